#include "engine/ops/interleave_op.h"
#include <algorithm>

#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/pipeline_text.h"
#include "engine/provenance.h"
#include "engine/provenance_test_util.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarStrings;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::TestDataDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// Files 1.txt .. 5.txt, each holding its number on 6 lines (tf.data's interleave example).
class InterleaveOpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 5; ++i) {
      std::string lines;
      for (int k = 0; k < 6; ++k) lines += std::to_string(i) + "\n";
      WriteFile(absl::StrCat(dir_.path(), "/", i, ".txt"), lines);
    }
    context_.data_roots = {dir_.path()};
  }
  std::vector<std::string> Run(const std::string& interleave_args) {
    absl::StatusOr<std::vector<Element>> out = DrainText(
        "from_tensor_slices(['1.txt', '2.txt', '3.txt', '4.txt', '5.txt']) | "
        "interleave(text_line(), " +
            interleave_args + ")",
        context_);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ScalarStrings(*out) : std::vector<std::string>{};
  }
  // bad.txt: record 2 is not a number. Lines enough after it that no read-ahead (a parallel
  // map's is 128 elements) reaches the file's end before the map fails: the reader is
  // still open then.
  void WriteBadFile() {
    std::string bad = "7\n7\nx\n";
    for (int i = 0; i < 400; ++i) bad += "7\n";
    WriteFile(dir_.path() + "/bad.txt", bad);
  }
  TempDir dir_;
  PipelineContext context_;
};

TEST_F(InterleaveOpTest, CycleAndBlockLengthGiveTfDatasOrder) {
  // The example from tf.data.Dataset.interleave's documentation.
  const std::vector<std::string> tf_order = {"1", "1", "1", "1", "2", "2", "2", "2", "1", "1",
                                             "2", "2", "3", "3", "3", "3", "4", "4", "4", "4",
                                             "3", "3", "4", "4", "5", "5", "5", "5", "5", "5"};
  EXPECT_THAT(Run("cycle_length=2, block_length=4"), ElementsAreArray(tf_order));
  EXPECT_THAT(Run("cycle_length=2, block_length=4, parallel=true"), ElementsAreArray(tf_order));
  std::vector<std::string> round_robin = Run("cycle_length=5");
  ASSERT_EQ(round_robin.size(), 30u);
  EXPECT_THAT(std::vector<std::string>(round_robin.begin(), round_robin.begin() + 6),
              ElementsAre("1", "2", "3", "4", "5", "1"));
  // cycle_length 1 reads the files one after the other.
  std::vector<std::string> sequential = Run("cycle_length=1, block_length=2");
  EXPECT_THAT(std::vector<std::string>(sequential.begin() + 5, sequential.begin() + 8),
              ElementsAre("1", "2", "2"));
}

TEST_F(InterleaveOpTest, NestedPipelinesAndErrors) {
  absl::StatusOr<std::vector<Element>> counted = DrainText(
      "from_tensor_slices(['1.txt', '2.txt']) | interleave(text_line() | take(2) | "
      "map(string_to_int64), cycle_length=2)",
      context_);
  ASSERT_TRUE(counted.ok()) << counted.status();
  EXPECT_THAT(testing::ScalarInt64s(*counted), ElementsAre(1, 2, 1, 2));
  EXPECT_THAT(DrainText("range(2) | interleave(text_line())", context_).status().message(),
              HasSubstr("text_line: expected the input element's component 0 to be a file name "
                        "(a string scalar), got (int64[]{0})"));
  EXPECT_THAT(DrainText("from_tensor_slices(['nope.txt']) | interleave(text_line())", context_)
                  .status()
                  .message(),
              HasSubstr("'nope.txt' does not exist"));
  EXPECT_THAT(DrainText("range(2) | interleave(map(square))").status().message(),
              HasSubstr("stage 1 (interleave): nested stage 0 (map): the first stage must be a "
                        "source"));
  EXPECT_THAT(DrainText("range(2) | interleave(range(3), cycle_length=0)").status().message(),
              HasSubstr("cycle_length must be in [1, 4096], got 0"));
}

