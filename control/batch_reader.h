// Reads one job's batches from its workers into client-owned registered memory.
//
// The reader keeps up to `max_outstanding_requests` GetElement calls in flight across the
// job's tasks, each with a landing slab from the client's registered pool, so a batch moves
// from the worker's slab into the client's slab by rendezvous, with no copy. Next() hands a
// Batch that views its slab; destroying the Batch returns the slab. Memory is bounded by
// the options: (max_outstanding_requests + prefetch_batches) slabs.
//
// Order: each task's batches come in the order its pipeline made them (of those that went
// to this client), however many requests are in flight; tasks interleave. Replies to
// requests in flight together may land out of order, even from one worker (it answers from
// more than one thread), so a batch that lands early waits for the ones before it
// (SequenceOrder). Only a batch the worker let go unacknowledged is skipped, once this
// reader has acknowledged past it or reported a failed request since; should it arrive after
// all, it is handed out late rather than lost. A copy of a batch handed out is dropped.
// One exception to the order: a batch another reader of a shared job lost with a broken
// connection, handed on to this one once that reader was forgotten (it left), comes when
// it is handed on, after batches the pipeline made later.
// Coordinated reads (num_consumers > 0) hand out rounds in order.
//
//   absl::StatusOr<std::unique_ptr<BatchReader>> reader = client.Read(dataset_id, options);
//   while (true) {
//     absl::StatusOr<std::optional<Batch>> batch = (*reader)->Next();
//     if (!batch.ok()) return batch.status();
//     if (!batch->has_value()) break;  // end of the job
//     Use((*batch)->view().tensor(0));
//   }
#ifndef SLUICE_CONTROL_BATCH_READER_H_
#define SLUICE_CONTROL_BATCH_READER_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/ring_queue.h"
#include "control/heartbeat_pacer.h"
#include "control/sequence_order.h"
#include "control/service.pb.h"
#include "engine/batch_layout.h"
#include "transport/id_slot_table.h"
#include "transport/rpc.h"
#include "transport/slab_pool.h"

namespace sluice::control {

struct ReadOptions {
  proto::ProcessingMode mode = proto::DYNAMIC;
  // Clients naming the same job share its elements; empty reads a job of one's own.
  std::string job_name;
  int max_outstanding_requests = 4;
  // Once batches of B bytes have been seen, at most max(1, this / B) fetches are in flight
  // (and at least one per worker with work left, up to max_outstanding_requests), so large
  // batches do not stream into many landing slabs at once: on a 16-CPU machine 16 MiB
  // batches came 1.45-1.6x faster, and 10x sooner, with one in flight than with eight
  // (perf/RESULTS.md, session 23). 0: no bound but max_outstanding_requests. Coordinated
  // reads (num_consumers > 0) are bounded alike.
  size_t max_bytes_in_flight = 4 << 20;
  // Batches that may wait, fetched, for the caller beyond the requests in flight. Batches
  // the caller keeps hold their slabs too: a caller that keeps all of them while it asks
  // for the next gets FailedPrecondition after request_timeout, rather than a wait for ever.
  int prefetch_batches = 4;
  // Largest batch the client accepts (the size of each landing slab).
  size_t slab_bytes = 16 << 20;
  absl::Duration heartbeat_interval = absl::Milliseconds(100);
  // Bound on each call: a fetch a worker does not answer within it counts the worker as
  // unreachable (for request_timeout in a row, with the dispatcher not saying it is lost,
  // the read fails), and so does the dispatcher without a heartbeat answered for this long.
  // A worker whose pipeline is slow answers a held fetch with "retry" after
  // TaskRunnerOptions::max_request_hold (10 s): keep this above that.
  absl::Duration request_timeout = absl::Seconds(60);
  // How long to wait for the job to get at least one worker.
  absl::Duration no_worker_timeout = absl::Seconds(60);
  // Coordinated reads: with num_consumers > 0 this reader is consumer `consumer_index` of a
  // named job read in rounds; Next() returns round 0, 1, 2, ... (skipping rounds whose worker
  // was lost before this consumer got its batch), each from the round's one worker.
  int num_consumers = 0;
  int consumer_index = 0;
  // Fault injection, for tests: after every this many batches (0: never) the reader drops
  // its connection to the worker that served the last one, as a broken network would.
  int disconnect_every_batches = 0;
  // Reads at most this many batches (0: the whole job), and fetches no more than that: of a
  // shared job, what a client fetched counts as consumed (as in tf.data), so a reader that
  // wants N batches and fetched more would take the rest from the job's other readers.
  // Not with num_consumers > 0, whose readers count rounds.
  int64_t max_batches = 0;
  // Called with the address of a worker whose task of this job the dispatcher declared lost
  // (once per worker and heartbeat: a worker's own task and a recovery task it took over
  // are said once when both are lost together). It runs on whichever thread heard it:
  // the reader's heartbeat thread, or the caller's in Client::Read and Next(), two of them
  // at a time possibly, so it must be thread-safe; a loss that ends the job is said before
  // Next() returns that end. What that costs depends on the
  // mode: DYNAMIC re-issues the task's splits to other workers; OFF ends that worker's pass
  // short (another worker's pass can end the job); a static shard waits for the worker to
  // come back.
  std::function<void(const std::string& worker)> on_worker_lost;
  // Static sharding: called (as on_worker_lost is, once per entry) with a --worker-addresses
  // entry of the dispatcher that no worker has joined as for kAwaitedNoticeAfter: the job
  // waits for its share, which no other worker reads.
  std::function<void(const std::string& listed_worker)> on_worker_awaited;
};

// One batch in the client's registered memory. Move-only; returns its slab when destroyed.
class Batch {
 public:
  // `worker` is shared with every batch of its task: a batch's address costs no allocation.
  Batch(transport::Slab slab, engine::BatchView view, std::shared_ptr<const std::string> worker,
        int64_t index, absl::Duration fetch_latency, int64_t round = -1, int64_t task = -1)
      : slab_(std::move(slab)),
        view_(std::move(view)),
        worker_(std::move(worker)),
        index_(index),
        fetch_latency_(fetch_latency),
        round_(round),
        task_(task) {}
  Batch(Batch&&) = default;
  Batch& operator=(Batch&&) = default;

