#include "engine/ops/interleave_op.h"

#include <algorithm>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/look_ahead.h"
#include "engine/ops/interleave_origins.h"
#include "engine/pipeline_text.h"
#include "engine/pipeline_validate.h"
#include "engine/prefetch_iterator.h"
#include "engine/provenance.h"
#include "engine/random.h"
#include "engine/split_key.h"

namespace sluice::engine {
namespace {

constexpr int64_t kMaxCycleLength = 4096;
// What parallel=true reads ahead of each open nested pipeline: a block (at least 2, so that
// the next element is ready when one is taken), but no more than this. Read ahead by
// block_length alone, a block_length of a million buffered a million elements per slot;
// past a few dozen, reading further ahead only holds memory while the consumer drains.
constexpr int64_t kMaxReadAheadPerSlot = 64;
// Hashed with a pass, the first instance its nested chains count from.
constexpr uint64_t kNestedInstanceSalt = 0x6e65737465642d69;  // "nested-i"

class InterleaveIterator : public ElementIterator {
 public:
  InterleaveIterator(std::unique_ptr<ElementIterator> input, const OpBuildArgs& args)
      : input_(std::move(input)),
        op_(args.stage.interleave()),
        // Inside the built pipeline's own copy of the definition, which build_nested_ keeps
        // alive; nested iterators refer to its stages.
        nested_(&args.stage.interleave().nested()),
        build_nested_(args.build_nested),
        seed_(args.stage_seed),
        instance_(args.instance),
        replay_seed_(args.context.replay_seed),
        final_ordinals_(args.final_ordinals),
        registry_(args.context.delivered),
        slots_(static_cast<size_t>(op_.cycle_length())) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (!input_done_ || open_ > 0) {
      Slot& slot = slots_[cycle_index_];
      if (slot.it != nullptr) {
        bool end = false;
        SLUICE_RETURN_IF_ERROR(NamingTheSource(slot, TakeFromSlot(slot, out, &end)));
        if (!end) {
          origins_.Took(slot.opened, cycle_index_, InnerIndex(slot, *out));
          credit_.CreditTo(*out);
          if (++block_index_ == op_.block_length()) NextInCycle();
          *end_of_sequence = false;
          return absl::OkStatus();
        }
        Close(slot);
        --open_;
        NextInCycle();
      } else if (!input_done_) {
        Element element;
        SLUICE_RETURN_IF_ERROR(input_->GetNext(&element, &input_done_));
        if (input_done_) continue;
        Slot next;
        next.opened = opened_;
        if (element.size() == 1 && element[0].dtype() == DType::kString &&
            element[0].shape().empty()) {
          next.source = std::string(element[0].string_value(0));
        }
        bool all_delivered = false;
        SLUICE_RETURN_IF_ERROR(Prepare(element, &next, &all_delivered));
        // A split's nested elements are numbered by their place, so every worker must
        // yield them in the same order: seeded from the job, the split's index and the
        // outer element, not from this worker nor from the pass.
        const uint64_t seed =
            next.retag
                ? CombineSeeds(CombineSeeds(replay_seed_,
                                            static_cast<uint64_t>(SplitKeyIndex(next.split_key))),
                               static_cast<uint64_t>(next.outer_ordinal))
                : CombineSeeds(seed_, opened_);
        ++opened_;
        if (all_delivered) continue;
        // The nested stages count instances from the pass (a repeat rebuilds this stage
        // each pass), so that a shuffle in there that reshuffles each iteration does so each
        // pass, and one that does not keeps its order. For a split, the pass its key names:
        // a recovery task's instances count differently, and it must shuffle alike. A nested
        // repeat counts on from there, so each pass starts at a point hashed from it (62
        // bits, far from any other pass's): one apart, the second iteration of a pass reused
        // the order of the next pass's first. Hashed, not shifted: an interleave nested in
        // this chain starts its own from an instance of it, and a shift wrapped the pass off.
        const int64_t pass = next.retag ? SplitKeyRepetition(next.split_key) : instance_;
        const auto first_instance = static_cast<int64_t>(
            CombineSeeds(kNestedInstanceSalt, static_cast<uint64_t>(pass)) >> 2);
        SLUICE_ASSIGN_OR_RETURN(next.it,
                                build_nested_(*nested_, std::move(element), seed, first_instance));
        if (op_.parallel()) {
          next.it = std::make_unique<PrefetchIterator>(
              std::move(next.it), std::clamp<int64_t>(op_.block_length(), 2, kMaxReadAheadPerSlot));
        }
        {
          absl::MutexLock lock(&slots_mu_);
          slot = std::move(next);
        }
        ++open_;
      } else {
        NextInCycle();
      }
    }
    *end_of_sequence = true;
    return absl::OkStatus();
  }

