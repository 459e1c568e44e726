// DispatcherState under worker churn: detecting lost workers, tracking what clients
// received of each DYNAMIC split, and re-issuing a lost task's splits so that nothing is
// lost and nothing is delivered twice.
//
// The protocol. Every DYNAMIC split carries a key; every batch carries the provenance of
// its elements (split key, ordinals); clients report what they received in their
// heartbeats. When a worker is lost, each of its unfinished DYNAMIC tasks becomes a
// Recovery that waits until every live client of the job has confirmed (abandoned_tasks)
// that it stopped reading the task and reported everything it got from it. Then a recovery
// task on a live worker re-reads the lost task's leased splits with the delivered ordinals
// attached, and the sources drop exactly those elements.
#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/dispatcher_state.h"
#include "control/processing_mode.h"

namespace sluice::control {

void DispatcherState::CheckLiveness(absl::Time now) {
  ChangeLock lock(this);
  for (auto& [address, worker] : workers_) {
    if (!worker.lost && now - worker.last_heartbeat > config_.worker_timeout) {
      LoseWorker(
          address, worker,
          absl::StrCat("missed heartbeats for ", absl::FormatDuration(config_.worker_timeout)));
    }
  }
  for (auto& [id, job] : jobs_) {
    for (Job::Recovery& recovery : job.recoveries) {
      if (now >= recovery.wait_until) recovery.waiting_for.clear();
      for (auto it = recovery.waiting_for.begin(); it != recovery.waiting_for.end();) {
        auto client = job.clients.find(*it);
        const bool silent =
            client == job.clients.end() || now - client->second > config_.client_timeout;
        it = silent ? recovery.waiting_for.erase(it) : std::next(it);
      }
    }
    ForgetSilentClients(job, now);
    LaunchRecoveries(job);
  }
  CollectJobs(now);
}

void DispatcherState::ForgetSilentClients(Job& job, absl::Time now) {
  // A silent client counts for nothing already; kept, a long-lived job that trainers join
  // and leave grew by one entry per client, and a gone consumer's old round pulled the
  // starting round of a task made when none was live (CreateTask) back below the others'.
  // One that speaks again is added back by its heartbeat.
  std::erase_if(job.clients,
                [&](const auto& client) { return now - client.second > config_.client_timeout; });
  std::erase_if(job.client_rounds,
                [&](const auto& round) { return !job.clients.contains(round.first); });
}

void DispatcherState::ForgetClient(Job& job, int64_t client_id) {
  job.clients.erase(client_id);
  job.client_rounds.erase(client_id);
  if (job.name.empty()) {
    // An anonymous job has one client, and no other can join it: what its tasks made or
    // would make is read by nobody. Left to the garbage collection, each kept up to
    // --buffer-batches slabs on its workers for --job-gc-timeout, and a worker that had
    // served a few short reads had none left for the next (measured: the sixth
    // `read --take 2` of 800 KB batches waited for good on 16 slabs).
    job.released = true;
    job.recoveries.clear();
    return;
  }
  // A released client no longer holds up a re-issue either.
  for (Job::Recovery& recovery : job.recoveries) recovery.waiting_for.erase(client_id);
}

void DispatcherState::CollectJobs(absl::Time now) {
  std::vector<int64_t> collect;
  for (auto& [id, job] : jobs_) {
    bool has_client = false;
    for (const auto& [client, last] : job.clients) {
      has_client = has_client || now - last <= config_.client_timeout;
    }
    if (has_client) {
      job.last_client_seen = now;
    } else if (now - job.last_client_seen > config_.job_gc_timeout) {
      collect.push_back(id);
    }
  }
  for (int64_t id : collect) {
    std::cerr << "sluice dispatcher: job " << id << " had no client for "
              << absl::FormatDuration(config_.job_gc_timeout) << "; garbage-collecting it\n";
    RemoveJob(id, /*journal=*/true);
  }
}

void DispatcherState::RemoveJob(int64_t job_id, bool journal) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Job& job = it->second;
  for (int64_t task_id : job.task_ids) {
    auto task = tasks_.find(task_id);
    if (task == tasks_.end()) continue;
    if (auto worker = workers_.find(task->second.worker_address); worker != workers_.end()) {
      std::vector<int64_t>& ids = worker->second.task_ids;
      ids.erase(std::remove(ids.begin(), ids.end(), task_id), ids.end());
    }
    tasks_.erase(task);
  }
  if (!job.name.empty()) {
    job_by_name_.erase(job.name);
    if (job.mode == proto::DYNAMIC) collected_job_names_[job.name] = job_id;
  }
  collected_jobs_.insert(job_id);
  jobs_.erase(it);
  if (journal) {
    proto::Update update;
    update.mutable_remove_job()->set_job_id(job_id);
    Journal(update);
  }
}

