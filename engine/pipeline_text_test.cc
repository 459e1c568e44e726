#include "engine/pipeline_text.h"

#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::HasSubstr;

proto::PipelineDef MustParse(std::string_view text) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << text << ": " << def.status();
  return def.ok() ? *def : proto::PipelineDef();
}

// The first line of the error message (the rest is the caret display).
std::string FirstLine(const absl::Status& s) {
  std::string m(s.message());
  return m.substr(0, m.find('\n'));
}

std::string ParseError(std::string_view text) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  EXPECT_FALSE(def.ok()) << text << " parsed as " << def->DebugString();
  if (def.ok()) return "";
  EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
  return FirstLine(def.status());
}

TEST(ParsePipelineTest, ParsesEveryOpWithDefaults) {
  proto::PipelineDef def = MustParse(
      "range(0, 1000) | map(square) | shuffle(64, seed=7) | batch(32, drop_remainder=true) | "
      "repeat() | take(5)");
  ASSERT_EQ(def.stages_size(), 6);
  EXPECT_EQ(def.stages(0).range().start(), 0);
  EXPECT_EQ(def.stages(0).range().stop(), 1000);
  EXPECT_EQ(def.stages(0).range().step(), 1);
  EXPECT_EQ(def.stages(1).map().function(), "square");
  EXPECT_EQ(def.stages(2).shuffle().buffer_size(), 64);
  EXPECT_EQ(def.stages(2).shuffle().seed(), 7u);
  EXPECT_TRUE(def.stages(2).shuffle().has_seed());
  EXPECT_TRUE(def.stages(2).shuffle().reshuffle_each_iteration());
  EXPECT_EQ(def.stages(3).batch().batch_size(), 32);
  EXPECT_TRUE(def.stages(3).batch().drop_remainder());
  EXPECT_EQ(def.stages(4).repeat().count(), -1);
  EXPECT_EQ(def.stages(5).take().count(), 5);

  proto::PipelineDef unseeded = MustParse("range(3) | shuffle(buffer_size=8)");
  EXPECT_FALSE(unseeded.stages(1).shuffle().has_seed());
  EXPECT_EQ(unseeded.stages(1).shuffle().seed(), 0u);
  EXPECT_FALSE(MustParse("range(3) | batch(2)").stages(1).batch().drop_remainder());
}

TEST(ParsePipelineTest, RangeTakesPythonStyleOverloads) {
  const proto::RangeOp one = MustParse("range(5)").stages(0).range();
  EXPECT_EQ(one.start(), 0);
  EXPECT_EQ(one.stop(), 5);
  EXPECT_EQ(one.step(), 1);
  const proto::RangeOp two = MustParse("range(2, 5)").stages(0).range();
  EXPECT_EQ(two.start(), 2);
  EXPECT_EQ(two.stop(), 5);
  const proto::RangeOp three = MustParse("range(10, -10, -3)").stages(0).range();
  EXPECT_EQ(three.start(), 10);
  EXPECT_EQ(three.stop(), -10);
  EXPECT_EQ(three.step(), -3);
  const proto::RangeOp kw = MustParse("range(7, step=2)").stages(0).range();
  EXPECT_EQ(kw.stop(), 7);
  EXPECT_EQ(kw.step(), 2);
  const proto::RangeOp all_kw = MustParse("range(step=-1, stop=0, start=+4)").stages(0).range();
  EXPECT_EQ(all_kw.start(), 4);
  EXPECT_EQ(all_kw.stop(), 0);
  EXPECT_EQ(all_kw.step(), -1);
}

TEST(ParsePipelineTest, MapTakesANameOrAQuotedString) {
  EXPECT_EQ(MustParse("range(1)|map(square)").stages(1).map().function(), "square");
  EXPECT_EQ(MustParse("range(1)|map('my fn')").stages(1).map().function(), "my fn");
  EXPECT_EQ(MustParse("range(1)|map(\"it's\")").stages(1).map().function(), "it's");
  EXPECT_EQ(MustParse(R"(range(1)|map('a\'b\\c'))").stages(1).map().function(), R"(a'b\c)");
  EXPECT_EQ(MustParse("range(1)|map(function=lib.fn_2)").stages(1).map().function(), "lib.fn_2");
}

