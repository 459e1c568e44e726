#include "engine/look_ahead.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

// A source of the int64 scalars 0 .. n-1 that fails instead of producing `fail_at`.
struct CountingSource {
  int64_t n = 0;
  int64_t fail_at = -1;
  int64_t next = 0;
  int reads = 0;

  absl::Status Read(Element* out, bool* end) {
    ++reads;
    if (next == fail_at) return absl::DataLossError("corrupt record");
    *end = next == n;
    if (*end) return absl::OkStatus();
    *out = {Tensor::Scalar<int64_t>(next++)};
    return absl::OkStatus();
  }
};

struct Taken {
  absl::Status status;
  bool end = false;
  bool last = false;
  int64_t value = -1;
};

Taken Take(ElementLookAhead& ahead, CountingSource& source) {
  Taken t;
  Element e;
  t.status = ahead.Next([&source](Element* out, bool* end) { return source.Read(out, end); }, &e,
                        &t.end, &t.last);
  if (t.status.ok() && !t.end) t.value = e.at(0).values<int64_t>()[0];
  return t;
}

TEST(ElementLookAheadTest, TellsWhichElementIsTheLast) {
  CountingSource source{.n = 3};
  ElementLookAhead ahead;
  std::vector<int64_t> values;
  std::vector<bool> lasts;
  for (int i = 0; i < 3; ++i) {
    Taken t = Take(ahead, source);
    ASSERT_TRUE(t.status.ok()) << t.status;
    ASSERT_FALSE(t.end);
    values.push_back(t.value);
    lasts.push_back(t.last);
  }
  EXPECT_THAT(values, ::testing::ElementsAre(0, 1, 2));
  EXPECT_THAT(lasts, ::testing::ElementsAre(false, false, true));
  const int reads = source.reads;
  Taken end = Take(ahead, source);
  EXPECT_TRUE(end.end);
  EXPECT_FALSE(end.last);
  EXPECT_EQ(source.reads, reads) << "the end was already seen: no read after it";
  EXPECT_TRUE(Take(ahead, source).end) << "the end stays";
  EXPECT_EQ(source.reads, reads);
}

TEST(ElementLookAheadTest, AnEmptySourceEndsAtOnce) {
  CountingSource source{.n = 0};
  ElementLookAhead ahead;
  Taken t = Take(ahead, source);
  ASSERT_TRUE(t.status.ok()) << t.status;
  EXPECT_TRUE(t.end);
  EXPECT_FALSE(t.last);
}

TEST(ElementLookAheadTest, AnErrorReadAheadComesAfterTheElementBeforeIt) {
  CountingSource source{.n = 5, .fail_at = 2};
  ElementLookAhead ahead;
  Taken first = Take(ahead, source);
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.value, 0);
  Taken second = Take(ahead, source);
  ASSERT_TRUE(second.status.ok()) << second.status;
  EXPECT_EQ(second.value, 1);
  EXPECT_FALSE(second.last);
  EXPECT_EQ(Take(ahead, source).status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Take(ahead, source).status.code(), absl::StatusCode::kDataLoss) << "it stays failed";
}

TEST(ElementLookAheadTest, AnErrorOnTheFirstReadStays) {
  CountingSource source{.n = 5, .fail_at = 0};
  ElementLookAhead ahead;
  EXPECT_EQ(Take(ahead, source).status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Take(ahead, source).status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(source.reads, 1) << "not read again once it failed";
}

TEST(ElementLookAheadTest, ResetStartsOverOnANewSource) {
  CountingSource a{.n = 2};
  ElementLookAhead ahead;
  EXPECT_EQ(Take(ahead, a).value, 0);  // 1 is held ahead
  ahead.Reset();
  CountingSource b{.n = 1};
  Taken t = Take(ahead, b);
  ASSERT_TRUE(t.status.ok()) << t.status;
  EXPECT_EQ(t.value, 0) << "nothing of the old source is handed out";
  EXPECT_TRUE(t.last);
  EXPECT_TRUE(Take(ahead, b).end);
}

}  // namespace
}  // namespace sluice::engine
