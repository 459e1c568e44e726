#include "engine/ops/padded_batch_op.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/ops/batch_op.h"
#include "engine/tensor_ops.h"

namespace sluice::engine {

absl::StatusOr<Element> PadAndStack(
    std::span<const Element> rows,
    const google::protobuf::RepeatedPtrField<proto::PaddedShape>& padded_shapes,
    const google::protobuf::RepeatedPtrField<proto::ScalarValue>& padding_values,
    std::span<const int64_t> dim0_override) {
  if (rows.empty()) return absl::InvalidArgumentError("expected at least one element to batch");
  const size_t components = rows[0].size();
  if (static_cast<size_t>(padded_shapes.size()) > components ||
      static_cast<size_t>(padding_values.size()) > components) {
    return absl::InvalidArgumentError(
        absl::StrCat("elements have ", components, " components, but ", padded_shapes.size(),
                     " padded_shapes and ", padding_values.size(), " padding_values are given"));
  }
  std::vector<std::vector<int64_t>> targets(components);
  for (size_t c = 0; c < components; ++c) {
    std::vector<int64_t>& target = targets[c];
    target = rows[0][c].shape();
    for (size_t r = 0; r < rows.size(); ++r) {
      if (rows[r].size() != components) {
        return absl::InvalidArgumentError(
            absl::StrCat("all elements of a batch need the same number of components; element ", r,
                         " has ", rows[r].size(), " but element 0 has ", components));
      }
      const Tensor& t = rows[r][c];
      if (t.dtype() != rows[0][c].dtype() || t.shape().size() != target.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("component ", c, " of element ", r, " is ", AbslView(DTypeName(t.dtype())),
                         ShapeString(t.shape()), ", which cannot be padded to match element 0's ",
                         AbslView(DTypeName(rows[0][c].dtype())), ShapeString(rows[0][c].shape()),
                         " (dtype and rank must agree)"));
      }
      for (size_t d = 0; d < target.size(); ++d) target[d] = std::max(target[d], t.shape()[d]);
    }
    if (static_cast<int>(c) < padded_shapes.size()) {
      const proto::PaddedShape& want = padded_shapes[static_cast<int>(c)];
      if (static_cast<size_t>(want.dims_size()) != target.size()) {
        return absl::InvalidArgumentError(absl::StrCat("padded_shapes[", c, "] has rank ",
                                                       want.dims_size(), " but component ", c,
                                                       " has rank ", target.size()));
      }
      for (size_t d = 0; d < target.size(); ++d) {
        const int64_t dim = want.dims(static_cast<int>(d));
        if (dim == -1) continue;
        if (dim < target[d]) {
          return absl::InvalidArgumentError(absl::StrCat("padded_shapes[", c, "] dim ", d, " is ",
                                                         dim, " but an element of the batch has ",
                                                         target[d]));
        }
        target[d] = dim;
      }
    }
    if (c < dim0_override.size() && dim0_override[c] >= 0 && !target.empty()) {
      if (dim0_override[c] < target[0]) {
        return absl::InvalidArgumentError(absl::StrCat("component ", c, " has length ", target[0],
                                                       ", longer than its bucket's padded "
                                                       "length ",
                                                       dim0_override[c]));
      }
      target[0] = dim0_override[c];
    }
  }
  // Checked once per component, not only where a row needs padding: a padding value of the
  // wrong kind fails the first batch, not whichever batch first happens to be ragged.
  for (size_t c = 0; c < static_cast<size_t>(padding_values.size()); ++c) {
    absl::Status fits = CheckPaddingValue(rows[0][c].dtype(), padding_values[static_cast<int>(c)]);
    if (!fits.ok()) return PrefixStatus(absl::StrCat("component ", c), fits);
  }
  std::vector<Element> padded(rows.size());
  const proto::ScalarValue unset;
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t c = 0; c < components; ++c) {
      const proto::ScalarValue& value =
          static_cast<int>(c) < padding_values.size() ? padding_values[static_cast<int>(c)] : unset;
      absl::StatusOr<Tensor> t = rows[r][c].shape() == targets[c]
                                     ? absl::StatusOr<Tensor>(rows[r][c])
                                     : PadTo(rows[r][c], targets[c], value);
      if (!t.ok()) return PrefixStatus(absl::StrCat("component ", c), t.status());
      padded[r].push_back(*std::move(t));
    }
    // A padded component 0 is a new tensor: keep the row's provenance for StackElements.
    if (components > 0 && rows[r][0].provenance() != nullptr) {
      padded[r][0].set_provenance(rows[r][0].provenance());
    }
  }
  return StackElements(padded);
}

