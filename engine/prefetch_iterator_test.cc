#include "engine/prefetch_iterator.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

// Yields 0, 1, ... up to `n`, then `error` (or the end); counts pulls.
class CountingIterator : public ElementIterator {
 public:
  CountingIterator(int64_t n, absl::Status error, std::atomic<int64_t>* pulls)
      : n_(n), error_(std::move(error)), pulls_(pulls) {}
  absl::Status GetNext(Element* out, bool* end) override {
    ++*pulls_;
    if (next_ == n_) {
      *end = true;
      return error_;
    }
    *out = {Tensor::Scalar<int64_t>(next_++)};
    *end = false;
    return absl::OkStatus();
  }
  std::string DescribeElement(int64_t index) const override {
    return absl::StrCat("element ", index);
  }

 private:
  int64_t next_ = 0;
  const int64_t n_;
  absl::Status error_;
  std::atomic<int64_t>* pulls_;
};

// With no room for its thread, a prefetch fails at its first element with a clear error:
// before, the throw from its constructor went uncaught and ended the worker.
TEST(PrefetchIteratorDeathTest, APrefetchThatCannotStartItsThreadFailsClearly) {
  EXPECT_EXIT(
      {
        std::atomic<int64_t> pulls{0};
        auto input = std::make_unique<CountingIterator>(10, absl::OkStatus(), &pulls);
        testing::LeaveNoRoomForAThread();
        PrefetchIterator it(std::move(input), 2);
        Element element;
        bool end = false;
        const absl::Status s = it.GetNext(&element, &end);
        std::fprintf(stderr, "%s\n", s.ToString().c_str());
        std::_Exit(s.code() == absl::StatusCode::kResourceExhausted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "prefetch: cannot start its thread");
}

TEST(PrefetchIteratorTest, ReadsAheadUpToTheBufferThenDeliversInOrder) {
  std::atomic<int64_t> pulls{0};
  PrefetchIterator it(std::make_unique<CountingIterator>(100, absl::OkStatus(), &pulls), 5);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pulls.load() < 5 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Five buffered plus at most the one the producer waits to store.
  EXPECT_GE(pulls.load(), 5);
  EXPECT_LE(pulls.load(), 6);
  absl::StatusOr<std::vector<Element>> all = testing::Drain(it);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 100u);
  EXPECT_EQ(testing::ScalarInt64s(*all)[99], 99);
}

// Elements are described by the input while it is held; once it ended the producer
// releases it (with its files), and the answer is empty rather than a freed input's.
TEST(PrefetchIteratorTest, DescribesElementsUntilItsInputIsReleased) {
  std::atomic<int64_t> pulls{0};
  PrefetchIterator it(std::make_unique<CountingIterator>(3, absl::OkStatus(), &pulls), 1);
  EXPECT_EQ(it.DescribeElement(0), "element 0");
  absl::StatusOr<std::vector<Element>> all = testing::Drain(it);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), 3u);
  EXPECT_EQ(it.DescribeElement(2), "");
}

TEST(PrefetchIteratorTest, ErrorsArriveAfterTheElementsBeforeThem) {
  std::atomic<int64_t> pulls{0};
  PrefetchIterator it(std::make_unique<CountingIterator>(3, absl::DataLossError("bad"), &pulls), 8);
  absl::StatusOr<std::vector<Element>> all = testing::Drain(it, 3);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u);
  Element e;
  bool end = false;
  EXPECT_EQ(it.GetNext(&e, &end).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace sluice::engine
