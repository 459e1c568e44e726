#include "engine/ops/parse_example_op.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/example_parser.h"
#include "engine/example_spec.h"
#include "engine/parallel_map.h"

namespace sluice::engine {

OpDef ParseExampleOpDef() {
  OpDef def;
  def.name = "parse_example";
  def.op_case = proto::Stage::kParseExample;
  def.params = {{"spec", true}, {"parallel", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::string text, args.GetIdentifier("spec", ""));
    SLUICE_ASSIGN_OR_RETURN(int64_t parallel, args.GetInt("parallel", 1));
    absl::StatusOr<std::vector<proto::FeatureSpec>> features = ParseFeatureSpecs(text);
    if (!features.ok()) return PrefixStatus("spec", features.status());
    proto::ParseExampleOp* op = stage->mutable_parse_example();
    for (proto::FeatureSpec& f : *features) *op->add_features() = std::move(f);
    op->set_parallel(static_cast<int32_t>(std::clamp<int64_t>(parallel, -1, 1 << 20)));
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::ParseExampleOp& op = stage.parse_example();
    std::vector<FormattedArg> args = {
        {"spec", ArgValue::String(FormatFeatureSpecs(op.features())), true}};
    if (op.parallel() > 1) args.push_back({"parallel", ArgValue::Integer(op.parallel()), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::ParseExampleOp& op = stage.parse_example();
    if (op.features().empty()) {
      return absl::InvalidArgumentError("expected at least one feature in spec, got none");
    }
    for (int i = 0; i < op.features_size(); ++i) {
      SLUICE_RETURN_IF_ERROR(
          PrefixStatus(absl::StrCat("spec feature ", i), ValidateFeatureSpec(op.features(i))));
    }
    if (op.parallel() < 0 || op.parallel() > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("parallel must be in [0, 1024], got ", op.parallel()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::ParseExampleOp& op = args.stage.parse_example();
    auto parser = std::make_shared<const ExampleParser>(
        std::vector<proto::FeatureSpec>(op.features().begin(), op.features().end()));
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    ElementTransform parse = [parser](Element in, int64_t index,
                                      std::optional<Element>* out) -> absl::Status {
      if (in.empty() || in[0].dtype() != DType::kString || !in[0].shape().empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("record ", index,
                         ": expected component 0 to be a serialized Example (a string "
                         "scalar), got ",
                         in.empty() ? "no components" : in[0].DebugString()));
      }
      Element parsed;
      SLUICE_RETURN_IF_ERROR(parser->Parse(in[0].string_value(0), index, &parsed));
      *out = std::move(parsed);
      return absl::OkStatus();
    };
    return MakeMapIterator(std::move(input), std::move(parse), op.parallel(), "parse_example");
  };
  return def;
}

}  // namespace sluice::engine
