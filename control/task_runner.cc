// TaskRunner: the producer assembling batches into slabs, and replies. Acknowledged
// deliveries are in task_runner_delivery.cc, coordinated rounds in task_runner_rounds.cc.
#include "control/task_runner.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "control/serialized_bytes.h"
#include "engine/batch_layout.h"
#include "engine/provenance.h"
#include "transport/payload_retention.h"

namespace sluice::control {

absl::StatusOr<std::unique_ptr<TaskRunner>> TaskRunner::Start(
    const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
    std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options) {
  if (options.buffer_batches == 0) {
    return absl::InvalidArgumentError("task buffer must hold at least one batch");
  }
  std::unique_ptr<TaskRunner> runner(
      new TaskRunner(task, std::move(pool), std::move(feed), options));
  try {
    runner->producer_ = std::thread([r = runner.get()] {
      SetCurrentThreadName(absl::StrCat("sluice-task", r->task_.task_id()));
      r->Produce();
    });
  } catch (const std::exception& e) {  // system_error, or bad_alloc for its state
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot start a thread for task ", task.task_id(), " (", e.what(), ")"));
  }
  return runner;
}

TaskRunner::TaskRunner(const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
                       std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options)
    : task_(task),
      round_wait_(task.round_wait_ms() > 0 ? absl::Milliseconds(task.round_wait_ms()) : kRoundWait),
      pool_(std::move(pool)),
      feed_(std::move(feed)),
      options_(options),
      kept_count_(pool_->num_slabs()),
      kept_budget_(std::max<size_t>(1, pool_->num_slabs() / 2)) {}

TaskRunner::~TaskRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    room_.Signal();
  }
  if (feed_ != nullptr) feed_->Cancel();
  if (producer_.joinable()) producer_.join();
  std::vector<Waiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    waiters.swap(waiters_);
  }
  for (const Waiter& w : waiters) w.call->Reply(absl::CancelledError("worker is shutting down"));
}

void TaskRunner::Produce() {
  engine::PipelineContext context;
  context.split_feed = feed_.get();
  context.seed_salt = static_cast<uint64_t>(task_.task_id());
  context.replay_seed = static_cast<uint64_t>(task_.job_id());
  context.data_roots = options_.data_roots;
  context.stats = &pipeline_stats_;
  absl::StatusOr<std::unique_ptr<engine::ElementIterator>> iterator =
      engine::BuildPipeline(task_.pipeline(), context);
  absl::Status status = iterator.ok() ? ProduceAll(**iterator) : iterator.status();
  // Nothing more is packed behind it or served from it again: its buffered batches alone
  // hold the slab now (and may move it out of the pool, SpillIfQuiet).
  last_slab_.reset();
  last_batch_.clear();
  {
    absl::MutexLock lock(&mu_);
    // Cut short by ~TaskRunner, the pipeline did not end: its parked requests are answered
    // Cancelled there, not told the end by the Serve below (a coordinated reader told the
    // end of a task that is not its recovery fails the whole read).
    produced_all_ = status.ok() || !stopping_;
    if (!status.ok() && !stopping_) {
      error_ =
          absl::Status(status.code(), absl::StrCat("task ", task_.task_id(), " (dataset ",
                                                   task_.dataset_id(), "): ", status.message()));
      error_is_the_feeds_ = feed_ != nullptr && feed_->failed();
    }
  }
  Serve();
}

bool TaskRunner::SameBuffers(const engine::Element& a, const engine::Element& b) {
  if (a.empty() || a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape()) return false;
    // Inline tensors (engine::Tensor::kInlineBytes) are never shared: a cached one comes
    // back as a copy, so equal bytes (at most 16) are what says it is the same.
    const bool same = a[i].byte_size() <= engine::Tensor::kInlineBytes
                          ? a[i] == b[i]
                          : a[i].SharesBufferWith(b[i]);
    if (!same) return false;
  }
  return true;
}