void DispatcherState::LoseWorker(const std::string& address, WorkerInfo& worker,
                                 const std::string& why) {
  worker.lost = true;
  std::cerr << "sluice dispatcher: worker " << address << " " << why << "; giving up its tasks\n";
  const absl::Time now = absl::Now();
  for (int64_t id : worker.task_ids) {
    Task& task = tasks_.at(id);
    Job& job = jobs_.at(task.job_id);
    if (task.lost || JobFinished(job)) continue;
    if (task.finished && job.mode != proto::DYNAMIC) {
      // Read to its end: taken for lost, a static share kept its job waiting for it, and
      // the worker back as a new process read its share or pass again. (A finished DYNAMIC
      // task is lost as any: a batch it sent but no reader got is re-issued.)
      task.worker_gone = true;
      continue;
    }
    task.lost = true;
    // Consumers may have been told rounds up to the horizon belong to it; they skip those
    // they did not get, and the rotation goes on without it after.
    if (job.num_consumers > 0) EndRounds(job, task, /*read_all=*/false);
    // Lost also across a restart of this dispatcher: an OFF pass or static shard restarts
    // with the worker as a new task, and a DYNAMIC task's splits wait to be re-issued (a
    // restart before they were would have the old task live again, and sent to a new
    // process at the address as new: read twice). Made outside any handler (the liveness
    // check) and told by any reply, so every reply waits until it is durable.
    proto::Update update;
    update.mutable_lose_task()->set_task_id(task.id);
    JournalCoordination(update);
    if (job.mode == proto::DYNAMIC) WaitToReissue(job, task.id, now);
  }
}

void DispatcherState::WaitToReissue(Job& job, int64_t lost_task, absl::Time now,
                                    absl::Time wait_until) {
  Job::Recovery recovery{lost_task, {}, wait_until};
  for (const auto& [client, last] : job.clients) {
    if (now - last <= config_.client_timeout) recovery.waiting_for.insert(client);
  }
  job.recoveries.push_back(std::move(recovery));
}

absl::Status DispatcherState::CheckListed(const std::string& address) const {
  const std::optional<int64_t> index = worker_list_.IndexOf(address);
  if (!index.has_value()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "worker ", address, " is not in the dispatcher's --worker-addresses list (",
        worker_list_.ToString(), "); start it with a listed --port and --advertise-host"));
  }
  for (const auto& [other, info] : workers_) {
    // A lost one's share goes to whoever comes next (a worker restarted on another port);
    // so does that of one not heard from since a restore (losses are not journaled) unless
    // it holds a task that was still being read then.
    if (other == address || info.lost || worker_list_.IndexOf(other) != index) continue;
    const bool reading = std::any_of(info.task_ids.begin(), info.task_ids.end(), [&](int64_t id) {
      const Task& task = tasks_.at(id);
      return !task.lost && !task.finished;
    });
    if (!info.unheard_since_restore || reading) {
      return absl::UnavailableError(absl::StrCat(
          "worker ", address, " would read the share of --worker-addresses entry '",
          worker_list_.entry(*index), "', which worker ", other,
          " reads; it may once that one is lost (or list each worker of a host with its "
          "port)"));
    }
  }
  return absl::OkStatus();
}

bool DispatcherState::ReadThere(const Job& job, const Task& task,
                                const std::string& address) const {
  if (!task.finished) return false;
  // A static share by its entry, whichever port of the host read it.
  return IsStaticSharding(job.mode) ? task.worker_index == worker_list_.IndexOf(address)
                                    : task.worker_address == address;
}

void DispatcherState::JoinJobsMadeWhileLost(const std::string& address) {
  // The first heartbeat since this dispatcher recovered its state. Lost is not journaled: a job
  // made while this worker was lost has no task on it, and a static shard would wait for it for
  // ever. It joins them as a worker that came back does.
  for (auto& [id, job] : jobs_) {
    if (JobFinished(job)) continue;
    const bool has_task =
        std::any_of(job.task_ids.begin(), job.task_ids.end(), [&](int64_t task_id) {
          const Task& task = tasks_.at(task_id);
          return !task.lost && (task.worker_address == address || ReadThere(job, task, address));
        });
    if (!has_task) CreateTask(job, address);
  }
}

void DispatcherState::FinishReportedTasks(const proto::WorkerHeartbeatRequest& request) {
  for (int64_t id : request.finished_tasks()) {
    auto it = tasks_.find(id);
    if (it != tasks_.end() && it->second.worker_address == request.worker_address() &&
        !it->second.finished) {
      it->second.finished = true;
      proto::Update update;
      update.mutable_finish_task()->set_task_id(id);
      Journal(update);
      // A coordinated recovery task read all it was given (other tasks never end).
      Job& job = jobs_.at(it->second.job_id);
      if (job.num_consumers > 0) EndRounds(job, it->second, /*read_all=*/true);
    }
  }
}

