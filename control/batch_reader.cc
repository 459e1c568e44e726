// BatchReader's data path: fetches kept in flight (Pump, Fetch), what their replies mean
// (Examine, OnFetched), and batches handed out in order. Next() is in batch_reader_next.cc;
// joining and leaving the job, the heartbeats and connecting to workers in
// batch_reader_job.cc; coordinated rounds in batch_reader_rounds.cc.
#include "control/batch_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "control/serialized_bytes.h"
#include "engine/pipeline_stats.h"

namespace sluice::control {
namespace {
// Failures that say the worker is gone or unreachable, not that the task failed.
bool IsUnreachable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsCancelled(status);
}
}  // namespace

void BatchReader::Pump() {
  if (options_.num_consumers > 0) {
    PumpRounds();
    return;
  }
  while (true) {
    uint64_t fetch_id;
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok() || stop_.HasBeenNotified()) return;
      if (tasks_.empty() || outstanding_ >= FetchLimit()) return;
      if (options_.max_batches > 0 && batches_kept_ + outstanding_ >= options_.max_batches) {
        // Nothing in flight or ready: batches held for order wait for one no fetch will
        // bring within the budget, and are handed out as they are rather than never.
        if (outstanding_ == 0 && ready_.empty()) {
          for (Task& task : tasks_) HandOutHeld(task);
        }
        return;
      }
      size_t n = tasks_.size();
      size_t i = 0;
      // The clock is read only for a task with a retry scheduled: none, as a rule.
      std::optional<absl::Time> now;
      auto due = [&now](const Task& task) {
        if (task.connecting) return false;
        if (task.retry_at == absl::InfinitePast()) return true;
        if (!now) now = absl::Now();
        return task.retry_at <= *now;
      };
      if (std::optional<size_t> first = FirstToRecover(); first.has_value()) {
        // ReadOptions::max_batches: a task whose reply was lost on the way is asked before
        // any other, and the others wait for it: its next request has the worker serve the
        // lost batch again (and the batches held behind it can go), where another task's
        // batch could take the last of the budget and leave the lost one with the worker.
        if (*first == n) return;  // its request is out, or not due yet
        i = (*first + n - next_task_ % n) % n;
        if (!due(tasks_[*first])) return;
      } else {
        for (; i < n; ++i) {
          const Task& candidate = tasks_[(next_task_ + i) % n];
          if (!candidate.ended && !candidate.end_seen && due(candidate)) break;
        }
      }
      if (i == n) return;
      const size_t task_index = (next_task_ + i) % n;
      std::optional<transport::Slab> free_slab = pool_->TryAcquire();
      if (!free_slab) {
        // Every slab is in flight or held. With none in flight and none ready, the held
        // ones wait for batches that cannot come now (a fetch whose slab was quarantined):
        // order is given up rather than wait for ever.
        if (outstanding_ == 0 && ready_.empty()) {
          for (Task& task : tasks_) HandOutHeld(task);
        }
        FailIfNoSlabWillComeBack();
        return;
      }
      caller_holds_every_slab_since_ = absl::InfiniteFuture();
      next_task_ = task_index + 1;
      tasks_[task_index].retry_at = absl::InfinitePast();  // due: the clock is not read again
      fetch_id = AddFetch(task_index, -1, std::move(*free_slab));
    }
    Fetch(fetch_id);
  }
}

uint64_t BatchReader::AddFetch(size_t task_index, int64_t round, transport::Slab slab) {
  uint64_t id = 0;
  InFlight* fetch = in_flight_.Add(&id);
  if (fetch == nullptr) {  // 16 M fetches in flight: not while FetchLimit bounds them
    std::fprintf(stderr, "sluice: BatchReader's table of fetches in flight is full\n");
    std::abort();
  }
  fetch->task_index = task_index;
  fetch->round = round;
  fetch->slab = std::move(slab);
  ++outstanding_;
  ++tasks_[task_index].outstanding;
  if (largest_batch_bytes_ > 0) {
    peak_fetches_after_first_batch_ = std::max(peak_fetches_after_first_batch_, outstanding_);
  }
  return id;
}

