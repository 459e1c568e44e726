// Checks that a PipelineDef can be built, before any iterator exists, so bad
// pipelines are rejected where they are submitted (client or dispatcher) with a
// message naming the stage, rather than failing later on a worker.
//
//   SLUICE_RETURN_IF_ERROR(ValidatePipeline(def, FunctionRegistry::Builtins()));
//   if (mode == kDynamic) SLUICE_RETURN_IF_ERROR(ValidateSplittable(def));
//
// All errors are InvalidArgument and start with the stage, e.g.
// "stage 2 (batch): batch_size must be > 0, got -1".
#ifndef SLUICE_ENGINE_PIPELINE_VALIDATE_H_
#define SLUICE_ENGINE_PIPELINE_VALIDATE_H_

#include "absl/status/status.h"
#include "engine/functions.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// Everything ValidatePipeline checks except that map functions exist; for processes (the
// dispatcher) that may not have the workers' custom functions.
[[nodiscard]] absl::Status ValidatePipelineStructure(const proto::PipelineDef& def);

// Non-empty; stage 0 is a source and no other stage is; each op's fields are in range;
// every map function is in `functions`.
[[nodiscard]] absl::Status ValidatePipeline(const proto::PipelineDef& def,
                                            const FunctionRegistry& functions);

// For DYNAMIC sharding: the source must have a split provider (be addressable by element
// index). Also checks ValidatePipelineStructure.
[[nodiscard]] absl::Status ValidateSplittable(const proto::PipelineDef& def);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PIPELINE_VALIDATE_H_