void DispatcherState::LetWorkerLeave(const proto::WorkerHeartbeatRequest& request) {
  auto known = workers_.find(request.worker_address());
  // Unknown, lost already, or a new process at the address: nothing of this one to give up.
  if (known == workers_.end() || known->second.lost ||
      (!known->second.uid.empty() && known->second.uid != request.worker_uid())) {
    return;
  }
  FinishReportedTasks(request);  // ended since its last heartbeat: finished, not lost
  bool has_work = false;
  for (int64_t id : known->second.task_ids) {
    const Task& task = tasks_.at(id);
    const Job& job = jobs_.at(task.job_id);
    if (task.lost || task.finished || JobFinished(job)) continue;
    // An OFF pass or a static shard starts over when the worker restarts, and only the
    // restart path (WorkerHeartbeat's restarting_jobs) keeps its job from looking finished
    // meanwhile: given up now, the restarted worker would find the job over and read
    // nothing. Such a worker is left to its restart or its timeout.
    if (job.mode != proto::DYNAMIC) return;
    has_work = true;
  }
  if (!has_work) {
    known->second.lost = true;  // quietly: a finished local cluster's workers all leave
    // Its finished OFF passes and static shares of jobs still read: readers that have not
    // had their end stop asking it (LoseWorker's worker_gone).
    for (int64_t id : known->second.task_ids) {
      Task& task = tasks_.at(id);
      const Job& job = jobs_.at(task.job_id);
      if (task.finished && !task.lost && job.mode != proto::DYNAMIC && !JobFinished(job)) {
        task.worker_gone = true;
      }
    }
    return;
  }
  LoseWorker(request.worker_address(), known->second, "is shutting down");
  for (auto& [id, job] : jobs_) LaunchRecoveries(job);
}

void DispatcherState::EndRounds(Job& job, Task& task, bool read_all) {
  if (task.ending_round > 0) return;  // ended before (a finished recovery task, say)
  task.ending_round = job.round_horizon + 1;
  task.ended_read_all = read_all;
  proto::Update update;
  update.mutable_end_task_rounds()->set_task_id(task.id);
  update.mutable_end_task_rounds()->set_ending_round(task.ending_round);
  update.mutable_end_task_rounds()->set_read_all(read_all);
  JournalCoordination(update);
}

void DispatcherState::LaunchRecoveries(Job& job) {
  for (auto it = job.recoveries.begin(); it != job.recoveries.end();) {
    if (!it->waiting_for.empty()) {
      ++it;
      continue;
    }
    // The live worker with the fewest tasks reads the lost task's splits.
    const std::string* host = nullptr;
    size_t fewest = 0;
    for (const auto& [address, worker] : workers_) {
      if (worker.lost || worker.unheard_since_restore) continue;
      if (host == nullptr || worker.task_ids.size() < fewest) {
        host = &address;
        fewest = worker.task_ids.size();
      }
    }
    if (host == nullptr) return;  // no live worker yet: the next registration launches it
    absl::StatusOr<std::map<int64_t, std::vector<proto::Split>>> splits =
        ReissuedSplits(job, tasks_.at(it->lost_task));
    if (!splits.ok()) {
      std::cerr << "sluice dispatcher: cannot re-issue the splits of lost task " << it->lost_task
                << ": " << splits.status().message() << "\n";
      ++it;
      continue;
    }
    CreateTask(job, *host, &*splits, it->lost_task);  // journals the splits with the task
    Task& recovery = tasks_.at(job.task_ids.back());
    std::cerr << "sluice dispatcher: the splits of lost task " << it->lost_task << " go to task "
              << recovery.id << " on " << *host << "\n";
    it = job.recoveries.erase(it);
  }
}

absl::StatusOr<std::map<int64_t, std::vector<proto::Split>>> DispatcherState::ReissuedSplits(
    Job& job, const Task& task) {
  std::map<int64_t, std::vector<proto::Split>> out;
  for (const auto& [repetition, leases] : task.lease_ranges) {
    // A range can be listed twice after a recovery (snapshot plus a later cursor).
    const std::set<std::pair<int64_t, int64_t>> ranges(leases.begin(), leases.end());
    for (const auto& [first, next] : ranges) {
      proto::GetSplitResponse replay;
      SLUICE_RETURN_IF_ERROR(
          ReplayLease(job, repetition, Job::Lease{0, first, next, false}, &replay));
      for (int i = 0; i < replay.splits_size(); ++i) {
        proto::Split& split = *replay.mutable_splits(i);
        split.set_key(SplitKey(repetition, first + i));
        out[repetition].push_back(std::move(split));
      }
    }
  }
  // A lost recovery task: what it leased and what it had not leased yet.
  for (const auto& [repetition, splits] : task.recovery_splits) {
    for (const proto::Split& split : splits) out[repetition].push_back(split);
  }
  for (auto& [repetition, queue] : out) {
    for (proto::Split& split : queue) {
      split.clear_delivered();
      for (const proto::OrdinalRange& range : job.delivered.Delivered(split.key())) {
        *split.add_delivered() = range;
      }
    }
  }
  return out;
}