absl::Status TaskRunner::ProduceAll(engine::ElementIterator& iterator) {
  // Reused: a replayed batch (cache() | repeat()) is copied into the room the last one
  // left, with no allocation.
  engine::Element batch;
  for (int64_t index = 0;; ++index) {
    {
      absl::MutexLock lock(&mu_);
      // A coordinated round takes num_consumers batches at once.
      const size_t capacity = std::max<size_t>(options_.buffer_batches, task_.num_consumers());
      // A full buffer of an uncoordinated task waits until half of it has gone: a pipeline
      // faster than its readers (a cached batch) is then woken once per half buffer, not
      // once per batch, each wake-up a context switch on cores the transport polls on.
      // Coordinated rounds keep the plain rule.
      const size_t resume_at =
          ready_.size() >= capacity && task_.num_consumers() == 0 ? capacity / 2 : capacity - 1;
      if (!stopping_ && ready_.size() > resume_at) {
        ++stats_.buffer_full_waits;
        // A condition variable Serve signals, not mu_.Await(Condition): with a waiter's
        // condition, every release of mu_ (several per request) evaluates it.
        while (!stopping_ && ready_.size() > resume_at) {
          if (drop_last_slab_) {
            // Its batches were moved out (PlaceSpilled): the slab goes back to the pool.
            drop_last_slab_ = false;
            last_slab_.reset();
            last_batch_.clear();
          }
          producer_resumes_at_ = resume_at;
          room_.Wait(&mu_);
        }
        producer_resumes_at_.reset();
        if (std::exchange(drop_last_slab_, false)) {
          // Asked while a reader's request was waking it: the moved batches' slab goes now.
          last_slab_.reset();
          last_batch_.clear();
        }
      }
      if (stopping_) return absl::CancelledError("stopping");
    }
    bool end = false;
    SLUICE_RETURN_IF_ERROR(iterator.GetNext(&batch, &end));
    if (end) return absl::OkStatus();
    if (SameBuffers(batch, last_batch_)) {
      // The pipeline handed out the batch it handed out last (cache() | repeat() shares
      // tensor buffers): serve the bytes it was assembled into again, copying nothing.
      ReadyBatch ready{last_slab_, last_offset_, last_size_, index, {}};
      if (const engine::Provenance* provenance = engine::ElementProvenance(batch)) {
        provenance->ToProto(&ready.provenance);
      }
      {
        absl::MutexLock lock(&mu_);
        stats_.bytes_reused += static_cast<int64_t>(last_size_);
        ready_.push_back(std::move(ready));
      }
      Serve();
      continue;
    }
    last_batch_.clear();
    const size_t size = engine::EncodedBatchSize(batch);
    if (size > pool_->slab_bytes()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("a batch of ", size, " bytes does not fit the worker's slabs of ",
                       pool_->slab_bytes(), " bytes; raise the worker's --slab-bytes"));
    }
    // Batches are packed one after the other into the slab the last one went to, so that
    // small batches kept for acknowledgements share slabs instead of holding one each.
    size_t offset = 0;
    if (last_slab_ != nullptr) {
      offset = engine::AlignUp(last_offset_ + last_size_, engine::kBatchDataAlignment);
      // No room left: the full slab goes back to the pool once its batches are all gone.
      if (offset + size > std::min(last_slab_->capacity(), kPackedBytes)) last_slab_.reset();
    }
    if (last_slab_ == nullptr) {
      SLUICE_ASSIGN_OR_RETURN(transport::Slab slab, AcquireSlab());
      last_slab_ = std::make_shared<transport::Slab>(std::move(slab));
      offset = 0;
    }
    SLUICE_ASSIGN_OR_RETURN(size_t written,
                            engine::EncodeBatch(batch, last_slab_->span().subspan(offset)));
    ReadyBatch ready{last_slab_, offset, written, index, {}};
    ready.assembled = true;
    if (const engine::Provenance* provenance = engine::ElementProvenance(batch)) {
      provenance->ToProto(&ready.provenance);
    }
    // Keeping the batch keeps its buffers alive, so an address cannot be reused by another
    // batch and fool SameBuffers.
    last_batch_ = std::move(batch);
    last_offset_ = offset;
    last_size_ = written;
    {
      absl::MutexLock lock(&mu_);
      stats_.bytes_assembled += static_cast<int64_t>(written);
      stats_.bytes_assembled_unserved += static_cast<int64_t>(written);
      ready_.push_back(std::move(ready));
    }
    Serve();
  }
}

absl::StatusOr<transport::Slab> TaskRunner::AcquireSlab() {
  constexpr absl::Duration kWait = absl::Milliseconds(100);
  absl::Duration waited;  // counted, not timed: no clock read for a slab free at once
  for (;;) {
    if (std::optional<transport::Slab> slab = pool_->Acquire(kWait)) return std::move(*slab);
    waited += kWait;
    // Slabs held after a send given up on while its peer could still read them come back
    // once their hold has passed.
    transport::ReleaseExpiredPeerReadHolds();
    bool released;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("stopping");
      ++stats_.slab_waits;
      // Acknowledgements that may never come (a client that died) must not starve the
      // pipeline: the oldest kept batch most likely arrived long ago.
      released = ReleaseOldestKept({.only_freeing_a_slab = true});
    }
    if (!released && options_.on_slabs_short) options_.on_slabs_short(this, waited);
  }
}

