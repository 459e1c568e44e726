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

// Wire bytes written by hand, as another writer may: a length-delimited field.
std::string Field(int number, const std::string& bytes) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  for (size_t n = bytes.size();; n >>= 7) {
    out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    if (n < 0x80) break;
  }
  return out + bytes;
}

std::string Int64Feature(std::initializer_list<int64_t> values) {
  example::Feature feature;
  for (int64_t v : values) feature.mutable_int64_list()->add_value(v);
  return feature.SerializeAsString();
}

// An Example of `entries` (map entries: key, then value).
std::string ExampleOf(const std::vector<std::string>& entries) {
  std::string features;
  for (const std::string& entry : entries) features += Field(1, entry);
  return Field(1, features);
}

// TensorFlow reads a record whose feature names are not UTF-8; proto3's map<string, ...>
// refused the whole record (and logged an error for each).
TEST(ExampleParserTest, AKeyThatIsNotUtf8DoesNotSpoilTheRecord) {
  const std::string record = ExampleOf({Field(1, "caf\xe9") + Field(2, Int64Feature({1})),
                                        Field(1, "x") + Field(2, Int64Feature({7}))});
  Element out;
  absl::Status parsed = Parser("x:int64:scalar, caf\xe9:int64:scalar").Parse(record, 0, &out);
  ASSERT_TRUE(parsed.ok()) << parsed;
  EXPECT_THAT(out[0].values<int64_t>(), ElementsAre(7));
  EXPECT_THAT(out[1].values<int64_t>(), ElementsAre(1));
}

// As protobuf reads a map: the last entry of a name wins, and a value given twice in one
// entry merges.
TEST(ExampleParserTest, RepeatedEntriesReadAsProtobufReadsAMap) {
  const std::string record =
      ExampleOf({Field(1, "x") + Field(2, Int64Feature({1})),
                 Field(1, "x") + Field(2, Int64Feature({2})) + Field(2, Int64Feature({3}))});
  Element out;
  absl::Status parsed = Parser("x:int64:var").Parse(record, 0, &out);
  ASSERT_TRUE(parsed.ok()) << parsed;
  EXPECT_THAT(out[0].values<int64_t>(), ElementsAre(2, 3));
  // Cut short anywhere: not an Example.
  for (size_t cut = 1; cut < record.size(); ++cut) {
    EXPECT_THAT(Parser("x:int64:var").Parse(record.substr(0, cut), 3, &out).message(),
                HasSubstr("record 3: "))
        << cut;
  }
  // A value that is not a Feature, under a name asked for.
  EXPECT_THAT(Parser("x:int64:var")
                  .Parse(ExampleOf({Field(1, "x") + Field(2, std::string("\xff", 1))}), 4, &out)
                  .message(),
              HasSubstr("record 4: feature 'x': its 1 bytes are not a tf.train.Feature"));
}

// Framing protobuf refuses is refused: a requested Feature that a 0 or end-group tag cuts
// short (a merge stops there and calls it success; its values after it were lost), a length
// of more than 5 bytes or past 2^31 (its high bits were dropped), field number 0.
TEST(ExampleParserTest, FramingProtobufRefusesIsRefused) {
  Element out;
  const std::string feature = Int64Feature({7});
  for (const std::string& cut : {std::string("\0\xff\xff", 3), std::string("\x0c", 1) + feature}) {
    EXPECT_THAT(Parser("x:int64:var")
                    .Parse(ExampleOf({Field(1, "x") + Field(2, feature + cut)}), 6, &out)
                    .message(),
                HasSubstr("record 6: feature 'x': its"));
  }
  const std::string long_length = std::string("\x0a\x81\x80\x80\x80\x10x", 7) + Field(2, feature);
  EXPECT_THAT(Parser("x:int64:var").Parse(ExampleOf({long_length}), 7, &out).message(),
              HasSubstr("record 7: expected a serialized tf.train.Example"));
  const std::string field_zero =
      std::string("\x02\x00", 2) + ExampleOf({Field(1, "x") + Field(2, feature)});
  EXPECT_THAT(Parser("x:int64:var").Parse(field_zero, 8, &out).message(),
              HasSubstr("record 8: expected a serialized tf.train.Example"));
}

}  // namespace
}  // namespace sluice::engine
