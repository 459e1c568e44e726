#include "engine/pipeline_validate.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/op_registry.h"

namespace sluice::engine {
namespace {

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
  return absl::OkStatus();
}

}  // namespace

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
