#include "common/inline_function.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/counting_new.h"

namespace sluice {
namespace {

using Callback = InlineFunction<int(int)>;

TEST(InlineFunctionTest, EmptyUntilGivenACallable) {
  Callback none;
  EXPECT_FALSE(none);
  Callback null = nullptr;
  EXPECT_FALSE(null);
  int (*no_function)(int) = nullptr;
  Callback from_null_pointer = no_function;
  EXPECT_FALSE(from_null_pointer);
  Callback from_empty_std_function = std::function<int(int)>();
  EXPECT_FALSE(from_empty_std_function);
  Callback from_empty_wrapper_of_another_size = InlineFunction<int(int), 16>();
  EXPECT_FALSE(from_empty_wrapper_of_another_size);
  Callback some = [](int x) { return x + 1; };
  ASSERT_TRUE(some);
  EXPECT_EQ(some(41), 42);
  some = nullptr;
  EXPECT_FALSE(some);
}

int Twice(int x) { return 2 * x; }

TEST(InlineFunctionTest, CallsFunctionPointersAndStdFunctions) {
  Callback pointer = &Twice;
  EXPECT_EQ(pointer(21), 42);
  Callback wrapped = std::function<int(int)>([](int x) { return x - 1; });
  EXPECT_EQ(wrapped(43), 42);
}

TEST(InlineFunctionTest, TwoSharedPointersStayInPlaceAndMoveWithoutAllocating) {
  auto a = std::make_shared<int>(40);
  auto b = std::make_shared<int>(2);
  auto lambda = [a, b](int x) { return *a + *b + x; };
  static_assert(Callback::StoresInline<decltype(lambda)>());
  const uint64_t before = AllocationsOnThisThread();
  Callback first = std::move(lambda);
  Callback second = std::move(first);
  Callback third;
  third = std::move(second);
  const int result = third(0);
  third = nullptr;
  EXPECT_EQ(AllocationsOnThisThread() - before, 0u);
  EXPECT_EQ(result, 42);
  EXPECT_FALSE(first);   // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  EXPECT_FALSE(second);  // NOLINT(bugprone-use-after-move)
  // Every copy the moves made was destroyed: only the originals hold the ints.
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 1);
}

TEST(InlineFunctionTest, BigCallablesGoToTheHeapOnceAndMoveByPointer) {
  auto counter = std::make_shared<int>(0);
  std::array<int64_t, 16> big{};
  big[15] = 42;
  auto lambda = [counter, big](int) { return static_cast<int>(big[15]); };
  static_assert(!Callback::StoresInline<decltype(lambda)>());
  const uint64_t before = AllocationsOnThisThread();
  Callback first = std::move(lambda);
  Callback second = std::move(first);
  EXPECT_EQ(AllocationsOnThisThread() - before, 1u);
  EXPECT_EQ(second(0), 42);
  EXPECT_EQ(counter.use_count(), 2);  // `counter` and the lambda on the heap
  second = nullptr;
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(InlineFunctionTest, HoldsMoveOnlyCallables) {
  auto owned = std::make_unique<std::string>("kept");
  InlineFunction<std::string()> take = [owned = std::move(owned)] { return *owned; };
  InlineFunction<std::string()> moved = std::move(take);
  EXPECT_EQ(moved(), "kept");
}

TEST(InlineFunctionTest, MoveAssignmentDestroysWhatItHeld) {
  auto old_capture = std::make_shared<int>(1);
  auto new_capture = std::make_shared<int>(2);
  Callback target = [old_capture](int) { return *old_capture; };
  Callback source = [new_capture](int) { return *new_capture; };
  EXPECT_EQ(old_capture.use_count(), 2);
  target = std::move(source);
  EXPECT_EQ(old_capture.use_count(), 1);
  EXPECT_EQ(new_capture.use_count(), 2);
  EXPECT_EQ(target(0), 2);
}

// `target = std::move(*inner)` where *inner lives in what target holds: taken out first,
// then target's old callable (and with it *inner's storage) goes.
TEST(InlineFunctionTest, MoveAssignmentFromInsideTheCallableItReplaces) {
  auto inner = std::make_shared<Callback>([](int x) { return x * 3; });
  Callback* source = inner.get();
  Callback target = [inner = std::move(inner)](int x) { return (*inner)(x); };
  target = std::move(*source);
  EXPECT_EQ(target(14), 42);
}

TEST(InlineFunctionTest, ArgumentsAreForwardedNotCopied) {
  InlineFunction<size_t(std::unique_ptr<std::vector<int>>)> consume =
      [](std::unique_ptr<std::vector<int>> v) { return v->size(); };
  EXPECT_EQ(consume(std::make_unique<std::vector<int>>(3)), 3u);
  std::string seen;
  InlineFunction<void(const std::string&)> look = [&seen](const std::string& s) { seen = s; };
  look("by reference");
  EXPECT_EQ(seen, "by reference");
}

TEST(InlineFunctionTest, AMutableLambdaKeepsItsStateAcrossCalls) {
  Callback count = [n = 0](int step) mutable { return n += step; };
  count(1);
  count(2);
  EXPECT_EQ(count(3), 6);
}

}  // namespace
}  // namespace sluice
