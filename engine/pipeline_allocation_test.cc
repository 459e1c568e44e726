// Holds the worker's "ideal model speed" pipeline (a batch made once, then replayed forever:
// take(1) | cache() | repeat()) to an allocation budget per element: a worker serving small
// batches spends much of its time per batch in operator new when every repetition rebuilds
// the iterators below repeat() (5 allocations per element did), and when the cached element
// is copied into a new Element with a new shape vector (1 more). A caller that reuses its
// Element, as the worker's producer does, gets the replay with none.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/counting_new.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"

namespace sluice::engine {
namespace {

TEST(PipelineAllocationTest, AReplayedBatchCostsNoAllocationIntoAReusedElement) {
  auto def = ParsePipeline("range(32) | batch(32) | take(1) | cache() | repeat()");
  ASSERT_TRUE(def.ok()) << def.status();
  auto iterator = BuildPipeline(*def, PipelineContext{});
  ASSERT_TRUE(iterator.ok()) << iterator.status();
  Element element;  // reused, as TaskRunner::ProduceAll does
  bool end = false;
  auto next = [&] {
    absl::Status status = (*iterator)->GetNext(&element, &end);
    ASSERT_TRUE(status.ok()) << status;
    ASSERT_FALSE(end);
  };
  // Warm: the cache fills on the first pass (which allocates: the count is live).
  const uint64_t cold = AllocationsOnThisThread();
  for (int i = 0; i < 4; ++i) next();
  EXPECT_GT(AllocationsOnThisThread(), cold);
  constexpr int kElements = 1000;
  const uint64_t before = AllocationsOnThisThread();
  for (int i = 0; i < kElements; ++i) next();
  const double per_element = static_cast<double>(AllocationsOnThisThread() - before) / kElements;
  std::printf("allocations per replayed element: %.3f\n", per_element);
  EXPECT_LE(per_element, 0.01);
  // And the replay is the batch: 0..31.
  ASSERT_EQ(element.size(), 1u);
  auto values = element[0].values<int64_t>();
  ASSERT_EQ(values.size(), 32u);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(values[i], i);
}

}  // namespace
}  // namespace sluice::engine
