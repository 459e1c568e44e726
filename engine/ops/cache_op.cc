#include "engine/ops/cache_op.h"

#include <any>
#include <utility>
#include <vector>

#include "common/status_macros.h"

namespace sluice::engine {
namespace {

// What every instance of one cache stage shares (OpBuildArgs::stage_state).
struct CacheState {
  bool complete = false;
  std::vector<Element> elements;
};

// Replays a completed cache.
class ReplayIterator : public ElementIterator {
 public:
  explicit ReplayIterator(std::shared_ptr<const CacheState> state) : state_(std::move(state)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    *end_of_sequence = next_ >= state_->elements.size();
    if (!*end_of_sequence) *out = state_->elements[next_++];
    return absl::OkStatus();
  }
  bool Rewind() override {
    next_ = 0;
    return true;
  }

 private:
  std::shared_ptr<const CacheState> state_;
  size_t next_ = 0;
};

// Passes the input through while recording it; publishes the recording when the input
// ends.
class FillIterator : public ElementIterator {
 public:
  FillIterator(std::unique_ptr<ElementIterator> input, std::shared_ptr<CacheState> state)
      : input_(std::move(input)), state_(std::move(state)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    SLUICE_RETURN_IF_ERROR(input_->GetNext(out, end_of_sequence));
    if (*end_of_sequence) {
      if (!published_) {
        state_->elements = std::move(recorded_);
        state_->complete = true;
        published_ = true;
      }
      return absl::OkStatus();
    }
    recorded_.push_back(*out);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  std::shared_ptr<CacheState> state_;
  std::vector<Element> recorded_;
  bool published_ = false;
};

}  // namespace

OpDef CacheOpDef() {
  OpDef def;
  def.name = "cache";
  def.op_case = proto::Stage::kCache;
  def.dynamic_unsupported =
      "it would replay the first repetition's splits instead of reading each repetition's own";
  def.from_args = [](const OpArgs&, proto::Stage* stage) -> absl::Status {
    stage->mutable_cache();
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage&) { return std::vector<FormattedArg>{}; };
  def.validate = [](const proto::Stage&, const FunctionRegistry*) { return absl::OkStatus(); };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    std::any& slot = *args.stage_state;
    if (!slot.has_value()) slot = std::make_shared<CacheState>();
    auto state = std::any_cast<std::shared_ptr<CacheState>>(slot);
    if (state->complete) return std::make_unique<ReplayIterator>(state);
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<FillIterator>(std::move(input), std::move(state));
  };
  return def;
}

}  // namespace sluice::engine