// An error of a nested pipeline names the file it read, once: a bad line said which text
// did not parse, but not in which of the interleaved files.
TEST_F(InterleaveOpTest, ANestedErrorNamesTheFileItRead) {
  WriteFile(absl::StrCat(dir_.path(), "/bad.txt"), "7\nseven\n");
  for (const char* parallel : {"false", "true"}) {
    SCOPED_TRACE(parallel);
    absl::Status failed =
        DrainText(absl::StrCat("from_tensor_slices(['1.txt', 'bad.txt']) | interleave(text_line() "
                               "| map(string_to_int64), cycle_length=2, parallel=",
                               parallel, ")"),
                  context_)
            .status();
    // The nested reader names its file and the line (DescribeElement); interleave then
    // adds nothing.
    EXPECT_THAT(failed.message(), HasSubstr("reading record 1 of 'bad.txt': "));
    EXPECT_EQ(failed.message().find("bad.txt"), failed.message().rfind("bad.txt")) << failed;
    EXPECT_THAT(failed.message(), HasSubstr("seven"));
    EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument) << failed;
  }
  // Named by the nested error already: not named twice.
  const std::string message(
      DrainText("from_tensor_slices(['nope.txt']) | interleave(text_line())", context_)
          .status()
          .message());
  EXPECT_EQ(message.find("reading 'nope.txt'"), std::string::npos) << message;
}

// A stage after the interleave names the file and record its element came from: the nested
// pipeline's own description while it is open, its file's name once it has ended.
TEST_F(InterleaveOpTest, AStageAfterItNamesTheFileAndRecord) {
  WriteBadFile();
  for (const char* interleave :
       {"cycle_length=2", "cycle_length=2, block_length=3", "cycle_length=3, parallel=true"}) {
    for (const char* map : {"map(string_to_int64)", "map(string_to_int64, parallel=4)"}) {
      SCOPED_TRACE(absl::StrCat(interleave, " | ", map));
      absl::StatusOr<std::vector<Element>> out =
          DrainText(absl::StrCat("from_tensor_slices(['1.txt', 'bad.txt', '3.txt']) | "
                                 "interleave(text_line(), ",
                                 interleave, ") | ", map),
                    context_);
      EXPECT_THAT(out.status().message(),
                  HasSubstr("reading record 2 of 'bad.txt': map(string_to_int64)"));
    }
  }
  // Once every file ended, the interleave still names where its latest elements came from.
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(
      "from_tensor_slices(['1.txt', '2.txt']) | interleave(text_line(), cycle_length=2)");
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context_);
  ASSERT_TRUE(it.ok()) << it.status();
  Element element;
  bool end = false;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*it)->GetNext(&element, &end).ok());
  EXPECT_EQ((*it)->DescribeElement(3), "record 1 of '2.txt'");
  absl::StatusOr<std::vector<Element>> rest = Drain(**it);
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ((*it)->DescribeElement(3), "'2.txt'");
  EXPECT_EQ((*it)->DescribeElement(2), "'1.txt'");
}

// DYNAMIC: the interleave tags its elements and passes over those delivered before, so
// its count of what a file gave is no record index; the element's ordinal is. Records 0 and
// 1 of bad.txt were delivered: its first element now is record 2 (counted, it was 0).
TEST_F(InterleaveOpTest, AStageAfterItNamesTheRecordPastDeliveredOnes) {
  WriteBadFile();
  for (const char* interleave : {"cycle_length=2", "cycle_length=2, parallel=true"}) {
    SCOPED_TRACE(interleave);
    proto::Split split = testing::MakeSplit(
        /*key=*/1, 0, 2, /*delivered=*/{{*NestedOrdinal(1, 0), *NestedOrdinal(1, 2)}});
    split.add_files(dir_.path() + "/1.txt");
    split.add_files(dir_.path() + "/bad.txt");
    testing::FakeFeed feed({split});
    std::unique_ptr<ElementIterator> it = testing::BuildFed(
        absl::StrCat("list_files('", dir_.path(), "/*.txt') | interleave(text_line(), ", interleave,
                     ") | map(string_to_int64)"),
        &feed, {dir_.path()});
    ASSERT_NE(it, nullptr);
    EXPECT_THAT(Drain(*it).status().message(),
                HasSubstr(absl::StrCat("reading record 2 of '", dir_.path(),
                                       "/bad.txt': map(string_to_int64)")));
  }
}

TEST_F(InterleaveOpTest, TextFormRoundTripsNestedPipelines) {
  const char* text =
      "list_files('/data/*.gz') | interleave(tfrecord(compression='gzip') | map(square), "
      "cycle_length=4, block_length=2, parallel=true) | batch(8)";
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(def->stages(1).interleave().nested().stages_size(), 2);
  EXPECT_EQ(FormatPipeline(*def), text);
}

