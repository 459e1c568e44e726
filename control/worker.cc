#include "control/worker.h"

#include <netdb.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/destroy_in_place.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "control/lease_sizer.h"
#include "control/proto_handler.h"
#include "transport/payload_retention.h"

namespace sluice::control {

Worker::Worker(const WorkerOptions& options) : options_(options), task_options_(options.task) {
  task_options_.spill_budget = std::make_shared<SpillBudget>(options.max_spilled_bytes);
  task_options_.on_slabs_short = [this](const TaskRunner* short_of_slabs, absl::Duration waited) {
    FreeSlabsFor(short_of_slabs, waited);
  };
  // The integration tests have every task check its count of kept slabs against a walk of
  // its kept batches (tests/meson.build); too slow for production.
  const char* verify = std::getenv("SLUICE_VERIFY_KEPT_SLABS");
  if (verify != nullptr && std::string_view(verify) == "1") task_options_.verify_kept_slabs = true;
}
namespace {

// Fetches DYNAMIC splits of one task from the dispatcher, several per round trip, as many
// as LeaseSizer says (tf.data pays one dispatcher RPC per split; tensorflow/tensorflow#70541).
class RemoteSplitFeed final : public engine::SplitFeed {
 public:
  RemoteSplitFeed(transport::RpcEndpoint* rpc, transport::Address dispatcher,
                  const proto::TaskDef& task, absl::Duration timeout, LeaseSizer lease_sizer,
                  absl::Duration outage_timeout)
      : rpc_(rpc),
        dispatcher_(std::move(dispatcher)),
        task_(task),
        timeout_(timeout),
        lease_sizer_(lease_sizer),
        outage_timeout_(outage_timeout) {}

  // `pass` counts the pipeline's passes over the source; the dispatcher's repetition may be
  // ahead of it (GetSplitResponse.next_repetition), and the passes after follow on.
  absl::Status GetNext(int64_t pass, proto::Split* split, bool* end_of_splits) override {
    if (pass != pass_) {  // a new pass over the source: leases are per pass
      repetition_ = pass_ < 0 ? pass : std::max<int64_t>(0, repetition_ + (pass - pass_));
      pass_ = pass;
      read_in_pass_ = false;
      skips_in_pass_ = 0;
      ResetLeases();
    }
    while (leased_.empty() && !exhausted_) {
      proto::GetSplitRequest request;
      request.set_job_id(task_.job_id());
      request.set_task_id(task_.task_id());
      request.set_repetition(repetition_);
      request.set_max_splits(lease_sizer_.Next(absl::Now()));
      request.set_lease_seq(++lease_seq_);
      proto::GetSplitResponse response;
      if (absl::Status called = CallWithRetry(request, &response); !called.ok()) {
        failed_.store(true, std::memory_order_release);
        return called;
      }
      lease_sizer_.Arrived(absl::Now());
      leased_.assign(response.splits().begin(), response.splits().end());
      exhausted_ = response.end_of_splits();
      source_empty_.store(response.source_empty(), std::memory_order_relaxed);
      // An empty pass would end a repeat(): go on to the repetition the dispatcher names
      // (bounded, in case others keep exhausting them first).
      if (leased_.empty() && !read_in_pass_ && response.next_repetition() > repetition_ &&
          ++skips_in_pass_ <= kMaxSkipsPerPass) {
        repetition_ = response.next_repetition();
        ResetLeases();
        continue;
      }
      break;
    }
    *end_of_splits = leased_.empty();
    read_in_pass_ = read_in_pass_ || !*end_of_splits;
    if (!*end_of_splits) {
      *split = std::move(leased_.front());
      leased_.pop_front();
    }
    return absl::OkStatus();
  }

  bool source_empty() const override { return source_empty_.load(std::memory_order_relaxed); }
  void Cancel() override { cancelled_.Notify(); }
  bool failed() const override { return failed_.load(std::memory_order_acquire); }

 private:
  static constexpr int kMaxSkipsPerPass = 8;

  void ResetLeases() {
    leased_.clear();
    exhausted_ = false;
    lease_seq_ = 0;
    lease_sizer_.NewPass();
  }

