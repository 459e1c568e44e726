#include "control/task_runner.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "engine/batch_layout.h"
#include "engine/provenance.h"

namespace sluice::control {

absl::StatusOr<std::unique_ptr<TaskRunner>> TaskRunner::Start(
    const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
    std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options) {
  if (options.buffer_batches == 0) {
    return absl::InvalidArgumentError("task buffer must hold at least one batch");
  }
  std::unique_ptr<TaskRunner> runner(
      new TaskRunner(task, std::move(pool), std::move(feed), options));
  runner->producer_ = std::thread([r = runner.get()] {
    SetCurrentThreadName(absl::StrCat("sluice-task", r->task_.task_id()));
    r->Produce();
  });
  return runner;
}

TaskRunner::TaskRunner(const proto::TaskDef& task, std::shared_ptr<transport::SlabPool> pool,
                       std::unique_ptr<engine::SplitFeed> feed, const TaskRunnerOptions& options)
    : task_(task),
      round_wait_(task.round_wait_ms() > 0 ? absl::Milliseconds(task.round_wait_ms()) : kRoundWait),
      pool_(std::move(pool)),
      feed_(std::move(feed)),
      options_(options),
      kept_budget_(std::max<size_t>(1, pool_->num_slabs() / 2)) {}

TaskRunner::~TaskRunner() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (feed_ != nullptr) feed_->Cancel();
  producer_.join();
  std::deque<Waiter> waiters;
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
  context.data_roots = options_.data_roots;
  context.stats = &pipeline_stats_;
  absl::StatusOr<std::unique_ptr<engine::ElementIterator>> iterator =
      engine::BuildPipeline(task_.pipeline(), context);
  absl::Status status = iterator.ok() ? ProduceAll(**iterator) : iterator.status();
  {
    absl::MutexLock lock(&mu_);
    produced_all_ = true;
    if (!status.ok() && !stopping_) {
      error_ =
          absl::Status(status.code(), absl::StrCat("task ", task_.task_id(), " (dataset ",
                                                   task_.dataset_id(), "): ", status.message()));
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
      auto room = [this, resume_at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || ready_.size() <= resume_at;
      };
      if (!room()) {
        ++stats_.buffer_full_waits;
        mu_.Await(absl::Condition(&room));
      }
      if (stopping_) return absl::CancelledError("stopping");
    }
    engine::Element batch;
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
      ready_.push_back(std::move(ready));
    }
    Serve();
  }
}

absl::StatusOr<transport::Slab> TaskRunner::AcquireSlab() {
  for (;;) {
    if (std::optional<transport::Slab> slab = pool_->Acquire(absl::Milliseconds(100))) {
      return std::move(*slab);
    }
    bool released;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return absl::CancelledError("stopping");
      // Acknowledgements that may never come (a client that died) must not starve the
      // pipeline: the oldest kept batch most likely arrived long ago.
      released = ReleaseOldestKept();
    }
    // Uncoordinated readers acknowledge other tasks' batches as they read on; coordinated
    // consumers waiting for this task's round cannot.
    if (!released && task_.num_consumers() > 0 && options_.on_slabs_short) {
      options_.on_slabs_short(this);
    }
  }
}

void TaskRunner::Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
                       int32_t consumer, int64_t round) {
  if (consumer >= 0) {
    Fetch(std::move(call), max_batch_bytes, RoundRequest{consumer, round, false, {}});
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
  waiters_.push_back(std::move(waiter));
  if (waiters_.size() <= options_.max_parked_requests) return std::nullopt;
  std::optional<Waiter> oldest(std::move(waiters_.front()));
  waiters_.pop_front();
  ++stats_.parked_requests_evicted;
  return oldest;
}

void TaskRunner::TellToRetry(const Waiter& waiter) {
  proto::GetElementResponse response;
  response.set_retry_later(true);
  waiter.call->Reply(response);
}

void TaskRunner::Serve() {
  std::vector<std::pair<Waiter, ReadyBatch>> matched;
  std::vector<Waiter> ended;
  std::vector<Waiter> stale;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    if (task_.num_consumers() > 0) MatchRounds(matched, ended);
    if (task_.num_consumers() == 0) MatchRequests(matched, stale);
    if (task_.num_consumers() == 0 && produced_all_ && ready_.empty()) {
      ended.assign(waiters_.begin(), waiters_.end());
      waiters_.clear();
    }
    error = error_;
  }
  for (auto& [waiter, batch] : matched) Reply(waiter, std::move(batch));
  // The client asks again, under its current epoch.
  for (const Waiter& waiter : stale) TellToRetry(waiter);
  for (const Waiter& waiter : ended) {
    if (!error.ok()) {
      waiter.call->Reply(error);
      continue;
    }
    proto::GetElementResponse response;
    response.set_end_of_sequence(true);
    waiter.call->Reply(response);
  }
}

