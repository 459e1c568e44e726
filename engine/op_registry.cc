#include "engine/op_registry.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/absl_compat.h"
#include "engine/ops/batch_op.h"
#include "engine/ops/bucket_by_sequence_length_op.h"
#include "engine/ops/cache_op.h"
#include "engine/ops/filter_op.h"
#include "engine/ops/fixed_length_record_op.h"
#include "engine/ops/from_tensor_slices_op.h"
#include "engine/ops/interleave_op.h"
#include "engine/ops/list_files_op.h"
#include "engine/ops/map_op.h"
#include "engine/ops/padded_batch_op.h"
#include "engine/ops/parse_example_op.h"
#include "engine/ops/prefetch_op.h"
#include "engine/ops/range_op.h"
#include "engine/ops/repeat_op.h"
#include "engine/ops/shard_op.h"
#include "engine/ops/shuffle_op.h"
#include "engine/ops/skip_op.h"
#include "engine/ops/take_op.h"
#include "engine/ops/text_line_op.h"
#include "engine/ops/tfrecord_op.h"
#include "engine/ops/unbatch_op.h"

namespace sluice::engine {

absl::Status OpRegistry::Register(OpDef def) {
  if (!IsNameToken(def.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("op name must match [A-Za-z_][A-Za-z0-9_.]*, got '", def.name, "'"));
  }
  if (def.op_case == proto::Stage::OP_NOT_SET) {
    return absl::InvalidArgumentError(absl::StrCat("op '", def.name, "' has no op_case"));
  }
  if (!def.from_args || !def.to_args || !def.validate || !def.cardinality || !def.make_iterator) {
    return absl::InvalidArgumentError(
        absl::StrCat("op '", def.name,
                     "' must define from_args, to_args, validate, cardinality and make_iterator"));
  }
  if (by_name_.contains(def.name)) {
    return absl::AlreadyExistsError(absl::StrCat("op '", def.name, "' is already registered"));
  }
  if (auto it = by_case_.find(def.op_case); it != by_case_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("op '", def.name, "' uses Stage field ",
                                                 static_cast<int>(def.op_case),
                                                 ", already taken by op '", it->second->name, "'"));
  }
  auto owned = std::make_unique<OpDef>(std::move(def));
  by_case_[owned->op_case] = owned.get();
  std::string name = owned->name;
  by_name_.emplace(std::move(name), std::move(owned));
  return absl::OkStatus();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second.get();
}

const OpDef* OpRegistry::Find(proto::Stage::OpCase op_case) const {
  auto it = by_case_.find(op_case);
  return it == by_case_.end() ? nullptr : it->second;
}

absl::StatusOr<const OpDef*> OpRegistry::ForStage(const proto::Stage& stage) const {
  if (stage.op_case() == proto::Stage::OP_NOT_SET) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected an op, found none set; known ops: ", absl::StrJoin(Names(), ", ")));
  }
  const OpDef* op = Find(stage.op_case());
  if (op == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Stage field ", static_cast<int>(stage.op_case()), " has no registered op"));
  }
  return op;
}

std::vector<std::string> OpRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, op] : by_name_) names.push_back(name);
  return names;
}

std::vector<std::string> OpRegistry::SourceNames(bool splittable_only) const {
  std::vector<std::string> names;
  for (const auto& [name, op] : by_name_) {
    if (op->is_source && (!splittable_only || op->splittable)) names.push_back(name);
  }
  return names;
}

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* const registry = [] {
    auto* r = new OpRegistry();
    for (OpDef def : {RangeOpDef(),
                      MapOpDef(),
                      BatchOpDef(),
                      RepeatOpDef(),
                      TakeOpDef(),
                      ShuffleOpDef(),
                      FilterOpDef(),
                      PrefetchOpDef(),
                      InterleaveOpDef(),
                      ParseExampleOpDef(),
                      PaddedBatchOpDef(),
                      BucketBySequenceLengthOpDef(),
                      CacheOpDef(),
                      SkipOpDef(),
                      ShardOpDef(),
                      UnbatchOpDef(),
                      FromTensorSlicesOpDef(),
                      ListFilesOpDef(),
                      TfRecordOpDef(),
                      TextLineOpDef(),
                      FixedLengthRecordOpDef()}) {
      absl::Status s = r->Register(std::move(def));
      // Built-in defs are fixed at compile time; a failure is a bug caught by every test.
      if (!s.ok()) __builtin_trap();
    }
    return r;
  }();
  return *registry;
}

std::string StageLabel(int index, const proto::Stage& stage) {
  const OpDef* op = OpRegistry::Global().Find(stage.op_case());
  if (op == nullptr) return absl::StrCat("stage ", index);
  return absl::StrCat("stage ", index, " (", op->name, ")");
}

absl::Status PrefixStatus(std::string_view prefix, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(AbslView(prefix), ": ", status.message()));
}

}  // namespace sluice::engine