  // The nested pipeline's own description while it is open ("record 4 of 'b.tfrecord'"),
  // else its outer element's name.
  std::string DescribeElement(int64_t index) const override {
    const std::optional<InterleaveOrigins::Origin> origin = origins_.Find(index);
    if (!origin.has_value()) return "";
    absl::MutexLock lock(&slots_mu_);
    const Slot& slot = slots_[origin->slot];
    if (slot.it != nullptr && slot.opened == origin->opened) {
      std::string nested = slot.it->DescribeElement(origin->inner);
      if (!nested.empty()) return nested;
      return slot.source.empty() ? "" : absl::StrCat("'", slot.source, "'");
    }
    for (const auto& [opened, source] : closed_sources_) {
      if (opened == origin->opened) return absl::StrCat("'", source, "'");
    }
    return "";
  }

 private:
  // An open nested pipeline and how its elements get provenance (engine/provenance.h).
  struct Slot {
    std::unique_ptr<ElementIterator> it;
    // This interleave assigns the final ordinals: element i of the outer element with
    // ordinal o in split `split_key` gets (o << 32) | i, unless `delivered` holds it.
    bool retag = false;
    int64_t split_key = 0;
    int64_t outer_ordinal = 0;
    int64_t inner = 0;
    std::shared_ptr<const DeliveredSet> delivered;
    // Reads one element ahead, so that the element before the end carries the rest.
    ElementLookAhead ahead;
    bool rest_credited = false;
    // Otherwise: the outer element's provenance, handed to its first element only (as
    // unbatch does for rows it cannot tell apart).
    std::shared_ptr<const Provenance> first;
    // The outer element when it is a string (a file name, usually), for errors.
    std::string source;
    uint64_t opened = 0;  // this interleave's count of nested pipelines opened before it
    int64_t taken = 0;    // elements taken from it (when not retagged)
  };

  // An error of a slot's nested pipeline names the slot's outer element, unless it already
  // does: a parse_example or map error inside `interleave(tfrecord() | ...)` said which
  // record of which feature, but not of which file.
  static absl::Status NamingTheSource(const Slot& slot, absl::Status status) {
    if (status.ok() || slot.source.empty() || absl::IsCancelled(status) ||
        absl::StrContains(status.message(), slot.source)) {
      return status;
    }
    return PrefixStatus(absl::StrCat("reading '", slot.source, "'"), status);
  }

  // The slot's next element into *out, or *end. A retagging slot credits the rest of its
  // outer element's nested range once the end is seen: with its last element, which the
  // look-ahead tells, or else (nothing left to produce) with the next element produced.
  // Its outer element is then delivered whole, however many elements it had.
  absl::Status TakeFromSlot(Slot& slot, Element* out, bool* end) {
    if (!slot.retag) return NextKept(slot, out, end);
    bool last = false;
    SLUICE_RETURN_IF_ERROR(
        slot.ahead.Next([&slot](Element* next, bool* ended) { return NextKept(slot, next, ended); },
                        out, end, &last));
    if ((last || *end) && !slot.rest_credited) {
      credit_.DropRange(NestedRest(slot.split_key, slot.outer_ordinal, slot.inner));
      slot.rest_credited = true;
    }
    return absl::OkStatus();
  }

