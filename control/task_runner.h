// Runs one task's pipeline on a worker and serves its batches to clients.
//
// A producer thread pulls elements (batches) from the pipeline and assembles each straight
// into a slab of the worker's registered pool; finished slabs wait in a bounded buffer
// (`buffer_batches`) and go out as the payload of a GetElement reply. A slab returns to the
// pool only when the transport reports the send complete. Requests that find the buffer
// empty are parked and answered as soon as a batch is ready, so clients never poll.
//
//   auto runner = TaskRunner::Start(task_def, pool, std::move(feed), {.buffer_batches = 4});
//   (*runner)->Fetch(call, request.max_batch_bytes());
#ifndef SLUICE_CONTROL_TASK_RUNNER_H_
#define SLUICE_CONTROL_TASK_RUNNER_H_

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "control/service.pb.h"
#include "engine/iterator.h"
#include "engine/pipeline_stats.h"
#include "transport/rpc.h"
#include "transport/slab_pool.h"

namespace sluice::control {

struct TaskRunnerOptions {
  // Finished batches kept per task ahead of requests (tf.data keeps one).
  size_t buffer_batches = 4;
  // Directories the task's pipeline may read files from (the worker's --data-root).
  std::vector<std::string> data_roots;
};

struct TaskRunnerStats {
  int64_t batches_served = 0;
  int64_t bytes_served = 0;
  int64_t bytes_assembled = 0;
  int64_t bad_records_skipped = 0;
};

class TaskRunner {
 public:
  // `feed` supplies DYNAMIC splits; null for OFF.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TaskRunner>> Start(
      const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
      std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options);
  ~TaskRunner();

  // Replies to `call` with the next batch, end of sequence or the pipeline's error.
  void Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes);
  // The pipeline reached its end (or failed); the buffer may still hold batches.
  [[nodiscard]] bool produced_all() const;
  // Produced all, and every batch reached a client (its send completed): losing this
  // worker now loses nothing of the task.
  [[nodiscard]] bool finished() const;
  [[nodiscard]] int64_t task_id() const { return task_.task_id(); }
  [[nodiscard]] TaskRunnerStats stats() const;

 private:
  struct ReadyBatch {
    std::shared_ptr<transport::Slab> slab;
    size_t size;
    int64_t index;
    // DYNAMIC: which split elements the batch holds (engine/provenance.h).
    google::protobuf::RepeatedPtrField<proto::ProvenanceRun> provenance;
  };
  struct Waiter {
    std::shared_ptr<transport::ServerCall> call;
    uint64_t max_batch_bytes;
  };

  TaskRunner(const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
             std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options);
  void Produce();
  absl::Status ProduceAll(engine::ElementIterator& iterator);
  // Pairs parked requests with ready batches (or with the end); replies outside the lock.
  void Serve();
  void Reply(const Waiter& waiter, ReadyBatch batch);

  const proto::TaskDef task_;
  const std::shared_ptr<transport::SlabPool> pool_;
  const std::unique_ptr<engine::SplitFeed> feed_;
  const TaskRunnerOptions options_;
  engine::PipelineStats pipeline_stats_;

  mutable absl::Mutex mu_;
  std::deque<ReadyBatch> ready_ ABSL_GUARDED_BY(mu_);
  std::deque<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  bool produced_all_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  TaskRunnerStats stats_ ABSL_GUARDED_BY(mu_);
  // Replies whose payload the transport has not finished sending; shared with the send
  // callbacks, which may run after the runner is gone.
  const std::shared_ptr<std::atomic<int64_t>> sends_in_flight_ =
      std::make_shared<std::atomic<int64_t>>(0);
  std::thread producer_;
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_TASK_RUNNER_H_
