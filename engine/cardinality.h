// How many elements a pipeline yields when run whole (OFF mode, one pass of
// the outermost iterator). Coordinated reads and progress reporting use it.
//
//   SLUICE_ASSIGN_OR_RETURN(int64_t n, Cardinality(def));
//   if (n == kInfinite) { ... }
#ifndef SLUICE_ENGINE_CARDINALITY_H_
#define SLUICE_ENGINE_CARDINALITY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// The pipeline never ends (e.g. repeat() over a non-empty input).
inline constexpr int64_t kInfinite = -1;
// The count depends on data or functions the engine cannot see.
inline constexpr int64_t kUnknown = -2;

// >= 0, kInfinite or kUnknown. InvalidArgument when the pipeline is structurally invalid
// (see ValidatePipelineStructure); OutOfRange when the count does not fit in int64.
[[nodiscard]] absl::StatusOr<int64_t> Cardinality(const proto::PipelineDef& def);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_CARDINALITY_H_
