#include "engine/ops/filter_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/ops/map_op.h"
#include "engine/parallel_map.h"

namespace sluice::engine {
namespace {

absl::StatusOr<bool> Truth(const Element& result) {
  if (result.empty() || !result[0].shape().empty() || !IsNumericDType(result[0].dtype())) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected the predicate to return a numeric scalar as component 0, got ",
                     result.empty() ? "no components" : result[0].DebugString()));
  }
  bool nonzero = false;
  VisitDType(result[0].dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    nonzero = result[0].values<T>()[0] != T{};
  });
  return nonzero;
}

}  // namespace

OpDef FilterOpDef() {
  OpDef def;
  def.name = "filter";
  def.op_case = proto::Stage::kFilter;
  def.params = {{"predicate", true}, {"parallel", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::string fn, args.GetIdentifier("predicate", ""));
    SLUICE_ASSIGN_OR_RETURN(int64_t parallel, args.GetInt("parallel", 0));
    SLUICE_RETURN_IF_ERROR(CheckParallel(parallel));
    stage->mutable_filter()->set_predicate(std::move(fn));
    stage->mutable_filter()->set_parallel(static_cast<int32_t>(parallel));
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args = {
        {"predicate", ArgValue::Identifier(stage.filter().predicate()), true}};
    if (stage.filter().parallel() != 0) {
      args.push_back({"parallel", ArgValue::Integer(stage.filter().parallel()), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry* functions) {
    SLUICE_RETURN_IF_ERROR(CheckParallel(stage.filter().parallel()));
    return CheckFunctionExists(stage.filter().predicate(), functions);
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input == 0 ? 0 : kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const std::string& name = args.stage.filter().predicate();
    SLUICE_RETURN_IF_ERROR(CheckFunctionExists(name, &args.functions));
    const FunctionRegistry::Function* fn = args.functions.Find(name);
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    ElementTransform keep = [fn](Element in, int64_t, std::optional<Element>* out) {
      Element result;
      SLUICE_RETURN_IF_ERROR((*fn)(in, &result));
      SLUICE_ASSIGN_OR_RETURN(bool truth, Truth(result));
      if (truth) *out = std::move(in);
      return absl::OkStatus();
    };
    return MakeMapIterator(std::move(input), std::move(keep), args.stage.filter().parallel(),
                           absl::StrCat("filter(", name, ")"));
  };
  return def;
}

}  // namespace sluice::engine
