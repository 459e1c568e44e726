#include "engine/cardinality.h"

#include "common/status_macros.h"
#include "engine/op_registry.h"
#include "engine/pipeline_validate.h"

namespace sluice::engine {

absl::StatusOr<int64_t> Cardinality(const proto::PipelineDef& def) {
  SLUICE_RETURN_IF_ERROR(ValidatePipelineStructure(def));
  int64_t count = 0;
  for (int i = 0; i < def.stages_size(); ++i) {
    const proto::Stage& stage = def.stages(i);
    SLUICE_ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global().ForStage(stage));
    absl::StatusOr<int64_t> next = op->cardinality(stage, count);
    if (!next.ok()) return PrefixStatus(StageLabel(i, stage), next.status());
    count = *next;
  }
  return count;
}

}  // namespace sluice::engine
