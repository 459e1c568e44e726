#include "engine/ops/map_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/parallel_map.h"

namespace sluice::engine {

absl::Status CheckFunctionExists(const std::string& name, const FunctionRegistry* functions) {
  if (name.empty()) return absl::InvalidArgumentError("expected a function name, got ''");
  if (functions != nullptr && functions->Find(name) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown function '", name,
                     "'; known functions: ", absl::StrJoin(functions->Names(), ", ")));
  }
  return absl::OkStatus();
}

absl::Status CheckParallel(int64_t parallel) {
  if (parallel < 0 || parallel > kMaxParallel) {
    return absl::InvalidArgumentError(
        absl::StrCat("parallel must be in [0, ", kMaxParallel, "], got ", parallel));
  }
  return absl::OkStatus();
}

OpDef MapOpDef() {
  OpDef def;
  def.name = "map";
  def.op_case = proto::Stage::kMap;
  def.params = {{"function", true}, {"parallel", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::string fn, args.GetIdentifier("function", ""));
    SLUICE_ASSIGN_OR_RETURN(int64_t parallel, args.GetInt("parallel", 0));
    SLUICE_RETURN_IF_ERROR(CheckParallel(parallel));
    stage->mutable_map()->set_function(std::move(fn));
    stage->mutable_map()->set_parallel(static_cast<int32_t>(parallel));
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args = {
        {"function", ArgValue::Identifier(stage.map().function()), true}};
    if (stage.map().parallel() != 0) {
      args.push_back({"parallel", ArgValue::Integer(stage.map().parallel()), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry* functions) {
    SLUICE_RETURN_IF_ERROR(CheckParallel(stage.map().parallel()));
    return CheckFunctionExists(stage.map().function(), functions);
  };
  // Every function maps one element to one element.
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const std::string& name = args.stage.map().function();
    SLUICE_RETURN_IF_ERROR(CheckFunctionExists(name, &args.functions));
    const FunctionRegistry::Function* fn = args.functions.Find(name);
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    ElementTransform apply = [fn](Element in, int64_t, std::optional<Element>* out) {
      Element result;
      SLUICE_RETURN_IF_ERROR((*fn)(std::move(in), &result));
      *out = std::move(result);
      return absl::OkStatus();
    };
    return MakeMapIterator(std::move(input), std::move(apply), args.stage.map().parallel(),
                           absl::StrCat("map(", name, ")"));
  };
  return def;
}

}  // namespace sluice::engine
