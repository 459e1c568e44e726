// Helpers shared by engine and split tests (not part of the library).
//
//   absl::StatusOr<std::vector<Element>> all = DrainText("range(5) | map(square)");
//   EXPECT_THAT(ScalarInt64s(*all), ElementsAre(0, 1, 4, 9, 16));
#ifndef SLUICE_ENGINE_TEST_UTIL_H_
#define SLUICE_ENGINE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/tensor.h"

namespace sluice::engine::testing {

// Every element up to the end; stops at `limit` elements (for infinite pipelines).
inline absl::StatusOr<std::vector<Element>> Drain(ElementIterator& it, size_t limit = 1 << 20) {
  std::vector<Element> out;
  while (out.size() < limit) {
    Element e;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it.GetNext(&e, &end));
    if (end) break;
    out.push_back(std::move(e));
  }
  return out;
}

inline absl::StatusOr<std::vector<Element>> DrainText(std::string_view text,
                                                      const PipelineContext& context = {},
                                                      size_t limit = 1 << 20) {
  SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef def, ParsePipeline(text));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> it, BuildPipeline(def, context));
  return Drain(*it, limit);
}

// Component 0 of each element, which must be an int64 scalar.
inline std::vector<int64_t> ScalarInt64s(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& e : elements) out.push_back(e.at(0).values<int64_t>()[0]);
  return out;
}

// All int64 values of component `c` of each element, concatenated.
inline std::vector<int64_t> FlatInt64s(const std::vector<Element>& elements, size_t c = 0) {
  std::vector<int64_t> out;
  for (const Element& e : elements) {
    for (int64_t v : e.at(c).values<int64_t>()) out.push_back(v);
  }
  return out;
}

}  // namespace sluice::engine::testing

#endif  // SLUICE_ENGINE_TEST_UTIL_H_
