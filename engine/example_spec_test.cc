#include "engine/example_spec.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ExampleSpecTest, ParsesTypesShapesAndDefaults) {
  absl::StatusOr<std::vector<proto::FeatureSpec>> specs = ParseFeatureSpecs(
      " age : int64 : scalar : 0 , name:bytes:var, pixels:float:3:0.5;1;1.5, tag:bytes:2:none");
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 4u);
  const proto::FeatureSpec& age = (*specs)[0];
  EXPECT_EQ(age.name(), "age");
  EXPECT_EQ(age.type(), proto::FeatureSpec::INT64);
  EXPECT_EQ(age.kind(), proto::FeatureSpec::SCALAR);
  EXPECT_THAT(age.int64_default(), ElementsAre(0));
  EXPECT_EQ((*specs)[1].kind(), proto::FeatureSpec::VAR);
  EXPECT_EQ((*specs)[1].type(), proto::FeatureSpec::BYTES);
  EXPECT_EQ((*specs)[2].length(), 3);
  EXPECT_THAT((*specs)[2].float_default(), ElementsAre(0.5f, 1.0f, 1.5f));
  EXPECT_THAT((*specs)[3].bytes_default(), ElementsAre("none"));

  google::protobuf::RepeatedPtrField<proto::FeatureSpec> field(specs->begin(), specs->end());
  EXPECT_EQ(FormatFeatureSpecs(field),
            "age:int64:scalar:0, name:bytes:var, pixels:float:3:0.5;1;1.5, tag:bytes:2:none");
}

// A record without the feature gets `length` defaults: a length no feature has made a
// worker allocate until it died (bad_alloc, or an unchecked status dereferenced).
TEST(ExampleSpecTest, AFixedLengthPastTheLimitIsRefused) {
  absl::StatusOr<std::vector<proto::FeatureSpec>> huge =
      ParseFeatureSpecs("x:int64:1000000000000000000:0");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("above the limit"));
  EXPECT_TRUE(ParseFeatureSpecs("x:int64:1024:0").ok());
}

TEST(ExampleSpecTest, ErrorsNameTheFeatureAndWhatWasExpected) {
  auto error = [](const char* text) {
    return std::string(ParseFeatureSpecs(text).status().message());
  };
  EXPECT_EQ(error("age:int32:scalar"),
            "feature 0 'age:int32:scalar': expected type int64, float or bytes, got 'int32'");
  EXPECT_EQ(error("a:int64:scalar, b:float:big"),
            "feature 1 ' b:float:big': expected shape N (a length >= 0), scalar or var, got 'big'");
  EXPECT_EQ(error("age"),
            "feature 0 'age': expected name:type:shape[:default], e.g. age:int64:scalar or "
            "name:bytes:var");
  EXPECT_THAT(error("x:float:3:1;2"), HasSubstr("expected 1 or 3 default values, got 2"));
  EXPECT_THAT(error("x:int64:var:1"), HasSubstr("var features take no default"));
  EXPECT_THAT(error("x:int64:2:abc"), HasSubstr("expected an int64 default, got 'abc'"));
  EXPECT_EQ(error("age:int64:scalar, name:bytes:var, age:float:2"),
            "feature 2 ' age:float:2': feature 'age' is named twice in the spec");
}

}  // namespace
}  // namespace sluice::engine
