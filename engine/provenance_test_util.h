// Helpers shared by the provenance pipeline tests (not part of the library): a fake split
// feed handing out keyed splits, and the (split key, ordinal) ids an element stands for.
//
//   FakeFeed feed({MakeSplit(/*key=*/3, 30, 40, /*delivered=*/{{0, 4}})});
//   std::unique_ptr<ElementIterator> it = BuildFed("range(100) | batch(7)", &feed);
//   std::vector<Id> ids = Ids(batch);  // {3, 4}, {3, 5}, ...
#ifndef SLUICE_ENGINE_PROVENANCE_TEST_UTIL_H_
#define SLUICE_ENGINE_PROVENANCE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/provenance.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine::testing {

// (split key, ordinal) of one element.
using Id = std::pair<int64_t, int64_t>;

// Hands out `splits` for repetition 0, then the end.
class FakeFeed : public SplitFeed {
 public:
  explicit FakeFeed(std::vector<proto::Split> splits) : splits_(std::move(splits)) {}
  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    *end = repetition != 0 || next_ >= splits_.size();
    if (!*end) *split = splits_[next_++];
    return absl::OkStatus();
  }

 private:
  std::vector<proto::Split> splits_;
  size_t next_ = 0;
};

// A tracked split of element (or file) indices [begin, end) with `delivered` ordinals.
inline proto::Split MakeSplit(int64_t key, int64_t begin, int64_t end,
                              std::vector<std::pair<int64_t, int64_t>> delivered = {}) {
  proto::Split split;
  split.set_key(key);
  split.set_begin(begin);
  split.set_end(end);
  for (auto [b, e] : delivered) {
    proto::OrdinalRange* r = split.add_delivered();
    r->set_begin(b);
    r->set_end(e);
  }
  return split;
}

// Matches a proto::OrdinalRange [begin, end).
inline ::testing::Matcher<const proto::OrdinalRange&> OrdinalRangeIs(int64_t begin, int64_t end) {
  return ::testing::AllOf(::testing::Property(&proto::OrdinalRange::begin, begin),
                          ::testing::Property(&proto::OrdinalRange::end, end));
}

// The pipeline `text` reading `feed` (DYNAMIC), or null after a test failure.
inline std::unique_ptr<ElementIterator> BuildFed(std::string_view text, SplitFeed* feed,
                                                 std::vector<std::string> roots = {}) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  PipelineContext context;
  context.split_feed = feed;
  context.data_roots = std::move(roots);
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  EXPECT_TRUE(it.ok()) << it.status();
  return it.ok() ? *std::move(it) : nullptr;
}

// The ids of an element's provenance, one per element it stands for.
inline std::vector<Id> Ids(const Element& e) {
  std::vector<Id> ids;
  const Provenance* p = ElementProvenance(e);
  if (p == nullptr) return ids;
  for (const Provenance::Run& run : p->runs()) {
    for (int64_t i = 0; i < run.count; ++i) ids.emplace_back(run.split_key, run.first_ordinal + i);
  }
  return ids;
}

}  // namespace sluice::engine::testing

#endif  // SLUICE_ENGINE_PROVENANCE_TEST_UTIL_H_
