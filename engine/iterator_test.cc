#include "engine/iterator.h"

#include <memory>
#include <vector>

#include "engine/functions.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::ScalarInt64s;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BuildPipelineTest, RunsAChainEndToEnd) {
  absl::StatusOr<std::vector<Element>> out = DrainText("range(1, 8, 2) | map(square) | take(3)");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(ScalarInt64s(*out), ElementsAre(1, 9, 25));
}

TEST(BuildPipelineTest, RangeMatchesPythonIncludingNegativeSteps) {
  auto values = [](std::string_view text) {
    absl::StatusOr<std::vector<Element>> out = DrainText(text);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? ScalarInt64s(*out) : std::vector<int64_t>{};
  };
  EXPECT_THAT(values("range(4)"), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(values("range(2, 10, 3)"), ElementsAre(2, 5, 8));
  EXPECT_THAT(values("range(5, 0, -2)"), ElementsAre(5, 3, 1));
  EXPECT_THAT(values("range(-3, -8, -1)"), ElementsAre(-3, -4, -5, -6, -7));
  EXPECT_THAT(values("range(0)"), ElementsAre());
  EXPECT_THAT(values("range(5, 5)"), ElementsAre());
  EXPECT_THAT(values("range(5, 0)"), ElementsAre());
  EXPECT_THAT(values("range(0, 5, -1)"), ElementsAre());
  EXPECT_THAT(values("range(9223372036854775805, 9223372036854775807)"),
              ElementsAre(9223372036854775805, 9223372036854775806));
  EXPECT_THAT(values("range(-9223372036854775807, -9223372036854775808, -1)"),
              ElementsAre(-9223372036854775807));
}

TEST(BuildPipelineTest, EndOfSequenceIsSticky) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(1) | batch(2)");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, {});
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  ASSERT_TRUE((*it)->GetNext(&e, &end).ok());
  EXPECT_FALSE(end);
  for (int i = 0; i < 3; ++i) {
    Element untouched = {Tensor::Scalar<int32_t>(99)};
    ASSERT_TRUE((*it)->GetNext(&untouched, &end).ok());
    EXPECT_TRUE(end);
    EXPECT_EQ(untouched[0], Tensor::Scalar<int32_t>(99));  // *out is left alone at the end.
  }
}

TEST(BuildPipelineTest, IteratorOutlivesTheDefinitionAndContext) {
  std::unique_ptr<ElementIterator> it;
  {
    proto::PipelineDef def = *ParsePipeline("range(3) | map(increment) | repeat(2)");
    PipelineContext context;
    absl::StatusOr<std::unique_ptr<ElementIterator>> built = BuildPipeline(def, context);
    ASSERT_TRUE(built.ok());
    it = *std::move(built);
  }
  absl::StatusOr<std::vector<Element>> out = Drain(*it);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(ScalarInt64s(*out), ElementsAre(1, 2, 3, 1, 2, 3));
}

TEST(BuildPipelineTest, RejectsInvalidPipelinesBeforeBuilding) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(3) | map(cube)");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, {});
  EXPECT_EQ(it.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(it.status().message(), HasSubstr("stage 1 (map): unknown function 'cube'"));
}

TEST(BuildPipelineTest, UsesTheContextRegistryAndPrefixesFunctionErrors) {
  FunctionRegistry registry = FunctionRegistry::Builtins();
  ASSERT_TRUE(registry
                  .Register("fail_on_2",
                            [](Element in, Element* out) {
                              if (in[0].values<int64_t>()[0] == 2) {
                                return absl::DataLossError("saw 2");
                              }
                              *out = std::move(in);
                              return absl::OkStatus();
                            })
                  .ok());
  PipelineContext context;
  context.functions = &registry;
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(5) | map(fail_on_2)");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  ASSERT_TRUE(it.ok()) << it.status();
  Element e;
  bool end = false;
  ASSERT_TRUE((*it)->GetNext(&e, &end).ok());
  ASSERT_TRUE((*it)->GetNext(&e, &end).ok());
  EXPECT_EQ(e[0].values<int64_t>()[0], 1);
  absl::Status s = (*it)->GetNext(&e, &end);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "map(fail_on_2): saw 2");
}

TEST(BuildPipelineTest, TakeStopsPullingItsInput) {
  FunctionRegistry registry = FunctionRegistry::Builtins();
  auto calls = std::make_shared<int>(0);
  ASSERT_TRUE(registry
                  .Register("count_calls",
                            [calls](Element in, Element* out) {
                              ++*calls;
                              *out = std::move(in);
                              return absl::OkStatus();
                            })
                  .ok());
  PipelineContext context;
  context.functions = &registry;
  absl::StatusOr<std::vector<Element>> out =
      DrainText("range(100) | map(count_calls) | repeat() | take(3)", context);
  ASSERT_TRUE(out.ok());
  EXPECT_THAT(ScalarInt64s(*out), ElementsAre(0, 1, 2));
  EXPECT_EQ(*calls, 3);
  out = DrainText("range(5) | take(0)");
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->empty());
}

}  // namespace
}  // namespace sluice::engine
