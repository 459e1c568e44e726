#include "engine/ops/shuffle_op.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/random.h"
#include "engine/seqlock_ring.h"

namespace sluice::engine {
namespace {

class ShuffleIterator : public ElementIterator {
 public:
  ShuffleIterator(std::unique_ptr<ElementIterator> input, int64_t buffer_size, uint64_t seed)
      : input_(std::move(input)), buffer_size_(buffer_size), rng_(seed) {
    // Cap the reservation: buffer_size may be far larger than the input.
    buffer_.reserve(static_cast<size_t>(std::min<int64_t>(buffer_size, 4096)));
    buffered_input_indices_.reserve(buffer_.capacity());
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!input_done_ && static_cast<int64_t>(buffer_.size()) < buffer_size_) {
      Element e;
      bool end = false;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&e, &end));
      if (end) {
        input_done_ = true;
        std::lock_guard<std::mutex> lock(input_mu_);  // DescribeElement may be asking it
        input_.reset();  // Release the input's resources (and splits) early.
        break;
      }
      buffer_.push_back(std::move(e));
      buffered_input_indices_.push_back(inputs_read_++);
    }
    if (buffer_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    size_t pick = static_cast<size_t>(rng_.Uniform(buffer_.size()));
    std::swap(buffer_[pick], buffer_.back());
    std::swap(buffered_input_indices_[pick], buffered_input_indices_.back());
    *out = std::move(buffer_.back());
    buffer_.pop_back();
    origins_.Push(Origin{outputs_made_++, buffered_input_indices_.back()});
    buffered_input_indices_.pop_back();
    *end_of_sequence = false;
    return absl::OkStatus();
  }

  // Asks the input about the element this output was, while the input is held (it goes
  // once read to its end) and the output is among the latest kOriginsKept.
  std::string DescribeElement(int64_t index) const override {
    const std::optional<Origin> origin =
        origins_.FindNewest([index](const Origin& o) { return o.output <= index; });
    if (!origin.has_value() || origin->output != index) return "";
    std::lock_guard<std::mutex> lock(input_mu_);
    return input_ == nullptr ? "" : input_->DescribeElement(origin->input);
  }

 private:
  struct Origin {
    int64_t output;
    int64_t input;
  };
  // 16 KiB. A stage after the shuffle that fails (a map, parse_example) asks about the
  // element it just took, or one a parallel map's few dozen in flight back.
  static constexpr size_t kOriginsKept = 1024;

  // Reset by GetNext's thread under input_mu_, the only change once built: that thread
  // reads it without the lock.
  std::unique_ptr<ElementIterator> input_;
  // A std::mutex, as prefetch's: ThreadSanitizer sees through it (Debian's Abseil is not
  // built for it).
  mutable std::mutex input_mu_;
  const int64_t buffer_size_;
  Rng rng_;
  std::vector<Element> buffer_;
  std::vector<int64_t> buffered_input_indices_;  // buffer_[i] is input element [i]
  int64_t inputs_read_ = 0;
  int64_t outputs_made_ = 0;
  SeqlockRing<Origin, kOriginsKept> origins_;
  bool input_done_ = false;
};

}  // namespace

OpDef ShuffleOpDef() {
  OpDef def;
  def.name = "shuffle";
  def.op_case = proto::Stage::kShuffle;
  def.params = {{"buffer_size", true}, {"seed", false}, {"reshuffle_each_iteration", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::ShuffleOp* shuffle = stage->mutable_shuffle();
    SLUICE_ASSIGN_OR_RETURN(int64_t buffer_size, args.GetInt("buffer_size", 0));
    SLUICE_ASSIGN_OR_RETURN(uint64_t seed, args.GetUint("seed", 0));
    SLUICE_ASSIGN_OR_RETURN(bool reshuffle, args.GetBool("reshuffle_each_iteration", true));
    shuffle->set_buffer_size(buffer_size);
    shuffle->set_seed(seed);
    shuffle->set_has_seed(args.Has("seed"));
    shuffle->set_reshuffle_each_iteration(reshuffle);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::ShuffleOp& s = stage.shuffle();
    std::vector<FormattedArg> args = {{"buffer_size", ArgValue::Integer(s.buffer_size()), true}};
    if (s.has_seed()) args.push_back({"seed", ArgValue::Unsigned(s.seed()), false});
    if (!s.reshuffle_each_iteration()) {
      args.push_back({"reshuffle_each_iteration", ArgValue::Bool(false), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    const proto::ShuffleOp& s = stage.shuffle();
    if (s.buffer_size() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer_size must be > 0, got ", s.buffer_size()));
    }
    // A seed without has_seed would be silently ignored; that is always a caller bug.
    if (!s.has_seed() && s.seed() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("seed is ", s.seed(), " but has_seed is false; set has_seed to use it"));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::ShuffleOp& s = args.stage.shuffle();
    uint64_t seed = s.has_seed() ? s.seed() : args.stage_seed;
    if (s.reshuffle_each_iteration())
      seed = CombineSeeds(seed, static_cast<uint64_t>(args.instance));
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<ShuffleIterator>(std::move(input), s.buffer_size(), seed);
  };
  return def;
}

}  // namespace sluice::engine
