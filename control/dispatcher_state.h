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

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "control/delivery_log.h"
#include "control/journal.h"
#include "control/service.pb.h"
#include "control/static_sharding.h"
#include "engine/split_key.h"
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
  // A worker silent this long is lost: its tasks end, and the DYNAMIC splits it leased are
  // re-issued (minus what clients already received) to a recovery task on a live worker.
  absl::Duration worker_timeout = absl::Seconds(10);
  // Coordinated reads: how long a worker's round waits for a consumer that has not asked
  // for it (TaskDef.round_wait_ms); unset: RoundWait() derives it from worker_timeout. A
  // consumer stuck on a lost worker's round asks the live workers for rounds past its
  // request window only once it learns of the loss, up to 1.25 x worker_timeout (the
  // liveness check runs every quarter) plus a heartbeat and a retry backoff after the worker
  // died; a round that gave up on it sooner went ahead without it, and its batch of that
  // round comes from further on in the worker's stream than the others' (another bucket,
  // say). The price of the longer wait: a consumer that dies holds the others up that long
  // once (tf.data's rounds wait for it for ever). A reader that stops cancels the rounds it
  // asked for ahead, so stopping costs nothing.
  std::optional<absl::Duration> round_wait;
  [[nodiscard]] absl::Duration RoundWait() const {
    return round_wait.value_or(worker_timeout * 3 / 2 + absl::Seconds(1));
  }
  // A client silent this long no longer holds up a re-issue, nor keeps its job alive.
  absl::Duration client_timeout = absl::Minutes(1);
  // A job without clients (released or silent) for this long is garbage-collected: its
  // tasks end on the workers. A DYNAMIC job's name is then refused rather than silently
  // re-created from the start. InfiniteDuration: never.
  absl::Duration job_gc_timeout = absl::Minutes(5);
};

class DispatcherState {
 public:
  // Passes a DYNAMIC job's split keys can name: the repetition takes a key's top 23 bits.
  static constexpr int64_t kMaxRepetitions = engine::kMaxSplitKeyRepetitions;
  explicit DispatcherState(const DispatcherConfig& config)
      : config_(config), worker_list_(config.worker_addresses) {}

  // Validates the pipeline; the same definition registered twice gets the same id. A
  // non-empty `dataset_id` names it instead: AlreadyExists when that name holds another
  // definition.
  [[nodiscard]] absl::StatusOr<std::string> RegisterDataset(const proto::PipelineDef& pipeline,
                                                            const std::string& dataset_id = "");
  [[nodiscard]] absl::StatusOr<proto::GetOrCreateJobResponse> GetOrCreateJob(
      const proto::GetOrCreateJobRequest& request);
  [[nodiscard]] absl::StatusOr<proto::ClientHeartbeatResponse> ClientHeartbeat(
      const proto::ClientHeartbeatRequest& request);
  // The client stops reading: it no longer holds its job alive (see job_gc_timeout).
  [[nodiscard]] absl::Status ReleaseClient(const proto::ReleaseClientRequest& request);
  // The first heartbeat of an address registers the worker.
  [[nodiscard]] absl::StatusOr<proto::WorkerHeartbeatResponse> WorkerHeartbeat(
      const proto::WorkerHeartbeatRequest& request);
  [[nodiscard]] absl::StatusOr<proto::GetSplitResponse> GetSplit(
      const proto::GetSplitRequest& request);

  // Fault tolerance. Every state change is appended to `journal` under the state lock (so
  // journal order is state order), and a snapshot compacts the journal every
  // `compact_every` updates. Call before serving; `journal` must outlive the state.
  void AttachJournal(JournalWriter* journal, int64_t compact_every);
  // Stops journaling (the journal is about to go); the state must not change after this.
  void DetachJournal();
  // Rebuilds the state a journal recorded; call on a fresh state, before AttachJournal.
  // DYNAMIC providers resume at their journaled cursors (Seek, no replay of splits).
  [[nodiscard]] absl::Status Restore(const Recovered& recovered);
  // Updates journaled so far. A handler whose call moved this must not reply before the
  // journal is durable (JournalWriter::Sync).
  [[nodiscard]] int64_t journaled_updates() const;
  // Those, plus the leases answered again to a retry: the lease's own record may not be
  // durable yet (or may never be, after a write failed), so a handler whose call moved
  // this waits for the journal as well.
  [[nodiscard]] int64_t answers_awaiting_the_journal() const;
  // Coordinated reads: how far past the furthest consumer the task list is fixed. Consumers
  // learn the horizon from heartbeats (every 100 ms), so it must cover more rounds than a
  // consumer reads between two of them.
  static constexpr int64_t kRoundWindow = 1024;
  // Coordinated-read updates (round horizons, task endings) and task losses appended but
  // not durable yet. Any handler's reply may tell a client of them, so none replies before
  // they are.
  [[nodiscard]] bool coordination_unsynced() const {
    return coordination_unsynced_->load(std::memory_order_acquire) > 0;
  }

