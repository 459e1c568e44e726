#include "engine/ops/map_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace sluice::engine {
namespace {

class MapIterator : public ElementIterator {
 public:
  MapIterator(std::unique_ptr<ElementIterator> input, const FunctionRegistry::Function* fn,
              std::string name)
      : input_(std::move(input)), fn_(fn), name_(std::move(name)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    Element in;
    SLUICE_RETURN_IF_ERROR(input_->GetNext(&in, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    Element result;
    SLUICE_RETURN_IF_ERROR(
        PrefixStatus(absl::StrCat("map(", name_, ")"), (*fn_)(std::move(in), &result)));
    *out = std::move(result);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const FunctionRegistry::Function* fn_;
  std::string name_;
};

absl::Status UnknownFunction(const std::string& name, const FunctionRegistry& functions) {
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown function '", name, "'; known functions: ", absl::StrJoin(functions.Names(), ", ")));
}

}  // namespace

OpDef MapOpDef() {
  OpDef def;
  def.name = "map";
  def.op_case = proto::Stage::kMap;
  def.params = {{"function", true}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::string fn, args.GetIdentifier("function", ""));
    stage->mutable_map()->set_function(std::move(fn));
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    return std::vector<FormattedArg>{
        {"function", ArgValue::Identifier(stage.map().function()), true}};
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry* functions) {
    const std::string& fn = stage.map().function();
    if (fn.empty()) return absl::InvalidArgumentError("expected a function name, got ''");
    if (functions != nullptr && functions->Find(fn) == nullptr) {
      return UnknownFunction(fn, *functions);
    }
    return absl::OkStatus();
  };
  // Every function maps one element to one element.
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const std::string& name = args.stage.map().function();
    const FunctionRegistry::Function* fn = args.functions.Find(name);
    if (fn == nullptr) return UnknownFunction(name, args.functions);
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<MapIterator>(std::move(input), fn, name);
  };
  return def;
}

}  // namespace sluice::engine