TEST(ParsePipelineTest, WhitespaceIsAllowedAnywhere) {
  proto::PipelineDef def = MustParse("  range (\n 1 ,\t5 )\n|\tbatch( batch_size = 2 )  ");
  EXPECT_EQ(def.stages(0).range().stop(), 5);
  EXPECT_EQ(def.stages(1).batch().batch_size(), 2);
}

TEST(ParsePipelineTest, SyntaxErrorsGiveColumnExpectationAndCaret) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(0, 100000 | map(square)");
  EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(def.status().message(),
            "pipeline syntax error at column 17: expected ')' or ',' after argument, found '|'\n"
            "  range(0, 100000 | map(square)\n"
            "                  ^");

  EXPECT_EQ(ParseError("range(10) batch(2)"),
            "pipeline syntax error at column 11: expected '|' or end of input after stage, "
            "found 'batch'");
  EXPECT_EQ(ParseError("range(10) |"),
            "pipeline syntax error at column 12: expected an op name, found end of input");
  EXPECT_EQ(ParseError("range 10"),
            "pipeline syntax error at column 7: expected '(' after op name 'range', found '10'");
  EXPECT_EQ(ParseError("range(10,)"),
            "pipeline syntax error at column 10: expected an argument, found ')'");
  EXPECT_EQ(ParseError("range(,)"),
            "pipeline syntax error at column 7: expected an argument or ')', found ','");
  EXPECT_EQ(ParseError("range(stop=)"),
            "pipeline syntax error at column 12: expected a value after '=', found ')'");
  EXPECT_EQ(ParseError("range(10) | 5"),
            "pipeline syntax error at column 13: expected an op name, found '5'");
  EXPECT_EQ(ParseError("range(10) # comment"),
            "pipeline syntax error at column 11: expected '|' or end of input after stage, "
            "found '#'");
  EXPECT_EQ(ParseError("range(10) | map('square)"),
            "pipeline syntax error at column 17: expected a closing ' for the string starting "
            "here, found end of input");
  EXPECT_EQ(ParseError("range(10"),
            "pipeline syntax error at column 9: expected ')' or ',' after argument, found end "
            "of input");
}

TEST(ParsePipelineTest, EmptyTextIsAnError) {
  for (std::string_view text : {"", "   ", "\n\t"}) {
    absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
    EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(def.status().message(),
              "pipeline text is empty; expected at least one stage, e.g. range(10)");
  }
}

TEST(ParsePipelineTest, UnknownOpListsKnownOps) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline("range(10) | bach(2)");
  EXPECT_EQ(def.status().message(),
            "pipeline error at column 13: unknown op 'bach'; known ops: batch, "
            "bucket_by_sequence_length, cache, filter, fixed_length_record, from_tensor_slices, "
            "interleave, list_files, map, padded_batch, parse_example, prefetch, range, repeat, "
            "shard, shuffle, skip, take, text_line, tfrecord, unbatch\n"
            "  range(10) | bach(2)\n"
            "              ^");
}

