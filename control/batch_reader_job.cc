// BatchReader's life in its job: joining it (the landing pool, the first heartbeat), the
// heartbeats that bring tasks, lost workers, the round horizon and the job's end, the
// connects to its workers (in the background), and leaving it. The data path is in
// batch_reader.cc, Next() in batch_reader_next.cc, coordinated rounds in
// batch_reader_rounds.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "control/batch_reader.h"

namespace sluice::control {
namespace {
absl::Status ReaderStopped() { return absl::CancelledError("the reader stopped"); }
}  // namespace

absl::StatusOr<std::unique_ptr<BatchReader>> BatchReader::Start(transport::RpcEndpoint* rpc,
                                                                transport::Address dispatcher,
                                                                std::string dataset_id,
                                                                const ReadOptions& options) {
  if (options.max_outstanding_requests < 1 || options.prefetch_batches < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_outstanding_requests must be >= 1 and prefetch_batches >= 0, got ",
                     options.max_outstanding_requests, " and ", options.prefetch_batches));
  }
  if (options.num_consumers < 0 ||
      (options.num_consumers > 0 &&
       (options.consumer_index < 0 || options.consumer_index >= options.num_consumers))) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected num_consumers >= 0 and 0 <= consumer_index < num_consumers, got ",
                     options.num_consumers, " and ", options.consumer_index));
  }
  if (options.max_batches < 0 || (options.max_batches > 0 && options.num_consumers > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected max_batches >= 0, and 0 with num_consumers > 0 (coordinated readers count "
        "rounds), got ",
        options.max_batches, " with num_consumers ", options.num_consumers));
  }
  std::unique_ptr<BatchReader> reader(new BatchReader(rpc, std::move(dispatcher), options));
  // Before the job is made: a pool that cannot be made leaves no job behind.
  absl::StatusOr<std::shared_ptr<transport::SlabPool>> pool = transport::SlabPool::Create(
      rpc->transport(), options.slab_bytes,
      static_cast<size_t>(int64_t{options.max_outstanding_requests} + options.prefetch_batches));
  if (!pool.ok()) {
    // Said in the reader's terms: its landing pool is one slab per request in flight and
    // per batch prefetched.
    return absl::Status(
        pool.status().code(),
        absl::StrCat("the reader's landing pool (max_outstanding_requests ",
                     options.max_outstanding_requests, " + prefetch_batches ",
                     options.prefetch_batches, " slabs of slab_bytes): ", pool.status().message()));
  }
  reader->pool_ = *std::move(pool);
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(std::move(dataset_id));
  request.set_mode(options.mode);
  request.set_job_name(options.job_name);
  request.set_num_consumers(options.num_consumers);
  request.set_consumer_index(options.consumer_index);
  proto::GetOrCreateJobResponse response;
  SLUICE_RETURN_IF_ERROR(rpc->CallProto(reader->dispatcher_, proto::GET_OR_CREATE_JOB, request,
                                        &response, options.request_timeout));
  reader->job_id_ = response.job_id();
  reader->client_id_ = response.client_id();
  reader->joined_a_finished_job_ = response.job_finished();
  {
    absl::MutexLock lock(&reader->mu_);
    reader->next_round_ = response.starting_round();
    reader->next_round_to_request_ = response.starting_round();
  }
  SLUICE_RETURN_IF_ERROR(reader->HeartbeatOnce());
  reader->heartbeat_thread_ = std::thread([r = reader.get()] {
    SetCurrentThreadName("sluice-reader");
    r->HeartbeatLoop();
    r->heartbeat_exited_.Notify();
  });
  return reader;
}

BatchReader::BatchReader(transport::RpcEndpoint* rpc, transport::Address dispatcher,
                         const ReadOptions& options)
    : rpc_(rpc), dispatcher_(std::move(dispatcher)), options_(options), started_(absl::Now()) {
  absl::MutexLock lock(&connect_waker_->mu);
  connect_waker_->reader = this;
}