void BatchReader::Unfetch(uint64_t fetch_id) {
  InFlight* fetch = in_flight_.Find(fetch_id);
  --outstanding_;
  --tasks_[fetch->task_index].outstanding;
  // A round not asked for keeps its place, as one the worker said to ask again for does:
  // PumpRounds asks for it once its worker is connected.
  if (fetch->round >= 0) rounds_to_retry_.emplace(fetch->round, absl::InfinitePast());
  static_cast<void>(in_flight_.Erase(fetch_id));  // its slab goes back to the pool
  // A Next() driving the transport for a completion would otherwise wait for one this fetch
  // will never bring.
  fetches_completed_.fetch_add(1, std::memory_order_release);
}

std::optional<size_t> BatchReader::FirstToRecover() const {
  if (options_.max_batches == 0) return std::nullopt;
  bool any = false;
  for (size_t k = 0; k < tasks_.size(); ++k) {
    const Task& task = tasks_[k];
    if (task.ended) continue;
    // Epoch 1 is the first; a raised one not confirmed yet means a request failed since.
    // Batches held for order wait for one before them, which may be a second batch lost
    // with the same broken connection after the first reply of the new epoch confirmed it.
    // A worker that served one lost batch again may hold more (lost_left): asked for next,
    // they are not left with the worker when another task's batches spend the budget.
    const bool failed = task.delivery_epoch > std::max<int64_t>(1, task.confirmed_epoch);
    const bool owed = task.lost_left > 0;
    if (!failed && !owed && (task.end_seen || task.order.held() == 0)) continue;
    any = true;
    if (task.outstanding == 0) return k;
  }
  return any ? std::optional<size_t>(tasks_.size()) : std::nullopt;
}

int BatchReader::FetchLimit() const {
  const int limit = options_.max_outstanding_requests;
  if (options_.max_bytes_in_flight == 0 || largest_batch_bytes_ == 0) return limit;
  const size_t by_bytes = std::max<size_t>(1, options_.max_bytes_in_flight / largest_batch_bytes_);
  if (by_bytes >= static_cast<size_t>(limit)) return limit;
  // One fetch per worker that can be asked now, so that each worker's stream keeps going.
  // Workers, not tasks (a worker serving a lost task's splits too holds two), and not one
  // being connected to or backing off: Pump would send those fetches to the others, past
  // the budget (two 16 MiB batches in flight to one worker while another was unreachable).
  // Coordinated reads count a waiting worker still: PumpRounds counts the rounds that wait
  // for it against the limit, and the other workers' later rounds must go on meanwhile.
  const bool rounds = options_.num_consumers > 0;
  const absl::Time now = absl::Now();
  absl::InlinedVector<const std::string*, 8> askable;
  for (const Task& task : tasks_) {
    if (task.ended || task.end_seen || task.lost ||
        (!rounds && (task.connecting || task.retry_at > now))) {
      continue;
    }
    if (std::none_of(askable.begin(), askable.end(),
                     [&task](const std::string* worker) { return *worker == *task.worker_text; })) {
      askable.push_back(task.worker_text.get());
    }
  }
  const size_t floor = std::min<size_t>(askable.size(), limit);
  return static_cast<int>(std::max(floor, by_bytes));
}

int BatchReader::fetch_limit() const {
  absl::MutexLock lock(&mu_);
  return FetchLimit();
}

int BatchReader::peak_fetches_after_first_batch() const {
  absl::MutexLock lock(&mu_);
  return peak_fetches_after_first_batch_;
}