TEST(ParsePipelineTest, ArgumentErrorsNameTheStageAndArgument) {
  EXPECT_EQ(ParseError("range(10) | batch(size=2)"),
            "pipeline error at column 19: stage 1 (batch): unknown argument 'size'; valid "
            "arguments: batch_size, drop_remainder");
  EXPECT_EQ(ParseError("range(10) | batch(drop_remainder=true)"),
            "pipeline error at column 13: stage 1 (batch): missing required argument "
            "'batch_size'");
  EXPECT_EQ(ParseError("range(10) | batch(4, batch_size=5)"),
            "pipeline error at column 22: stage 1 (batch): argument 'batch_size' given more "
            "than once");
  EXPECT_EQ(ParseError("range(10) | batch('x')"),
            "pipeline error at column 13: stage 1 (batch): batch_size expects an integer, got "
            "string 'x'");
  EXPECT_EQ(ParseError("range(10) | batch(2.5)"),
            "pipeline error at column 13: stage 1 (batch): batch_size expects an integer, got "
            "float 2.5");
  EXPECT_EQ(ParseError("range(10) | batch(2, drop_remainder=1)"),
            "pipeline error at column 13: stage 1 (batch): drop_remainder expects a boolean "
            "(true or false), got integer 1");
  EXPECT_EQ(ParseError("range(10) | map(7)"),
            "pipeline error at column 13: stage 1 (map): function expects a name or a quoted "
            "string, got integer 7");
  EXPECT_EQ(ParseError("range(10) | batch(batch_size=2, true)"),
            "pipeline error at column 33: stage 1 (batch): positional argument follows a "
            "keyword argument");
  EXPECT_EQ(ParseError("range(10) | batch(1, true, 3)"),
            "pipeline error at column 28: stage 1 (batch): batch takes at most 2 positional "
            "arguments, got 3");
  EXPECT_EQ(ParseError("range(1, 2, 3, 4)"),
            "pipeline error at column 1: stage 0 (range): range takes 1 to 3 positional "
            "arguments (stop | start, stop | start, stop, step), got 4");
  EXPECT_EQ(ParseError("range(start=1)"),
            "pipeline error at column 1: stage 0 (range): missing required argument 'stop'");
  EXPECT_EQ(ParseError("range(99999999999999999999)"),
            "pipeline error at column 1: stage 0 (range): stop expects an integer in the int64 "
            "range, got 99999999999999999999");
  EXPECT_EQ(ParseError("range(3) | shuffle(4, seed=-1)"),
            "pipeline error at column 12: stage 1 (shuffle): seed expects an integer in the "
            "uint64 range, got -1");
}

TEST(ParsePipelineTest, ListsAndNestedPipelinesAreValues) {
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(
      "from_tensor_slices([[1, -2], [3, 4]]) | "
      "interleave( tfrecord( files = [ 'a', \"b\" ] ) | map(square) , cycle_length = 2)");
  ASSERT_TRUE(def.ok()) << def.status();
  ASSERT_EQ(def->stages_size(), 2);
  EXPECT_EQ(def->stages(0).from_tensor_slices().components(0).int_values_size(), 4);
  const proto::PipelineDef& nested = def->stages(1).interleave().nested();
  ASSERT_EQ(nested.stages_size(), 2);
  EXPECT_EQ(nested.stages(0).tfrecord().files_size(), 2);
  EXPECT_EQ(nested.stages(1).map().function(), "square");
  EXPECT_EQ(FormatPipeline(*def),
            "from_tensor_slices([[1, -2], [3, 4]]) | interleave(tfrecord(files=['a', 'b']) | "
            "map(square), cycle_length=2)");
}

TEST(ParsePipelineTest, ListAndNestedSyntaxErrorsPointAtTheColumn) {
  EXPECT_EQ(ParsePipeline("from_tensor_slices([1, 2)").status().message(),
            "pipeline syntax error at column 25: expected ']' or ',' after list item, found ')'\n"
            "  from_tensor_slices([1, 2)\n"
            "                          ^");
  EXPECT_EQ(ParsePipeline("range(3) | interleave(tfrecord(colour=1))").status().message(),
            "pipeline error at column 32: nested pipeline at column 23: stage 0 (tfrecord): "
            "unknown argument 'colour'; valid arguments: files, compression, skip_bad_records\n"
            "  range(3) | interleave(tfrecord(colour=1))\n"
            "                                 ^");
  const std::string deep = "from_tensor_slices(" + std::string(100, '[') + ")";
  EXPECT_THAT(std::string(ParsePipeline(deep).status().message()),
              ::testing::HasSubstr("lists and nested pipelines nest deeper than 32"));
  EXPECT_EQ(ParsePipeline("range(3) | interleave(range(2) | )").status().message(),
            "pipeline syntax error at column 34: expected an op name, found ')'\n"
            "  range(3) | interleave(range(2) | )\n"
            "                                   ^");
}

