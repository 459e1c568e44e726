// The dispatcher's bookkeeping: datasets, jobs, workers, tasks and DYNAMIC split providers.
//
// Pure state, no network: the Dispatcher service (dispatcher.h) maps RPCs onto it, and tests
// drive it directly. Thread-safe; every method takes one lock, none blocks.
//
//   DispatcherState state({.elements_per_split = 256});
//   absl::StatusOr<std::string> id = state.RegisterDataset(pipeline);
//   absl::StatusOr<proto::GetOrCreateJobResponse> job = state.GetOrCreateJob(request);
#ifndef SLUICE_CONTROL_DISPATCHER_STATE_H_
#define SLUICE_CONTROL_DISPATCHER_STATE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "control/service.pb.h"
#include "control/static_sharding.h"
#include "split/split_provider.h"

namespace sluice::control {

struct DispatcherConfig {
  // Elements per DYNAMIC split: one GetSplit round trip per this many source elements.
  int64_t elements_per_split = 256;
  // Where DYNAMIC `list_files` may glob (the dispatcher's --data-root); the dispatcher hands
  // out file names, so it must see the files workers read.
  std::vector<std::string> data_roots;
  // The fixed worker list static sharding needs (--worker-addresses): a worker's index is
  // its position; when non-empty, workers not in it are refused.
  std::vector<std::string> worker_addresses;
};

class DispatcherState {
 public:
  explicit DispatcherState(const DispatcherConfig& config)
      : config_(config), worker_list_(config.worker_addresses) {}

  // Validates the pipeline; the same definition registered twice gets the same id.
  [[nodiscard]] absl::StatusOr<std::string> RegisterDataset(const proto::PipelineDef& pipeline);
  [[nodiscard]] absl::StatusOr<proto::GetOrCreateJobResponse> GetOrCreateJob(
      const proto::GetOrCreateJobRequest& request);
  [[nodiscard]] absl::StatusOr<proto::ClientHeartbeatResponse> ClientHeartbeat(
      const proto::ClientHeartbeatRequest& request);
  // The first heartbeat of an address registers the worker.
  [[nodiscard]] absl::StatusOr<proto::WorkerHeartbeatResponse> WorkerHeartbeat(
      const proto::WorkerHeartbeatRequest& request);
  [[nodiscard]] absl::StatusOr<proto::GetSplitResponse> GetSplit(
      const proto::GetSplitRequest& request);

  [[nodiscard]] int num_workers() const;
  // Workers, datasets and jobs, for `sluice status`.
  [[nodiscard]] proto::GetStatusResponse Status() const;

 private:
  struct Job {
    int64_t id;
    std::string name;
    std::string dataset_id;
    proto::ProcessingMode mode;
    std::vector<int64_t> task_ids;
    int num_clients = 0;
    // DYNAMIC: one provider per repetition (pass) of the source, made on first use.
    std::map<int64_t, std::unique_ptr<split::SplitProvider>> providers;
  };
  struct Task {
    int64_t id;
    int64_t job_id;
    std::string worker_address;
    bool finished = false;
    // Static sharding: the worker's index and the pipeline rewritten for it.
    int64_t worker_index = 0;
    std::optional<proto::PipelineDef> sharded_pipeline;
  };

  bool JobFinished(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CreateTask(Job& job, const std::string& worker_address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DispatcherConfig config_;
  const WorkerList worker_list_;
  mutable absl::Mutex mu_;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, proto::PipelineDef> datasets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> dataset_by_definition_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> job_by_name_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Task> tasks_ ABSL_GUARDED_BY(mu_);
  struct WorkerInfo {
    std::vector<int64_t> task_ids;
    absl::Time last_heartbeat;
    proto::WorkerStats stats;
  };
  std::map<std::string, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_STATE_H_