  // Declares workers silent for longer than worker_timeout lost; call periodically.
  void CheckLiveness(absl::Time now);

  // Workers not lost.
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
    // An anonymous job whose client released it: nobody can read it again, so its tasks
    // were ended (journaled as finished) and workers are told to delete them, freeing the
    // slabs their buffers held until the job's garbage collection.
    bool released = false;
    // DYNAMIC: one provider per repetition (pass) of the source, made on first use.
    std::map<int64_t, std::unique_ptr<split::SplitProvider>> providers;
    // The split size the job's providers use (journaled, so a restart keeps it).
    int64_t elements_per_split = 0;
    // SplitOptions::unseeded_shuffle_seed of every provider the job makes (journaled).
    uint64_t shuffle_seed = 0;
    // Cursors restored from a journal, applied when a repetition's provider is made.
    std::map<int64_t, int64_t> restored_cursors;
    // list_files: each pass's files as its provider first listed them (journaled). Every
    // provider of the pass made since (a replayed lease, a lost task's splits, a restart)
    // is made from it, not from a new glob that may list other files.
    std::map<int64_t, std::shared_ptr<const std::vector<std::string>>> pass_files;
    // The last lease of each (task, repetition), to answer a retried GetSplit alike.
    struct Lease {
      int64_t seq = 0;
      int64_t first = 0;
      int64_t next = 0;
      bool end = false;
    };
    std::map<std::pair<int64_t, int64_t>, Lease> last_leases;
    // Clients by id, with their last heartbeat (they hold up re-issues until they confirm);
    // dropped once silent for client_timeout (ForgetSilentClients).
    std::map<int64_t, absl::Time> clients;
    // DYNAMIC delivery tracking: the ordinals of each split clients reported as received.
    DeliveryLog delivered;
    // Lost tasks whose splits wait for these clients to confirm they stopped reading them.
    struct Recovery {
      int64_t lost_task;
      std::set<int64_t> waiting_for;
      // Rebuilt at a restore, it waits for every client restored, one that never knew the
      // task too (it joined after the loss; older readers do not confirm a task they never
      // held): past this, the rest are not waited for.
      absl::Time wait_until = absl::InfiniteFuture();
    };
    std::vector<Recovery> recoveries;
    // When the job last had a client (for garbage collection).
    absl::Time last_client_seen = absl::Now();
    // Coordinated reads: consumers per round (0: not coordinated), the round up to which the
    // task list is final, and each consumer's reported round.
    int32_t num_consumers = 0;
    int64_t round_horizon = 0;
    // The horizon last journaled (Update.RoundHorizon), at least round_horizon once a
    // consumer heartbeat raised it; 0 before.
    int64_t journaled_horizon = 0;
    std::map<int64_t, int64_t> client_rounds;
    // Coordinated reads: consumer index -> its latest client (soft state), to tell a
    // restarted consumer where the others are.
    std::map<int32_t, int64_t> consumer_clients;
    // Passes below this were left by every task and their state dropped (infinite jobs).
    int64_t pruned_below_repetition = 0;
    // The pipeline never ends (EndlessJob; worked out on the first lease).
    std::optional<bool> endless;
    // Rebuilt from the journal. Its clients are those that joined and did not release it,
    // assumed reading for a client timeout (a crash loses who went silent); so the worker
    // lists (WorkerHeartbeat's job_clients) still wait that long after started_.
    bool restored = false;
  };
  struct Task {
    int64_t id;
    int64_t job_id;
    std::string worker_address;
    bool finished = false;
    // Static sharding: the worker's index and the pipeline rewritten for it.
    int64_t worker_index = 0;
    std::optional<proto::PipelineDef> sharded_pipeline;
    // Its worker was lost: the task is over and its clients abandon it.
    bool lost = false;
    // An OFF pass or static share its worker read to the end before it was lost: read, not
    // lost (the job does not wait for it, nor is it read again), but its clients are told
    // it is lost so that they stop asking that worker. Not journaled.
    bool worker_gone = false;
    // Coordinated reads: the rounds [starting_round, ending_round) it serves (0: open).
    int64_t starting_round = 0;
    int64_t ending_round = 0;
    // Its rounds ended because it read all it was given (a recovery task), not because it
    // was lost: a restart must not show it lost.
    bool ended_read_all = false;
    // DYNAMIC: split index ranges [first, next) leased per repetition, for re-issue.
    std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> lease_ranges;
    // A recovery task reads only re-issued splits, per repetition; its leases are kept
    // whole (they are not index ranges) in case it is lost too.
    bool recovery = false;
    // The lost task whose splits it reads (0: none). Journaled with it, so that a restart
    // knows that task was lost and recovered, and does not recover it again.
    int64_t recovers_task_id = 0;
    // Per pass: its splits, and how many it has leased (the rest wait).
    std::map<int64_t, std::vector<proto::Split>> recovery_splits;
    std::map<int64_t, int64_t> recovery_next;
  };

  bool JobFinished(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Static sharding: the --worker-addresses entries no task of `job` reads (no worker on
  // that address joined); empty for other modes.
  std::vector<std::string> WorkersAwaited(const Job& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Coordinated reads: the round a new client of `consumer_index` starts at
  // (GetOrCreateJobResponse.starting_round).
  int64_t StartingRoundFor(const Job& job, int32_t consumer_index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `reissued`: makes it a recovery task reading exactly these splits, per pass, those of
  // lost task `recovers_task_id`.
  void CreateTask(Job& job, const std::string& worker_address,
                  const std::map<int64_t, std::vector<proto::Split>>* reissued = nullptr,
                  int64_t recovers_task_id = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddTask(Job& job, int64_t task_id, const std::string& worker_address)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddDataset(const std::string& id, const proto::PipelineDef& pipeline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Apply(const proto::Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Coordinated reads: takes a lost or finished task out of the rotation after the rounds
  // consumers may have been told it serves (journaled).
  void EndRounds(Job& job, Task& task, bool read_all) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the job's pipeline never ends: its tasks then skip passes others exhausted
  // (GetSplitResponse.next_repetition) instead of ending on an empty one.
  bool EndlessJob(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The repetition a task that found every pass up to `after` taken should lease from.
  int64_t LatestRepetition(const Job& job, int64_t after) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops providers, leases and delivery records of passes no task can return to.
  void PruneOldPasses(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The provider of (job, repetition), made (and sought to a restored cursor) on first use.
  absl::StatusOr<split::SplitProvider*> Provider(Job& job, int64_t repetition)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Splits [first, next) of a pass again, for a retried lease.
  // The options of every provider of `job`'s pass `repetition`.
  split::SplitOptions SplitOptionsOf(const Job& job, int64_t repetition) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReplayLease(const Job& job, int64_t repetition, const Job::Lease& lease,
                           proto::GetSplitResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Journal(const proto::Update& update, JournalWriter::DurableCallback durable = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Journal, counted in coordination_unsynced() until durable.
  void JournalCoordination(const proto::Update& update) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::Snapshot SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bounds one lease so a single worker cannot drain a job's splits in one call.
  static constexpr int kMaxSplitsPerLease = 64;
  // Unique per (repetition, split index) within a job; never 0 (0 means untracked).
  static int64_t SplitKey(int64_t repetition, int64_t index) {
    return engine::MakeSplitKey(repetition, index);
  }
  // Whether the split `split_key` names was handed out: its pass's provider got past it.
  static bool HandedOut(const Job& job, int64_t split_key);
  void SeeId(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    next_id_ = std::max(next_id_, id + 1);
  }

  const DispatcherConfig config_;
  const WorkerList worker_list_;
  mutable absl::Mutex mu_;
  // Holds mu_ for a change of the state; a compaction that Journal found due is taken as it
  // lets go, once the change is whole. A snapshot taken within one (a job journaled before
  // it was entered, say) missed what was journaled and not yet applied, and the compaction
  // deleted those records: the restart then failed on a task of an unknown job.
  class ABSL_SCOPED_LOCKABLE ChangeLock {
   public:
    explicit ChangeLock(DispatcherState* state) ABSL_EXCLUSIVE_LOCK_FUNCTION(state->mu_)
        : state_(state) {
      state_->mu_.Lock();
    }
    ~ChangeLock() ABSL_UNLOCK_FUNCTION() {
      state_->CompactIfDueLocked();
      state_->mu_.Unlock();
    }
    ChangeLock(const ChangeLock&) = delete;
    ChangeLock& operator=(const ChangeLock&) = delete;

   private:
    DispatcherState* const state_;
  };
  void CompactIfDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool compaction_due_ ABSL_GUARDED_BY(mu_) = false;
  // A state restored from the journal knows which clients joined its jobs and did not
  // release them, but not which went silent before the restart, nor any client's round:
  // until client_timeout has passed since it started serving, workers are not told who
  // reads the restored jobs (WorkerHeartbeatResponse.job_clients), lest they forget live
  // clients the journal does not hold. Jobs created since are listed at once.
  absl::Time started_ ABSL_GUARDED_BY(mu_) = absl::Now();
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, proto::PipelineDef> datasets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> dataset_by_definition_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Job> jobs_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> job_by_name_ ABSL_GUARDED_BY(mu_);
  // Names of garbage-collected DYNAMIC jobs: reusing one is an error, not a fresh epoch.
  absl::flat_hash_map<std::string, int64_t> collected_job_names_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> collected_jobs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Task> tasks_ ABSL_GUARDED_BY(mu_);
  struct WorkerInfo {
    std::vector<int64_t> task_ids;
    absl::Time last_heartbeat;
    proto::WorkerStats stats;
    bool lost = false;
    std::string uid;  // of the process behind the address (WorkerHeartbeatRequest)
    // Restored from the journal and silent since: maybe the dead worker a task was lost
    // with, so no recovery task goes to it yet.
    bool unheard_since_restore = false;
  };
  // Worker churn (dispatcher_state_churn.cc).
  // Garbage-collects jobs whose clients are all gone for job_gc_timeout.
  // Drops clients silent for client_timeout, and their rounds.
  void ForgetSilentClients(Job& job, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A client released the job (ReleaseClient, or its journal record replayed): it neither
  // reads it nor holds up a re-issue any more; an anonymous job is then read by nobody.
  void ForgetClient(Job& job, int64_t client_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CollectJobs(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a job and its tasks (workers are told to delete them); journals it if `journal`.
  void RemoveJob(int64_t job_id, bool journal) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseWorker(const std::string& address, WorkerInfo& worker, const std::string& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Re-issues DYNAMIC task `lost_task`'s splits once every client of `job` live at `now`
  // has confirmed it stopped reading it (LaunchRecoveries).
  void WaitToReissue(Job& job, int64_t lost_task, absl::Time now,
                     absl::Time wait_until = absl::InfiniteFuture())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker registering (new, back after a loss, or first heard since a restore) under
  // --worker-addresses: PermissionDenied when no entry lists it; Unavailable (it tries
  // again) while its host's entry is another live worker's, which two would read.
  [[nodiscard]] absl::Status CheckListed(const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `task` read its OFF pass or static share to the end at `address` (a static
  // share: at the --worker-addresses entry `address` takes): a worker there does not read
  // it again.
  [[nodiscard]] bool ReadThere(const Job& job, const Task& task, const std::string& address) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On a restored worker's first heartbeat since the restore: a task of each unfinished job
  // that has none on it (a worker's loss is not journaled, so one lost before the restart
  // missed the jobs made meanwhile).
  void JoinJobsMadeWhileLost(const std::string& address) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A worker shutting down (WorkerHeartbeatRequest.leaving): lost now, not a timeout later,
  // unless it holds an OFF pass or a static shard of a job still running.
  void LetWorkerLeave(const proto::WorkerHeartbeatRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the tasks a heartbeat reports finished (those of the reporting worker).
  void FinishReportedTasks(const proto::WorkerHeartbeatRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  [[nodiscard]] int LiveWorkers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchRecoveries(Job& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The splits of `task`'s leases, keyed and with what clients already received attached.
  absl::StatusOr<std::map<int64_t, std::vector<proto::Split>>> ReissuedSplits(Job& job,
                                                                              const Task& task)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the runs a client reported into the job's delivery log, and journals them;
  // runs no split could have (an untracked key, no elements, ordinals out of range) are
  // dropped, so that the journal replays into the same log.
  void RecordDelivered(Job& job,
                       const google::protobuf::RepeatedPtrField<proto::ProvenanceRun>& runs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<proto::GetSplitResponse> GetRecoverySplits(Job& job, Task& task,
                                                            const proto::GetSplitRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<std::string, WorkerInfo> workers_ ABSL_GUARDED_BY(mu_);
  JournalWriter* journal_ ABSL_GUARDED_BY(mu_) = nullptr;
  int64_t compact_every_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t since_compaction_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t journaled_updates_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t leases_replayed_ ABSL_GUARDED_BY(mu_) = 0;
  // Shared with the journal's callbacks, which may run after the state is gone.
  const std::shared_ptr<std::atomic<int64_t>> coordination_unsynced_ =
      std::make_shared<std::atomic<int64_t>>(0);
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_DISPATCHER_STATE_H_