// An unseeded shuffle in the nested pipelines reshuffles each pass, as at the top level
// (reshuffle_each_iteration): every pass's nested pipelines were seeded alike.
TEST(InterleaveSeedTest, ANestedShuffleReshufflesEachPass) {
  absl::StatusOr<std::vector<Element>> out =
      DrainText("range(2) | interleave(range(50) | shuffle(50), cycle_length=2) | repeat(2)");
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 200u);
  const std::vector<int64_t> all = testing::ScalarInt64s(*out);
  const std::vector<int64_t> first(all.begin(), all.begin() + 100);
  const std::vector<int64_t> second(all.begin() + 100, all.end());
  EXPECT_NE(first, second) << "the second pass replayed the first's order";
  std::vector<int64_t> sorted = second;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> sorted_first = first;
  std::sort(sorted_first.begin(), sorted_first.end());
  EXPECT_EQ(sorted, sorted_first) << "the same elements, in another order";
  // One that does not reshuffle each iteration keeps its order, as at the top level.
  absl::StatusOr<std::vector<Element>> fixed = DrainText(
      "range(2) | interleave(range(50) | shuffle(50, reshuffle_each_iteration=false), "
      "cycle_length=2) | repeat(2)");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  const std::vector<int64_t> both = testing::ScalarInt64s(*fixed);
  ASSERT_EQ(both.size(), 200u);
  EXPECT_EQ(std::vector<int64_t>(both.begin(), both.begin() + 100),
            std::vector<int64_t>(both.begin() + 100, both.end()));
}

// parallel=true reads ahead of each open pipeline by a block, but not without bound: with
// a block of a million, a slot read its whole nested pipeline (100,000 elements) ahead.
TEST(InterleaveReadAheadTest, AHugeBlockReadsAheadAFewDozenElements) {
  std::atomic<int64_t> pulled{0};
  FunctionRegistry functions = FunctionRegistry::Builtins();
  ASSERT_TRUE(functions
                  .Register("count_pulls",
                            [&pulled](Element in, Element* out) {
                              pulled.fetch_add(1);
                              *out = std::move(in);
                              return absl::OkStatus();
                            })
                  .ok());
  PipelineContext context;
  context.functions = &functions;
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(
      "range(1) | interleave(range(100000) | map(count_pulls), block_length=1000000, "
      "parallel=true)");
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  ASSERT_TRUE(it.ok()) << it.status();
  Element first;
  bool end = false;
  ASSERT_TRUE((*it)->GetNext(&first, &end).ok());
  ASSERT_FALSE(end);
  // Until the read-ahead has started, then stops (it fills its buffer, then waits): the
  // count unchanged over four 50 ms windows running.
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (pulled.load() < 3 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  int64_t seen = pulled.load();
  for (int still = 0; still < 4 && absl::Now() < give_up;) {
    absl::SleepFor(absl::Milliseconds(50));
    const int64_t now = pulled.load();
    still = now == seen ? still + 1 : 0;
    seen = now;
  }
  EXPECT_LE(pulled.load(), 64 + 2) << "the buffer, the element taken, and one waiting";
  EXPECT_GE(pulled.load(), 3) << "it reads ahead";
  // Everything still comes, in order.
  absl::StatusOr<std::vector<Element>> rest = testing::Drain(**it);
  ASSERT_TRUE(rest.ok()) << rest.status();
  ASSERT_EQ(rest->size(), 99999u);
  EXPECT_EQ(testing::ScalarInt64s(*rest).back(), 99999);
  EXPECT_EQ(pulled.load(), 100000);
}

TEST(InterleaveGoldenTest, ListFilesInterleavedOverTaxiShards) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  PipelineContext context;
  context.data_roots = {*data};
  absl::StatusOr<std::vector<Element>> records = DrainText(
      "list_files('tfrecord/tfx/tfx/components/testdata/csv_example_gen/Split-eval/*.gz') | "
      "interleave(tfrecord(compression='gzip'), cycle_length=4, parallel=true) | "
      "parse_example(spec='trip_start_hour:int64:scalar, fare:float:scalar, "
      "pickup_census_tract:int64:scalar:-1, company:bytes:var', parallel=2)",
      context);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 5091u);  // PROVENANCE.md: 5,091 records in the 12 shards.
  for (const Element& e : *records) {
    const int64_t hour = e[0].values<int64_t>()[0];
    EXPECT_TRUE(hour >= 0 && hour < 24) << hour;
    EXPECT_GE(e[1].values<float>()[0], 0.0f);
    EXPECT_EQ(e[2].values<int64_t>()[0], -1);  // Always empty in this split: the default.
    EXPECT_LE(e[3].num_elements(), 1);
  }
}

}  // namespace
}  // namespace sluice::engine