void BatchReader::Fetch(uint64_t fetch_id) {
  size_t task_index;
  int64_t round;
  int64_t task_id;
  int64_t epoch = 0;
  // Set when the task is added and never changed, and tasks_ only grows (a deque): read
  // outside the lock, and not copied per fetch.
  const transport::Address* worker;
  transport::ConnectionId known_connection;
  transport::PayloadDestination landing;
  // A heartbeat may declare the task lost after Pump chose it. Asked before looking up the
  // connection and again before sending: a connection stored before the loss is closed by
  // that heartbeat, and a request sent afterwards to a worker behind a partition would hold
  // its slab until the request's deadline.
  auto lost_meanwhile = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    return absl::UnavailableError(absl::StrCat("worker ", *tasks_[task_index].worker_text,
                                               " was declared lost before this request"));
  };
  bool lost;
  {
    absl::MutexLock lock(&mu_);
    const InFlight& fetch = *in_flight_.Find(fetch_id);  // only this call's thread takes it out
    task_index = fetch.task_index;
    round = fetch.round;
    const Task& task = tasks_[task_index];
    task_id = task.id;
    worker = &task.worker;
    known_connection = task.connection;
    landing = transport::PayloadDestination{fetch.slab.data(), fetch.slab.capacity()};
    lost = task.lost;
  }
  // Never a connect here: this runs on the caller's thread in Next(), on the progress
  // thread after a reply, and on the heartbeat and connect threads, and a worker the
  // dispatcher reaches but this trainer cannot would hold each for the connect timeout
  // (the caller's batches, the dispatcher's word that the worker is lost). A missing
  // connection is made in the background.
  std::optional<transport::ConnectionId> connection;
  if (!lost) connection = rpc_->LiveConnection(*worker, known_connection);
  // One message per thread, cleared (its repeated field keeps its room), serialized onto
  // the stack: a request costs no allocation (CallAsync copies it into the frame). Filled
  // from here on only, after anything that could run another fetch on this thread.
  thread_local proto::GetElementRequest request;
  request.Clear();
  absl::Status failed;
  bool ended_here = false;
  bool overtaken = false;
  {
    absl::MutexLock lock(&mu_);
    Task& task = tasks_[task_index];
    if (task.lost) {
      failed = lost_meanwhile();
    } else if (!connection.has_value()) {
      // Not sent: the fetch is taken back as if never made, so nothing about delivery
      // changes (no epoch raised, no acknowledgement taken), and the task waits for its
      // connection.
      Unfetch(fetch_id);
      if (task.end_seen && task.outstanding == 0 && !task.ended) {
        // Another request's reply said the task ended while this one was on its way here:
        // nothing is left to ask it for. Ended as OnFetched ends a task, or no one would.
        task.ended = true;
        HandOutHeld(task);
        ended_here = true;
      } else if (task.connecting) {
        return;
      } else if (std::exchange(task.connected_unused, false)) {
        const absl::Time now = absl::Now();
        const absl::Status gone = absl::UnavailableError(absl::StrCat(
            "the connection to worker ", *task.worker_text, " closed as soon as it opened"));
        if (BearUnreachable(task, gone, now)) {
          task.retry_at = now + kUnreachableBackoff;
          retry_scheduled_ = true;
        } else {
          Fail(absl::UnavailableError(
              absl::StrCat("reading task ", task.id, ": ", gone.message(), ", again for ",
                           absl::FormatDuration(options_.request_timeout))));
        }
        return;
      } else {
        task.connecting = true;
      }
    } else if (task.connection != known_connection && *connection != task.connection) {
      // Another fetch went out on a newer connection since this one looked (the one it
      // found has broken since): sent here it would fail, and raise the epoch again after
      // requests went out on the new one. Taken back and asked again.
      Unfetch(fetch_id);
      overtaken = true;
      if (task.end_seen && task.outstanding == 0 && !task.ended) {  // as OnFetched ends one
        task.ended = true;
        HandOutHeld(task);
      }
    } else {
      InFlight& fetch = *in_flight_.Find(fetch_id);
      Sent& sent = fetch.sent_request;
      // A new connection to the worker: the last one broke (or was dropped). Raised here
      // too, not only when a request fails: a call whose payload was landing fails only
      // once its receive ends, which may be after requests went out on the new connection.
      if (round < 0 && task.connection != transport::kNoConnection &&
          *connection != task.connection) {
        ++task.delivery_epoch;
      }
      if (task.delivery_epoch > task.confirmed_epoch) {
        sent.acked.assign(task.unconfirmed.begin(), task.unconfirmed.end());
      } else {
        sent.acked = task.to_carry;
      }
      task.to_carry.clear();
      sent.epoch = epoch = task.delivery_epoch;
      auto* acked =
          round >= 0 ? request.mutable_acked_rounds() : request.mutable_acked_batch_indices();
      acked->Add(sent.acked.begin(), sent.acked.end());
      fetch.sent_at = absl::Now();
      task.connection = *connection;
      task.connected_unused = false;
    }
  }
  if (!failed.ok()) {
    OnFetched(fetch_id, failed);
    return;
  }
  if (ended_here || overtaken) {
    Pump();
    return;
  }
  if (!connection.has_value()) {
    ConnectInBackground(task_index, *worker);
    return;
  }
  request.set_task_id(task_id);
  request.set_client_id(client_id_);
  request.set_max_batch_bytes(landing.capacity);
  request.set_delivery_epoch(epoch);
  if (round >= 0) {
    request.set_coordinated(true);
    request.set_consumer_index(options_.consumer_index);
    request.set_round(round);
  }
  transport::CallOptions call_options;
  call_options.timeout = options_.request_timeout;
  call_options.landing = landing;
  call_options.group = this;
  request.ByteSizeLong();
  char stack[256];
  std::string heap;  // a request with many acknowledgements
  rpc_->CallAsync(*connection, proto::GET_ELEMENT, SerializeCached(request, stack, heap),
                  call_options, [this, fetch_id](absl::StatusOr<transport::CallResult> result) {
                    OnFetched(fetch_id, std::move(result));
                  });
}

