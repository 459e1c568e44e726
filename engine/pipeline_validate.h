// Checks that a PipelineDef can be built, before any iterator exists, so bad
// pipelines are rejected where they are submitted (client or dispatcher) with a
// message naming the stage, rather than failing later on a worker.
//
//   SLUICE_RETURN_IF_ERROR(ValidatePipeline(def, GlobalFunctions()));
//   if (mode == kDynamic) SLUICE_RETURN_IF_ERROR(ValidateSplittable(def));
//
// All errors are InvalidArgument and start with the stage, e.g.
// "stage 2 (batch): batch_size must be > 0, got -1"; inside an interleave's nested
// pipeline, "stage 1 (interleave): nested stage 0 (tfrecord): ...".
#ifndef SLUICE_ENGINE_PIPELINE_VALIDATE_H_
#define SLUICE_ENGINE_PIPELINE_VALIDATE_H_

#include "absl/status/status.h"
#include "engine/functions.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// Everything ValidatePipeline checks except that functions exist; for processes (the
// dispatcher) that may not have the workers' custom functions.
[[nodiscard]] absl::Status ValidatePipelineStructure(const proto::PipelineDef& def);

// Non-empty; stage 0 is a source and no other stage is; the top-level source does not
// need an outer element (tfrecord without files=[...] only works inside interleave);
// each op's fields are in range; every function named is in `functions`; the pipeline runs
// at most kMaxPipelineThreads threads.
[[nodiscard]] absl::Status ValidatePipeline(const proto::PipelineDef& def,
                                            const FunctionRegistry& functions);

// The same for an interleave's nested pipeline, whose source may read the outer element.
// `functions` may be null (structure only). Errors are prefixed "nested stage i (op)".
[[nodiscard]] absl::Status ValidateNestedPipeline(const proto::PipelineDef& def,
                                                  const FunctionRegistry* functions);

// Most threads one pipeline may run at once (a worker runs one per task). A parallel stage
// inside an interleave runs once per open slot, so limits on each stage alone allowed
// cycle_length 4096 × map(parallel=1024): four million threads, and the worker died when
// thread creation failed.
inline constexpr int64_t kMaxPipelineThreads = 8192;

// Threads one instance of `def` may run at once: a parallel map, filter or parse_example
// `parallel` of them, a prefetch one, an interleave cycle_length times its nested
// pipeline's (plus one per slot with parallel=true). Saturates at 2^40.
[[nodiscard]] int64_t PipelineThreads(const proto::PipelineDef& def);

// For DYNAMIC sharding: the source must have a split provider (be addressable by element
// or file index) and no stage may be one that breaks under it (cache); the error names
// the op. Also checks ValidatePipelineStructure.
[[nodiscard]] absl::Status ValidateSplittable(const proto::PipelineDef& def);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PIPELINE_VALIDATE_H_
