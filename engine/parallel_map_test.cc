#include "engine/parallel_map.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "engine/pipeline_text.h"
#include "engine/provenance.h"
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

// Scalars 0, 1, ... `size` of them (then the end, or `error` when it is not OK); counts the
// pulls. With `tag_provenance`, element i carries the provenance of split 7, ordinal 3 i.
class ScriptedInput : public ElementIterator {
 public:
  ScriptedInput(int64_t size, absl::Status error, std::atomic<int64_t>* pulls = nullptr,
                bool tag_provenance = false)
      : size_(size), error_(std::move(error)), pulls_(pulls), tag_(tag_provenance) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    if (pulls_ != nullptr) ++*pulls_;
    if (next_ == size_) {
      *end_of_sequence = error_.ok();
      return error_;
    }
    *out = Element{Tensor::Scalar<int64_t>(next_)};
    if (tag_) SetElementProvenance(*out, Provenance::Of(7, 3 * next_));
    ++next_;
    *end_of_sequence = false;
    return absl::OkStatus();
  }

 private:
  const int64_t size_;
  const absl::Status error_;
  std::atomic<int64_t>* const pulls_;
  const bool tag_;
  int64_t next_ = 0;
};

// Everything the iterator gives until the end, going on after errors: values as numbers,
// errors as "error: <message>". Stops after `limit` entries.
std::vector<std::string> Trace(ElementIterator& it, int limit = 100000) {
  std::vector<std::string> trace;
  while (static_cast<int>(trace.size()) < limit) {
    Element e;
    bool end = false;
    absl::Status s = it.GetNext(&e, &end);
    if (!s.ok()) {
      trace.push_back("error: " + std::string(s.message()));
      continue;
    }
    if (end) break;
    trace.push_back(std::to_string(e.at(0).values<int64_t>()[0]));
  }
  return trace;
}

