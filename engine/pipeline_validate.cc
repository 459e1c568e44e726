#include "engine/pipeline_validate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/op_registry.h"

namespace sluice::engine {
namespace {

absl::Status ValidateStages(const proto::PipelineDef& def, const FunctionRegistry* functions) {
  const OpRegistry& registry = OpRegistry::Global();
  if (def.stages_size() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline is empty: expected at least a source stage (",
                     absl::StrJoin(registry.SourceNames(/*splittable_only=*/false), ", "), ")"));
  }
  for (int i = 0; i < def.stages_size(); ++i) {
    const proto::Stage& stage = def.stages(i);
    std::string label = StageLabel(i, stage);
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
    SLUICE_RETURN_IF_ERROR(PrefixStatus(label, (*op)->validate(stage, functions)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePipelineStructure(const proto::PipelineDef& def) {
  return ValidateStages(def, nullptr);
}

absl::Status ValidatePipeline(const proto::PipelineDef& def, const FunctionRegistry& functions) {
  return ValidateStages(def, &functions);
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
  return absl::OkStatus();
}

}  // namespace sluice::engine
