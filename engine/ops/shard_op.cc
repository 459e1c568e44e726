#include "engine/ops/shard_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/cardinality.h"

namespace sluice::engine {
namespace {

constexpr char kHintName[] = "SHARD_HINT";

class ShardIterator : public ElementIterator {
 public:
  ShardIterator(std::unique_ptr<ElementIterator> input, int64_t num_shards, int64_t index)
      : input_(std::move(input)), num_shards_(num_shards), index_(index) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      if (position_++ % num_shards_ == index_) return absl::OkStatus();
    }
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t num_shards_;
  const int64_t index_;
  int64_t position_ = 0;
};

absl::StatusOr<int64_t> ShardArg(const OpArgs& args, std::string_view name) {
  const ArgValue* v = args.Get(name);
  if (v != nullptr && v->kind == ArgValue::Kind::kName && v->text == kHintName) return kShardHint;
  SLUICE_ASSIGN_OR_RETURN(int64_t n, args.GetInt(name, 0));
  if (n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects an integer >= 0 or SHARD_HINT, got ", n));
  }
  return n;
}

ArgValue ShardText(int64_t v) {
  return v == kShardHint ? ArgValue::Name(kHintName) : ArgValue::Integer(v);
}

}  // namespace

OpDef ShardOpDef() {
  OpDef def;
  def.name = "shard";
  def.op_case = proto::Stage::kShard;
  def.params = {{"num_shards", true}, {"index", true}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t num_shards, ShardArg(args, "num_shards"));
    SLUICE_ASSIGN_OR_RETURN(int64_t index, ShardArg(args, "index"));
    stage->mutable_shard()->set_num_shards(num_shards);
    stage->mutable_shard()->set_index(index);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    return std::vector<FormattedArg>{{"num_shards", ShardText(stage.shard().num_shards()), true},
                                     {"index", ShardText(stage.shard().index()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const int64_t n = stage.shard().num_shards(), i = stage.shard().index();
    if ((n != kShardHint && n <= 0) || (i != kShardHint && i < 0) ||
        (n != kShardHint && i != kShardHint && i >= n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected num_shards > 0 and 0 <= index < num_shards (or SHARD_HINT), got ",
                       n, " and ", i));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    const int64_t n = stage.shard().num_shards(), i = stage.shard().index();
    if (input < 0 || n == kShardHint || i == kShardHint) return input < 0 ? input : kUnknown;
    return input / n + (input % n > i ? 1 : 0);
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::ShardOp& op = args.stage.shard();
    if (op.num_shards() == kShardHint || op.index() == kShardHint) {
      return absl::FailedPreconditionError(
          "shard(SHARD_HINT, ...) is a placeholder: run the pipeline with a FILE, DATA or HINT "
          "sharding policy (which calls RewriteShardHints) or give explicit numbers");
    }
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<ShardIterator>(std::move(input), op.num_shards(), op.index());
  };
  return def;
}

}  // namespace sluice::engine
