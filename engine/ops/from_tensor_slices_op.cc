#include "engine/ops/from_tensor_slices_op.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/split_cursor.h"
#include "engine/tensor_literal.h"
#include "engine/tensor_ops.h"

namespace sluice::engine {
namespace {

constexpr const char* kValueParams[] = {"values", "values_1", "values_2", "values_3"};

absl::StatusOr<std::vector<Tensor>> Components(const proto::FromTensorSlicesOp& op) {
  if (op.components_size() == 0) {
    return absl::InvalidArgumentError("expected at least one component of values, got none");
  }
  std::vector<Tensor> out;
  for (int c = 0; c < op.components_size(); ++c) {
    absl::StatusOr<Tensor> t = TensorFromLiteral(op.components(c));
    if (!t.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("component ", c, ": ", t.status().message()));
    }
    if (t->shape().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "component ", c, " is a scalar; slicing needs rank >= 1, e.g. [", t->DebugString(), "]"));
    }
    if (!out.empty() && t->shape()[0] != out[0].shape()[0]) {
      return absl::InvalidArgumentError(
          absl::StrCat("all components need the same dim 0; component ", c, " has ", t->shape()[0],
                       " but component 0 has ", out[0].shape()[0]));
    }
    out.push_back(*std::move(t));
  }
  return out;
}

class FromTensorSlicesIterator : public ElementIterator {
 public:
  FromTensorSlicesIterator(std::vector<Tensor> components, const OpBuildArgs& args)
      : components_(std::move(components)),
        cursor_(args.context.split_feed, args.instance, components_[0].shape()[0],
                "from_tensor_slices", args.context.delivered, args.final_ordinals) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    int64_t index;
    SLUICE_RETURN_IF_ERROR(cursor_.Next(&index, end_of_sequence));
    if (*end_of_sequence) return absl::OkStatus();
    out->clear();
    for (const Tensor& t : components_) out->push_back(SliceRow(t, index));
    if (cursor_.split_key() != 0) SetElementProvenance(*out, cursor_.LastProvenance());
    return absl::OkStatus();
  }

 private:
  const std::vector<Tensor> components_;
  SplitCursor cursor_;
};

}  // namespace

absl::StatusOr<int64_t> FromTensorSlicesLength(const proto::FromTensorSlicesOp& op) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> components, Components(op));
  return components[0].shape()[0];
}

OpDef FromTensorSlicesOpDef() {
  OpDef def;
  def.name = "from_tensor_slices";
  def.op_case = proto::Stage::kFromTensorSlices;
  def.is_source = true;
  def.splittable = true;
  def.params = {{"values", true},
                {"values_1", false},
                {"values_2", false},
                {"values_3", false},
                {"dtypes", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> dtype_names, args.GetStringList("dtypes"));
    int count = 0;
    for (const char* name : kValueParams) count += args.Has(name) ? 1 : 0;
    for (int c = 0; c < count; ++c) {
      if (!args.Has(kValueParams[c])) {
        return absl::InvalidArgumentError(
            absl::StrCat(kValueParams[c], " is missing but a later values_ argument is given"));
      }
    }
    if (!dtype_names.empty() && static_cast<int>(dtype_names.size()) != count) {
      return absl::InvalidArgumentError(
          absl::StrCat("dtypes lists ", dtype_names.size(), " dtypes for ", count, " components"));
    }
    proto::FromTensorSlicesOp* op = stage->mutable_from_tensor_slices();
    for (int c = 0; c < count; ++c) {
      std::optional<DType> dtype;
      if (!dtype_names.empty()) {
        absl::StatusOr<DType> parsed = ParseDType(dtype_names[c]);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("dtypes[", c, "]: ", parsed.status().message()));
        }
        dtype = *parsed;
      }
      SLUICE_ASSIGN_OR_RETURN(*op->add_components(),
                              LiteralFromArg(*args.Get(kValueParams[c]), dtype, kValueParams[c]));
    }
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::FromTensorSlicesOp& op = stage.from_tensor_slices();
    std::vector<FormattedArg> args;
    bool defaults = true;
    std::vector<ArgValue> dtypes;
    for (int c = 0; c < op.components_size() && c < 4; ++c) {
      const proto::TensorLiteral& lit = op.components(c);
      args.push_back({kValueParams[c], LiteralToArg(lit), true});
      const auto dtype = static_cast<DType>(lit.dtype());
      defaults &= dtype == LiteralDefaultDType(lit);
      dtypes.push_back(ArgValue::Name(std::string(DTypeName(dtype))));
    }
    if (!defaults) args.push_back({"dtypes", ArgValue::List(std::move(dtypes)), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::FromTensorSlicesOp& op = stage.from_tensor_slices();
    if (op.components_size() > 4) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected at most 4 components (the text form's values..values_3), got ",
                       op.components_size()));
    }
    SLUICE_RETURN_IF_ERROR(Components(op).status());
    for (int c = 0; c < op.components_size(); ++c) {
      absl::Status writable = CheckLiteralIsWritable(op.components(c));
      if (!writable.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("component ", c, ": ", writable.message()));
      }
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t) {
    return FromTensorSlicesLength(stage.from_tensor_slices());
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::vector<Tensor> components,
                            Components(args.stage.from_tensor_slices()));
    return std::make_unique<FromTensorSlicesIterator>(std::move(components), args);
  };
  return def;
}

}  // namespace sluice::engine