  // The nested pipeline's next element not delivered before (with its provenance), or *end.
  static absl::Status NextKept(Slot& slot, Element* out, bool* end) {
    while (true) {
      SLUICE_RETURN_IF_ERROR(slot.it->GetNext(out, end));
      if (*end) return absl::OkStatus();
      bool keep = true;
      SLUICE_RETURN_IF_ERROR(Tag(slot, out, &keep));
      if (keep) return absl::OkStatus();  // else delivered before: not produced, not counted
    }
  }

  // Sets up `slot` for the outer `element`; *all_delivered when every element it can
  // yield was delivered before (its pipeline is then not even built).
  absl::Status Prepare(const Element& element, Slot* slot, bool* all_delivered) {
    const Provenance* provenance = ElementProvenance(element);
    if (provenance == nullptr || provenance->empty()) return absl::OkStatus();
    if (!final_ordinals_ || provenance->total() != 1) {
      slot->first = SharedElementProvenance(element);
      return absl::OkStatus();
    }
    const Provenance::Run& run = provenance->runs()[0];
    slot->retag = true;
    slot->split_key = run.split_key;
    slot->outer_ordinal = run.first_ordinal;
    CreditNested(provenance->skipped());
    SLUICE_ASSIGN_OR_RETURN(int64_t first, NestedOrdinal(run.first_ordinal, 0));
    if (registry_ != nullptr) slot->delivered = registry_->Find(run.split_key);
    *all_delivered = slot->delivered != nullptr &&
                     slot->delivered->ContainsAll(first, first + (int64_t{1} << kInnerOrdinalBits));
    return absl::OkStatus();
  }

  // Outer elements a filter dropped before this one (outer ordinal runs [o, o + n)) are
  // credited as the nested ranges [o << 32, (o + n) << 32): every element they could have
  // yielded. Runs out of NestedOrdinal's range are left out (a hole, no harm).
  void CreditNested(std::span<const Provenance::Run> dropped_outer) {
    constexpr int64_t kOuterLimit = int64_t{1} << (62 - kInnerOrdinalBits);
    for (const Provenance::Run& run : dropped_outer) {
      if (run.first_ordinal < 0 || run.count > kOuterLimit - run.first_ordinal) continue;
      credit_.DropRange(Provenance::Run{run.split_key, run.first_ordinal << kInnerOrdinalBits,
                                        run.count << kInnerOrdinalBits});
    }
  }

  // Gives the nested pipeline's next element its provenance; *keep = false drops it.
  static absl::Status Tag(Slot& slot, Element* out, bool* keep) {
    if (slot.retag) {
      SLUICE_ASSIGN_OR_RETURN(int64_t ordinal, NestedOrdinal(slot.outer_ordinal, slot.inner++));
      if (slot.delivered != nullptr && slot.delivered->Contains(ordinal)) {
        *keep = false;
        return absl::OkStatus();
      }
      SetElementProvenance(*out, Provenance::Of(slot.split_key, ordinal));
    } else if (slot.first != nullptr) {
      SetElementProvenance(*out, std::move(slot.first));
      slot.first = nullptr;
    }
    return absl::OkStatus();
  }

  // Which element of its nested pipeline's output `out`, just taken from `slot`, is: counted,
  // or where some are passed over (delivered before), read from the ordinal Tag gave it.
  static int64_t InnerIndex(Slot& slot, const Element& out) {
    if (!slot.retag) return slot.taken++;
    const Provenance* provenance = ElementProvenance(out);
    if (provenance == nullptr || provenance->runs().empty()) return slot.taken++;
    return provenance->runs()[0].first_ordinal & ((int64_t{1} << kInnerOrdinalBits) - 1);
  }