BatchReader::~BatchReader() {
  stop_.Notify();
  {
    // A background connect that ends from now on finds no reader; one whose OnConnected
    // runs already counts in callbacks_running_, waited for below.
    absl::MutexLock lock(&connect_waker_->mu);
    connect_waker_->reader = nullptr;
  }
  heartbeat_pacer_.Stop();
  if (heartbeat_thread_.joinable()) {
    // A heartbeat under way to a dispatcher gone silent (its host down) would hold this
    // destructor for a request timeout: given up, again until the thread has seen the stop.
    while (!heartbeat_exited_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
      rpc_->CancelGroup(&heartbeat_pacer_, ReaderStopped());
    }
    heartbeat_thread_.join();
  }
  // Best effort: tell the dispatcher this client is gone, so the job does not wait for it
  // (a client that dies instead times out). With what it received since its last report:
  // a released client's reports are no longer waited for, so those elements would be read
  // again by the job's other readers should their worker be lost.
  proto::ReleaseClientRequest release;
  release.set_job_id(job_id_);
  release.set_client_id(client_id_);
  {
    absl::MutexLock lock(&mu_);
    release.mutable_delivered()->Swap(&unreported_);
  }
  proto::ReleaseClientResponse released;
  if (client_id_ != 0) {  // 0: Start failed before the job was joined
    (void)rpc_->CallProto(dispatcher_, proto::RELEASE_CLIENT, release, &released, absl::Seconds(1));
  }
  // Calls in flight hold `this` in their callbacks; each ends by reply, failure or deadline.
  // Replies on their way are waited for: cancelling those would leave their payloads
  // landing while the transport may be torn down next (UCX 1.13 aborts on an endpoint
  // destroyed mid-receive). Requests still parked at a worker after kStopGrace (a
  // coordinated round waiting for the other consumers, up to the round wait) are cancelled.
  // A reply still landing a request timeout later is stuck (its worker cut off where nothing
  // noticed): its connection is given up, as for a lost worker, so that the call fails with
  // its slab quarantined instead of holding this destructor for ever.
  const absl::Time give_up_landing_at = absl::Now() + options_.request_timeout;
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return outstanding_ == 0 && callbacks_running_ == 0;
  };
  while (!mu_.AwaitWithTimeout(absl::Condition(&idle), kStopGrace)) {
    std::vector<transport::ConnectionId> stuck;
    if (absl::Now() >= give_up_landing_at) {
      for (const Task& task : tasks_) {
        if (task.outstanding > 0 && task.connection != transport::kNoConnection) {
          stuck.push_back(task.connection);
        }
      }
    }
    mu_.Unlock();
    rpc_->CancelGroup(this, ReaderStopped());
    for (transport::ConnectionId connection : stuck) {
      rpc_->Disconnect(connection,
                       absl::UnavailableError("the reader stopped; a reply was still landing a "
                                              "request timeout later"));
    }
    mu_.Lock();
  }
  // Slabs a receive may still land in (and so their pool) outlive this reader until the
  // transport is destroyed: unmapped or reused, they would take that write elsewhere.
  if (!quarantined_slabs_.empty()) {
    rpc_->transport().HoldUntilDestroyed(
        std::make_shared<std::vector<transport::Slab>>(std::move(quarantined_slabs_)));
  }
}

