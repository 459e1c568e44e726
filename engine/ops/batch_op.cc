#include "engine/ops/batch_op.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/cardinality.h"
#include "engine/provenance.h"

namespace sluice::engine {

absl::StatusOr<Element> StackElements(std::span<const Element> rows) {
  if (rows.empty()) return absl::InvalidArgumentError("expected at least one element to stack");
  const Element& first = rows[0];
  for (size_t r = 1; r < rows.size(); ++r) {
    if (rows[r].size() != first.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("all elements of a batch need the same number of components; element ", r,
                       " has ", rows[r].size(), " but element 0 has ", first.size()));
    }
    for (size_t c = 0; c < first.size(); ++c) {
      const Tensor& a = first[c];
      const Tensor& b = rows[r][c];
      if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "all elements of a batch need equal dtype and shape per component; component ", c,
            " of element ", r, " is ", AbslView(DTypeName(b.dtype())), ShapeString(b.shape()),
            " but in element 0 it is ", AbslView(DTypeName(a.dtype())), ShapeString(a.shape())));
      }
    }
  }
  Element out;
  out.reserve(first.size());
  for (size_t c = 0; c < first.size(); ++c) {
    std::vector<int64_t> shape = {static_cast<int64_t>(rows.size())};
    shape.insert(shape.end(), first[c].shape().begin(), first[c].shape().end());
    if (first[c].dtype() == DType::kString) {
      std::vector<std::string_view> strings;
      strings.reserve(rows.size() * static_cast<size_t>(first[c].num_elements()));
      for (const Element& row : rows) {
        for (int64_t i = 0; i < row[c].num_elements(); ++i) {
          strings.push_back(row[c].string_value(i));
        }
      }
      out.push_back(Tensor::FromStrings(std::move(shape), strings));
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(Tensor stacked, Tensor::Create(first[c].dtype(), std::move(shape)));
    const size_t row_bytes = first[c].byte_size();
    if (row_bytes > 0) {
      for (size_t r = 0; r < rows.size(); ++r) {
        std::memcpy(stacked.mutable_data() + r * row_bytes, rows[r][c].data(), row_bytes);
      }
    }
    out.push_back(std::move(stacked));
  }
  // The batch's provenance: its rows', in row order.
  if (std::shared_ptr<const Provenance> p = ConcatProvenance(rows)) {
    SetElementProvenance(out, std::move(p));
  }
  return out;
}

namespace {

class BatchIterator : public ElementIterator {
 public:
  BatchIterator(std::unique_ptr<ElementIterator> input, int64_t batch_size, bool drop_remainder)
      : input_(std::move(input)), batch_size_(batch_size), drop_remainder_(drop_remainder) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    std::vector<Element> rows;
    // Cap the reservation: batch_size comes from users and may be far above what arrives.
    rows.reserve(static_cast<size_t>(std::min<int64_t>(batch_size_, 4096)));
    while (!input_done_ && static_cast<int64_t>(rows.size()) < batch_size_) {
      Element e;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_done_ = true;
        break;
      }
      rows.push_back(std::move(e));
    }
    if (rows.empty() || (drop_remainder_ && static_cast<int64_t>(rows.size()) < batch_size_)) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    absl::StatusOr<Element> stacked = StackElements(rows);
    if (!stacked.ok()) return PrefixStatus("batch", stacked.status());
    *out = *std::move(stacked);
    *end_of_sequence = false;
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  const int64_t batch_size_;
  const bool drop_remainder_;
  bool input_done_ = false;
};

}  // namespace

OpDef BatchOpDef() {
  OpDef def;
  def.name = "batch";
  def.op_case = proto::Stage::kBatch;
  def.params = {{"batch_size", true}, {"drop_remainder", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    SLUICE_ASSIGN_OR_RETURN(int64_t batch_size, args.GetInt("batch_size", 0));
    SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
    stage->mutable_batch()->set_batch_size(batch_size);
    stage->mutable_batch()->set_drop_remainder(drop);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args = {
        {"batch_size", ArgValue::Integer(stage.batch().batch_size()), true}};
    if (stage.batch().drop_remainder()) {
      args.push_back({"drop_remainder", ArgValue::Bool(true), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    if (stage.batch().batch_size() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_size must be > 0, got ", stage.batch().batch_size()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage& stage, int64_t input) -> absl::StatusOr<int64_t> {
    if (input < 0) return input;  // kInfinite and kUnknown pass through.
    const int64_t n = stage.batch().batch_size();
    if (n <= 0) return absl::InvalidArgumentError(absl::StrCat("batch_size must be > 0, got ", n));
    return stage.batch().drop_remainder() ? input / n : input / n + (input % n != 0 ? 1 : 0);
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<BatchIterator>(std::move(input), args.stage.batch().batch_size(),
                                           args.stage.batch().drop_remainder());
  };
  return def;
}

}  // namespace sluice::engine