void TaskRunner::Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
                       Delivery delivery) {
  if (task_.num_consumers() > 0 || delivery.client_id < 0 || delivery.epoch <= 0) {
    Fetch(std::move(call), max_batch_bytes);
    return;
  }
  std::optional<Waiter> evicted;
  {
    absl::MutexLock lock(&mu_);
    // Created on the client's first request, so that its epoch is known from then on.
    {
      auto [entry, created] = deliveries_.try_emplace(delivery.client_id);
      ClientDeliveries& client = entry->second;
      if (created) {
        absl::BitGen bits;
        client.stream = absl::Uniform<uint64_t>(absl::IntervalClosed, bits, 1,
                                                std::numeric_limits<uint64_t>::max());
      }
      client.last_request = absl::Now();
      for (int64_t index : delivery.acked) {
        client.unacked.erase(index);
        client.released.erase(index);
        std::erase_if(client.lost, [index](const ReadyBatch& b) { return b.index == index; });
      }
      if (delivery.epoch > client.epoch) {
        // The client's connection broke since: what it has not acknowledged by now was lost.
        client.epoch = delivery.epoch;
        for (auto it = client.unacked.begin(); it != client.unacked.end();) {
          if (it->second.second < delivery.epoch) {
            client.lost.push_back(std::move(it->second.first));
            it = client.unacked.erase(it);
          } else {
            ++it;
          }
        }
        std::sort(client.lost.begin(), client.lost.end(),
                  [](const ReadyBatch& a, const ReadyBatch& b) { return a.index < b.index; });
        // What was let go under an older epoch and not acknowledged now was lost for good.
        std::erase_if(client.released, [&delivery](const auto& entry) {
          return entry.second.second < delivery.epoch;
        });
      }
      // The entry stays even when empty: it remembers the client's epoch (see MatchRequests).
    }
    evicted =
        Park(Waiter{std::move(call), max_batch_bytes, -1, -1, delivery.client_id, delivery.epoch});
  }
  if (evicted.has_value()) TellToRetry(*evicted);
  Serve();
}

void TaskRunner::MatchRequests(std::vector<std::pair<Waiter, ReadyBatch>>& matched,
                               std::vector<Waiter>& stale) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    std::optional<ReadyBatch> batch;
    bool again = false;
    auto client = it->epoch > 0 ? deliveries_.find(it->client_id) : deliveries_.end();
    if (client != deliveries_.end() && it->epoch < client->second.epoch) {
      // Sent before its client saw a connection break (a newer epoch arrived first, over
      // the new connection): its reply most likely goes nowhere, and a batch kept under the
      // old epoch would never be counted lost again. It gets no batch.
      stale.push_back(std::move(*it));
      it = waiters_.erase(it);
      continue;
    }
    if (client != deliveries_.end() && !client->second.lost.empty()) {
      batch.emplace(std::move(client->second.lost.front()));
      client->second.lost.pop_front();
      again = true;
    } else if (!ready_.empty()) {
      batch.emplace(std::move(ready_.front()));
      ready_.pop_front();
    } else {
      ++it;
      continue;
    }
    if (client != deliveries_.end()) {
      // A batch served again keeps the number it went out with the first time.
      if (!again) batch->sequence = ++client->second.last_sequence;
      KeepUntilAcknowledged(*it, *batch);
      SetReplyOrder(client->second, *batch);
    }
    stats_.batches_served += 1;
    stats_.batches_redelivered += again ? 1 : 0;
    stats_.bytes_served += static_cast<int64_t>(batch->size);
    // Counted before the batch leaves ready_, so finished() never sees it nowhere.
    sends_in_flight_->fetch_add(1);
    matched.emplace_back(std::move(*it), std::move(*batch));
    it = waiters_.erase(it);
  }
}

