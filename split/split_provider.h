// Split providers carve one pass over a pipeline's source into splits (ranges
// of element indices) for DYNAMIC sharding: the dispatcher owns a provider per
// job and hands each worker's SplitFeed the next split on request, so workers
// that are faster simply take more splits.
//
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<SplitProvider> provider,
//                           CreateSplitProvider(def, SplitOptions{.elements_per_split = 1024}));
//   proto::Split split;
//   bool end = false;
//   SLUICE_RETURN_IF_ERROR(provider->GetNext(&split, &end));
//   ...
//   provider->Reset();  // next repetition starts over
//
// Splits are chunks of many elements, not one element each: one request per
// element (tf.data's original scheme) makes the dispatcher the bottleneck.
// Thread-compatible: the dispatcher serialises calls.
#ifndef SLUICE_SPLIT_SPLIT_PROVIDER_H_
#define SLUICE_SPLIT_SPLIT_PROVIDER_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::split {

class SplitProvider {
 public:
  virtual ~SplitProvider() = default;
  // The next split, or *end_of_splits once the pass is covered (then `*split` is
  // untouched, and further calls keep reporting the end until Reset).
  [[nodiscard]] virtual absl::Status GetNext(proto::Split* split, bool* end_of_splits) = 0;
  // Starts a new pass from the first split.
  virtual void Reset() = 0;
};

struct SplitOptions {
  // Elements per split; the last split of a pass may be shorter. Must be > 0.
  int64_t elements_per_split = 256;
};

// A provider for the pipeline's source. InvalidArgument when the pipeline is invalid, the
// source has no split provider (see engine::ValidateSplittable), or elements_per_split <= 0.
[[nodiscard]] absl::StatusOr<std::unique_ptr<SplitProvider>> CreateSplitProvider(
    const proto::PipelineDef& def, const SplitOptions& options);

}  // namespace sluice::split

#endif  // SLUICE_SPLIT_SPLIT_PROVIDER_H_
