#include "engine/ops/bucket_by_sequence_length_op.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/ops/padded_batch_op.h"

namespace sluice::engine {
namespace {

class BucketIterator : public ElementIterator {
 public:
  BucketIterator(std::unique_ptr<ElementIterator> input, proto::BucketBySequenceLengthOp op)
      : input_(std::move(input)), op_(std::move(op)), buckets_(op_.bucket_batch_sizes_size()) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!input_done_) {
      Element e;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_done_ = true;
        break;
      }
      SLUICE_ASSIGN_OR_RETURN(size_t b, BucketOf(e));
      buckets_[b].push_back(std::move(e));
      if (static_cast<int64_t>(buckets_[b].size()) == op_.bucket_batch_sizes(static_cast<int>(b))) {
        return Emit(b, out, end_of_sequence);
      }
    }
    // Flush what is left, bucket by bucket.
    for (; flush_ < buckets_.size(); ++flush_) {
      if (buckets_[flush_].empty() || op_.drop_remainder()) continue;
      return Emit(flush_, out, end_of_sequence);
    }
    *end_of_sequence = true;
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<size_t> BucketOf(const Element& e) const {
    const size_t c = static_cast<size_t>(op_.length_component());
    if (c >= e.size() || e[c].shape().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket_by_sequence_length: expected component ", c,
                       " to have rank >= 1 (its dim 0 is the length), got ",
                       c >= e.size() ? "an element with fewer components" : e[c].DebugString()));
    }
    const int64_t length = e[c].shape()[0];
    const auto& bounds = op_.bucket_boundaries();
    return static_cast<size_t>(std::upper_bound(bounds.begin(), bounds.end(), length) -
                               bounds.begin());
  }

  absl::Status Emit(size_t b, Element* out, bool* end_of_sequence) {
    std::vector<Element> rows = std::move(buckets_[b]);
    buckets_[b].clear();
    std::vector<int64_t> dim0(static_cast<size_t>(op_.length_component()) + 1, -1);
    if (op_.pad_to_bucket_boundary()) {
      if (b == buckets_.size() - 1) {
        // validate refuses no boundaries, but a stage built in C++ may not have been validated.
        return absl::InvalidArgumentError(absl::StrCat(
            "bucket_by_sequence_length: with pad_to_bucket_boundary every length must be below "
            "the last boundary ",
            op_.bucket_boundaries().empty()
                ? std::string("(there is none)")
                : absl::StrCat(op_.bucket_boundaries(op_.bucket_boundaries_size() - 1))));
      }
      dim0.back() = op_.bucket_boundaries(static_cast<int>(b)) - 1;
    }
    absl::StatusOr<Element> batch = PadAndStack(
        rows, google::protobuf::RepeatedPtrField<proto::PaddedShape>(), op_.padding_values(), dim0);
    if (!batch.ok()) return PrefixStatus("bucket_by_sequence_length", batch.status());
    *out = *std::move(batch);
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  std::unique_ptr<ElementIterator> input_;
  const proto::BucketBySequenceLengthOp op_;
  std::vector<std::vector<Element>> buckets_;
  bool input_done_ = false;
  size_t flush_ = 0;
};

}  // namespace

OpDef BucketBySequenceLengthOpDef() {
  OpDef def;
  def.name = "bucket_by_sequence_length";
  def.op_case = proto::Stage::kBucketBySequenceLength;
  def.params = {{"bucket_boundaries", true},       {"bucket_batch_sizes", true},
                {"length_component", false},       {"padding_values", false},
                {"pad_to_bucket_boundary", false}, {"drop_remainder", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::BucketBySequenceLengthOp* op = stage->mutable_bucket_by_sequence_length();
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> bounds, args.GetIntList("bucket_boundaries"));
    SLUICE_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, args.GetIntList("bucket_batch_sizes"));
    SLUICE_ASSIGN_OR_RETURN(int64_t component, args.GetInt("length_component", 0));
    SLUICE_ASSIGN_OR_RETURN(bool pad_to_boundary, args.GetBool("pad_to_bucket_boundary", false));
    SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
    op->mutable_bucket_boundaries()->Add(bounds.begin(), bounds.end());
    op->mutable_bucket_batch_sizes()->Add(sizes.begin(), sizes.end());
    if (component < 0 || component > 1024) {
      return absl::InvalidArgumentError(
          absl::StrCat("length_component must be in [0, 1024], got ", component));
    }
    op->set_length_component(static_cast<int32_t>(component));
    op->set_pad_to_bucket_boundary(pad_to_boundary);
    op->set_drop_remainder(drop);
    return PaddingValuesFromArgs(args, op->mutable_padding_values());
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::BucketBySequenceLengthOp& op = stage.bucket_by_sequence_length();
    auto ints = [](const google::protobuf::RepeatedField<int64_t>& v) {
      std::vector<ArgValue> items;
      for (int64_t x : v) items.push_back(ArgValue::Integer(x));
      return ArgValue::List(std::move(items));
    };
    std::vector<FormattedArg> args = {{"bucket_boundaries", ints(op.bucket_boundaries()), false},
                                      {"bucket_batch_sizes", ints(op.bucket_batch_sizes()), false}};
    if (op.length_component() != 0) {
      args.push_back({"length_component", ArgValue::Integer(op.length_component()), false});
    }
    if (!op.padding_values().empty()) {
      args.push_back({"padding_values", PaddingValuesToArg(op.padding_values()), false});
    }
    if (op.pad_to_bucket_boundary()) {
      args.push_back({"pad_to_bucket_boundary", ArgValue::Bool(true), false});
    }
    if (op.drop_remainder()) args.push_back({"drop_remainder", ArgValue::Bool(true), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::BucketBySequenceLengthOp& op = stage.bucket_by_sequence_length();
    for (int i = 0; i < op.bucket_boundaries_size(); ++i) {
      if (op.bucket_boundaries(i) <= (i == 0 ? 0 : op.bucket_boundaries(i - 1))) {
        return absl::InvalidArgumentError(
            absl::StrCat("bucket_boundaries must be positive and strictly increasing; entry ", i,
                         " is ", op.bucket_boundaries(i)));
      }
    }
    if (op.bucket_batch_sizes_size() != op.bucket_boundaries_size() + 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected one more bucket_batch_sizes entry than bucket_boundaries (",
                       op.bucket_boundaries_size() + 1, "), got ", op.bucket_batch_sizes_size()));
    }
    for (int64_t n : op.bucket_batch_sizes()) {
      if (n <= 0) {
        return absl::InvalidArgumentError(absl::StrCat("bucket_batch_sizes must be > 0, got ", n));
      }
    }
    if (op.pad_to_bucket_boundary() && op.bucket_boundaries_size() == 0) {
      // Every length falls in the one open-ended bucket, which has no boundary to pad to.
      return absl::InvalidArgumentError(
          "pad_to_bucket_boundary needs bucket_boundaries: without one every element falls in "
          "the last, open-ended bucket, which has no boundary to pad to");
    }
    if (op.length_component() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("length_component must be >= 0, got ", op.length_component()));
    }
    return ValidatePaddingValues(op.padding_values());
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input == 0 ? 0 : input == kInfinite ? kInfinite : kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<BucketIterator>(std::move(input),
                                            args.stage.bucket_by_sequence_length());
  };
  return def;
}

}  // namespace sluice::engine
