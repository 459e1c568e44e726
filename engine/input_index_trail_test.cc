#include "engine/input_index_trail.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/test_util.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::HasSubstr;

TEST(InputIndexTrailTest, OutputsAfterDropsMapPastThem) {
  InputIndexTrail trail;
  for (int64_t input : {0, 1, 3, 4, 5, 9}) trail.Produced(input);
  EXPECT_EQ(trail.InputIndexOf(0), 0);
  EXPECT_EQ(trail.InputIndexOf(1), 1);
  EXPECT_EQ(trail.InputIndexOf(2), 3);
  EXPECT_EQ(trail.InputIndexOf(4), 5);
  EXPECT_EQ(trail.InputIndexOf(5), 9);
}

TEST(InputIndexTrailTest, OnlyTheLatestDropsAreKept) {
  InputIndexTrail trail;
  // Every other input dropped: each output starts a run of its own.
  for (int64_t output = 0; output < 1000; ++output) trail.Produced(2 * output);
  EXPECT_EQ(trail.InputIndexOf(999), 1998);
  EXPECT_EQ(trail.InputIndexOf(800), 1600);
  EXPECT_EQ(trail.InputIndexOf(3), -1) << "long past: not known, rather than guessed";
}

// A stage after map, filter, prefetch, take or skip names the file and record its element
// came from, past the elements a filter dropped, sequential or parallel.
class DescribeThroughStagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.data_roots = {dir_.path()};
    WriteFile(dir_.path() + "/a.txt", "1\n2\n3\n");
    // Record 3 of b.txt is not a number; a blank line before it is filtered out. Records
    // after it keep a prefetch from reaching the end (and releasing the reader) first.
    WriteFile(dir_.path() + "/b.txt", "4\n\n5\nx\n6\n7\n8\n9\n10\n11\n12\n13\n");
  }
  std::string Error(const std::string& stages) {
    absl::StatusOr<std::vector<Element>> rows =
        DrainText(absl::StrCat("text_line(files=['a.txt', 'b.txt']) | ", stages), context_);
    return rows.ok() ? "no error" : std::string(rows.status().message());
  }
  TempDir dir_;
  PipelineContext context_;
};

TEST_F(DescribeThroughStagesTest, AfterAFilterTheRecordCountsTheDroppedOnes) {
  for (const char* filter : {"filter(non_empty)", "filter(non_empty, parallel=4)"}) {
    for (const char* map : {"map(string_to_int64)", "map(string_to_int64, parallel=4)"}) {
      SCOPED_TRACE(absl::StrCat(filter, " | ", map));
      EXPECT_THAT(Error(absl::StrCat(filter, " | ", map)),
                  HasSubstr("reading record 3 of 'b.txt': map(string_to_int64)"));
    }
  }
}

TEST_F(DescribeThroughStagesTest, MapsPrefetchTakeAndSkipPassTheQuestionOn) {
  for (const char* stages : {"map(identity) | prefetch(2)", "map(identity, parallel=3)",
                             "skip(2) | take(100)", "prefetch(1) | skip(1)"}) {
    SCOPED_TRACE(stages);
    EXPECT_THAT(Error(absl::StrCat(stages, " | filter(non_empty) | map(string_to_int64)")),
                HasSubstr("reading record 3 of 'b.txt': map(string_to_int64)"));
  }
}

// batch and padded_batch name the rows of the batch a later stage failed on, and the row
// that would not stack; shuffle names the input element its output was.
TEST_F(DescribeThroughStagesTest, BatchesNameTheirRowsAndShuffleItsInput) {
  EXPECT_THAT(Error("filter(non_empty) | batch(3) | map(string_to_int64)"),
              HasSubstr("reading a batch of 3, from record 0 of 'b.txt' to record 3 of 'b.txt': "
                        "map(string_to_int64)"));
  EXPECT_THAT(Error("filter(non_empty) | batch(3) | map(string_to_int64, parallel=2)"),
              HasSubstr("reading a batch of 3, from record 0 of 'b.txt' to record 3 of 'b.txt'"));
  // A shuffle releases its input once read to the end, and a parallel map reads up to
  // 2 x parallel x 16 elements ahead: records after the bad one keep the input open.
  std::string long_b = "4\n\n5\nx\n";
  for (int i = 0; i < 400; ++i) absl::StrAppend(&long_b, i, "\n");
  WriteFile(dir_.path() + "/b.txt", long_b);
  for (const char* shuffle : {"shuffle(3, seed=1)", "shuffle(3, seed=2)", "shuffle(3, seed=3)"}) {
    for (const char* map : {"map(string_to_int64)", "map(string_to_int64, parallel=4)"}) {
      SCOPED_TRACE(absl::StrCat(shuffle, " | ", map));
      EXPECT_THAT(Error(absl::StrCat(shuffle, " | filter(non_empty) | ", map)),
                  HasSubstr("reading record 3 of 'b.txt': map(string_to_int64)"));
    }
  }
  // Record 0 of 'b.txt' has two words, the rows before it one.
  WriteFile(dir_.path() + "/b.txt", "4 5\n6\n");
  EXPECT_THAT(Error("map(split_whitespace) | batch(2)"),
              HasSubstr("reading record 0 of 'b.txt': batch: all elements of a batch need"));
  EXPECT_THAT(Error("map(split_whitespace) | map(string_to_int64) | "
                    "padded_batch(2, padded_shapes=[[1]])"),
              HasSubstr("reading a batch of 2, from record 2 of 'a.txt' to record 0 of 'b.txt': "
                        "padded_batch"));
}

}  // namespace
}  // namespace sluice::engine