  // Rides through a dispatcher restart: transient failures are retried with backoff (the
  // same lease_seq, so a lease whose reply was lost comes back, not a new one) until
  // `outage_timeout`. Errors that a retry cannot fix end the task.
  absl::Status CallWithRetry(const proto::GetSplitRequest& request,
                             proto::GetSplitResponse* response) {
    const absl::Time give_up = absl::Now() + outage_timeout_;
    absl::Duration backoff = absl::Milliseconds(20);
    while (true) {
      absl::Status status =
          rpc_->CallProto(dispatcher_, proto::GET_SPLIT, request, response, timeout_);
      if (status.ok()) return status;
      if (absl::IsNotFound(status)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the dispatcher at ", dispatcher_.ToString(), " no longer knows job ", task_.job_id(),
            " (", status.message(),
            "); it restarted without its state: run it with --work-dir and --fault-tolerant"));
      }
      // Aborted: the dispatcher gave this task up (its worker looked dead); retrying cannot
      // bring it back.
      if (absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status) ||
          absl::IsAborted(status) || absl::IsPermissionDenied(status) || absl::IsDataLoss(status) ||
          absl::Now() + backoff > give_up) {
        return status;
      }
      if (cancelled_.WaitForNotificationWithTimeout(backoff)) {
        return absl::CancelledError("worker is shutting down");
      }
      backoff = std::min(backoff * 2, absl::Seconds(1));
    }
  }

  transport::RpcEndpoint* rpc_;
  transport::Address dispatcher_;
  std::atomic<bool> failed_{false};
  proto::TaskDef task_;
  absl::Duration timeout_;
  LeaseSizer lease_sizer_;
  int64_t pass_ = -1;
  int64_t repetition_ = 0;     // the dispatcher's repetition this pass leases from
  bool read_in_pass_ = false;  // a split of this pass was handed out
  // The dispatcher's word on the last lease: read by the repeat, perhaps on another thread
  // (a prefetch under it leases), after the pass ended.
  std::atomic<bool> source_empty_{false};
  int skips_in_pass_ = 0;
  std::deque<proto::Split> leased_;
  bool exhausted_ = false;
  int64_t lease_seq_ = 0;
  absl::Duration outage_timeout_;
  absl::Notification cancelled_;
};

// Adds one task's counters to a worker's.
void AddTaskStats(const TaskRunnerStats& task, proto::WorkerStats* worker) {
  worker->set_batches_served(worker->batches_served() + task.batches_served);
  worker->set_bytes_served(worker->bytes_served() + task.bytes_served);
  worker->set_bytes_assembled(worker->bytes_assembled() + task.bytes_assembled);
  worker->set_bad_records_skipped(worker->bad_records_skipped() + task.bad_records_skipped);
  worker->set_bytes_reused(worker->bytes_reused() + task.bytes_reused);
  worker->set_buffer_full_waits(worker->buffer_full_waits() + task.buffer_full_waits);
  worker->set_batches_redelivered(worker->batches_redelivered() + task.batches_redelivered);
  worker->set_kept_batches_released(worker->kept_batches_released() + task.kept_batches_released);
  worker->set_batches_with_provenance_in_payload(worker->batches_with_provenance_in_payload() +
                                                 task.batches_with_provenance_in_payload);
  worker->set_clients_forgotten(worker->clients_forgotten() + task.clients_forgotten);
  worker->set_parked_requests_evicted(worker->parked_requests_evicted() +
                                      task.parked_requests_evicted);
  worker->set_requests_held_too_long(worker->requests_held_too_long() +
                                     task.requests_held_too_long);
  worker->set_batches_handed_on(worker->batches_handed_on() + task.batches_handed_on);
  worker->set_lost_batches_dropped(worker->lost_batches_dropped() + task.lost_batches_dropped);
  worker->set_unacked_batches_forgotten(worker->unacked_batches_forgotten() +
                                        task.unacked_batches_forgotten);
  worker->set_acknowledgements_received(worker->acknowledgements_received() +
                                        task.acknowledgements_received);
  worker->set_breaks_reported(worker->breaks_reported() + task.breaks_reported);
  worker->set_slab_waits(worker->slab_waits() + task.slab_waits);
  worker->set_bytes_assembled_unserved(worker->bytes_assembled_unserved() +
                                       task.bytes_assembled_unserved);
  worker->set_batches_spilled(worker->batches_spilled() + task.batches_spilled);
  worker->set_bytes_spilled(worker->bytes_spilled() + task.bytes_spilled);
}