absl::Status BatchReader::HeartbeatOnce(absl::Duration timeout) {
  proto::ClientHeartbeatRequest request;
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  {
    absl::MutexLock lock(&mu_);
    // Deliveries first, then the abandoned tasks: the dispatcher re-issues a lost task's
    // splits only once it has every delivery this client got from it.
    request.mutable_delivered()->Swap(&unreported_);
    request.set_current_round(next_round_);
    horizon_beat_asked_ = false;
    for (const Task& task : tasks_) {
      if (task.lost) request.add_abandoned_tasks(task.id);
    }
    for (int64_t id : lost_unread_) request.add_abandoned_tasks(id);
  }
  proto::ClientHeartbeatResponse response;
  absl::Status called = rpc_->CallProto(dispatcher_, proto::CLIENT_HEARTBEAT, request, &response,
                                        timeout, &heartbeat_pacer_);
  if (!called.ok()) {
    absl::MutexLock lock(&mu_);
    // Report them next time (a report that did arrive twice is harmless).
    request.mutable_delivered()->MergeFrom(unreported_);
    unreported_.Swap(request.mutable_delivered());
    return called;
  }
  std::vector<Task> added;
  std::vector<std::pair<transport::ConnectionId, std::string>> given_up;
  std::vector<std::string> lost_workers;  // for on_worker_lost, called without the lock
  absl::Status bad_address;
  {
    absl::MutexLock lock(&mu_);
    // Lost before this reader held them (it joined after the loss, or the dispatcher
    // restarted and waits for every client it restored): never read here, so abandoned
    // with every heartbeat while listed, or the re-issue of their splits waits on this one.
    lost_unread_.clear();
    for (int64_t lost : response.lost_tasks()) {
      const bool held =
          std::any_of(tasks_.begin(), tasks_.end(),
                      [lost](const Task& t) { return t.id == lost; }) ||
          std::any_of(response.tasks().begin(), response.tasks().end(),
                      [lost](const proto::TaskInfo& t) { return t.task_id() == lost; });
      if (!held) lost_unread_.push_back(lost);
    }
    for (int64_t lost : response.lost_tasks()) {
      for (Task& task : tasks_) {
        if (task.id == lost && !task.lost) {
          task.lost = true;
          task.ended = true;
          ++tasks_lost_;
          lost_workers.push_back(*task.worker_text);
          HandOutHeld(task);
          if (task.connection != transport::kNoConnection) {
            given_up.emplace_back(task.connection, *task.worker_text);
          }
        }
      }
    }
    for (int64_t gone : response.gone_tasks()) {
      for (Task& task : tasks_) {
        if (task.id == gone && !task.ended) {
          // Read to its end by the job's readers, its worker gone since: no end will come
          // from it, and nothing of it is lost (not counted, not said).
          task.ended = true;
          HandOutHeld(task);
          if (task.connection != transport::kNoConnection) {
            given_up.emplace_back(task.connection, *task.worker_text);
          }
        }
      }
    }
    for (const proto::TaskInfo& info : response.tasks()) {
      bool known = false;
      for (Task& t : tasks_) {
        if (t.id != info.task_id()) continue;
        known = true;
        t.ending_round = info.ending_round();  // set once its worker is lost
      }
      if (known) continue;
      absl::StatusOr<transport::Address> worker = transport::ParseAddress(info.worker_address());
      if (!worker.ok()) {
        // The rest of the reply (losses above, other tasks, the horizon) still applies.
        if (bad_address.ok()) {
          bad_address = absl::DataLossError(
              absl::StrCat("the dispatcher named worker '", info.worker_address(), "' for task ",
                           info.task_id(), ": ", worker.status().message()));
        }
        continue;
      }
      Task task{info.task_id(), *worker,
                std::make_shared<const std::string>(info.worker_address())};
      task.starting_round = info.starting_round();
      task.ending_round = info.ending_round();
      task.recovery = info.recovery();
      task.lost = info.lost();
      task.ended = info.lost();
      added.push_back(std::move(task));
    }
  }
  // A lost worker may be alive behind a partition, where nothing ever closes the connection:
  // stop waiting for its replies now rather than at their deadline (its splits are re-issued
  // to others, and this client's abandonment is what lets the dispatcher do so).
  // By connection, not by address: a worker restarted on the same address may already be
  // served over a new connection, by this reader or another one sharing the endpoint.
  for (const auto& [connection, text] : given_up) {
    rpc_->Disconnect(connection, absl::UnavailableError(absl::StrCat(
                                     "the dispatcher declared worker ", text, " lost")));
  }
  // Connected to now, so that a new task's first fetch finds the connection ready; in the
  // background, not here, where a worker this reader cannot reach would hold every heartbeat
  // (the dispatcher's word that it is lost included) for the connect timeout.
  for (Task& task : added) {
    task.connecting = !task.lost && !rpc_->LiveConnection(task.worker).has_value();
  }
  // Each with its worker's address: set once, and tasks_ only grows (a deque), so it stays
  // valid and is read without the lock, where tasks_[i] would race a push_back.
  std::vector<std::pair<size_t, const transport::Address*>> to_connect;
  std::vector<std::string> awaited_workers;  // for on_worker_awaited, called without the lock
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    std::map<std::string, absl::Time> awaited;
    for (const std::string& worker : response.workers_awaited()) {
      auto known = awaited_since_.find(worker);
      const absl::Time since = known != awaited_since_.end() ? known->second : now;
      awaited.emplace(worker, since);
      if (now - since >= kAwaitedNoticeAfter && awaited_said_.insert(worker).second) {
        awaited_workers.push_back(worker);
      }
    }
    awaited_since_ = std::move(awaited);
    workers_listed_ = response.num_workers();
    for (Task& task : added) {
      // Another heartbeat, replied to meanwhile, may have added it.
      const bool known = std::any_of(tasks_.begin(), tasks_.end(),
                                     [&task](const Task& t) { return t.id == task.id; });
      if (known) continue;
      if (task.lost) {  // lost before this reader joined
        ++tasks_lost_;
        lost_workers.push_back(*task.worker_text);
      }
      const bool connect = task.connecting;
      tasks_.push_back(std::move(task));
      if (connect) to_connect.emplace_back(tasks_.size() - 1, &tasks_.back().worker);
    }
    // A task that cannot be read fails the read, but the dispatcher did answer: this is no
    // lost dispatcher (HeartbeatLoop) and the rest of the reply applies.
    if (!bad_address.ok()) Fail(bad_address);
    // Only now that the task list is current may rounds up to the horizon be read.
    round_horizon_ = std::max(round_horizon_, response.round_horizon());
    horizon_lead_ = round_horizon_ - request.current_round();
    // Failed here, not returned: the dispatcher answered, so HeartbeatLoop must not count
    // this as losing it (which failed the read a request_timeout later, and said so).
    if (tasks_.empty() && response.num_workers() == 0 &&
        absl::Now() - started_ > options_.no_worker_timeout) {
      Fail(absl::UnavailableError(absl::StrCat("no worker joined job ", job_id_, " within ",
                                               absl::FormatDuration(options_.no_worker_timeout))));
    }
  }
  for (const auto& [task_index, worker] : to_connect) ConnectInBackground(task_index, *worker);
  if (options_.on_worker_lost) {
    std::sort(lost_workers.begin(), lost_workers.end());
    lost_workers.erase(std::unique(lost_workers.begin(), lost_workers.end()), lost_workers.end());
    for (const std::string& worker : lost_workers) options_.on_worker_lost(worker);
  }
  if (options_.on_worker_awaited) {
    for (const std::string& worker : awaited_workers) options_.on_worker_awaited(worker);
  }
  if (response.job_finished()) {
    // Only now: a caller hears of the losses that let the job finish (on_worker_lost)
    // before Next() says it finished. A finished job stays finished, whatever an older
    // reply to a concurrent heartbeat says.
    absl::MutexLock lock(&mu_);
    job_finished_ = true;
  }
  return absl::OkStatus();
}

