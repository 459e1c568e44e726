#include "engine/pipeline_validate.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/op_registry.h"

namespace sluice::engine {
namespace {

// Counts stop here: cycle_length (at most 4096) times this still fits in 64 bits.
constexpr int64_t kSaturated = int64_t{1} << 40;

int64_t StageThreads(const proto::Stage& stage) {
  auto parallel = [](int64_t n) { return n > 1 ? std::min(n, kSaturated) : int64_t{0}; };
  switch (stage.op_case()) {
    case proto::Stage::kMap:
      return parallel(stage.map().parallel());
    case proto::Stage::kFilter:
      return parallel(stage.filter().parallel());
    case proto::Stage::kParseExample:
      return parallel(stage.parse_example().parallel());
    case proto::Stage::kPrefetch:
      return 1;
    case proto::Stage::kInterleave: {
      const proto::InterleaveOp& op = stage.interleave();
      const int64_t per_slot = PipelineThreads(op.nested()) + (op.parallel() ? 1 : 0);
      const int64_t slots = std::clamp<int64_t>(op.cycle_length(), 0, kSaturated);
      // Both may be near 2^40: their product would overflow.
      return per_slot != 0 && slots > kSaturated / per_slot ? kSaturated : slots * per_slot;
    }
    default:
      return 0;
  }
}

absl::Status CheckThreads(const proto::PipelineDef& def) {
  int64_t total = 0;
  int most = 0;
  int64_t most_threads = 0;
  for (int i = 0; i < def.stages_size(); ++i) {
    const int64_t threads = StageThreads(def.stages(i));
    total = std::min(kSaturated, total + threads);
    if (threads > most_threads) {
      most = i;
      most_threads = threads;
    }
  }
  if (total <= kMaxPipelineThreads) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      StageLabel(most, def.stages(most)), ": the pipeline would run ",
      total == kSaturated ? "at least " : "", total, " threads at once",
      def.stages(most).has_interleave()
          ? " (an interleave runs its nested pipeline's parallel stages once per open slot: "
            "cycle_length times their parallel)"
          : "",
      ", more than the ", kMaxPipelineThreads, " one pipeline may; lower the parallelism"));
}

absl::Status ValidateStages(const proto::PipelineDef& def, const FunctionRegistry* functions,
                            bool nested) {
  const OpRegistry& registry = OpRegistry::Global();
  const std::string prefix = nested ? "nested " : "";
  if (def.stages_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, "pipeline is empty: expected at least a source stage (",
                     absl::StrJoin(registry.SourceNames(/*splittable_only=*/false), ", "), ")"));
  }
  for (int i = 0; i < def.stages_size(); ++i) {
    const proto::Stage& stage = def.stages(i);
    std::string label = absl::StrCat(prefix, StageLabel(i, stage));
    absl::StatusOr<const OpDef*> op = registry.ForStage(stage);
    if (!op.ok()) return PrefixStatus(label, op.status());
    if (i == 0 && !(*op)->is_source) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": the first stage must be a source (",
                       absl::StrJoin(registry.SourceNames(/*splittable_only=*/false), ", "),
                       "), got ", (*op)->name));
    }
    if (i > 0 && (*op)->is_source) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, ": a source may only be the first stage; ", (*op)->name,
                       " has an input here (stage ", i - 1, ")"));
    }
    if (i == 0 && !nested && (*op)->reads_source_element && (*op)->reads_source_element(stage)) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": without files=[...] ", (*op)->name,
          " reads the file named by its input element, so it can only be the source of an "
          "interleave's nested pipeline, e.g. list_files('/data/*') | interleave(",
          (*op)->name, "()); give files=[...] here"));
    }
    SLUICE_RETURN_IF_ERROR(PrefixStatus(label, (*op)->validate(stage, functions)));
  }
  // Nested pipelines count in their interleave, once per slot.
  return nested ? absl::OkStatus() : CheckThreads(def);
}

}  // namespace

int64_t PipelineThreads(const proto::PipelineDef& def) {
  int64_t total = 0;
  for (const proto::Stage& stage : def.stages()) {
    total = std::min(kSaturated, total + StageThreads(stage));
  }
  return total;
}

absl::Status ValidatePipelineStructure(const proto::PipelineDef& def) {
  return ValidateStages(def, nullptr, /*nested=*/false);
}

absl::Status ValidatePipeline(const proto::PipelineDef& def, const FunctionRegistry& functions) {
  return ValidateStages(def, &functions, /*nested=*/false);
}

absl::Status ValidateNestedPipeline(const proto::PipelineDef& def,
                                    const FunctionRegistry* functions) {
  return ValidateStages(def, functions, /*nested=*/true);
}

absl::Status ValidateSplittable(const proto::PipelineDef& def) {
  SLUICE_RETURN_IF_ERROR(ValidatePipelineStructure(def));
  const OpRegistry& registry = OpRegistry::Global();
  const OpDef* source = registry.Find(def.stages(0).op_case());
  if (!source->splittable) {
    return absl::InvalidArgumentError(
        absl::StrCat(StageLabel(0, def.stages(0)),
                     ": DYNAMIC sharding needs a source with a split "
                     "provider (",
                     absl::StrJoin(registry.SourceNames(/*splittable_only=*/true), ", "), "), but ",
                     source->name, " has none"));
  }
  for (int i = 1; i < def.stages_size(); ++i) {
    const OpDef* op = registry.Find(def.stages(i).op_case());
    if (!op->dynamic_unsupported.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(StageLabel(i, def.stages(i)), ": ", op->name,
                       " cannot run under DYNAMIC sharding: ", op->dynamic_unsupported));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::engine
