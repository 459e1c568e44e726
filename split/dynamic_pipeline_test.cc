// End-to-end DYNAMIC sharding: engine pipelines fed by a real split provider through a
// SplitFeed adapter that stands in for the dispatcher.
#include <algorithm>
#include <set>
#include <vector>

#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "split/split_provider.h"

namespace sluice::split {
namespace {

using ::sluice::engine::Element;
using ::sluice::engine::ElementIterator;
using ::sluice::engine::PipelineContext;
using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::FlatInt64s;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Like the dispatcher: one provider per job, restarted when a new repetition is first
// asked for; requests for a finished repetition get the end.
class ProviderFeed : public engine::SplitFeed {
 public:
  explicit ProviderFeed(SplitProvider* provider) : provider_(provider) {}

  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    if (repetition < current_) {
      *end = true;
      return absl::OkStatus();
    }
    if (repetition > current_) {
      provider_->Reset();
      current_ = repetition;
    }
    return provider_->GetNext(split, end);
  }

 private:
  SplitProvider* provider_;
  int64_t current_ = 0;
};

std::unique_ptr<SplitProvider> MakeProvider(std::string_view text, int64_t k) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(*def, SplitOptions{.elements_per_split = k});
  EXPECT_TRUE(provider.ok()) << provider.status();
  return provider.ok() ? *std::move(provider) : nullptr;
}

std::unique_ptr<ElementIterator> Build(std::string_view text, engine::SplitFeed* feed) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  PipelineContext context;
  context.split_feed = feed;
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = engine::BuildPipeline(*def, context);
  EXPECT_TRUE(it.ok()) << it.status();
  return it.ok() ? *std::move(it) : nullptr;
}

std::vector<int64_t> Squares(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * i);
  return v;
}

TEST(DynamicPipelineTest, FedPipelineYieldsExactlyTheSquares) {
  constexpr std::string_view kText = "range(0, 1000) | map(square) | batch(7)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/64);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> it = Build(kText, &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->size(), 143u);  // ceil(1000 / 7)
  EXPECT_THAT(batches->front()[0].shape(), ElementsAre(7));
  EXPECT_THAT(batches->back()[0].shape(), ElementsAre(1000 % 7));
  EXPECT_THAT(FlatInt64s(*batches), ElementsAreArray(Squares(1000)));
  // 16 splits of 64 (the last 40), then the end: 17 requests, all for repetition 0.
  EXPECT_EQ(feed.requests.size(), 17u);
  EXPECT_THAT(std::set<int64_t>(feed.requests.begin(), feed.requests.end()), ElementsAre(0));
}

TEST(DynamicPipelineTest, RepeatAsksForEachRepetitionSeparately) {
  constexpr std::string_view kText = "range(0, 1000) | repeat(2) | map(square) | batch(7)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/256);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> it = Build(kText, &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();

  std::vector<int64_t> expected = Squares(1000);
  std::vector<int64_t> twice = expected;
  twice.insert(twice.end(), expected.begin(), expected.end());
  EXPECT_THAT(FlatInt64s(*batches), ElementsAreArray(twice));
  // Four splits and the end per repetition.
  EXPECT_THAT(feed.requests, ElementsAre(0, 0, 0, 0, 0, 1, 1, 1, 1, 1));
}

TEST(DynamicPipelineTest, WorkersSharingAProviderSplitThePassBetweenThem) {
  constexpr std::string_view kText = "range(0, 1000) | map(square)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/10);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> a = Build(kText, &feed);
  std::unique_ptr<ElementIterator> b = Build(kText, &feed);
  std::vector<int64_t> got_a, got_b;
  bool a_done = false, b_done = false;
  // Worker a is twice as fast as worker b.
  while (!a_done || !b_done) {
    for (int step = 0; step < 3; ++step) {
      ElementIterator* it = step < 2 ? a.get() : b.get();
      bool& done = step < 2 ? a_done : b_done;
      if (done) continue;
      Element e;
      ASSERT_TRUE(it->GetNext(&e, &done).ok());
      if (!done) (step < 2 ? got_a : got_b).push_back(e[0].values<int64_t>()[0]);
    }
  }
  EXPECT_GT(got_a.size(), got_b.size());
  EXPECT_GT(got_b.size(), 0u);
  std::vector<int64_t> all = got_a;
  all.insert(all.end(), got_b.begin(), got_b.end());
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAreArray(Squares(1000)));
}

}  // namespace
}  // namespace sluice::split