  [[nodiscard]] const engine::BatchView& view() const { return view_; }
  // Address of the worker that produced it.
  [[nodiscard]] const std::string& worker() const {
    static const std::string* const kNone = new std::string();
    return worker_ != nullptr ? *worker_ : *kNone;
  }
  // Position of the batch in its task's output.
  [[nodiscard]] int64_t index() const { return index_; }
  // The dispatcher's id of that task (-1 if unknown): a worker serves a second task of a job
  // when it takes over a lost task's splits, and that task's indices start at 0 again.
  [[nodiscard]] int64_t task() const { return task_; }
  [[nodiscard]] const std::byte* data() const { return slab_.data(); }
  // From sending the request to the batch having landed.
  [[nodiscard]] absl::Duration fetch_latency() const { return fetch_latency_; }
  // Coordinated reads: the round it belongs to (-1 otherwise).
  [[nodiscard]] int64_t round() const { return round_; }

 private:
  transport::Slab slab_;
  engine::BatchView view_;
  std::shared_ptr<const std::string> worker_;
  int64_t index_;
  absl::Duration fetch_latency_;
  int64_t round_;
  int64_t task_;
};

class BatchReader {
 public:
  // Use Client::Read.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<BatchReader>> Start(
      transport::RpcEndpoint* rpc, transport::Address dispatcher, std::string dataset_id,
      const ReadOptions& options);
  ~BatchReader();

  // The next batch; nullopt at the end of the job; an error fails the read.
  [[nodiscard]] absl::StatusOr<std::optional<Batch>> Next();