void TaskRunner::SetReplyOrder(const ClientDeliveries& client, ReadyBatch& batch) const {
  // The lowest number that may still reach the client: a batch on its way (kept until
  // acknowledged, or let go since), one to serve again, or the next one. Numbers mostly
  // rise with the batch index, but not always (a forgotten client's lost batches go back
  // to ready_, behind batches others already had), so all are looked at: a few each
  // (about one per request in flight).
  int64_t floor = client.last_sequence + 1;
  for (const auto& [index, kept] : client.unacked) floor = std::min(floor, kept.first.sequence);
  for (const auto& [index, let_go] : client.released) floor = std::min(floor, let_go.first);
  for (const ReadyBatch& lost : client.lost) floor = std::min(floor, lost.sequence);
  batch.sequence_floor = floor;
  batch.sequence_stream = client.stream;
}

void TaskRunner::KeepUntilAcknowledged(const Waiter& waiter, const ReadyBatch& batch) {
  ClientDeliveries& client = deliveries_[waiter.client_id];
  client.epoch = std::max(client.epoch, waiter.epoch);
  if (client.unacked.size() >= kMaxUnackedPerClient) {
    LetGo(client, std::min_element(client.unacked.begin(), client.unacked.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.second.first.kept_since < b.second.first.kept_since;
                                   }));
    ++stats_.kept_batches_released;
  }
  ReadyBatch kept = CopyOf(batch);
  kept.kept_since = ++batches_kept_;
  client.unacked.insert_or_assign(batch.index, std::pair{std::move(kept), waiter.epoch});
  while (KeptSlabs() > kept_budget_ && ReleaseOldestKept()) {
  }
}

size_t TaskRunner::KeptSlabs() const {
  // Few kept batches (a handful per client): a sorted vector beats a hash set here.
  std::vector<const transport::Slab*> slabs;
  for (const auto& [id, client] : deliveries_) {
    for (const auto& [index, kept] : client.unacked) slabs.push_back(kept.first.slab.get());
    for (const ReadyBatch& lost : client.lost) slabs.push_back(lost.slab.get());
  }
  for (const auto& [consumer, rounds] : kept_rounds_) {
    for (const auto& [round, kept] : rounds) slabs.push_back(kept.slab.get());
  }
  std::sort(slabs.begin(), slabs.end());
  return static_cast<size_t>(std::unique(slabs.begin(), slabs.end()) - slabs.begin());
}

std::map<int64_t, std::pair<TaskRunner::ReadyBatch, int64_t>>::iterator TaskRunner::LetGo(
    ClientDeliveries& client, std::map<int64_t, std::pair<ReadyBatch, int64_t>>::iterator kept) {
  const auto& [batch, epoch] = kept->second;
  client.released.insert_or_assign(batch.index, std::pair{batch.sequence, epoch});
  if (client.released.size() > kMaxReleasedPerClient)
    client.released.erase(client.released.begin());
  return client.unacked.erase(kept);
}

bool TaskRunner::ReleaseKeptBatch() {
  absl::MutexLock lock(&mu_);
  return ReleaseOldestKept();
}

bool TaskRunner::ReleaseOldestKept() {
  // Few kept batches (about one per request in flight): a scan is cheaper than keeping an
  // index of them. A batch awaiting its acknowledgement goes before a lost one: it has most
  // likely arrived, while a lost one let go is lost for good. Among them the one kept
  // longest goes first, not the lowest index: a batch handed on from a forgotten client has
  // a low index but was sent just now.
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  const transport::Slab* slab = nullptr;
  auto consider = [&oldest, &slab](const ReadyBatch& kept) {
    if (kept.kept_since < oldest) {
      oldest = kept.kept_since;
      slab = kept.slab.get();
    }
  };
  for (const auto& [id, client] : deliveries_) {
    for (const auto& [index, kept] : client.unacked) consider(kept.first);
  }
  for (const auto& [consumer, rounds] : kept_rounds_) {
    for (const auto& [round, kept] : rounds) consider(kept);
  }
  for (const auto& [id, client] : deliveries_) {
    if (slab != nullptr) break;
    for (const ReadyBatch& lost : client.lost) consider(lost);
  }
  if (slab == nullptr) return false;
  // Its slab-mates go with it: letting one packed batch go alone would free no memory.
  int64_t released = 0;
  for (auto& [id, client] : deliveries_) {
    for (auto it = client.unacked.begin(); it != client.unacked.end();) {
      if (it->second.first.slab.get() != slab) {
        ++it;
        continue;
      }
      it = LetGo(client, it);
      ++released;
    }
    // A lost batch let go is lost for good: the sequence floor passes it, and the client
    // stops waiting for it.
    released += static_cast<int64_t>(std::erase_if(
        client.lost, [slab](const ReadyBatch& lost) { return lost.slab.get() == slab; }));
  }
  for (auto& [consumer, rounds] : kept_rounds_) {
    for (auto it = rounds.begin(); it != rounds.end();) {
      if (it->second.slab.get() != slab) {
        ++it;
        continue;
      }
      NoteRoundLetGo(consumer, it->first);
      it = rounds.erase(it);
      ++released;
    }
  }
  stats_.kept_batches_released += released;
  return true;
}