absl::Status PaddingValuesFromArgs(const OpArgs& args,
                                   google::protobuf::RepeatedPtrField<proto::ScalarValue>* out) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<ArgValue> items, args.GetList("padding_values"));
  for (size_t i = 0; i < items.size(); ++i) {
    const ArgValue& v = items[i];
    proto::ScalarValue* s = out->Add();
    const std::string what = absl::StrCat("padding_values[", i, "]");
    switch (v.kind) {
      case ArgValue::Kind::kInteger: {
        SLUICE_ASSIGN_OR_RETURN(int64_t n, v.AsInt(what));
        s->set_int_value(n);
        break;
      }
      case ArgValue::Kind::kFloat: {
        SLUICE_ASSIGN_OR_RETURN(double d, v.AsDouble(what));
        s->set_float_value(d);
        break;
      }
      case ArgValue::Kind::kString:
        s->set_string_value(v.text);
        break;
      case ArgValue::Kind::kName:
      case ArgValue::Kind::kBool:
      case ArgValue::Kind::kList:
      case ArgValue::Kind::kPipeline:
        return absl::InvalidArgumentError(
            absl::StrCat(what, " expects a number or a quoted string, got ", v.Describe()));
    }
  }
  return absl::OkStatus();
}

ArgValue PaddingValuesToArg(const google::protobuf::RepeatedPtrField<proto::ScalarValue>& values) {
  std::vector<ArgValue> items;
  for (const proto::ScalarValue& v : values) {
    switch (v.value_case()) {
      case proto::ScalarValue::kIntValue:
        items.push_back(ArgValue::Integer(v.int_value()));
        break;
      case proto::ScalarValue::kFloatValue:
        items.push_back(ArgValue::Float(v.float_value()));
        break;
      case proto::ScalarValue::kStringValue:
        items.push_back(ArgValue::String(v.string_value()));
        break;
      case proto::ScalarValue::VALUE_NOT_SET:
        items.push_back(ArgValue::Integer(0));
        break;
    }
  }
  return ArgValue::List(std::move(items));
}

absl::Status ValidatePaddingValues(
    const google::protobuf::RepeatedPtrField<proto::ScalarValue>& values) {
  for (int i = 0; i < values.size(); ++i) {
    if (values[i].value_case() == proto::ScalarValue::VALUE_NOT_SET) {
      return absl::InvalidArgumentError(absl::StrCat("padding_values[", i, "] is unset"));
    }
    if (values[i].value_case() == proto::ScalarValue::kFloatValue &&
        !std::isfinite(values[i].float_value())) {
      return absl::InvalidArgumentError(
          absl::StrCat("padding_values[", i, "] must be finite, got ", values[i].float_value()));
    }
  }
  return absl::OkStatus();
}

