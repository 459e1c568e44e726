#include "engine/op_args.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;

TEST(ArgValueTest, FloatsPrintTheShortestExactText) {
  EXPECT_EQ(ArgValue::Float(1.0).ToText(), "1.0");
  EXPECT_EQ(ArgValue::Float(0.1).ToText(), "0.1");
  EXPECT_EQ(ArgValue::Float(-2.5).ToText(), "-2.5");
  EXPECT_EQ(ArgValue::Float(1e30).ToText(), "1e+30");
  EXPECT_EQ(ArgValue::Float(1.0 / 3).ToText(), "0.3333333333333333");
}

TEST(ArgValueTest, ListsPrintAndDescribe) {
  ArgValue list = ArgValue::List(
      {ArgValue::Integer(1), ArgValue::String("it's"), ArgValue::List({ArgValue::Bool(true)})});
  EXPECT_EQ(list.ToText(), "[1, 'it\\'s', [true]]");
  EXPECT_EQ(list.Describe(), "list [1, 'it\\'s', [true]]");
  proto::PipelineDef def;
  EXPECT_EQ(ArgValue::Pipeline(def, "range(0, 3, 1)").Describe(), "pipeline range(0, 3, 1)");
}

TEST(OpArgsTest, TypedListAccess) {
  OpArgs args({{"files", ArgValue::List({ArgValue::String("a"), ArgValue::Name("b")})},
               {"one", ArgValue::String("solo")},
               {"dims", ArgValue::List({ArgValue::Integer(3), ArgValue::Integer(-1)})},
               {"bad", ArgValue::List({ArgValue::Integer(3), ArgValue::String("x")})},
               {"x", ArgValue::Float(0.5)}});
  EXPECT_THAT(*args.GetStringList("files"), ElementsAre("a", "b"));
  EXPECT_THAT(*args.GetStringList("one"), ElementsAre("solo"));
  EXPECT_TRUE(args.GetStringList("absent")->empty());
  EXPECT_THAT(*args.GetIntList("dims"), ElementsAre(3, -1));
  EXPECT_EQ(args.GetIntList("bad").status().message(), "bad[1] expects an integer, got string 'x'");
  EXPECT_EQ(*args.GetDouble("x", 0), 0.5);
  EXPECT_FALSE(args.GetDouble("dims", 7.0).ok());
  EXPECT_EQ(args.GetPipeline("files").status().message(),
            "files expects a nested pipeline such as tfrecord(compression='gzip'), got list "
            "['a', b]");
}

}  // namespace
}  // namespace sluice::engine
