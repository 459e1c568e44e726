#include "engine/example_parser.h"

#include <string>
#include <vector>

#include "engine/example.pb.h"
#include "engine/example_spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ExampleParser Parser(const char* spec) { return ExampleParser(*ParseFeatureSpecs(spec)); }

TEST(ExampleParserTest, DenseOutputsInSpecOrder) {
  example::Example ex;
  auto& map = *ex.mutable_features()->mutable_feature();
  map["ids"].mutable_int64_list()->add_value(7);
  map["ids"].mutable_int64_list()->add_value(8);
  map["w"].mutable_float_list()->add_value(0.5f);
  map["name"].mutable_bytes_list()->add_value("ada");
  map["empty"];  // A feature with no list: treated as absent.
  Element out;
  ASSERT_TRUE(Parser("name:bytes:scalar, ids:int64:2, w:float:var, empty:int64:var, "
                     "missing:float:2:9")
                  .Parse(ex.SerializeAsString(), 5, &out)
                  .ok());
  ASSERT_EQ(out.size(), 5u);
  EXPECT_EQ(out[0].string_value(0), "ada");
  EXPECT_THAT(out[1].values<int64_t>(), ElementsAre(7, 8));
  EXPECT_THAT(out[2].values<float>(), ElementsAre(0.5f));
  EXPECT_THAT(out[3].shape(), ElementsAre(0));
  EXPECT_EQ(out[3].dtype(), DType::kInt64);
  EXPECT_THAT(out[4].values<float>(), ElementsAre(9.0f, 9.0f));
  absl::Status missing = Parser("empty:int64:scalar").Parse(ex.SerializeAsString(), 5, &out);
  EXPECT_EQ(missing.message(), "record 5: feature 'empty' is empty and the spec gives no default");
  // Fixed length 0: a feature that is there, empty, is what the spec asks for (it was "empty
  // and the spec gives no default"); a missing one still needs the default.
  ASSERT_TRUE(Parser("empty:int64:0").Parse(ex.SerializeAsString(), 5, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_THAT(out[0].shape(), ElementsAre(0));
  EXPECT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(Parser("absent:int64:0").Parse(ex.SerializeAsString(), 5, &out).message(),
            "record 5: feature 'absent' is missing and the spec gives no default");
}

TEST(ExampleParserTest, PackedAndUnpackedEncodingsBothParse) {
  // Example { features (1) { feature (1) { key "x", value { int64_list (3) { 3, 4, 5 as
  // three unpacked varints (tag 0x08 each) } } } } }, written by hand.
  const std::string unpacked("\x0a\x0f\x0a\x0d\x0a\x01x\x12\x08\x1a\x06\x08\x03\x08\x04\x08\x05",
                             17);
  Element out;
  absl::Status s = Parser("x:int64:var").Parse(unpacked, 0, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(out[0].values<int64_t>(), ElementsAre(3, 4, 5));
  EXPECT_THAT(Parser("x:int64:var").Parse("\xff\xff", 2, &out).message(),
              HasSubstr("record 2: expected a serialized tf.train.Example"));
}

}  // namespace
}  // namespace sluice::engine