void TaskRunner::ForgetClients(const absl::flat_hash_set<int64_t>& readers,
                               absl::Time quiet_since) {
  std::vector<Waiter> to_retry;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = deliveries_.begin(); it != deliveries_.end();) {
      auto& [id, client] = *it;
      if (readers.contains(id) || client.last_request >= quiet_since) {
        ++it;
        continue;
      }
      // Its lost batches never reached it, so others may have them: back to the front of
      // ready_, unless the readers were all told the end (no one would take them).
      if (!(produced_all_ && ready_.empty())) {
        for (auto lost = client.lost.rbegin(); lost != client.lost.rend(); ++lost) {
          lost->sequence = 0;
          ready_.push_front(std::move(*lost));
        }
        stats_.batches_handed_on += static_cast<int64_t>(client.lost.size());
      } else {
        stats_.lost_batches_dropped += static_cast<int64_t>(client.lost.size());
      }
      for (auto waiter = waiters_.begin(); waiter != waiters_.end();) {
        if (waiter->epoch > 0 && waiter->client_id == id) {
          to_retry.push_back(std::move(*waiter));
          waiter = waiters_.erase(waiter);
        } else {
          ++waiter;
        }
      }
      ++stats_.clients_forgotten;
      it = deliveries_.erase(it);
    }
  }
  for (const Waiter& waiter : to_retry) TellToRetry(waiter);
  Serve();  // the batches handed on may be what parked requests wait for
}

void TaskRunner::Reply(const Waiter& waiter, ReadyBatch batch) {
  if (batch.size > waiter.max_batch_bytes) {
    waiter.call->Reply(absl::ResourceExhaustedError(
        absl::StrCat("batch ", batch.index, " of task ", task_.task_id(), " is ", batch.size,
                     " bytes but the client's landing buffers hold ", waiter.max_batch_bytes,
                     "; raise the client's slab size")));
    sends_in_flight_->fetch_sub(1);
    return;
  }
  proto::GetElementResponse response;
  response.set_batch_bytes(batch.size);
  response.set_batch_index(batch.index);
  if (batch.sequence > 0) {
    response.set_client_sequence(batch.sequence);
    response.set_sequence_floor(batch.sequence_floor);
    response.set_sequence_stream(batch.sequence_stream);
  }
  response.mutable_provenance()->Swap(&batch.provenance);
  if (response.ByteSizeLong() > waiter.call->max_body_with_payload()) {
    ReplyWithProvenanceInPayload(waiter, std::move(batch), std::move(response));
    return;
  }
  transport::Payload payload{batch.slab->data() + batch.offset, batch.size};
  // The slab goes back to the pool once the transport no longer reads it.
  waiter.call->Reply(absl::OkStatus(), response.SerializeAsString(), payload,
                     [in_flight = sends_in_flight_, slab = std::move(batch.slab)](absl::Status) {
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
  waiter.call->Reply(
      absl::OkStatus(), response.SerializeAsString(), transport::Payload{bytes.get(), total},
      [in_flight = sends_in_flight_, bytes](absl::Status) { in_flight->fetch_sub(1); });
}

bool TaskRunner::finished() const {
  absl::MutexLock lock(&mu_);
  for (const auto& [client_id, client] : deliveries_) {
    if (!client.lost.empty()) return false;
  }
  return produced_all_ && ready_.empty() && sends_in_flight_->load() == 0;
}

bool TaskRunner::produced_all() const {
  absl::MutexLock lock(&mu_);
  return produced_all_;
}

TaskRunnerStats TaskRunner::stats() const {
  absl::MutexLock lock(&mu_);
  TaskRunnerStats stats = stats_;
  stats.bad_records_skipped = pipeline_stats_.bad_records_skipped();
  return stats;
}

}  // namespace sluice::control