void TaskRunner::Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
                       int32_t consumer, int64_t round) {
  if (consumer >= 0) {
    Fetch(std::move(call), max_batch_bytes, RoundRequest{consumer, round, 0, {}});
    return;
  }
  if (task_.num_consumers() > 0) {
    call->Reply(absl::InvalidArgumentError(
        absl::StrCat("task ", task_.task_id(), " is read by ", task_.num_consumers(),
                     " coordinated consumers; got an uncoordinated request")));
    return;
  }
  std::optional<Waiter> evicted;
  {
    absl::MutexLock lock(&mu_);
    evicted = Park(Waiter{std::move(call), max_batch_bytes});
  }
  if (evicted.has_value()) TellToRetry(*evicted);
  Serve();
}

std::optional<TaskRunner::Waiter> TaskRunner::Park(Waiter waiter) {
  ++requests_;
  waiters_.push_back(std::move(waiter));
  if (waiters_.size() <= options_.max_parked_requests) return std::nullopt;
  std::optional<Waiter> oldest(std::move(waiters_.front()));
  waiters_.erase(waiters_.begin());
  ++stats_.parked_requests_evicted;
  return oldest;
}

void TaskRunner::Poll() {
  std::vector<Waiter> to_retry;
  {
    absl::MutexLock lock(&mu_);
    const bool end_held = task_.num_consumers() == 0 && produced_all_ && ready_.empty() &&
                          !waiters_.empty() && AnyLostBatches();
    const absl::Time now = absl::Now();
    if (!end_held) {
      end_held_since_ = absl::InfiniteFuture();
    } else if (end_held_since_ == absl::InfiniteFuture()) {
      end_held_since_ = now;
    } else if (now - end_held_since_ >= kEndHeldAtMost) {
      // They ask again at once: a reply, unlike a deadline passed, says the worker is there.
      to_retry = std::move(waiters_);
      waiters_.clear();
      end_held_since_ = absl::InfiniteFuture();
    }
    if (task_.num_consumers() == 0) {
      for (Waiter& waiter : waiters_) waiter.first_polled = std::min(waiter.first_polled, now);
      auto held_too_long =
          std::stable_partition(waiters_.begin(), waiters_.end(), [&](const Waiter& waiter) {
            return now - waiter.first_polled < options_.max_request_hold;
          });
      stats_.requests_held_too_long += waiters_.end() - held_too_long;
      std::move(held_too_long, waiters_.end(), std::back_inserter(to_retry));
      waiters_.erase(held_too_long, waiters_.end());
    }
  }
  for (const Waiter& waiter : to_retry) TellToRetry(waiter);
  Serve();
}

void TaskRunner::TellToRetry(const Waiter& waiter) {
  proto::GetElementResponse response;
  response.set_retry_later(true);
  waiter.call->Reply(response);
}

void TaskRunner::Serve() {
  // On the stack for the usual few: a heap vector cost an allocation per reply.
  Matches matched;
  std::vector<Waiter> ended;
  std::vector<Waiter> stale;
  absl::Status error;
  bool error_is_the_feeds = false;
  {
    absl::MutexLock lock(&mu_);
    if (task_.num_consumers() > 0) MatchRounds(matched, ended);
    if (task_.num_consumers() == 0) MatchRequests(matched, stale);
    // Only these take batches from ready_: the producer waiting for room is woken here.
    if (producer_resumes_at_.has_value() && ready_.size() <= *producer_resumes_at_) {
      producer_resumes_at_.reset();  // signalled once, not by every Serve until it runs
      room_.Signal();
    }
    // Not while a client has lost batches (unless the pipeline failed): should it leave,
    // they go to these readers.
    if (task_.num_consumers() == 0 && produced_all_ && ready_.empty() &&
        (!error_.ok() || !AnyLostBatches())) {
      told_a_reader_the_end_ = told_a_reader_the_end_ || !waiters_.empty();
      ended.assign(waiters_.begin(), waiters_.end());
      waiters_.clear();
    }
    error = error_;
    error_is_the_feeds = error_is_the_feeds_;
  }
  for (auto& [waiter, batch] : matched) Reply(waiter, std::move(batch));
  // The client asks again, under its current epoch.
  for (const Waiter& waiter : stale) TellToRetry(waiter);
  for (const Waiter& waiter : ended) {
    if (error_is_the_feeds) {
      waiter.call->Reply(error);
      continue;
    }
    proto::GetElementResponse response;
    if (const int64_t skipped = pipeline_stats_.bad_records_skipped(); skipped > 0) {
      response.set_bad_records_skipped(skipped);
      std::vector<std::string> examples = pipeline_stats_.bad_record_messages();
      examples.resize(std::min<size_t>(examples.size(), engine::kBadRecordExamples));
      for (std::string& example : examples) response.add_bad_record_examples(std::move(example));
    }
    if (error.ok()) {
      response.set_end_of_sequence(true);
    } else {
      response.set_task_error_code(static_cast<int32_t>(error.code()));
      response.set_task_error_message(std::string(error.message()));
    }
    waiter.call->Reply(response);
  }
}

