// Runs one task's pipeline on a worker and serves its batches to clients.
//
// A producer thread pulls elements (batches) from the pipeline and assembles each straight
// into a slab of the worker's registered pool, packed behind the batch before it while the
// slab has room; finished batches wait in a bounded buffer (`buffer_batches`) and go out as
// the payload of a GetElement reply. A slab returns to the pool only when the transport
// reports the sends of all its batches complete. Requests that find the buffer
// empty are parked and answered as soon as a batch is ready, so clients never poll.
// A batch sent to a client that acknowledges deliveries (Delivery) is kept until the client
// acknowledges it, and served to that client again if its connection broke meanwhile; a
// coordinated consumer's batch of a round (RoundRequest) is kept alike and served again to
// a repeated request for that round.
//
//   auto runner = TaskRunner::Start(task_def, pool, std::move(feed), {.buffer_batches = 4});
//   (*runner)->Fetch(call, request.max_batch_bytes());
#ifndef SLUICE_CONTROL_TASK_RUNNER_H_
#define SLUICE_CONTROL_TASK_RUNNER_H_

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

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "common/ring_queue.h"
#include "control/kept_slab_count.h"
#include "control/service.pb.h"
#include "control/spill_budget.h"
#include "engine/iterator.h"
#include "engine/pipeline_stats.h"
#include "transport/rpc.h"
#include "transport/slab_pool.h"

namespace sluice::control {

class TaskRunner;

struct TaskRunnerOptions {
  // Finished batches kept per task ahead of requests (tf.data keeps one).
  size_t buffer_batches = 4;
  // Directories the task's pipeline may read files from (the worker's --data-root).
  std::vector<std::string> data_roots;
  // Called by a producer that waited for a slab and had no kept batch of its own to let go,
  // with how long it has waited for this slab: the worker lets other tasks' kept batches go
  // (Worker::FreeSlabsFor). Two tasks of one coordinated job on one worker (a recovery
  // task beside the worker's own) otherwise deadlock: one holds every slab in kept and
  // buffered batches while the consumers wait for the other's round. And readers of other
  // jobs that stopped reading (slow, or dead until their client timeout) would otherwise
  // hold every slab for acknowledgements while this task's readers wait. It gets the
  // calling runner, which it must not hold on to.
  std::function<void(const TaskRunner*, absl::Duration waited)> on_slabs_short;
  // Requests a task holds while no batch is ready for them; beyond it the oldest is told to
  // retry (a reader that is still there asks again), so that the requests of readers that
  // went away cannot pile up behind a slow pipeline.
  size_t max_parked_requests = 4096;
  // An uncoordinated request held this long with no batch for it is told to retry (Poll,
  // so up to a heartbeat later): a pipeline slower than the reader's request_timeout (a
  // large shuffle filling from slow storage) would otherwise pass the request's deadline,
  // and the reader takes that for a worker it cannot reach. Keep it well under readers'
  // request_timeout (60 s by default).
  absl::Duration max_request_hold = absl::Seconds(10);
  // Checks the count of slabs holding kept batches against a walk of every kept batch
  // whenever the budget is checked and after acknowledgements, releases and forgotten
  // clients, and aborts on a difference. For tests: the walk costs a sort per request.
  bool verify_kept_slabs = false;
  // The heap that batches moved out of the pool may hold (SpillIfQuiet), shared by the
  // worker's tasks; null: no bound.
  std::shared_ptr<SpillBudget> spill_budget;
};

struct TaskRunnerStats {
  int64_t batches_served = 0;
  int64_t bytes_served = 0;
  int64_t bytes_assembled = 0;
  int64_t bad_records_skipped = 0;
  // Bytes served again from a slab already holding the same batch (no copy).
  int64_t bytes_reused = 0;
  // Times the pipeline found the task's buffer full and waited for readers to take half of
  // it: how often the readers, not the pipeline, set the pace.
  int64_t buffer_full_waits = 0;
  // Batches served again to a client that lost them with its connection (Delivery).
  int64_t batches_redelivered = 0;
  // Kept batches let go before their client acknowledged them (kept_budget_, or a
  // producer short of slabs): lost for good, should their delivery have failed.
  int64_t kept_batches_released = 0;
  // Batches whose provenance was too long for the reply's header, sent with it in the
  // payload: the batch's bytes are copied once more for these (TaskRunner::Reply).
  int64_t batches_with_provenance_in_payload = 0;
  // Acknowledging clients forgotten (ForgetClients), with all they had kept and lost.
  int64_t clients_forgotten = 0;
  // Parked requests told to retry because max_parked_requests were parked.
  int64_t parked_requests_evicted = 0;
  // Parked requests told to retry after max_request_hold with no batch for them.
  int64_t requests_held_too_long = 0;
  // Batches a forgotten client lost with a connection, served to other readers instead.
  int64_t batches_handed_on = 0;
  // The same, dropped: a reader had been told the end before. Lost for good.
  int64_t lost_batches_dropped = 0;
  // Sent to a forgotten client and not acknowledged: no longer kept (most likely arrived).
  int64_t unacked_batches_forgotten = 0;
  // Acknowledgements requests carried (WorkerStats.acknowledgements_received).
  int64_t acknowledgements_received = 0;
  // Requests that raised their client's delivery epoch (WorkerStats.breaks_reported).
  int64_t breaks_reported = 0;
  // 100 ms waits of the pipeline for a free slab (WorkerStats.slab_waits).
  int64_t slab_waits = 0;
  // Bytes assembled into batches not served (yet): in the buffer, or in a coordinated
  // round's slot. What a deleted task held stays counted in its worker's retired stats.
  int64_t bytes_assembled_unserved = 0;
  // Buffered batches of a task whose readers had stopped, copied out of the pool to the heap
  // to give their slabs to a task that waited for one (SpillIfQuiet), and their bytes.
  int64_t batches_spilled = 0;
  int64_t bytes_spilled = 0;
};

// What an uncoordinated request says about delivery (GetElementRequest fields 7, 8).
struct Delivery {
  int64_t client_id = -1;
  int64_t epoch = 0;  // 0: the client does not acknowledge; nothing is kept for it
  absl::InlinedVector<int64_t, 4> acked;  // usually one: no allocation per request
};

// What a coordinated request says (GetElementRequest fields 5, 6, 8, 9).
struct RoundRequest {
  int32_t consumer = 0;
  int64_t round = 0;
  int64_t epoch = 0;  // delivery_epoch: > 0, its batches are kept until acknowledged
  absl::InlinedVector<int64_t, 4> acked_rounds;
};

class TaskRunner {
 public:
  // `feed` supplies DYNAMIC splits; null for OFF.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<TaskRunner>> Start(
      const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
      std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options);
  ~TaskRunner();