  // Empties an ended slot, keeping its outer element's name for describing what it gave;
  // the nested pipeline is destroyed outside the lock (it may join threads).
  void Close(Slot& slot) {
    Slot closed;
    {
      absl::MutexLock lock(&slots_mu_);
      closed = std::exchange(slot, Slot{});
      if (!closed.source.empty()) {
        if (closed_sources_.size() == kClosedSourcesKept) closed_sources_.pop_front();
        closed_sources_.emplace_back(closed.opened, std::move(closed.source));
      }
    }
  }

  void NextInCycle() {
    block_index_ = 0;
    cycle_index_ = (cycle_index_ + 1) % slots_.size();
  }

  std::unique_ptr<ElementIterator> input_;
  const proto::InterleaveOp op_;
  const proto::PipelineDef* const nested_;
  const decltype(OpBuildArgs::build_nested) build_nested_;
  const uint64_t seed_;
  const int64_t instance_;
  const uint64_t replay_seed_;
  const bool final_ordinals_;
  const std::shared_ptr<DeliveredRegistry> registry_;
  // Read by the consumer without the lock; replaced under it, which DescribeElement holds.
  std::vector<Slot> slots_;
  mutable absl::Mutex slots_mu_;
  // As many as the runs InterleaveOrigins keeps: a run it still knows has its file's name.
  static constexpr size_t kClosedSourcesKept = InterleaveOrigins::kRunsKept;
  std::deque<std::pair<uint64_t, std::string>> closed_sources_ ABSL_GUARDED_BY(slots_mu_);
  InterleaveOrigins origins_;
  // What this interleave will never produce (see engine/provenance.h), for the next
  // element it does.
  DroppedCredit credit_;
  size_t cycle_index_ = 0;
  int64_t block_index_ = 0;
  int64_t open_ = 0;
  uint64_t opened_ = 0;
  bool input_done_ = false;
};

}  // namespace

OpDef InterleaveOpDef() {
  OpDef def;
  def.name = "interleave";
  def.op_case = proto::Stage::kInterleave;
  def.params = {
      {"pipeline", true}, {"cycle_length", false}, {"block_length", false}, {"parallel", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::InterleaveOp* op = stage->mutable_interleave();
    SLUICE_ASSIGN_OR_RETURN(*op->mutable_nested(), args.GetPipeline("pipeline"));
    SLUICE_ASSIGN_OR_RETURN(int64_t cycle, args.GetInt("cycle_length", 1));
    SLUICE_ASSIGN_OR_RETURN(int64_t block, args.GetInt("block_length", 1));
    SLUICE_ASSIGN_OR_RETURN(bool parallel, args.GetBool("parallel", false));
    op->set_cycle_length(cycle);
    op->set_block_length(block);
    op->set_parallel(parallel);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::InterleaveOp& op = stage.interleave();
    std::vector<FormattedArg> args = {
        {"pipeline", ArgValue::Pipeline(op.nested(), FormatPipeline(op.nested())), true}};
    if (op.cycle_length() != 1) {
      args.push_back({"cycle_length", ArgValue::Integer(op.cycle_length()), false});
    }
    if (op.block_length() != 1) {
      args.push_back({"block_length", ArgValue::Integer(op.block_length()), false});
    }
    if (op.parallel()) args.push_back({"parallel", ArgValue::Bool(true), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry* functions) -> absl::Status {
    const proto::InterleaveOp& op = stage.interleave();
    if (op.cycle_length() < 1 || op.cycle_length() > kMaxCycleLength) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cycle_length must be in [1, ", kMaxCycleLength, "], got ", op.cycle_length()));
    }
    if (op.block_length() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("block_length must be >= 1, got ", op.block_length()));
    }
    return ValidateNestedPipeline(op.nested(), functions);
  };
  def.cardinality = [](const proto::Stage&, int64_t input) -> absl::StatusOr<int64_t> {
    return input == 0 ? 0 : kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> input, args.input());
    return std::make_unique<InterleaveIterator>(std::move(input), args);
  };
  return def;
}

}  // namespace sluice::engine