bool BatchReader::BearUnreachable(Task& task, const absl::Status& status, absl::Time now) {
  if (!IsUnreachable(status) ||
      now - std::min(task.unreachable_since, now) >= options_.request_timeout) {
    return false;
  }
  // Perhaps the worker died: wait for the dispatcher to say so, or for it to answer.
  task.unreachable_since = std::min(task.unreachable_since, now);
  return true;
}

BatchReader::FetchOutcome BatchReader::Examine(Task& task, const transport::Slab& slab,
                                               const absl::StatusOr<transport::CallResult>& result,
                                               int64_t round, absl::Time now,
                                               proto::GetElementResponse* response) {
  // Named in errors only: not made for every reply.
  auto what = [&task, round] {
    return round >= 0 ? absl::StrCat("round ", round) : absl::StrCat("task ", task.id);
  };
  if (!result.ok() && BearUnreachable(task, result.status(), now)) {
    return FetchOutcome::kUnreachable;
  }
  if (!result.ok()) {
    Fail(absl::Status(result.status().code(),
                      absl::StrCat("reading ", what(), " from worker ", *task.worker_text, ": ",
                                   result.status().message())));
    return FetchOutcome::kFailed;
  }
  if (!response->ParseFromArray(result->response.data(),
                                static_cast<int>(result->response.size()))) {
    Fail(absl::DataLossError(
        absl::StrCat("malformed GetElementResponse from worker ", *task.worker_text)));
    return FetchOutcome::kFailed;
  }
  // Any answer shows the worker reachable, a "retry later" too: an unreachable spell counted
  // from before it would fail the read at the next hiccup (a connect another thread makes).
  task.unreachable_since = absl::InfiniteFuture();
  // Each reply carries the task's running count: a reply that overtook a later one carries
  // less, and adds nothing.
  if (response->bad_records_skipped() > task.bad_records_skipped) {
    bad_records_skipped_ += response->bad_records_skipped() - task.bad_records_skipped;
    task.bad_records_skipped = response->bad_records_skipped();
  }
  // Each is kept once: every request in flight at a task's end is answered with its
  // examples, and tasks that read the same file (OFF: every worker reads all of it) skip
  // the same records.
  for (const std::string& example : response->bad_record_examples()) {
    if (bad_record_examples_.size() >= engine::kBadRecordExamples) break;
    if (std::find(bad_record_examples_.begin(), bad_record_examples_.end(), example) ==
        bad_record_examples_.end()) {
      bad_record_examples_.push_back(example);
    }
  }
  if (response->task_error_code() != 0) {
    const int code = response->task_error_code();
    Fail(absl::Status(code > 0 && code <= static_cast<int>(absl::StatusCode::kUnauthenticated)
                          ? static_cast<absl::StatusCode>(code)
                          : absl::StatusCode::kUnknown,
                      absl::StrCat("reading ", what(), " from worker ", *task.worker_text, ": ",
                                   response->task_error_message())));
    return FetchOutcome::kFailed;
  }
  const bool carries_batch = !response->retry_later() && !response->end_of_sequence();
  const uint64_t provenance_bytes = response->provenance_bytes_in_payload();
  if (carries_batch && (response->batch_bytes() > result->payload.size ||
                        result->payload.size - response->batch_bytes() != provenance_bytes ||
                        provenance_bytes > static_cast<uint64_t>(std::numeric_limits<int>::max()) ||
                        (provenance_bytes > 0 && response->provenance_size() > 0) ||
                        result->payload.data != slab.data())) {
    Fail(absl::DataLossError(absl::StrCat("worker ", *task.worker_text, " announced a batch of ",
                                          response->batch_bytes(), " bytes and ", provenance_bytes,
                                          " of provenance, but ", result->payload.size,
                                          " bytes arrived")));
    return FetchOutcome::kFailed;
  }
  if (carries_batch && provenance_bytes > 0) {
    proto::BatchProvenance provenance;
    if (!provenance.ParseFromArray(slab.data() + response->batch_bytes(),
                                   static_cast<int>(provenance_bytes))) {
      Fail(absl::DataLossError(
          absl::StrCat("malformed batch provenance from worker ", *task.worker_text)));
      return FetchOutcome::kFailed;
    }
    response->mutable_provenance()->Swap(provenance.mutable_runs());
  }
  return FetchOutcome::kReply;
}

