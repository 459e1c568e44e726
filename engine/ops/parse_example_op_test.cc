#include "engine/ops/parse_example_op.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/example.pb.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::TestDataDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

TEST(ParseExampleOpTest, GoldenExampleTfRecord) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  PipelineContext context;
  context.data_roots = {*data};
  absl::StatusOr<std::vector<Element>> rows = DrainText(
      "tfrecord(files=['tfrecord/pytorch-data/test/_fakedata/tfrecord/example.tfrecord']) | "
      "parse_example(spec='x_float:float:10, x_int:int64:10, x_byte:bytes:scalar')",
      context);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 4u);  // PROVENANCE.md: 4 Examples.
  for (int i = 0; i < 4; ++i) {
    const Element& e = (*rows)[i];
    std::vector<float> floats;
    std::vector<int64_t> ints;
    for (int k = 0; k < 10; ++k) {
      floats.push_back(static_cast<float>(10 * i + k));
      ints.push_back(10 * (10 * i + k));
    }
    EXPECT_THAT(e[0].shape(), ElementsAre(10));
    EXPECT_THAT(e[0].values<float>(), ElementsAreArray(floats)) << "record " << i;
    EXPECT_THAT(e[1].values<int64_t>(), ElementsAreArray(ints)) << "record " << i;
    EXPECT_TRUE(e[2].shape().empty());
    EXPECT_EQ(e[2].string_value(0), "test str");
  }
}

class ParseExampleErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    context_.data_roots = {dir_.path()};
    std::string bytes;
    AppendTfRecord(Record(3, {1.5f, 2.5f}, {"a", "bc"}), &bytes);
    AppendTfRecord(Record(4, {}, {}), &bytes);  // No "score", empty "tags".
    WriteFile(dir_.path() + "/r.tfrecord", bytes);
  }
  static std::string Record(int64_t label, std::vector<float> score,
                            std::vector<std::string> tags) {
    example::Example ex;
    auto& map = *ex.mutable_features()->mutable_feature();
    map["label"].mutable_int64_list()->add_value(label);
    if (!score.empty()) {
      for (float f : score) map["score"].mutable_float_list()->add_value(f);
    }
    auto* list = map["tags"].mutable_bytes_list();
    for (const std::string& t : tags) list->add_value(t);
    return ex.SerializeAsString();
  }
  absl::StatusOr<std::vector<Element>> Parse(const std::string& spec) {
    return DrainText("tfrecord(files=['r.tfrecord']) | parse_example(spec='" + spec + "')",
                     context_);
  }
  TempDir dir_;
  PipelineContext context_;
};

TEST_F(ParseExampleErrorsTest, VarFeaturesAndDefaultsFillAbsentValues) {
  absl::StatusOr<std::vector<Element>> rows =
      Parse("label:int64:scalar, score:float:2:-1, tags:bytes:var, missing:bytes:scalar:n/a");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0][0], Tensor::Scalar<int64_t>(3));
  EXPECT_THAT((*rows)[0][1].values<float>(), ElementsAre(1.5f, 2.5f));
  EXPECT_THAT((*rows)[0][2].string_values(), ElementsAre("a", "bc"));
  EXPECT_EQ((*rows)[0][3].string_value(0), "n/a");
  EXPECT_THAT((*rows)[1][1].values<float>(), ElementsAre(-1.0f, -1.0f));
  EXPECT_THAT((*rows)[1][2].shape(), ElementsAre(0));
}

TEST_F(ParseExampleErrorsTest, ErrorsNameTheRecordAndFeature) {
  EXPECT_THAT(Parse("score:float:2").status().message(),
              HasSubstr("parse_example: record 1: feature 'score' is missing and the spec gives "
                        "no default"));
  EXPECT_THAT(Parse("label:float:scalar").status().message(),
              HasSubstr("record 0: feature 'label' is int64_list, but the spec expects "
                        "float_list"));
  EXPECT_THAT(Parse("score:float:3").status().message(),
              HasSubstr("record 0: feature 'score' has 2 values, but the spec expects 3"));
  EXPECT_THAT(DrainText("from_tensor_slices(['not a proto \\xff']) | "
                        "parse_example(spec='a:int64:var')")
                  .status()
                  .message(),
              HasSubstr("record 0: expected a serialized tf.train.Example"));
  EXPECT_THAT(DrainText("range(3) | parse_example(spec='a:int64:var')").status().message(),
              HasSubstr("record 0: expected component 0 to be a serialized Example (a string "
                        "scalar), got int64[]{0}"));
}

// Of many files, the error names the file and the record in it, not only parse_example's
// count across them all; so with parallel parsing, which fails on a thread while another
// reads on.
TEST_F(ParseExampleErrorsTest, ErrorsNameTheFileAndItsRecord) {
  std::string first;
  for (int i = 0; i < 3; ++i) AppendTfRecord(Record(i, {0.5f, 1.5f}, {}), &first);
  WriteFile(dir_.path() + "/first.tfrecord", first);
  for (const char* parallel : {"", ", parallel=4"}) {
    SCOPED_TRACE(parallel);
    absl::StatusOr<std::vector<Element>> rows =
        DrainText(absl::StrCat("tfrecord(files=['first.tfrecord', 'r.tfrecord']) | "
                               "parse_example(spec='score:float:2'",
                               parallel, ")"),
                  context_);
    EXPECT_THAT(rows.status().message(),
                HasSubstr("reading record 1 of 'r.tfrecord': parse_example: record 4: feature "
                          "'score' is missing"));
  }
  // A source that cannot tell says nothing more.
  EXPECT_THAT(
      std::string(DrainText("range(3) | parse_example(spec='a:int64:var')").status().message()),
      ::testing::StartsWith("parse_example: record 0"));
}

TEST_F(ParseExampleErrorsTest, ParallelParsingKeepsOrderAndTextRoundTrips) {
  std::string bytes;
  for (int i = 0; i < 200; ++i) AppendTfRecord(Record(i, {0.5f}, {"t"}), &bytes);
  WriteFile(dir_.path() + "/many.tfrecord", bytes);
  absl::StatusOr<std::vector<Element>> rows = DrainText(
      "tfrecord(files=['many.tfrecord']) | parse_example(spec='label:int64:scalar', "
      "parallel=4)",
      context_);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ((*rows)[i][0], Tensor::Scalar<int64_t>(i));
  absl::StatusOr<proto::PipelineDef> def =
      ParsePipeline("tfrecord(files=['a']) | parse_example(spec='a:int64:scalar:7', parallel=4)");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ(FormatPipeline(*def),
            "tfrecord(files=['a']) | parse_example('a:int64:scalar:7', parallel=4)");
}

}  // namespace
}  // namespace sluice::engine