bool Resolves(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (result != nullptr) freeaddrinfo(result);
  return rc == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Worker>> Worker::Start(const WorkerOptions& options) {
  std::unique_ptr<Worker> worker(new Worker(options));
  absl::BitGen gen;
  worker->uid_ = absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
  transport::RpcOptions rpc_options;
  rpc_options.scheme = options.bind.scheme;
  rpc_options.transport = options.transport;
  rpc_options.transport.connect_timeout = options.dispatcher_timeout;
  SLUICE_ASSIGN_OR_RETURN(worker->rpc_, transport::RpcEndpoint::Create(rpc_options));
  SLUICE_ASSIGN_OR_RETURN(worker->pool_,
                          transport::SlabPool::Create(worker->rpc_->transport(), options.slab_bytes,
                                                      options.num_slabs));
  Worker* w = worker.get();
  // GetElement never blocks (a call without a ready batch is parked), so it runs on the
  // progress thread and its reply leaves without a thread hand-off.
  w->rpc_->Handle(
      proto::GET_ELEMENT, [w](auto call) { w->HandleGetElement(std::move(call)); },
      transport::HandlerThread::kInline);
  SLUICE_ASSIGN_OR_RETURN(transport::Address bound, w->rpc_->Listen(options.bind));
  // Told again before each try: the IP facing a dispatcher whose name did not resolve yet
  // would be loopback.
  auto advertise = [&] {
    std::string host = options.advertise_host.empty()
                           ? transport::LocalAddressFacing(options.dispatcher.host)
                           : options.advertise_host;
    w->address_ = transport::Address{bound.scheme, host, bound.port}.ToString();
  };
  advertise();
  // The first heartbeat registers the worker; failing it fails start-up with its reason,
  // once a dispatcher out of reach (or whose name does not resolve yet: a cluster's DNS
  // record may come with the dispatcher) has had register_timeout to come up.
  auto may_come_up = [&options](const absl::Status& status) {
    return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
           (absl::IsInvalidArgument(status) && !Resolves(options.dispatcher.host));
  };
  absl::Status registered = w->Heartbeat();
  const absl::Time give_up = absl::Now() + options.register_timeout;
  while (may_come_up(registered) && absl::Now() < give_up) {
    if (!options.on_register_retry) {
      absl::SleepFor(absl::Seconds(1));
    } else if (!options.on_register_retry(registered)) {
      break;
    }
    advertise();
    registered = w->Heartbeat();
  }
  if (absl::IsUnimplemented(registered)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker could not register: ", options.dispatcher.ToString(),
        " is not a dispatcher (it does not answer WorkerHeartbeat: another worker's address?)"));
  }
  if (!registered.ok()) {
    return absl::Status(registered.code(),
                        absl::StrCat("worker could not register with the dispatcher at ",
                                     options.dispatcher.ToString(), ": ", registered.message()));
  }
  w->heartbeat_thread_ = std::thread([w] {
    SetCurrentThreadName("sluice-beat");
    w->HeartbeatLoop();
  });
  return worker;
}

Worker::~Worker() {
  heartbeat_pacer_.Stop();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  SayLeaving();
  std::map<int64_t, std::shared_ptr<TaskRunner>> runners;
  std::vector<std::shared_ptr<TaskRunner>> removing;
  {
    absl::MutexLock lock(&mu_);
    runners.swap(runners_);
    removing.swap(removing_);
  }
  // A GetElement handler on the transport's thread may hold a runner it looked up just
  // before the swap. Were its copy the last, ~TaskRunner would run on that thread, joining
  // a producer that may wait on it and replying through the transport torn down below.
  // Such a copy lives for one Fetch: waited out, within a bound.
  const absl::Time give_up_at = absl::Now() + absl::Seconds(5);
  auto held_elsewhere = [&runners, &removing] {
    return std::any_of(runners.begin(), runners.end(),
                       [](const auto& entry) { return entry.second.use_count() > 1; }) ||
           std::any_of(removing.begin(), removing.end(),
                       [](const auto& runner) { return runner.use_count() > 1; });
  };
  while (held_elsewhere() && absl::Now() < give_up_at) absl::SleepFor(absl::Milliseconds(1));
  // Stops producers and answers parked requests before the transport goes.
  runners.clear();
  removing.clear();
  // Not reset: its transport's thread runs handlers, which may reach rpc_, until it stops.
  DestroyInPlace(rpc_);
}