// With no room for a thread, a parallel map fails with a clear error: before, the throw
// from starting its threads went uncaught and ended the worker.
TEST(ParallelMapDeathTest, AMapThatCannotStartAThreadFailsClearly) {
  EXPECT_EXIT(
      {
        ElementTransform same = [](Element in, int64_t, std::optional<Element>* out) {
          *out = std::move(in);
          return absl::OkStatus();
        };
        auto it = MakeMapIterator(Range(10), same, 4, "t");
        testing::LeaveNoRoomForAThread();
        Element element;
        bool end = false;
        const absl::Status s = it->GetNext(&element, &end);
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        std::_Exit(s.code() == absl::StatusCode::kResourceExhausted &&
                           absl::StrContains(s.message(), "t: cannot start a thread")
                       ? 0
                       : 1);
      },
      ::testing::ExitedWithCode(0), "cannot start a thread");
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

TEST(ParallelMapTest, FastElementsInChunksKeepOrderDropsAndErrorPositions) {
  // Mostly sub-microsecond calls, so workers claim chunks of many elements, with slow
  // stretches that shrink the chunks again and make calls finish out of order.
  ElementTransform transform = [](Element in, int64_t index, std::optional<Element>* out) {
    if (index % 1000 >= 500 && index % 1000 < 520) {
      std::this_thread::sleep_for(std::chrono::microseconds((index * 7919) % 400));
    }
    if (index % 7 == 3) return absl::OkStatus();  // Dropped.
    if (index == 0 || index == 18 || index == 1000 || index == 1001 || index == 2998) {
      return absl::InvalidArgumentError("boom at " + std::to_string(index));
    }
    *out = Element{Tensor::Scalar<int64_t>(10 * in.at(0).values<int64_t>()[0])};
    return absl::OkStatus();
  };
  auto sequential = MakeMapIterator(Range(3000), transform, 1, "t");
  const std::vector<std::string> expected = Trace(*sequential);
  ASSERT_EQ(expected.size(), 3000u - 429);  // 429 of 0..2999 are 3 mod 7.
  EXPECT_EQ(expected[0], "error: t: boom at 0");
  EXPECT_EQ(expected.back(), "error: t: boom at 2998");
  for (int parallel : {2, 3, 8}) {
    auto it = MakeMapIterator(Range(3000), transform, parallel, "t");
    EXPECT_EQ(Trace(*it), expected) << parallel;
    Element e;
    bool end = false;
    ASSERT_TRUE(it->GetNext(&e, &end).ok());  // The end, again.
    EXPECT_TRUE(end);
  }
}

TEST(ParallelMapTest, InputErrorComesAfterTheElementsPulledBeforeIt) {
  ElementTransform identity = [](Element in, int64_t, std::optional<Element>* out) {
    *out = std::move(in);
    return absl::OkStatus();
  };
  for (int64_t size : {0, 1, 5, 1000}) {
    for (int parallel : {1, 2, 4}) {
      auto it =
          MakeMapIterator(std::make_unique<ScriptedInput>(size, absl::DataLossError("bad record")),
                          identity, parallel, "t");
      std::vector<std::string> expected;
      for (int64_t i = 0; i < size; ++i) expected.push_back(std::to_string(i));
      expected.push_back("error: bad record");
      EXPECT_EQ(Trace(*it, static_cast<int>(size) + 1), expected) << size << " " << parallel;
      if (parallel > 1) {  // The pool stops pulling at the input's error.
        Element e;
        bool end = false;
        ASSERT_TRUE(it->GetNext(&e, &end).ok());
        EXPECT_TRUE(end);
      }
    }
  }
}

TEST(ParallelMapTest, OutputsCarryTheirInputsProvenance) {
  // The function makes new elements, without provenance; the map puts the input's on them,
  // and each dropped element's on the next one kept, as skipped runs.
  ElementTransform transform = [](Element in, int64_t, std::optional<Element>* out) {
    const int64_t v = in.at(0).values<int64_t>()[0];
    if (v % 5 != 4) *out = Element{Tensor::Scalar<int64_t>(v + 100)};
    return absl::OkStatus();
  };
  for (int parallel : {1, 2, 4}) {
    auto it = MakeMapIterator(std::make_unique<ScriptedInput>(2000, absl::OkStatus(), nullptr,
                                                              /*tag_provenance=*/true),
                              transform, parallel, "t");
    absl::StatusOr<std::vector<Element>> all = Drain(*it);
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_EQ(all->size(), 1600u) << parallel;
    for (const Element& e : *all) {
      const int64_t input = e.at(0).values<int64_t>()[0] - 100;
      const Provenance* p = ElementProvenance(e);
      ASSERT_NE(p, nullptr) << parallel << " " << input;
      Provenance expected = *Provenance::Of(7, 3 * input);
      if (input % 5 == 0 && input > 0) expected.AppendSkipped({7, 3 * (input - 1), 1});
      EXPECT_EQ(*p, expected) << parallel << " " << input << ": " << p->DebugString();
    }
  }
}

TEST(ParallelMapTest, BuffersAtMostTwoParallelChunksOfFastElements) {
  // Fast calls grow the chunks to their largest, 16 elements: the pool may claim up to
  // 2 x parallel x 16 elements beyond those taken, and no more, however long the input.
  std::atomic<int64_t> pulls{0};
  ElementTransform identity = [](Element in, int64_t, std::optional<Element>* out) {
    *out = std::move(in);
    return absl::OkStatus();
  };
  constexpr int kParallel = 3;
  auto it =
      MakeMapIterator(std::make_unique<ScriptedInput>(int64_t{1} << 40, absl::OkStatus(), &pulls),
                      identity, kParallel, "t");
  int64_t taken = 0;
  for (int round = 0; round < 5; ++round) {
    absl::StatusOr<std::vector<Element>> got = Drain(*it, 1000);
    ASSERT_TRUE(got.ok()) << got.status();
    for (const Element& e : *got) EXPECT_EQ(e.at(0).values<int64_t>()[0], taken++);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_LE(pulls.load(), taken + 2 * kParallel * 16) << round;
  }
  it.reset();
}

TEST(ParallelMapTest, DestroyingTheIteratorStopsTheWorkers) {
  std::atomic<int64_t> calls{0};
  ElementTransform counting = [&](Element in, int64_t index, std::optional<Element>* out) {
    ++calls;
    if (index % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    *out = std::move(in);
    return absl::OkStatus();
  };
  // Never started: no thread, no call.
  MakeMapIterator(Range(100), counting, 4, "t").reset();
  EXPECT_EQ(calls.load(), 0);
  for (int take : {1, 50, 99, 150}) {
    for (int parallel : {2, 8}) {
      auto it = MakeMapIterator(Range(1000000), counting, parallel, "t");
      absl::StatusOr<std::vector<Element>> head = Drain(*it, take);
      ASSERT_TRUE(head.ok()) << head.status();
      EXPECT_EQ(head->size(), static_cast<size_t>(take));
      it.reset();  // Joins workers in calls, waiting for room or pulling.
      const int64_t after = calls.load();
      EXPECT_LE(after, 1000000);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(calls.load(), after) << "a call after the iterator was destroyed";
      calls = 0;
    }
  }
}

}  // namespace
}  // namespace sluice::engine
