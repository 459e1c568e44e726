// Static sharding on the dispatcher: the fixed worker list and each worker's pipeline.
//
// With FILE, DATA, FILE_OR_DATA or HINT the dispatcher is started with a fixed list of
// worker addresses; a worker's index is its position in that list, and the dispatcher sends
// each worker a pipeline rewritten to read only its share (unlike tf.data, any client may
// read any worker: clients are not pinned to a local worker).
//
//   WorkerList list({"10.0.0.1:7000", "10.0.0.2:7000"});
//   std::optional<int64_t> index = list.IndexOf("ucx://10.0.0.2:7000");  // 1
//   absl::StatusOr<proto::PipelineDef> mine =
//       ShardPipelineForWorker(def, proto::FILE, list.size(), *index);
#ifndef SLUICE_CONTROL_STATIC_SHARDING_H_
#define SLUICE_CONTROL_STATIC_SHARDING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "control/service.pb.h"
#include "engine/pipeline.pb.h"

namespace sluice::control {

class WorkerList {
 public:
  // Entries are "host:port", "scheme://host:port" or "host" (any port on that host).
  explicit WorkerList(std::vector<std::string> entries);
  // InvalidArgument naming the first entry that is none of those (empty, no host, a port
  // that is not a number in 1-65535) or repeats one before it.
  [[nodiscard]] static absl::Status Check(const std::vector<std::string>& entries);

  // The position of the entry matching `worker_address` ("scheme://host:port"): its own
  // host:port entry, else its host's entry. A host entry matches any worker on the host;
  // the dispatcher lets one live worker at a time have it.
  [[nodiscard]] std::optional<int64_t> IndexOf(const std::string& worker_address) const;
  [[nodiscard]] int64_t size() const { return static_cast<int64_t>(entries_.size()); }
  // Entry `index` (< size()), without its scheme.
  [[nodiscard]] const std::string& entry(int64_t index) const { return entries_.at(index); }
  [[nodiscard]] bool empty() const { return entries_.empty(); }
  // "a, b, c", for errors.
  [[nodiscard]] std::string ToString() const;

 private:
  std::vector<std::string> entries_;  // scheme stripped
};

// The pipeline worker `worker_index` of `num_workers` runs under a static `mode`:
// FILE: ApplyFileSharding; DATA: shard(n, i) inserted before the first batching stage (or
// appended), so each worker batches its own elements; FILE_OR_DATA: FILE when the first
// stage reads files, DATA otherwise; HINT: RewriteShardHints. InvalidArgument for a mode
// that is not static; the engine's errors (fewer files than workers, ...) otherwise.
[[nodiscard]] absl::StatusOr<proto::PipelineDef> ShardPipelineForWorker(
    const proto::PipelineDef& def, proto::ProcessingMode mode, int64_t num_workers,
    int64_t worker_index);

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_STATIC_SHARDING_H_