TEST(ParsePipelineTest, ParsingDoesNotValidateValues) {
  // Range checks belong to ValidatePipeline so every producer of protos gets them.
  proto::PipelineDef def = MustParse("batch(-1) | range(0, 1, 0)");
  EXPECT_EQ(def.stages(0).batch().batch_size(), -1);
  EXPECT_EQ(def.stages(1).range().step(), 0);
}

TEST(ParsePipelineTest, LargeSeedsUseTheFullUint64Range) {
  proto::PipelineDef def = MustParse("range(3) | shuffle(4, seed=18446744073709551615)");
  EXPECT_EQ(def.stages(1).shuffle().seed(), 18446744073709551615ull);
}

TEST(FormatPipelineTest, CanonicalFormIsReadable) {
  EXPECT_EQ(FormatPipeline(MustParse("range(5)|map(square)|batch(batch_size=2)")),
            "range(0, 5, 1) | map(square) | batch(2)");
  EXPECT_EQ(FormatPipeline(MustParse(
                "range(5) | shuffle(3, reshuffle_each_iteration=false, seed=9) | repeat() | "
                "batch(2, true) | repeat(2) | take(-1)")),
            "range(0, 5, 1) | shuffle(3, seed=9, reshuffle_each_iteration=false) | repeat() | "
            "batch(2, drop_remainder=true) | repeat(2) | take(-1)");
  EXPECT_EQ(FormatPipeline(MustParse(R"(range(1) | map('it\'s') | map('true'))")),
            R"(range(0, 1, 1) | map('it\'s') | map('true'))");
  proto::PipelineDef unset;
  unset.add_stages();
  EXPECT_EQ(FormatPipeline(unset), "<unset>()");
}

TEST(FormatPipelineTest, RoundTripsToEqualMessages) {
  for (std::string_view text : {
           "range(10)",
           "range(-5, 5, 2) | map(increment) | batch(3, drop_remainder=true)",
           "range(9223372036854775807, -9223372036854775808, -1)",
           "range(0, 100) | shuffle(10) | shuffle(5, seed=0) | repeat(3) | take(7)",
           "range(1) | map('a b') | map(\"\\\\'\") | map(x.y) | map('-')",
           "range(1) | shuffle(1, seed=18446744073709551615, reshuffle_each_iteration=false)",
           "range(1) | repeat(0) | take(0) | batch(1)",
       }) {
    absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
    ASSERT_TRUE(def.ok()) << text << ": " << def.status();
    std::string formatted = FormatPipeline(*def);
    absl::StatusOr<proto::PipelineDef> again = ParsePipeline(formatted);
    ASSERT_TRUE(again.ok()) << formatted << ": " << again.status();
    EXPECT_TRUE(MessageDifferencer::Equals(*def, *again))
        << text << "\n -> " << formatted << "\n -> " << again->DebugString();
    EXPECT_EQ(FormatPipeline(*again), formatted);
  }
}

TEST(FormatPipelineTest, RoundTripsProtosBuiltInCode) {
  proto::PipelineDef def;
  proto::RangeOp* range = def.add_stages()->mutable_range();
  range->set_start(-9223372036854775807 - 1);
  range->set_stop(9223372036854775807);
  range->set_step(1 << 30);
  def.add_stages()->mutable_map()->set_function("with\nnewline 'and' \\ quotes\"");
  proto::ShuffleOp* shuffle = def.add_stages()->mutable_shuffle();
  shuffle->set_buffer_size(3);  // Proto default: reshuffle_each_iteration = false.
  def.add_stages()->mutable_take()->set_count(-1);
  def.add_stages()->mutable_repeat()->set_count(-1);
  def.add_stages()->mutable_batch()->set_batch_size(1);

  std::string text = FormatPipeline(def);
  absl::StatusOr<proto::PipelineDef> parsed = ParsePipeline(text);
  ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status();
  EXPECT_TRUE(MessageDifferencer::Equals(def, *parsed)) << text;
  EXPECT_THAT(text, HasSubstr("range(-9223372036854775808, 9223372036854775807, 1073741824)"));
}

}  // namespace
}  // namespace sluice::engine