void BatchReader::OnFetched(uint64_t fetch_id, absl::StatusOr<transport::CallResult>&& result) {
  // Runs whatever the body below leaves to do, then marks this callback finished: the last
  // touch of `this`.
  struct Finish {
    BatchReader* reader;
    ~Finish() {
      absl::MutexLock lock(&reader->mu_);
      --reader->callbacks_running_;
    }
  };
  Finish finish{this};  // declared first: its lock is the last touch
  bool pump;
  transport::ConnectionId to_drop;
  {
    absl::MutexLock lock(&mu_);
    --outstanding_;
    ++callbacks_running_;
    if (result.ok()) largest_batch_bytes_ = std::max(largest_batch_bytes_, result->payload.size);
    // Read in place and erased below (nothing else changes the table meanwhile): moving it
    // out was a copy of its acknowledgements per batch.
    InFlight* fetch = in_flight_.Find(fetch_id);
    // The RPC layer completes each call once, and only here (or by Unfetch, for a fetch
    // never sent) is it erased.
    if (fetch == nullptr) {
      std::fprintf(stderr, "sluice: a fetch's reply came twice\n");
      std::abort();
    }
    const int64_t round = fetch->round;
    const absl::Time sent = fetch->sent_at;
    const Sent& request = fetch->sent_request;
    transport::Slab slab = std::move(fetch->slab);
    Task& task = tasks_[fetch->task_index];
    --task.outstanding;
    if (!result.ok() && transport::LandingMayStillBeWritten(result.status())) {
      // A receive the transport could not cancel may still land in this slab: it leaves
      // circulation for good (at most one slab per such fetch; see docs/design.md).
      quarantined_slabs_.push_back(std::move(slab));
      slab = transport::Slab();
    }
    pump = round >= 0 ? OnRoundFetched(task, std::move(slab), sent, result, round, request)
                      : OnTaskFetched(task, std::move(slab), sent, result, request);
    if (task.end_seen && task.outstanding == 0 && !task.ended) {
      task.ended = true;
      HandOutHeld(task);
      pump = true;
    }
    static_cast<void>(in_flight_.Erase(fetch_id));  // found above
    to_drop = std::exchange(connection_to_drop_, transport::kNoConnection);
    // Under mu_: a reader reads `seen` under it too, so a change always means a completion
    // after that read, and the wait counters count only waits that ended in one (or in a
    // fetch taken back unsent, Unfetch: rare, a worker not connected yet).
    fetches_completed_.fetch_add(1, std::memory_order_release);
  }
  if (to_drop != transport::kNoConnection) {
    rpc_->Disconnect(to_drop, absl::UnavailableError("connection dropped by fault injection "
                                                     "(ReadOptions::disconnect_every_batches)"));
  }
  if (pump) Pump();
}