  [[nodiscard]] int64_t job_id() const { return job_id_; }
  // The named job (ReadOptions::job_name) had finished before this reader joined it, so
  // Next() has nothing to give: a caller may say so rather than report an empty read.
  [[nodiscard]] bool joined_a_finished_job() const { return joined_a_finished_job_; }
  // Waits in Next() that ended with this thread having received a batch itself, driving the
  // transport (TransportOptions::caller_driven_progress) instead of being woken by its
  // progress thread. 0 without caller-driven progress.
  [[nodiscard]] int64_t driven_waits() const {
    return driven_waits_.load(std::memory_order_relaxed);
  }
  // Waits in Next() that ended while this thread polled for a fetch the progress thread
  // completed, without sleeping (TransportOptions::wait_spin).
  [[nodiscard]] int64_t spun_waits() const { return spun_waits_.load(std::memory_order_relaxed); }
  // How many fetches may be in flight now (ReadOptions::max_bytes_in_flight applied to the
  // largest batch seen so far), and the most that were, counted when each fetch was sent
  // once a batch had been seen.
  [[nodiscard]] int fetch_limit() const ABSL_LOCKS_EXCLUDED(mu_);
  // Tasks of this job the dispatcher declared lost (their workers were lost) so far.
  [[nodiscard]] int64_t tasks_lost() const ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] int peak_fetches_after_first_batch() const ABSL_LOCKS_EXCLUDED(mu_);
  // Records the workers' pipelines skipped as corrupt (tfrecord's skip_bad_records=true) in
  // the tasks this reader read from, as of their latest replies; and why, for the first
  // kBadRecordExamples of those whose task ended (the reply that ends a task says).
  [[nodiscard]] int64_t bad_records_skipped() const ABSL_LOCKS_EXCLUDED(mu_);
  [[nodiscard]] std::vector<std::string> bad_record_examples() const ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the read from another thread (a Ctrl-C handler): Next() returns `why` (Cancelled
  // for an OK status), at once if it waits. Batches handed out already stay valid.
  void Interrupt(absl::Status why) ABSL_LOCKS_EXCLUDED(mu_);
  // What the read waits on, in a sentence, for a caller that has had no batch for a while:
  // "the job has no task yet (the dispatcher lists no live worker; ...)", "waiting on 2 tasks
  // at ucx://a:1, ucx://b:2 (3 requests in flight)".
  [[nodiscard]] std::string DescribeWait() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Ready {
    std::shared_ptr<const std::string> worker;
    int64_t index;
    transport::Slab slab;
    size_t size;
    absl::Duration fetch_latency;
    int64_t round = -1;
    int64_t task = -1;
  };
  struct Task {
    int64_t id;
    transport::Address worker;
    std::shared_ptr<const std::string> worker_text;  // never null; shared with its batches
    bool ended = false;
    // A reply said end of sequence; ended once the other requests to it came back well.
    bool end_seen = false;
    int outstanding = 0;
    // The dispatcher gave the task up (its worker was lost): nothing more is read from it,
    // and what still arrives is dropped (its splits are re-issued).
    bool lost = false;
    // The worker could not be reached, or answered retry_later: not asked again before
    // retry_at. Unreachable for request_timeout without the dispatcher declaring it lost is
    // an error.
    absl::Time unreachable_since = absl::InfiniteFuture();
    absl::Time retry_at = absl::InfinitePast();
    // There is no live connection to its worker: one is being made in the background
    // (ConnectInBackground), and the task is not asked until OnConnected.
    bool connecting = false;
    // A background connect to its worker succeeded, and no request has gone out on it yet:
    // finding it gone already counts as the worker unreachable (a worker that accepts and
    // drops), not as a reason to connect again at once.
    bool connected_unused = false;
    // Coordinated reads: the rounds [starting_round, ending_round) it serves (0: open).
    int64_t starting_round = 0;
    int64_t ending_round = 0;
    // It reads a lost task's re-issued splits: its end is expected, and (coordinated) its
    // rounds from then on are skipped.
    bool recovery = false;
    // The connection its latest fetch went out on (given up on when the task is lost).
    transport::ConnectionId connection = transport::kNoConnection;
    // The latest count of records its pipeline skipped as corrupt (bad_records_skipped).
    int64_t bad_records_skipped = 0;
    // Delivery without loss (GetElementRequest fields 7 and 8): batch indices received and
    // not confirmed yet (a reply confirms those its request carried), and the epoch, raised
    // when a request to the task failed so that the worker serves lost batches again.
    // Coordinated reads confirm rounds instead (field 9); a round lost on the way is asked
    // for again by its number, so their epoch stays 1 (it only says "I acknowledge").
    std::vector<int64_t> unconfirmed;
    // What the next request carries: each acknowledgement goes once, not with every request
    // until its reply comes (about max_outstanding times, each parsed and looked up by the
    // worker). After a reply that confirms nothing (a failure, retry_later) all of
    // `unconfirmed` goes again, and until a request of the current epoch is answered every
    // request carries all of it: whichever of them reaches the worker first must bring the
    // acknowledgements, or the worker would count those batches lost and send them again.
    absl::InlinedVector<int64_t, 4> to_carry;
    void CarryAllAgain() { to_carry.assign(unconfirmed.begin(), unconfirmed.end()); }
    int64_t delivery_epoch = 1;
    int64_t confirmed_epoch = 0;  // the highest epoch a reply confirmed acknowledgements of
    // Batches lost with a broken connection that the worker still holds to serve again, as
    // its latest reply said (GetElementResponse.lost_left): FirstToRecover asks for them.
    int64_t lost_left = 0;
    // Its batches go to the caller in the order the worker numbered them for this client
    // (GetElementResponse.client_sequence, sequence_floor, sequence_stream).
    SequenceOrder<Ready> order;
  };

  // A coordinated round the worker answered retry_later for (it does not know the task yet)
  // is asked for again after this long; Next() also wakes this often to Pump.
  static constexpr absl::Duration kRetryLater = absl::Milliseconds(20);
  // The same for a task's next batch: its first request often comes before the worker's
  // early heartbeat brings it the task, and the caller waits for that request's batch.
  // (The worker also answers retry_later to a request of an epoch it has left behind.)
  static constexpr absl::Duration kTaskRetryLater = absl::Milliseconds(2);
  // A listed worker still missing after this long is said (on_worker_awaited): workers
  // started with the read join within it.
  static constexpr absl::Duration kAwaitedNoticeAfter = absl::Seconds(2);
  // Heartbeats asked for early (HeartbeatPacer::Soon) come at most this often.
  static constexpr absl::Duration kMinHeartbeatGap = absl::Milliseconds(5);
  // A worker that could not be reached is asked again after this long.
  static constexpr absl::Duration kUnreachableBackoff = absl::Milliseconds(200);
  // Batches that landed after the heartbeat that said the job finished are reported once,
  // when Next() first says so, within this long (or request_timeout if shorter): the
  // dispatcher's log then holds all that was read.
  static constexpr absl::Duration kFinalReportTimeout = absl::Seconds(2);
  // A stopping reader waits this long for the replies to its requests before cancelling
  // the rest (~BatchReader).
  static constexpr absl::Duration kStopGrace = absl::Milliseconds(500);

  BatchReader(transport::RpcEndpoint* rpc, transport::Address dispatcher,
              const ReadOptions& options);
  absl::Status HeartbeatOnce() { return HeartbeatOnce(options_.request_timeout); }
  // May run on two threads at once (the heartbeat thread's, and Next()'s last report).
  absl::Status HeartbeatOnce(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  void HeartbeatLoop();
  // Starts requests while there are slabs, room and tasks not ended. Never blocks.
  void Pump();
  // Pump for coordinated reads: requests rounds in order from their owners.
  void PumpRounds();
  // Index in tasks_ of the task serving `round`; nullopt when none is active for it.
  std::optional<size_t> OwnerOf(int64_t round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a request said about delivery (GetElementRequest fields 7, 8, 9): indices, or
  // rounds when coordinated.
  struct Sent {
    absl::InlinedVector<int64_t, 4> acked;
    int64_t epoch = 0;
  };
  // A fetch from its start to its reply, in in_flight_. Its RPC callback carries only the
  // fetch's id: a callback that captures two words stays inside its std::function, where
  // the slab, the task and the acknowledgements it carried made a heap block per batch.
  struct InFlight {
    size_t task_index = 0;
    int64_t round = -1;  // -1: not coordinated
    transport::Slab slab;
    absl::Time sent_at;
    Sent sent_request;
  };
  // Enters a fetch of `round` (-1: not coordinated) from `task_index` into `slab`; returns
  // its id, for Fetch. Counts it outstanding.
  uint64_t AddFetch(size_t task_index, int64_t round, transport::Slab slab)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the GetElement of fetch `fetch_id`; with no live connection to its worker, takes
  // the fetch back (Unfetch) and has the connection made in the background.
  void Fetch(uint64_t fetch_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Undoes AddFetch of a fetch never sent (its round, if any, is asked for again).
  void Unfetch(uint64_t fetch_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Connects to `worker`, that of task `task_index` (marked connecting), on the endpoint's
  // thread; OnConnected follows there, unless the reader is gone by then. An endpoint
  // being destroyed calls it inside this call, with Cancelled (so the caller holds no lock;
  // the task is then retried after kUnreachableBackoff, or the read fails).
  void ConnectInBackground(size_t task_index, const transport::Address& worker)
      ABSL_LOCKS_EXCLUDED(mu_);
  void OnConnected(size_t task_index, const absl::StatusOr<transport::ConnectionId>& connected)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `status`, a failure to reach the task's worker at `now`, is waited out (it has
  // not been unreachable for request_timeout: the dispatcher may yet declare it lost).
  bool BearUnreachable(Task& task, const absl::Status& status, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnFetched(uint64_t fetch_id, absl::StatusOr<transport::CallResult>&& result)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Moves rounds that are next in order (or skipped) from rounds_ready_ to ready_.
  void AdvanceRounds() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A round this consumer goes on without (unless it holds it already).
  void SkipRound(int64_t round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  enum class FetchOutcome { kUnreachable, kFailed, kReply };
  // Shared by the OnFetched paths. kUnreachable: the worker could not be reached (and has
  // not been for long); kFailed: error_ is set; kReply: *response holds the parsed reply,
  // whose batch, when it carries one, arrived whole. `round` (-1: none) names the request in
  // errors; `now` is the time the reply is handled.
  FetchOutcome Examine(Task& task, const transport::Slab& slab,
                       const absl::StatusOr<transport::CallResult>& result, int64_t round,
                       absl::Time now, proto::GetElementResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands `ready`, a batch of `task` described by `response`, to the caller in the task's
  // order: now, or once the batches numbered before it have landed or are given up.
  void HandOutInOrder(Task& task, Ready ready, const proto::GetElementResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands out every batch `task` holds back, in order (the task ended, or is renumbered).
  void HandOutHeld(Task& task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OnFetched's bookkeeping for a task's next batch; returns whether to Pump.
  bool OnTaskFetched(Task& task, transport::Slab slab, absl::Time sent,
                     const absl::StatusOr<transport::CallResult>& result, const Sent& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OnFetched's bookkeeping for a coordinated round; returns whether to Pump.
  bool OnRoundFetched(Task& task, transport::Slab slab, absl::Time sent,
                      const absl::StatusOr<transport::CallResult>& result, int64_t round,
                      const Sent& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With no free slab: fails the read when no landing slab is left to it
  // (quarantined_slabs_), or when the caller has held all the others for request_timeout.
  void FailIfNoSlabWillComeBack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the read's first error (Next() returns it); later ones are dropped.
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (error_.ok()) error_ = std::move(status);
  }
  // Next() with nothing to hand out and fetches in flight: with caller-driven progress, this
  // thread drives the transport until one of them completes (true), so the batch lands on
  // the thread that wants it, with no hand-off from the progress thread; false when it could
  // not drive or the reply was slow (Transport::DriveUntil), and Next() waits as usual.
  bool DriveUntilAFetchCompletes() ABSL_LOCKS_EXCLUDED(mu_);
  // How long Next() may sleep before a task is due to be asked again (at most kRetryLater).
  absl::Duration UntilTheNextRetry() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every task has ended and every batch was handed out: only the dispatcher's word that
  // the job finished is missing (it may yet add a task, e.g. for a lost worker's splits).
  bool WaitsOnlyForTheDispatcher() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int FetchLimit() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReadOptions::max_batches only: the index of a task that must be asked before any other
  // (a request to it failed, and no request of the raised epoch has been answered; or the
  // worker holds more batches lost on the way, GetElementResponse.lost_left; or it holds
  // batches for order, waiting for one before them), with none in flight to it; tasks_.size()
  // when every such task has one in flight; nullopt when there is none (or no max_batches).
  std::optional<size_t> FirstToRecover() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  transport::RpcEndpoint* const rpc_;
  const transport::Address dispatcher_;
  const ReadOptions options_;
  int64_t job_id_ = 0;
  int64_t client_id_ = 0;
  bool joined_a_finished_job_ = false;
  std::shared_ptr<transport::SlabPool> pool_;
  absl::Time started_;

  mutable absl::Mutex mu_;
  std::deque<Task> tasks_ ABSL_GUARDED_BY(mu_);
  // Next() sent the last report of deliveries (it is not retried).
  bool final_report_sent_ ABSL_GUARDED_BY(mu_) = false;
  // A task's retry_at was set while Next() may be asleep: it wakes to sleep only that long.
  bool retry_scheduled_ ABSL_GUARDED_BY(mu_) = false;  // only grows; indices stay valid
  size_t next_task_ ABSL_GUARDED_BY(mu_) = 0;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  size_t largest_batch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int peak_fetches_after_first_batch_ ABSL_GUARDED_BY(mu_) = 0;
  // OnFetched calls past their bookkeeping but still running (they may call Pump): the
  // destructor waits for these too, so no callback touches a destroyed reader.
  int callbacks_running_ ABSL_GUARDED_BY(mu_) = 0;
  // Slabs a cancelled-but-not-ended receive may still write (transport::
  // LandingMayStillBeWritten): never reused.
  std::vector<transport::Slab> quarantined_slabs_ ABSL_GUARDED_BY(mu_);
  // Since when the caller's Batches have held every slab not quarantined (none in flight,
  // ready or held for order); InfiniteFuture while not.
  absl::Time caller_holds_every_slab_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int nexts_waiting_ ABSL_GUARDED_BY(mu_) = 0;  // calls in Next() now
  // Fetches started (AddFetch) and not yet completed (OnFetched), by id; destroyed before
  // pool_, which their slabs return to.
  transport::IdSlotTable<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  // ReadOptions::disconnect_every_batches: batches accepted, and a connection to drop.
  int64_t batches_accepted_ ABSL_GUARDED_BY(mu_) = 0;
  // ReadOptions::max_batches: batches kept to hand out (duplicates dropped), and handed out.
  int64_t batches_kept_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batches_handed_out_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t tasks_lost_ ABSL_GUARDED_BY(mu_) = 0;
  // Tasks the dispatcher lists as lost that this reader never held: abandoned at once.
  std::vector<int64_t> lost_unread_ ABSL_GUARDED_BY(mu_);
  int64_t bad_records_skipped_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> bad_record_examples_ ABSL_GUARDED_BY(mu_);
  // Live workers the dispatcher listed in its latest heartbeat reply (-1: none came yet).
  int64_t workers_listed_ ABSL_GUARDED_BY(mu_) = -1;
  // Static sharding: listed workers the dispatcher says the job awaits, since when; and
  // those said to on_worker_awaited.
  std::map<std::string, absl::Time> awaited_since_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> awaited_said_ ABSL_GUARDED_BY(mu_);
  transport::ConnectionId connection_to_drop_ ABSL_GUARDED_BY(mu_) = transport::kNoConnection;
  RingQueue<Ready> ready_ ABSL_GUARDED_BY(mu_);
  bool job_finished_ ABSL_GUARDED_BY(mu_) = false;
  // Coordinated reads: rounds up to the horizon may be requested; rounds below
  // next_round_to_request_ were requested (or skipped); Next() hands out next_round_.
  int64_t round_horizon_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t next_round_to_request_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_round_ ABSL_GUARDED_BY(mu_) = 0;
  // How far ahead of next_round_ the last heartbeat put the horizon, and whether a heartbeat
  // was asked for early since: a reader past half of that lead asks for the next beat now,
  // so fast rounds do not wait for the heartbeat interval at the horizon.
  int64_t horizon_lead_ ABSL_GUARDED_BY(mu_) = 0;
  bool horizon_beat_asked_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, Ready> rounds_ready_ ABSL_GUARDED_BY(mu_);
  std::set<int64_t> rounds_skipped_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, absl::Time> rounds_to_retry_ ABSL_GUARDED_BY(mu_);
  // Provenance of batches received and not yet reported to the dispatcher.
  google::protobuf::RepeatedPtrField<proto::ProvenanceRun> unreported_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // Bumped, under mu_, by every fetch callback once its bookkeeping is done: what a Next()
  // that drives the transport polls, without the lock.
  std::atomic<uint64_t> fetches_completed_{0};
  std::atomic<int64_t> driven_waits_{0};
  std::atomic<int64_t> spun_waits_{0};
  absl::Notification stop_;
  // What a background connect's callback reaches the reader through: ~BatchReader clears
  // it, and a connect may end after that (the endpoint's thread outlives the reader).
  struct ConnectWaker {
    absl::Mutex mu;
    BatchReader* reader ABSL_GUARDED_BY(mu) = nullptr;
  };
  const std::shared_ptr<ConnectWaker> connect_waker_ = std::make_shared<ConnectWaker>();
  HeartbeatPacer heartbeat_pacer_{options_.heartbeat_interval, kMinHeartbeatGap};
  std::thread heartbeat_thread_;
  absl::Notification heartbeat_exited_;  // HeartbeatLoop returned
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_BATCH_READER_H_
