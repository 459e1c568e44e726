#include "engine/parallel_map.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::HasSubstr;

std::unique_ptr<ElementIterator> Range(int64_t n) {
  return *BuildPipeline(*ParsePipeline("range(" + std::to_string(n) + ")"), {});
}

TEST(ParallelMapTest, OrderDropsAndErrorsMatchTheSequentialVersion) {
  // Slow, uneven work so parallel calls finish out of order.
  ElementTransform transform = [](Element in, int64_t index, std::optional<Element>* out) {
    std::this_thread::sleep_for(std::chrono::microseconds((index * 7919) % 200));
    if (index % 3 == 0) return absl::OkStatus();  // Dropped.
    if (index == 100) return absl::InvalidArgumentError("boom at 100");
    *out = std::move(in);
    return absl::OkStatus();
  };
  for (int parallel : {1, 4}) {
    auto it = MakeMapIterator(Range(150), transform, parallel, "t");
    absl::StatusOr<std::vector<Element>> head = Drain(*it, 66);
    ASSERT_TRUE(head.ok()) << head.status();
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < 100; ++i) {
      if (i % 3 != 0) expected.push_back(i);
    }
    EXPECT_EQ(ScalarInt64s(*head), expected) << parallel;
    Element e;
    bool end = false;
    absl::Status s = it->GetNext(&e, &end);
    EXPECT_EQ(s.message(), "t: boom at 100") << parallel;
  }
}

TEST(ParallelMapTest, RunsCallsConcurrentlyAndBoundsBufferedResults) {
  std::atomic<int> running{0}, peak{0}, started{0};
  ElementTransform transform = [&](Element in, int64_t, std::optional<Element>* out) {
    ++started;
    const int now = ++running;
    for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    --running;
    *out = std::move(in);
    return absl::OkStatus();
  };
  auto it = MakeMapIterator(Range(1000), transform, 4, "t");
  Element e;
  bool end = false;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // With one result consumed, at most 2 x parallel more may be in flight or waiting.
  EXPECT_LE(started.load(), 1 + 8);
  EXPECT_GT(peak.load(), 1);
  it.reset();  // Joins the pool mid-stream.
}

}  // namespace
}  // namespace sluice::engine