bool BatchReader::OnTaskFetched(Task& task, transport::Slab slab, absl::Time sent,
                                const absl::StatusOr<transport::CallResult>& result,
                                const Sent& request) {
  if (task.lost) return false;  // its splits are re-issued; this batch is not delivered
  // A failed request may have lost a batch on the way: the next request says so (and the
  // task is read on, whatever end another reply announced).
  if (!result.ok()) {
    // Raised once per break as the worker sees it: by the first failed request of the
    // current epoch, and by the first request on a new connection (Fetch). After a break
    // no request goes out under the first of the two, so the worker sees one step. A request sent
    // before an earlier raise is covered by it: the worker counts a batch served under an older
    // epoch lost once the newer one reaches it, and serves a request of an older epoch nothing.
    // Raised again, the worker would also take batches served on the new connection for lost, and
    // let those it had let go pass the sequence floor while their replies were still on their way:
    // handed out after later ones (a CI run saw it).
    if (request.epoch >= task.delivery_epoch) ++task.delivery_epoch;
    task.end_seen = false;
    // Whatever requests in flight carry may be lost with this one: all go again.
    task.CarryAllAgain();
  }
  const absl::Time now = absl::Now();
  proto::GetElementResponse response;
  switch (Examine(task, slab, result, /*round=*/-1, now, &response)) {
    case FetchOutcome::kUnreachable:
      task.retry_at = now + kUnreachableBackoff;
      return false;
    case FetchOutcome::kFailed:
      return false;
    case FetchOutcome::kReply:
      break;
  }
  // retry_later: the worker does not run the task yet, the request was of an epoch it has
  // left behind, or it held too many requests (or forgot this client) and let this one go.
  // The acknowledgements stay unconfirmed and go again with the next request: taking them
  // twice is harmless.
  if (response.retry_later()) {
    task.CarryAllAgain();
    // Said to a client owed nothing (a request of one owed is served what it lost): a
    // lost_left left from an earlier reply would have FirstToRecover wait on this task.
    // Not so a request of an epoch left behind: the worker tells those to retry whatever
    // it owes, and may have sent one of this epoch a lost batch just before.
    if (request.epoch >= task.delivery_epoch) task.lost_left = 0;
    // Asked again after a short pause, not at round-trip rate: the worker learns the task
    // at its next heartbeat (it asks for one early), which may take a while.
    task.retry_at = now + kTaskRetryLater;
    retry_scheduled_ = true;
    return false;
  }
  // Any other reply means the task took the acknowledgements the request carried.
  std::erase_if(task.unconfirmed, [&request](int64_t index) {
    return std::find(request.acked.begin(), request.acked.end(), index) != request.acked.end();
  });
  task.confirmed_epoch = std::max(task.confirmed_epoch, request.epoch);
  // The worker's count as of this reply; one to a request of an earlier epoch predates the
  // loss, or crossed a newer reply.
  if (request.epoch >= task.delivery_epoch) task.lost_left = response.lost_left();
  if (response.end_of_sequence()) {
    // Ended once no other request to it is in flight (OnFetched): their replies may still
    // carry batches, and should their connection break, the worker serves those again only
    // to a later request. Only an end said to the current epoch counts: a request sent
    // before another one failed cannot have made the worker serve the lost batch again.
    if (request.epoch >= task.delivery_epoch) task.end_seen = true;
    return true;
  }
  const int64_t index = response.batch_index();
  if (std::find(task.unconfirmed.begin(), task.unconfirmed.end(), index) !=
      task.unconfirmed.end()) {
    // Served again although it arrived: the acknowledgement and the worker's resend crossed.
    return true;  // the slab goes back to the pool
  }
  // Acknowledged even when dropped as handed out already: that stops further resends.
  task.unconfirmed.push_back(index);
  task.to_carry.push_back(index);
  if (response.client_sequence() > 0 &&
      task.order.HandedOut(response.sequence_stream(), response.client_sequence())) {
    return true;  // a resend that crossed the acknowledgement; the slab goes back to the pool
  }
  if (options_.disconnect_every_batches > 0 &&
      ++batches_accepted_ % options_.disconnect_every_batches == 0) {
    connection_to_drop_ = task.connection;
  }
  unreported_.MergeFrom(response.provenance());
  ++batches_kept_;
  HandOutInOrder(task,
                 Ready{task.worker_text, response.batch_index(), std::move(slab),
                       response.batch_bytes(), now - sent, /*round=*/-1, task.id},
                 response);
  return true;
}

void BatchReader::HandOutInOrder(Task& task, Ready ready,
                                 const proto::GetElementResponse& response) {
  if (response.client_sequence() <= 0) {  // not numbered (the client does not acknowledge)
    ready_.push_back(std::move(ready));
    return;
  }
  task.order.Add(response.sequence_stream(), response.client_sequence(), response.sequence_floor(),
                 std::move(ready), [this](Ready due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                   ready_.push_back(std::move(due));
                 });
}

void BatchReader::HandOutHeld(Task& task) {
  task.order.Flush([this](Ready due)
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { ready_.push_back(std::move(due)); });
}

}  // namespace sluice::control