void BatchReader::ConnectInBackground(size_t task_index, const transport::Address& worker) {
  rpc_->ConnectInBackground(worker, [waker = connect_waker_, task_index](
                                        absl::StatusOr<transport::ConnectionId> connected) {
    BatchReader* reader;
    {
      absl::MutexLock lock(&waker->mu);
      reader = waker->reader;
      if (reader == nullptr) return;
      // Counted before the waker lets go: ~BatchReader, once past clearing the waker,
      // waits for it.
      absl::MutexLock reader_lock(&reader->mu_);
      ++reader->callbacks_running_;
    }
    reader->OnConnected(task_index, connected);
  });
}

void BatchReader::OnConnected(size_t task_index,
                              const absl::StatusOr<transport::ConnectionId>& connected) {
  {
    absl::MutexLock lock(&mu_);
    Task& task = tasks_[task_index];
    task.connecting = false;
    const absl::Time now = absl::Now();
    if (connected.ok()) {
      task.retry_at = absl::InfinitePast();
      task.connected_unused = true;
    } else if (BearUnreachable(task, connected.status(), now)) {
      task.retry_at = now + kUnreachableBackoff;
    } else if (!task.lost && !task.ended && !task.end_seen) {
      Fail(absl::Status(connected.status().code(),
                        absl::StrCat("connecting to worker ", *task.worker_text, " for task ",
                                     task.id, ": ", connected.status().message())));
    }
    retry_scheduled_ = true;  // a Next() asleep sleeps only until the task is due
  }
  Pump();
  absl::MutexLock lock(&mu_);
  --callbacks_running_;
}

int64_t BatchReader::tasks_lost() const {
  absl::MutexLock lock(&mu_);
  return tasks_lost_;
}

int64_t BatchReader::bad_records_skipped() const {
  absl::MutexLock lock(&mu_);
  return bad_records_skipped_;
}

std::vector<std::string> BatchReader::bad_record_examples() const {
  absl::MutexLock lock(&mu_);
  return bad_record_examples_;
}

void BatchReader::HeartbeatLoop() {
  absl::Time last_success = absl::Now();
  while (heartbeat_pacer_.Wait()) {
    absl::Status status = HeartbeatOnce();
    if (status.ok()) {
      last_success = absl::Now();
    } else if (absl::IsFailedPrecondition(status)) {
      absl::MutexLock lock(&mu_);
      Fail(status);
    } else if (status.code() == absl::StatusCode::kNotFound) {
      absl::MutexLock lock(&mu_);
      Fail(absl::FailedPreconditionError(absl::StrCat(
          "the dispatcher at ", dispatcher_.ToString(), " restarted without its state (",
          status.message(), "); run it with --work-dir and --fault-tolerant to survive restarts")));
    } else if (absl::Now() - last_success > options_.request_timeout) {
      absl::MutexLock lock(&mu_);
      Fail(absl::Status(
          status.code(),
          absl::StrCat("lost the dispatcher at ", dispatcher_.ToString(), " for ",
                       absl::FormatDuration(options_.request_timeout), ": ", status.message())));
    }
    Pump();
  }
}

}  // namespace sluice::control