bool DispatcherState::HandedOut(const Job& job, int64_t split_key) {
  if (split_key <= 0) return false;
  const int64_t repetition = engine::SplitKeyRepetition(split_key);
  const int64_t index = engine::SplitKeyIndex(split_key);
  int64_t cursor = 0;
  if (auto restored = job.restored_cursors.find(repetition);
      restored != job.restored_cursors.end()) {
    cursor = restored->second;
  }
  if (auto provider = job.providers.find(repetition);
      provider != job.providers.end() && provider->second != nullptr) {
    cursor = std::max(cursor, provider->second->next_split_index());
  }
  return index < cursor;
}

void DispatcherState::RecordDelivered(
    Job& job, const google::protobuf::RepeatedPtrField<proto::ProvenanceRun>& runs) {
  if (runs.empty() || job.mode != proto::DYNAMIC) return;
  proto::Update update;
  proto::Update::RecordDeliveries* record = update.mutable_record_deliveries();
  for (const proto::ProvenanceRun& run : runs) {
    // Also a late report of a pass already pruned (its entry would stay for good), and one
    // of a split not handed out yet (a client's mistake, which would grow the log and the
    // journal with every report).
    if (run.split_key() < SplitKey(job.pruned_below_repetition, 0) ||
        !HandedOut(job, run.split_key()) || run.first_ordinal() < 0 || run.count() <= 0 ||
        run.first_ordinal() > std::numeric_limits<int64_t>::max() - run.count()) {
      continue;
    }
    job.delivered.Record(run.split_key(), run.first_ordinal(), run.count());
    *record->add_runs() = run;
  }
  if (record->runs().empty()) return;
  // Answered once durable (the heartbeat's reply waits on the journal): a report lost in a
  // crash was never acknowledged, and the client reports it again.
  record->set_job_id(job.id);
  Journal(update);
}

absl::StatusOr<proto::GetSplitResponse> DispatcherState::GetRecoverySplits(
    Job& job, Task& task, const proto::GetSplitRequest& request) {
  const int64_t repetition = request.repetition();
  const std::vector<proto::Split>& splits = task.recovery_splits[repetition];
  int64_t& next = task.recovery_next[repetition];
  const std::pair<int64_t, int64_t> lease_key{task.id, repetition};
  int64_t first = next;
  if (request.lease_seq() > 0) {
    auto last = job.last_leases.find(lease_key);
    if (last != job.last_leases.end() && last->second.seq == request.lease_seq()) {
      first = last->second.first;  // a retry after a lost reply: the same splits again
      // Answered once durable, as the first answer is: it may be a retry of one whose
      // journal write failed, and a restart would then hand its splits out again.
      ++leases_replayed_;
    }
  }
  const int64_t total = static_cast<int64_t>(splits.size());
  const int64_t end =
      first == next
          ? std::min(total, next + std::clamp<int64_t>(request.max_splits(), 1, kMaxSplitsPerLease))
          : next;
  proto::GetSplitResponse response;
  for (int64_t i = first; i < end; ++i) *response.add_splits() = splits[i];
  response.set_end_of_splits(end == total);
  if (response.splits_size() > 0) *response.mutable_split() = response.splits(0);
  if (response.splits_size() == 0) {
    // Its pipeline counts passes from 0, but the re-issued splits may start at any
    // repetition: point an empty pass at the next one holding some.
    for (auto later = task.recovery_splits.upper_bound(repetition);
         later != task.recovery_splits.end(); ++later) {
      if (!later->second.empty()) {
        response.set_next_repetition(later->first);
        break;
      }
    }
    // Its re-issued splits are all read: its repeat() ends here.
    response.set_source_empty(response.end_of_splits() && response.next_repetition() == 0);
  }
  if (first == next && end > next) {
    next = end;
    if (request.lease_seq() > 0) {
      job.last_leases[lease_key] = Job::Lease{request.lease_seq(), first, end, end == total};
    }
    proto::Update update;
    proto::Update::SplitCursor* cursor = update.mutable_split_cursor();
    cursor->set_job_id(job.id);
    cursor->set_repetition(repetition);
    cursor->set_leased_by_task(task.id);
    cursor->set_first_split_index(first);
    cursor->set_next_split_index(end);
    cursor->set_end_of_splits(end == total);
    cursor->set_lease_seq(request.lease_seq());
    cursor->set_recovery(true);
    Journal(update);
  }
  return response;
}

}  // namespace sluice::control