void Worker::FreeSlabsFor(const TaskRunner* except, absl::Duration waited) {
  // Coordinated consumers waiting for `except`'s round cannot read on, so its job's other
  // tasks' slabs do not come back by themselves: those go at once. Other jobs' readers
  // usually read on and acknowledge; a slab none of them gave back within
  // kOtherJobsKeepSlabsFor is held for a reader that stopped (a slow one, or a dead one
  // until its client timeout, a minute), and this task must not wait for it.
  const bool any_job = waited >= kOtherJobsKeepSlabsFor;
  if (!any_job && !except->coordinated()) return;
  const bool move_buffers = any_job && except->ReadLately(absl::Now());
  // Under mu_, not on copies of the runners: a copy whose last reference dropped here
  // would join its producer from another producer's thread (two starving producers could
  // join each other), and ~Worker could free this worker while a producer is still here.
  // A runner's lock is taken under mu_ elsewhere too (stats, Heartbeat); nothing takes mu_
  // under a runner's. One slab's kept batches of each, per wait of a starving producer: the
  // slabs come from whichever task holds them, and none loses more than the producer needs.
  // Batches a client lost stay: they are not given up for another job's sake.
  absl::MutexLock lock(&mu_);
  for (const auto& [id, runner] : runners_) {
    if (runner.get() != except && (any_job || runner->job_id() == except->job_id())) {
      (void)runner->ReleaseKeptBatch(TaskRunner::LostBatches::kKeep);
    }
  }
  // Buffered batches cannot be let go: those of tasks whose readers stopped asking move to
  // the heap, on the heartbeat thread (TaskRunner::SpillIfQuiet).
  if (move_buffers) spill_wanted_ = true;
}

proto::WorkerStats Worker::stats() {
  proto::WorkerStats stats;
  absl::MutexLock lock(&mu_);
  stats = retired_stats_;
  for (const auto& [id, runner] : runners_) {
    AddTaskStats(runner->stats(), &stats);
  }
  stats.set_transport_bytes_copied(
      static_cast<int64_t>(rpc_->transport().stats().payload_bytes_copied.load()));
  stats.set_spilled_bytes_held(static_cast<int64_t>(task_options_.spill_budget->held()));
  return stats;
}

void Worker::DestroyRemovedRunners() {
  std::vector<std::shared_ptr<TaskRunner>> unused;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = removing_.begin(); it != removing_.end();) {
      // Only copies of runners_ entries are ever made, under mu_: one no one else holds now
      // stays so.
      if (it->use_count() == 1) {
        unused.push_back(std::move(*it));
        it = removing_.erase(it);
      } else {
        ++it;
      }
    }
  }
  unused.clear();  // joins their producers, outside mu_ (a producer may want it)
}

void Worker::ListTasks(proto::WorkerHeartbeatRequest& request) const {
  for (const auto& [id, runner] : runners_) {
    request.add_current_tasks(id);
    if (runner->finished()) request.add_finished_tasks(id);
  }
}

void Worker::SayLeaving() {
  {
    absl::MutexLock lock(&mu_);
    if (dispatcher_id_.empty()) return;  // never registered: nothing to give up
  }
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address_);
  request.set_worker_uid(uid_);
  request.set_leaving(true);
  {
    // Those that ended since the last heartbeat are finished, not lost.
    absl::MutexLock lock(&mu_);
    ListTasks(request);
  }
  proto::WorkerHeartbeatResponse response;
  // A dispatcher that is gone or slow is not waited for: missed heartbeats tell it as well.
  const absl::Status told =
      rpc_->CallProto(options_.dispatcher, proto::WORKER_HEARTBEAT, request, &response,
                      std::min(options_.dispatcher_timeout, absl::Seconds(2)));
  (void)told;
}