  // Replies to `call` with the next batch, end of sequence or the pipeline's error.
  // Coordinated reads (task num_consumers > 0): `consumer`'s batch of `round`. A round takes
  // the next num_consumers batches when its first request arrives, so all its batches come
  // from this worker, consecutively.
  void Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
             int32_t consumer = -1, int64_t round = -1);
  // Uncoordinated: takes the acknowledgements first, and serves batches lost under an older
  // epoch again before new ones.
  void Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
             Delivery delivery);
  // Coordinated: takes the acknowledgements first; a round this consumer was already served
  // (its reply was lost) gets the same batch again, and a request for a round it already
  // waits for replaces the earlier one (whose connection broke).
  void Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
             RoundRequest request);
  // Coordinated reads: rounds this task remembers (asked for, holding a batch, or served to
  // some of its consumers). Bounded by the rounds in flight, whoever stopped asking.
  [[nodiscard]] size_t rounds_remembered() const;
  // Coordinated reads: lets a round that waited round_wait_ for missing consumers go on.
  // Uncoordinated: tells requests held back from the end (another client's lost batches
  // wait to be served again, see Serve) to retry once the end was held back for
  // kEndHeldAtMost, lest they pass their deadline waiting for a slow or vanished client, and
  // requests held past options.max_request_hold (a slow pipeline) likewise. The worker calls
  // it periodically.
  void Poll();
  // The pipeline reached its end (or failed); the buffer may still hold batches. Not when
  // the destructor cut it short.
  [[nodiscard]] bool produced_all() const;
  // Produced all, and every batch reached a client (its send completed): losing this
  // worker now loses nothing of the task.
  [[nodiscard]] bool finished() const;
  [[nodiscard]] int64_t task_id() const { return task_.task_id(); }
  [[nodiscard]] int64_t job_id() const { return task_.job_id(); }
  [[nodiscard]] bool coordinated() const { return task_.num_consumers() > 0; }
  // Whether a batch kept because its client lost it may be let go (for good: the client
  // stops waiting for it) to give a slab back.
  enum class LostBatches { kKeep, kLetGo };
  // Lets the oldest batch kept for an acknowledgement go, with the kept batches packed into
  // its slab, when that gives the slab back to the pool (see on_slabs_short): a slab the
  // producer or the buffer still holds (a cached batch served again) stays with its kept
  // batches. False when no kept batch would free a slab. Another task's producer passes
  // kKeep: a batch its client never got is not lost for the sake of another job.
  bool ReleaseKeptBatch(LostBatches lost);
  // Forgets the acknowledging clients not in `readers` that have not asked since
  // `quiet_since`: the batches kept for them go (they may have arrived), those they lost go
  // to the other readers (or, when a reader was told the end, are dropped and counted),
  // and their parked requests are told to retry (a client that is still there asks again
  // and is numbered afresh). The worker
  // calls it with the readers the dispatcher lists for the job and the time its heartbeat
  // went out, so that a client that joined after the list was made is not forgotten.
  void ForgetClients(const absl::flat_hash_set<int64_t>& readers, absl::Time quiet_since);
  // When no request came for kQuietBeforeSpill up to `now` (counted from the task's start,
  // or from the call that last saw a request since the one before), copies the buffered
  // batches out of the pool to the heap, so that their slabs go back to it: a stopped
  // reader's buffer otherwise holds slabs until its job is collected. Only slabs nothing
  // else holds go (no kept batch, no send in flight; the producer waiting for room is told
  // to let go of its last one), and only within options.spill_budget. The copies are made
  // without the task's lock; the batches are sent from the heap when their readers come
  // back. True when any batch moved.
  bool SpillIfQuiet(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Only notes whether a request came since the last call, for SpillIfQuiet. The worker
  // calls it on every heartbeat turn: SpillIfQuiet, called once slabs run short, then knows
  // how long the task has been quiet instead of starting to count then.
  void NoteQuiet(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a reader waits for this task now, or asked within kQuietBeforeSpill of `now` (as
  // NoteQuiet last saw). A pipeline short of slabs for a task nobody reads has no buffer of
  // others moved for it: that would copy one stopped reader's buffer to fill another's.
  [[nodiscard]] bool ReadLately(absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr absl::Duration kQuietBeforeSpill = absl::Seconds(1);
  static constexpr absl::Duration kEndHeldAtMost = absl::Seconds(1);
  [[nodiscard]] TaskRunnerStats stats() const;

 private:
  struct ReadyBatch {
    // Shared by the batches packed into it; back to the pool when the last of them goes.
    std::shared_ptr<transport::Slab> slab;
    size_t offset;  // where the batch starts in the slab
    size_t size;
    int64_t index;
    // DYNAMIC: which split elements the batch holds (engine/provenance.h).
    google::protobuf::RepeatedPtrField<proto::ProvenanceRun> provenance;
    // Its number in what went to the acknowledging client it was sent to (0: none); kept
    // with the batch so that a batch served again keeps its place.
    int64_t sequence = 0;
    // Set for the reply only: GetElementResponse.sequence_floor, sequence_stream, lost_left.
    int64_t sequence_floor = 0;
    uint64_t sequence_stream = 0;
    int64_t lost_left = 0;
    // Kept for an acknowledgement: when, in batches_kept_ (the oldest goes first).
    uint64_t kept_since = 0;
    // Counts its slab in kept_count_ while it is kept (KeptCopyOf); cleared when a kept
    // batch leaves the kept batches (served again, or handed on to ready_). Makes ReadyBatch
    // move-only: copies go through CopyOf, unmarked.
    KeptSlabCount::Mark kept_mark;
    // Assembled for this entry (not served again from the last batch's slab) and not
    // served yet: counted in TaskRunnerStats::bytes_assembled_unserved.
    bool assembled = false;
  };
  struct Waiter {
    std::shared_ptr<transport::ServerCall> call;
    uint64_t max_batch_bytes;
    int32_t consumer = -1;
    int64_t round = -1;
    int64_t client_id = -1;  // acknowledges deliveries when >= 0
    int64_t epoch = 0;
    // When Poll first saw it parked (a request matched at once costs no clock read).
    absl::Time first_polled = absl::InfiniteFuture();
  };
  // Requests paired with their batches, to reply to outside mu_ (usually one or two: on the
  // stack).
  using Matches = absl::InlinedVector<std::pair<Waiter, ReadyBatch>, 4>;

  // What one acknowledging client has not confirmed, and what it lost.
  struct ClientDeliveries {
    int64_t epoch = 0;
    // The client's numbering of the batches sent to it (GetElementResponse.client_sequence):
    // random per entry, so that a client tells a restarted worker's numbers from ours.
    uint64_t stream = 0;
    int64_t last_sequence = 0;
    // Sent, not acknowledged yet: batch index -> the batch and the epoch it went out under.
    std::map<int64_t, std::pair<ReadyBatch, int64_t>> unacked;
    // Nodes of acknowledged batches, emptied, for the next batches kept: a batch sent and
    // acknowledged costs no allocation (a std::map node per batch was 1 of the worker's 4).
    std::vector<std::map<int64_t, std::pair<ReadyBatch, int64_t>>::node_type> spare_nodes;
    std::deque<ReadyBatch> lost;  // to serve again, lowest index first
    // Let go before acknowledged: batch index -> its number and the epoch it went out under,
    // until the client acknowledges it or reports a break since (a newer epoch). Until
    // then it may still be on its way, so the sequence floor stays at or below it.
    std::map<int64_t, std::pair<int64_t, int64_t>> released;
    absl::Time last_request;  // ForgetClients spares a client that asked since it was listed
    // The highest batch index numbered for it, and the last number that went to a lower
    // index (a batch handed on from a forgotten client; 0: none): while an entry numbered
    // below it remains, SetReplyOrder looks at every entry for the lowest number instead
    // of taking the lowest index's.
    int64_t highest_index = -1;
    int64_t out_of_order_sequence = 0;
  };
  // A client that stops acknowledging (gone, or reading slowly) keeps no more of the worker's
  // batches than this; beyond it the oldest batch is let go (most likely it arrived). In
  // steady state a client has about one per request in flight, and small batches are read
  // with up to 64 in flight (8 let nearly every batch go at 16). All clients together keep
  // at most half the pool's slabs (kept_budget_), which is what bounds memory, and a
  // producer that finds no free slab lets its oldest kept batch go: kept batches never
  // starve the pipeline.
  static constexpr size_t kMaxUnackedPerClient = 64;
  // What a client that never acknowledges leaves in ClientDeliveries::released (a reader
  // acknowledges each batch with its next request, so a few entries at most).
  static constexpr size_t kMaxReleasedPerClient = 1024;
  // Acknowledgements come about as fast as batches go out, so a few spare nodes suffice;
  // the cap keeps a client that acknowledged a burst from holding its peak's nodes.
  static constexpr size_t kMaxSpareNodesPerClient = 16;
  // Coordinated reads: one round's batches, by consumer.
  // A round opens with its first request and takes its batches, consecutively from the
  // pipeline, once every consumer asked (or round_wait_ passed: a consumer that died or
  // stopped must not stall the others for long). Until then it holds no slab, so consumers
  // at different speeds cannot tie up the worker's memory; open rounds are bounded by the
  // consumers' outstanding requests.
  struct Round {
    std::vector<bool> requested;
    size_t num_requested = 0;
    std::vector<std::optional<ReadyBatch>> batches;
    std::vector<bool> given;  // the consumer's slot got its batch (served or not)
    bool assigned = false;
    size_t served = 0;
    absl::Time opened;
  };
  // Small batches are packed into a slab's first kPackedBytes only: the pool's pages are
  // committed where batches are written, and a slab the pipeline wrote end to end would
  // commit all of it (16 MiB by default) for batches of a few KiB. A MiB holds enough of
  // them for the kept batches' budget, and stays in cache.
  static constexpr size_t kPackedBytes = size_t{1} << 20;
  // Coordinated reads: how long a round waits for consumers that did not ask yet, unless
  // TaskDef.round_wait_ms says otherwise.
  static constexpr absl::Duration kRoundWait = absl::Seconds(1);

  TaskRunner(const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
             std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options);
  void Produce();
  absl::Status ProduceAll(engine::ElementIterator& iterator);
  // A free slab of the pool; while none frees up, lets kept batches go (see on_slabs_short).
  [[nodiscard]] absl::StatusOr<transport::Slab> AcquireSlab();
  // Whether two batches are the same tensors (same dtypes and shapes; heap buffers shared,
  // inline ones equal), so that the slab `a` was encoded into serves `b` unchanged.
  static bool SameBuffers(const engine::Element& a, const engine::Element& b);
  // Pairs parked requests with ready batches (or with the end); replies outside the lock.
  void Serve();
  // Holds `waiter` until a batch is ready for it; returns the oldest request held if that
  // makes more than options_.max_parked_requests (to be told to retry, outside the lock).
  [[nodiscard]] std::optional<Waiter> Park(Waiter waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A buffered batch's bytes SpillIfQuiet copies to the heap.
  struct SpillCopy {
    std::shared_ptr<transport::Slab> from;  // held while it is copied
    size_t offset;
    size_t size;
    std::shared_ptr<transport::Slab> to;  // made outside mu_
  };
  // SpillIfQuiet's choice, under mu_: a copy for each distinct batch in the buffered slabs
  // that would come back, within the budget (taken here).
  [[nodiscard]] std::vector<SpillCopy> PlanSpill() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the copies in place of the buffered batches still there; true when any moved.
  bool PlaceSpilled(std::vector<SpillCopy>& copies) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void TellToRetry(const Waiter& waiter);
  // Serve() for coordinated reads; fills `matched` and `ended` under mu_.
  void MatchRounds(Matches& matched, std::vector<Waiter>& ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets rounds every consumer had its batch of, or went ahead without (noted in
  // went_ahead_below_), and, past a minute, rounds a missing consumer never came back for.
  void ForgetRounds(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Reply(const Waiter& waiter, ReadyBatch batch) ABSL_LOCKS_EXCLUDED(mu_);
  // Reply() for a batch whose provenance does not fit the reply's header.
  void ReplyWithProvenanceInPayload(const Waiter& waiter, ReadyBatch batch,
                                    proto::GetElementResponse response) ABSL_LOCKS_EXCLUDED(mu_);
  // Serve() for uncoordinated reads, under mu_; requests of an epoch their client has left
  // behind go to `stale`, to be told to retry.
  void MatchRequests(Matches& matched, std::vector<Waiter>& stale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills in the reply's sequence floor, stream and lost_left for `batch`, numbered and
  // kept for `client`.
  void SetReplyOrder(ClientDeliveries& client, ReadyBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Some client lost batches with a broken connection that it has not been sent again.
  [[nodiscard]] bool AnyLostBatches() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Lets `client`'s kept batch `kept` go unacknowledged; returns the next entry.
  std::map<int64_t, std::pair<ReadyBatch, int64_t>>::iterator LetGo(
      ClientDeliveries& client, std::map<int64_t, std::pair<ReadyBatch, int64_t>>::iterator kept)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps a copy of `batch`, sent to an acknowledging client, until acknowledged.
  void KeepUntilAcknowledged(const Waiter& waiter, const ReadyBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for a coordinated consumer's batch of a round.
  void KeepRound(const Waiter& waiter, const ReadyBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens `round` (opened at `now`) if it is not open, and marks `consumer` as asking for it.
  Round& RequestRound(int64_t round, int32_t consumer, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers that `consumer`'s kept batch of `round` was let go unacknowledged.
  void NoteRoundLetGo(int32_t consumer, int64_t round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `consumer` asks again for a round whose batch was let go (NoteRoundLetGo): that batch is
  // lost, and the round serves it the next one at once.
  void ServeRoundAfresh(int32_t consumer, int64_t round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Slabs the batches kept for acknowledgements (or lost, to serve again) hold, of all
  // clients: a cached batch served again and again is one slab however many clients keep it.
  [[nodiscard]] size_t KeptSlabs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // With TaskRunnerOptions::verify_kept_slabs, aborts unless kept_count_ agrees with a walk
  // of every kept batch.
  void VerifyKeptSlabs() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Which kept batches ReleaseOldestKept may let go.
  struct ReleaseRule {
    LostBatches lost = LostBatches::kLetGo;
    // Only a slab that nothing but kept batches holds, so that its memory comes back.
    bool only_freeing_a_slab = false;
  };
  // Lets the batch kept longest for an acknowledgement go (a lost one only when none is), with
  // every kept or lost batch packed into the same slab; false when no kept batch may go.
  bool ReleaseOldestKept(ReleaseRule rule) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy of `batch` to keep for an acknowledgement, stamped as kept now (kept_since).
  [[nodiscard]] ReadyBatch KeptCopyOf(const ReadyBatch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ReadyBatch kept = CopyOf(batch);
    kept.kept_since = ++batches_kept_;
    // A batch spilled to the heap holds no slab of the pool.
    if (kept.slab->pooled()) kept.kept_mark = kept_count_.MarkKept(kept.slab->index());
    return kept;
  }
  [[nodiscard]] static ReadyBatch CopyOf(const ReadyBatch& batch) {
    return ReadyBatch{batch.slab,           batch.offset,          batch.size,
                      batch.index,          batch.provenance,      batch.sequence,
                      /*sequence_floor=*/0, /*sequence_stream=*/0, /*lost_left=*/0,
                      batch.kept_since};
  }
  const proto::TaskDef task_;
  const absl::Duration round_wait_;  // coordinated reads (TaskDef.round_wait_ms)
  const std::shared_ptr<transport::SlabPool> pool_;
  const std::unique_ptr<engine::SplitFeed> feed_;
  const TaskRunnerOptions options_;
  // Before the containers of kept batches: their marks count it down as they go.
  KeptSlabCount kept_count_;
  engine::PipelineStats pipeline_stats_;
  // The last batch assembled and where (producer thread only): a batch the pipeline hands
  // out again is served from those bytes without assembling it again, and the next new
  // batch is packed behind them while the slab has room.
  engine::Element last_batch_;
  std::shared_ptr<transport::Slab> last_slab_;
  size_t last_offset_ = 0;
  size_t last_size_ = 0;

  mutable absl::Mutex mu_;
  RingQueue<ReadyBatch> ready_ ABSL_GUARDED_BY(mu_);
  // The producer waits on room_ for ready_ to shrink to *producer_resumes_at_ (set while it
  // waits, until signalled); Serve, the only place ready_ shrinks, signals it, and the
  // destructor. The producer is the one thread that waits on room_.
  absl::CondVar room_;
  std::optional<size_t> producer_resumes_at_ ABSL_GUARDED_BY(mu_);
  // Set by PlaceSpilled, which moved the batches out of last_slab_: the producer waiting
  // for room lets go of it (and of last_batch_, which was served from it).
  bool drop_last_slab_ ABSL_GUARDED_BY(mu_) = false;
  // Requests that came (Park, or a round served again): SpillIfQuiet's sign of readers.
  uint64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
  struct QuietCheck {
    uint64_t requests = 0;
    absl::Time since = absl::Now();  // quiet from the task's start until it is asked
  };
  QuietCheck quiet_check_ ABSL_GUARDED_BY(mu_);
  // Whether the task was asked since quiet_check_ was taken (or has requests parked); if so,
  // takes it anew: quiet from `now` on, at the earliest.
  bool AskedSinceQuietCheck(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A vector, not a deque: a deque moving through its blocks allocated one every 8 parked
  // requests. Few are parked at a time (about the readers' requests in flight), so erasing
  // at the front moves little.
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Set by a request whose client has lost batches to serve again or a newer epoch (which
  // makes its older parked requests stale): MatchRequests then looks at every parked request
  // even with nothing in ready_.
  bool scan_parked_ ABSL_GUARDED_BY(mu_) = false;
  std::map<int64_t, Round> rounds_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads: by consumer, whether a round went ahead without it and it has not
  // asked since (MatchRounds).
  std::vector<bool> absent_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads, by consumer: rounds below this one that went ahead without it were
  // forgotten once the others had their batches (kept, a dead consumer's rounds piled up
  // for a minute and every match walked them); asked for late, such a round gets the next
  // batch at once, as it did while remembered.
  std::vector<int64_t> went_ahead_below_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, ClientDeliveries> deliveries_ ABSL_GUARDED_BY(mu_);  // by client id
  // Coordinated reads, by consumer, then round: batches sent and not acknowledged yet.
  std::map<int32_t, std::map<int64_t, ReadyBatch>> kept_rounds_ ABSL_GUARDED_BY(mu_);
  // Coordinated reads, by consumer: rounds whose kept batch was let go unacknowledged, until
  // acknowledged after all or asked for again (at most kMaxReleasedPerClient each).
  std::map<int32_t, std::set<int64_t>> rounds_let_go_ ABSL_GUARDED_BY(mu_);
  uint64_t batches_kept_ ABSL_GUARDED_BY(mu_) = 0;  // numbers ReadyBatch::kept_since
  const size_t kept_budget_;

  // Written under mu_; atomic so that produced_all(), asked on every request, reads it
  // without taking mu_.
  std::atomic<bool> produced_all_{false};
  // An uncoordinated reader was told the end: a batch handed on from a client forgotten
  // since would wait for a reader that may never ask (and the task would never finish).
  bool told_a_reader_the_end_ ABSL_GUARDED_BY(mu_) = false;
  // Since when Poll saw requests held back from the end (InfiniteFuture: none were).
  absl::Time end_held_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  // error_ is the split feed's (SplitFeed::failed: the dispatcher gave the task up, or
  // stayed out of reach), not the data's: said as the call's status, which a reader takes
  // for its worker being out of reach and so waits for the dispatcher's word on the task.
  bool error_is_the_feeds_ ABSL_GUARDED_BY(mu_) = false;
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