namespace {

class PaddedBatchIterator : public ElementIterator {
 public:
  PaddedBatchIterator(std::unique_ptr<ElementIterator> input, proto::PaddedBatchOp op)
      : input_(std::move(input)), op_(std::move(op)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    std::vector<Element> rows;
    while (!input_done_ && static_cast<int64_t>(rows.size()) < op_.batch_size()) {
      Element e;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_done_ = true;
        break;
      }
      rows_read_.store(rows_read_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      rows.push_back(std::move(e));
    }
    if (rows.empty() ||
        (op_.drop_remainder() && static_cast<int64_t>(rows.size()) < op_.batch_size())) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    absl::StatusOr<Element> batch = PadAndStack(rows, op_.padded_shapes(), op_.padding_values());
    if (!batch.ok()) {
      // The rows that would not pad, as the input names them: the batch being made is the
      // one after those handed out.
      const std::string where = DescribeBatchRows(*input_, batches_made_, op_.batch_size(),
                                                  rows_read_.load(std::memory_order_relaxed));
      absl::Status s = PrefixStatus("padded_batch", batch.status());
      return where.empty() ? s : PrefixStatus(absl::StrCat("reading ", where), s);
    }
    ++batches_made_;
    *out = *std::move(batch);
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  std::string DescribeElement(int64_t index) const override {
    return DescribeBatchRows(*input_, index, op_.batch_size(),
                             rows_read_.load(std::memory_order_relaxed));
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const proto::PaddedBatchOp op_;
  bool input_done_ = false;
  int64_t batches_made_ = 0;
  // Written by GetNext's thread only; DescribeElement may read it from another.
  std::atomic<int64_t> rows_read_{0};
};

}  // namespace

OpDef PaddedBatchOpDef() {
  OpDef def;
  def.name = "padded_batch";
  def.op_case = proto::Stage::kPaddedBatch;
  def.params = {{"batch_size", true},
                {"padded_shapes", false},
                {"padding_values", false},
                {"drop_remainder", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::PaddedBatchOp* op = stage->mutable_padded_batch();
    SLUICE_ASSIGN_OR_RETURN(int64_t batch_size, args.GetInt("batch_size", 0));
    SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
    op->set_batch_size(batch_size);
    op->set_drop_remainder(drop);
    SLUICE_ASSIGN_OR_RETURN(std::vector<ArgValue> shapes, args.GetList("padded_shapes"));
    for (size_t c = 0; c < shapes.size(); ++c) {
      const std::string what = absl::StrCat("padded_shapes[", c, "]");
      if (shapes[c].kind != ArgValue::Kind::kList) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " expects a list of dims such as [10, -1], got ", shapes[c].Describe()));
      }
      proto::PaddedShape* shape = op->add_padded_shapes();
      for (size_t d = 0; d < shapes[c].items.size(); ++d) {
        SLUICE_ASSIGN_OR_RETURN(int64_t dim,
                                shapes[c].items[d].AsInt(absl::StrCat(what, "[", d, "]")));
        shape->add_dims(dim);
      }
    }
    return PaddingValuesFromArgs(args, op->mutable_padding_values());
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::PaddedBatchOp& op = stage.padded_batch();
    std::vector<FormattedArg> args = {{"batch_size", ArgValue::Integer(op.batch_size()), true}};
    if (!op.padded_shapes().empty()) {
      std::vector<ArgValue> shapes;
      for (const proto::PaddedShape& s : op.padded_shapes()) {
        std::vector<ArgValue> dims;
        for (int64_t d : s.dims()) dims.push_back(ArgValue::Integer(d));
        shapes.push_back(ArgValue::List(std::move(dims)));
      }
      args.push_back({"padded_shapes", ArgValue::List(std::move(shapes)), false});
    }
    if (!op.padding_values().empty()) {
      args.push_back({"padding_values", PaddingValuesToArg(op.padding_values()), false});
    }
    if (op.drop_remainder()) args.push_back({"drop_remainder", ArgValue::Bool(true), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::PaddedBatchOp& op = stage.padded_batch();
    if (op.batch_size() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_size must be > 0, got ", op.batch_size()));
    }
    for (int c = 0; c < op.padded_shapes_size(); ++c) {
      for (int64_t d : op.padded_shapes(c).dims()) {
        if (d < -1) {
          return absl::InvalidArgumentError(absl::StrCat(
              "padded_shapes[", c, "] dims must be >= 0 or -1 (pad to the longest), got ", d));
        }
      }
    }
    return ValidatePaddingValues(op.padding_values());
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    if (input < 0) return input;
    const int64_t n = stage.padded_batch().batch_size();
    if (n <= 0) return absl::InvalidArgumentError(absl::StrCat("batch_size must be > 0, got ", n));
    return stage.padded_batch().drop_remainder() ? input / n : input / n + (input % n != 0 ? 1 : 0);
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<PaddedBatchIterator>(std::move(input), args.stage.padded_batch());
  };
  return def;
}

}  // namespace sluice::engine