absl::Status Worker::Heartbeat() {
  // Also while the dispatcher is unreachable: a removed runner's producer holds slabs.
  DestroyRemovedRunners();
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address_);
  request.set_worker_uid(uid_);
  *request.mutable_stats() = stats();
  {
    absl::MutexLock lock(&mu_);
    SayPoolPressureOnce(request.stats());
    ListTasks(request);
  }
  proto::WorkerHeartbeatResponse response;
  const absl::Time sent_at = absl::Now();
  SLUICE_RETURN_IF_ERROR(rpc_->CallProto(options_.dispatcher, proto::WORKER_HEARTBEAT, request,
                                         &response, options_.dispatcher_timeout));
  {
    absl::MutexLock lock(&mu_);
    if (!dispatcher_id_.empty() && response.dispatcher_id() != dispatcher_id_) {
      std::cerr << "sluice worker " << address_ << ": the dispatcher restarted without its state "
                << "(id " << dispatcher_id_ << ", now " << response.dispatcher_id()
                << "); its tasks here end and the worker registers again\n";
      // The new one numbers its tasks from 1 again: one it gives this worker may carry the
      // id of a task still running here for the old one, which would serve the old
      // pipeline's batches under it. All end now (before this response's new tasks start);
      // one it took for running because the id was listed comes as new at the next beat.
      for (auto& [id, runner] : runners_) {
        AddTaskStats(runner->stats(), &retired_stats_);
        removing_.push_back(std::move(runner));
      }
      runners_.clear();
      tasks_not_started_.clear();  // its task ids may come again, for other tasks
    }
    dispatcher_id_ = response.dispatcher_id();
  }
  // Only the tasks that fail again stay listed: one the dispatcher no longer sends (ended,
  // deleted) would keep another task under a reused id from being said.
  absl::flat_hash_map<int64_t, NotStarted> not_started;
  for (const proto::TaskDef& task : response.new_tasks()) {
    std::unique_ptr<engine::SplitFeed> feed;
    if (task.mode() == proto::DYNAMIC) {
      feed = std::make_unique<RemoteSplitFeed>(
          rpc_.get(), options_.dispatcher, task, options_.dispatcher_timeout,
          LeaseSizer(options_.splits_per_lease, options_.max_splits_per_lease,
                     options_.lease_target),
          options_.outage_timeout);
    }
    absl::StatusOr<std::unique_ptr<TaskRunner>> runner =
        TaskRunner::Start(task, pool_, std::move(feed), task_options_);
    absl::MutexLock lock(&mu_);
    if (!runner.ok()) {
      // Out of threads, most likely. The rest of the heartbeat's answer still applies, and
      // the dispatcher sends the task again (it is not among this worker's current ones):
      // said once per task, not at every try.
      NotStarted& failed = not_started[task.task_id()];
      failed.why = runner.status();
      failed.last_try = absl::Now();
      if (auto before = tasks_not_started_.find(task.task_id());
          before != tasks_not_started_.end()) {
        failed.since = before->second.since;
      } else {
        failed.since = failed.last_try;
        std::cerr << "sluice worker " << address_ << ": cannot start task " << task.task_id()
                  << ": " << runner.status().message()
                  << "; it is tried again at each heartbeat for "
                  << absl::FormatDuration(options_.task_start_timeout)
                  << ", then its readers are told\n";
      }
      continue;
    }
    runners_[task.task_id()] = *std::move(runner);
  }
  {
    absl::MutexLock lock(&mu_);
    tasks_not_started_ = std::move(not_started);
  }
  std::vector<std::shared_ptr<TaskRunner>> runners;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t id : response.tasks_to_delete()) {
      if (auto it = runners_.find(id); it != runners_.end()) {
        AddTaskStats(it->second->stats(), &retired_stats_);
        removing_.push_back(std::move(it->second));
        runners_.erase(it);
      }
    }
    for (const auto& [id, runner] : runners_) runners.push_back(runner);
  }
  DestroyRemovedRunners();
  absl::flat_hash_map<int64_t, absl::flat_hash_set<int64_t>> readers;
  for (const proto::JobClients& job : response.job_clients()) {
    readers[job.job_id()].insert(job.client_ids().begin(), job.client_ids().end());
  }
  for (const std::shared_ptr<TaskRunner>& runner : runners) {
    if (auto job = readers.find(runner->job_id()); job != readers.end()) {
      runner->ForgetClients(job->second, sent_at);
    }
  }
  return absl::OkStatus();
}