void TaskRunner::Reply(const Waiter& waiter, ReadyBatch batch) {
  if (batch.size > waiter.max_batch_bytes) {
    waiter.call->Reply(absl::ResourceExhaustedError(
        absl::StrCat("batch ", batch.index, " of task ", task_.task_id(), " is ", batch.size,
                     " bytes but the client's landing buffers hold ", waiter.max_batch_bytes,
                     "; raise the client's slab size (sluice read --slab-bytes, "
                     "ReadOptions::slab_bytes)")));
    sends_in_flight_->fetch_sub(1);
    return;
  }
  proto::GetElementResponse response;
  response.set_batch_bytes(batch.size);
  response.set_batch_index(batch.index);
  // Nothing on the wire while there is none (proto3 leaves zero out).
  response.set_bad_records_skipped(pipeline_stats_.bad_records_skipped());
  if (batch.sequence > 0) {
    response.set_client_sequence(batch.sequence);
    response.set_sequence_floor(batch.sequence_floor);
    response.set_sequence_stream(batch.sequence_stream);
    response.set_lost_left(batch.lost_left);
  }
  response.mutable_provenance()->Swap(&batch.provenance);
  if (response.ByteSizeLong() > waiter.call->max_body_with_payload()) {
    ReplyWithProvenanceInPayload(waiter, std::move(batch), std::move(response));
    return;
  }
  transport::Payload payload{batch.slab->data() + batch.offset, batch.size};
  // On the stack: Reply copies the bytes into the frame. ByteSizeLong above cached the size,
  // which max_body_with_payload bounds (a header's room, a few KiB at most).
  std::string heap;
  char stack[512];
  // The slab goes back to the pool once the transport no longer reads it.
  waiter.call->Reply(
      absl::OkStatus(), SerializeCached(response, stack, heap), payload,
      [in_flight = sends_in_flight_, slab = std::move(batch.slab)](absl::Status sent) mutable {
        if (transport::PayloadMayStillBeRead(sent)) {
          transport::KeepForPeerReads(std::move(slab));
        }
        in_flight->fetch_sub(1);
      });
}

void TaskRunner::ReplyWithProvenanceInPayload(const Waiter& waiter, ReadyBatch batch,
                                              proto::GetElementResponse response) {
  proto::BatchProvenance provenance;
  provenance.mutable_runs()->Swap(response.mutable_provenance());
  const size_t provenance_bytes = provenance.ByteSizeLong();
  const size_t total = batch.size + provenance_bytes;
  if (total > waiter.max_batch_bytes) {
    waiter.call->Reply(absl::ResourceExhaustedError(
        absl::StrCat("batch ", batch.index, " of task ", task_.task_id(), " is ", batch.size,
                     " bytes and its provenance (", provenance.runs_size(), " runs) ",
                     provenance_bytes, " more, but the client's landing buffers hold ",
                     waiter.max_batch_bytes, "; raise the client's slab size")));
    sends_in_flight_->fetch_sub(1);
    return;
  }
  // One contiguous payload: the batch, copied out of its slab (which may hold other batches
  // or be served to other clients with other provenance), then the runs.
  std::shared_ptr<char[]> bytes(new char[total]);  // written whole below
  std::memcpy(bytes.get(), batch.slab->data() + batch.offset, batch.size);
  provenance.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(bytes.get()) + batch.size);
  response.set_provenance_bytes_in_payload(provenance_bytes);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.batches_with_provenance_in_payload;
  }
  batch.slab.reset();  // copied: back to the pool now
  waiter.call->Reply(absl::OkStatus(), response.SerializeAsString(),
                     transport::Payload{bytes.get(), total},
                     [in_flight = sends_in_flight_, bytes](absl::Status sent) mutable {
                       if (transport::PayloadMayStillBeRead(sent))
                         transport::KeepForPeerReads(std::move(bytes));
                       in_flight->fetch_sub(1);
                     });
}

bool TaskRunner::finished() const {
  absl::MutexLock lock(&mu_);
  return !AnyLostBatches() && produced_all_ && ready_.empty() && sends_in_flight_->load() == 0;
}

bool TaskRunner::AnyLostBatches() const {
  for (const auto& [client_id, client] : deliveries_) {
    if (!client.lost.empty()) return true;
  }
  return false;
}

bool TaskRunner::produced_all() const { return produced_all_.load(std::memory_order_acquire); }

TaskRunnerStats TaskRunner::stats() const {
  absl::MutexLock lock(&mu_);
  TaskRunnerStats stats = stats_;
  stats.bad_records_skipped = pipeline_stats_.bad_records_skipped();
  return stats;
}

}  // namespace sluice::control
