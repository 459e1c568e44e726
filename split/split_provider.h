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
//
// What a split holds, per source op:
//   range, from_tensor_slices      element indices [begin, end)
//   tfrecord / text_line / fixed_length_record with files=[...]
//                                  file indices [begin, end) into that list
//   list_files                     file indices [begin, end) into the pass's file list,
//                                  plus the names of those files (Split.files)
// list_files splits carry the names because the list comes from globbing a file
// system: the dispatcher globs (under SplitOptions::data_roots, so it must see the same
// files as the workers, e.g. a shared mount) and orders the files once, and workers read
// exactly the names they are handed. Had workers globbed too, a file added or a mount
// differing between dispatcher and worker would silently shift every index. Workers
// still check each name against the pattern and their own data roots.
// Thread-compatible: the dispatcher serialises calls.
#ifndef SLUICE_SPLIT_SPLIT_PROVIDER_H_
#define SLUICE_SPLIT_SPLIT_PROVIDER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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
  // How many splits of this pass have been handed out (the index of the next one).
  [[nodiscard]] virtual int64_t next_split_index() const = 0;
  // Continues the pass at split `split_index` as if that many had been handed out: O(1), so
  // a restarted dispatcher restores a journaled cursor without replaying the splits. An
  // index past the end leaves the provider at the end. InvalidArgument when negative.
  [[nodiscard]] virtual absl::Status Seek(int64_t split_index) = 0;
  // list_files: the pass's files in the order its splits index them (after any shuffle);
  // null for other sources. Given back as SplitOptions::pass_files, it makes a provider of
  // the same splits however the file system changed since.
  [[nodiscard]] virtual std::shared_ptr<const std::vector<std::string>> pass_files() const {
    return nullptr;
  }
};

struct SplitOptions {
  // Elements per split (range, from_tensor_slices); the last split of a pass may be
  // shorter. Must be > 0.
  int64_t elements_per_split = 256;
  // Files per split for file sources (list_files, readers with files=[...]). Must be > 0.
  int64_t files_per_split = 1;
  // Where list_files may glob (engine/io/data_roots.h); empty refuses list_files.
  std::vector<std::string> data_roots;
  // The pass this provider serves; reshuffles list_files(shuffle=true) per pass as a
  // worker-side list_files would (Reset() replays the same pass).
  int64_t repetition = 0;
  // Seeds list_files(shuffle=true) without a seed of its own; 0: a random seed per
  // provider. A dispatcher gives each job one, so that the providers it remakes for a
  // pass (a replayed lease, after a restart) list that pass's files in the same order.
  uint64_t unseeded_shuffle_seed = 0;
  // list_files: the pass's files as an earlier provider of the pass listed them
  // (SplitProvider::pass_files); set, the provider neither globs nor shuffles. A dispatcher
  // keeps (and journals) each pass's list, so that a lease replayed or re-issued names the
  // files the pass handed out, even after files were added, removed or renamed.
  std::shared_ptr<const std::vector<std::string>> pass_files;
};

// A provider for the pipeline's source. InvalidArgument when the pipeline is invalid, the
// source has no split provider or a stage cannot run under DYNAMIC sharding (see
// engine::ValidateSplittable), or a per-split count is <= 0. For list_files, the glob's
// errors (PermissionDenied outside the data roots, NotFound when nothing matches).
[[nodiscard]] absl::StatusOr<std::unique_ptr<SplitProvider>> CreateSplitProvider(
    const proto::PipelineDef& def, const SplitOptions& options);

}  // namespace sluice::split

#endif  // SLUICE_SPLIT_SPLIT_PROVIDER_H_
