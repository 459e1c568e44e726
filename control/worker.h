// A data worker: registers with the dispatcher, runs the tasks it is given, serves batches.
//
// Heartbeats carry the worker's task list; the reply carries new tasks. Each task runs in a
// TaskRunner whose batches live in one slab pool registered with the transport at start-up.
//
//   WorkerOptions options;
//   options.dispatcher = *ParseAddress("ucx://10.0.0.1:5050");
//   absl::StatusOr<std::unique_ptr<Worker>> w = Worker::Start(options);
#ifndef SLUICE_CONTROL_WORKER_H_
#define SLUICE_CONTROL_WORKER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "control/heartbeat_pacer.h"
#include "control/task_runner.h"
#include "transport/rpc.h"
#include "transport/slab_pool.h"

namespace sluice::control {

struct WorkerOptions {
  transport::Address dispatcher;
  transport::Address bind{"ucx", "0.0.0.0", 0};
  // Host put in the address clients are told; empty: the local IP facing the dispatcher.
  std::string advertise_host;
  // Registered memory: slab_bytes bounds one batch, num_slabs bounds the worker's buffers.
  size_t slab_bytes = 16 << 20;
  size_t num_slabs = 16;
  // Heap that buffered batches of readers that stopped may move to, so that their slabs
  // serve other jobs (TaskRunner::SpillIfQuiet); 0: they stay in the pool. With the pool,
  // what bounds the memory the worker's batches hold.
  size_t max_spilled_bytes = 256 << 20;
  TaskRunnerOptions task;
  // DYNAMIC splits leased per dispatcher round trip: from splits_per_lease, doubled while a
  // lease lasts less than lease_target, up to max_splits_per_lease (control/lease_sizer.h).
  int splits_per_lease = 4;
  int max_splits_per_lease = 64;
  absl::Duration lease_target = absl::Milliseconds(5);
  absl::Duration heartbeat_interval = absl::Milliseconds(100);
  absl::Duration dispatcher_timeout = absl::Seconds(10);
  // How long a task waits for an unreachable dispatcher (e.g. one restarting) before it
  // fails; heartbeats retry for as long as the worker runs.
  absl::Duration outage_timeout = absl::Minutes(5);
  // How long Start keeps trying to register with a dispatcher it cannot reach (not started
  // yet, restarting) before it fails; zero: one try. A cluster's workers may start first.
  absl::Duration register_timeout = absl::ZeroDuration();
  // How long a task that cannot start (TaskRunner::Start failed: out of threads, most
  // likely) is tried again at each heartbeat before its readers are told why, instead of
  // being asked to retry for ever.
  absl::Duration task_start_timeout = absl::Seconds(30);
  // While Start retries: called with each failed try's reason, it paces the tries (Start
  // tries again as soon as it returns; without it Start sleeps a second) and returns false
  // to give up (`sluice worker` does on Ctrl-C).
  std::function<bool(const absl::Status& why)> on_register_retry;
  transport::TransportOptions transport;
};

class Worker {
 public:
  // Fails if the dispatcher cannot be reached within options.dispatcher_timeout, tried again
  // until options.register_timeout has passed.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Worker>> Start(const WorkerOptions& options);
  ~Worker();

  // The address clients use to reach this worker.
  [[nodiscard]] const std::string& address() const { return address_; }
  // The transport in one line (library, transports picked, who notices dead peers).
  [[nodiscard]] std::string transport_description() const { return rpc_->transport().Describe(); }
  // Data-path counters summed over all tasks since start.
  [[nodiscard]] proto::WorkerStats stats();

  // How long a producer short of slabs waits before other jobs' tasks let kept batches go
  // (FreeSlabsFor): their readers usually acknowledge, and so give slabs back, sooner.
  static constexpr absl::Duration kOtherJobsKeepSlabsFor = absl::Seconds(1);

 private:
  // Heartbeats asked for early (HeartbeatPacer::Soon) come at most this often.
  static constexpr absl::Duration kMinHeartbeatGap = absl::Milliseconds(5);

  explicit Worker(const WorkerOptions& options);
  absl::Status Heartbeat();
  void HeartbeatLoop();
  // Tells the dispatcher this worker is going (WorkerHeartbeatRequest.leaving), so that its
  // readers move on now rather than a worker timeout later. Best effort, and brief.
  void SayLeaving();
  // Adds the tasks this worker runs to `request`, the finished ones also as finished.
  void ListTasks(proto::WorkerHeartbeatRequest& request) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Slabs let go early, producers waiting for slabs, the spill heap full (worker_warnings.cc).
  void SayPoolPressureOnce(const proto::WorkerStats& stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleGetElement(std::shared_ptr<transport::ServerCall> call);
  // Destroys the removed runners no request handler holds any more, on the calling thread
  // (the heartbeat's): a runner's destructor joins its producer, which must happen neither
  // on the transport's progress thread nor on another runner's producer (FreeSlabsFor).
  void DestroyRemovedRunners();
  // TaskRunnerOptions::on_slabs_short: one slab's kept batches of every other task of a
  // coordinated task's job go; of every other task of any job once the producer waited
  // kOtherJobsKeepSlabsFor, when also the buffers of tasks nobody asked for a while move to
  // the heap (TaskRunner::SpillIfQuiet) if a reader reads the task short of slabs.
  void FreeSlabsFor(const TaskRunner* except, absl::Duration waited);

  const WorkerOptions options_;
  TaskRunnerOptions task_options_;  // options_.task, with on_slabs_short set to this worker
  std::string address_;
  std::string uid_;  // random per process: tells the dispatcher this process restarted
  std::unique_ptr<transport::RpcEndpoint> rpc_;
  std::shared_ptr<transport::SlabPool> pool_;

  absl::Mutex mu_;
  std::map<int64_t, std::shared_ptr<TaskRunner>> runners_ ABSL_GUARDED_BY(mu_);
  // Deleted by the dispatcher, to be destroyed by the heartbeat thread once no request
  // handler holds them (Heartbeat).
  std::vector<std::shared_ptr<TaskRunner>> removing_ ABSL_GUARDED_BY(mu_);
  std::string last_heartbeat_error_ ABSL_GUARDED_BY(mu_);
  bool warned_kept_released_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_slab_waits_ ABSL_GUARDED_BY(mu_) = false;
  bool warned_spill_budget_ ABSL_GUARDED_BY(mu_) = false;
  // Tasks the dispatcher sent at the last heartbeat that could not start (TaskRunner::Start
  // failed), since when and why: said once, and told to readers after task_start_timeout.
  struct NotStarted {
    absl::Time since;
    absl::Time last_try;  // told only once tried for task_start_timeout, not merely that old
    absl::Status why;
  };
  absl::flat_hash_map<int64_t, NotStarted> tasks_not_started_ ABSL_GUARDED_BY(mu_);
  // Set by FreeSlabsFor once a producer waited kOtherJobsKeepSlabsFor: the heartbeat thread
  // asks every task to spill its buffer if it is quiet (the copies are made there, not on
  // the producer's thread under mu_, which the transport's thread takes for each request).
  bool spill_wanted_ ABSL_GUARDED_BY(mu_) = false;
  std::string dispatcher_id_ ABSL_GUARDED_BY(mu_);
  proto::WorkerStats retired_stats_ ABSL_GUARDED_BY(mu_);  // of tasks already deleted
  HeartbeatPacer heartbeat_pacer_{options_.heartbeat_interval, kMinHeartbeatGap};
  std::thread heartbeat_thread_;
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_WORKER_H_