void Worker::HeartbeatLoop() {
  while (heartbeat_pacer_.Wait()) {
    {
      std::vector<std::shared_ptr<TaskRunner>> runners;
      bool spill = false;
      {
        absl::MutexLock lock(&mu_);
        for (const auto& [id, runner] : runners_) runners.push_back(runner);
        spill = std::exchange(spill_wanted_, false);
      }
      const absl::Time now = absl::Now();
      for (const auto& runner : runners) {
        runner->Poll();
        if (spill) {
          (void)runner->SpillIfQuiet(now);
        } else {
          runner->NoteQuiet(now);
        }
      }
    }
    // Slabs held for a peer that might still read them come back, even on an idle worker.
    transport::ReleaseExpiredPeerReadHolds();
    absl::Status status = Heartbeat();
    std::string message = status.ok() ? "" : std::string(status.message());
    absl::MutexLock lock(&mu_);
    // Report changes only: a dispatcher that is down must not flood the log.
    if (message != last_heartbeat_error_) {
      if (!message.empty()) {
        std::cerr << "sluice worker " << address_ << ": heartbeat failed: " << message << "\n";
      } else {
        std::cerr << "sluice worker " << address_ << ": heartbeat recovered\n";
      }
      last_heartbeat_error_ = message;
    }
  }
}

void Worker::HandleGetElement(std::shared_ptr<transport::ServerCall> call) {
  // One per thread, reused (ParseFromString clears it): a request's message and its repeated
  // field cost an allocation and a free each otherwise. Nothing below reads it once
  // TaskRunner::Fetch is called (its arguments are taken first), so a handler nested inside
  // would do no harm.
  thread_local proto::GetElementRequest request;
  if (!request.ParseFromArray(call->request().data(), static_cast<int>(call->request().size()))) {
    call->Reply(absl::InvalidArgumentError("malformed GetElementRequest"));
    return;
  }
  std::shared_ptr<TaskRunner> runner;
  absl::Status cannot_start;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = runners_.find(request.task_id()); it != runners_.end()) {
      runner = it->second;
    } else if (auto failed = tasks_not_started_.find(request.task_id());
               failed != tasks_not_started_.end() &&
               failed->second.last_try - failed->second.since >= options_.task_start_timeout) {
      cannot_start = failed->second.why;
    }
  }
  if (!cannot_start.ok()) {
    // As a pipeline's error is told: the readers fail with it rather than wait for ever.
    proto::GetElementResponse response;
    response.set_task_error_code(static_cast<int>(cannot_start.code()));
    response.set_task_error_message(absl::StrCat("the worker could not start this task for ",
                                                 absl::FormatDuration(options_.task_start_timeout),
                                                 ": ", cannot_start.message()));
    call->Reply(response);
    return;
  }
  if (runner == nullptr) {
    // The client may learn of a task before this worker's next heartbeat brings it: fetch it
    // now rather than at the next interval.
    heartbeat_pacer_.Soon();
    proto::GetElementResponse response;
    response.set_retry_later(true);
    call->Reply(response);
    return;
  }
  // A task that has produced everything ends once its last batches are sent: tell the
  // dispatcher soon, so that readers waiting only for the job's end are not held up by it.
  if (runner->produced_all()) heartbeat_pacer_.Soon();
  if (request.coordinated()) {
    RoundRequest round{request.consumer_index(),
                       request.round(),
                       request.delivery_epoch(),
                       {request.acked_rounds().begin(), request.acked_rounds().end()}};
    runner->Fetch(std::move(call), request.max_batch_bytes(), std::move(round));
  } else {
    Delivery delivery{request.client_id(),
                      request.delivery_epoch(),
                      {request.acked_batch_indices().begin(), request.acked_batch_indices().end()}};
    runner->Fetch(std::move(call), request.max_batch_bytes(), std::move(delivery));
  }
}

}  // namespace sluice::control
