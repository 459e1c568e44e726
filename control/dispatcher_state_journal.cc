// DispatcherState's fault tolerance: journaling its changes, taking snapshots, and
// rebuilding itself from a recovered journal (see control/journal.h for the files).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/dispatcher_state.h"

namespace sluice::control {
namespace {

// Adds splits [first, next) to a task's leased ranges, merging overlaps. A snapshot writes
// a task's ranges, merged as consecutive leases are, and beside them its last lease (to
// answer a retry), which lies within them: restored as two ranges, the last lease's splits
// were re-issued twice when the task's worker was lost after the restart.
void AddLeaseRange(std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t first, int64_t next) {
  ranges.emplace_back(first, next);
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& [begin, end] : ranges) {
    if (!merged.empty() && begin <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, end);
    } else {
      merged.emplace_back(begin, end);
    }
  }
  ranges = std::move(merged);
}

}  // namespace

void DispatcherState::AttachJournal(JournalWriter* journal, int64_t compact_every) {
  ChangeLock lock(this);
  journal_ = journal;
  compact_every_ = compact_every;
  // The last step before serving, after any Restore (which may take a while): clients can
  // only report from now on, so a restored client's client timeout starts here too.
  started_ = absl::Now();
  for (auto& [id, job] : jobs_) {
    if (!job.restored) continue;
    for (auto& [client, last] : job.clients) last = started_;
  }
}

void DispatcherState::DetachJournal() {
  absl::MutexLock lock(&mu_);
  journal_ = nullptr;
  compaction_due_ = false;
}

int64_t DispatcherState::journaled_updates() const {
  absl::MutexLock lock(&mu_);
  return journaled_updates_;
}

int64_t DispatcherState::answers_awaiting_the_journal() const {
  absl::MutexLock lock(&mu_);
  return journaled_updates_ + leases_replayed_;
}

void DispatcherState::Journal(const proto::Update& update, JournalWriter::DurableCallback durable) {
  if (journal_ == nullptr) return;
  // Failures surface through the Sync the handler waits on before it replies.
  journal_->Append(update, std::move(durable));
  ++journaled_updates_;
  if (compact_every_ > 0 && ++since_compaction_ >= compact_every_) compaction_due_ = true;
}

void DispatcherState::CompactIfDueLocked() {
  if (!compaction_due_) return;
  compaction_due_ = false;
  since_compaction_ = 0;
  // Under mu_ at the end of a change, so the snapshot holds exactly the updates appended
  // before it, each applied.
  journal_->CompactAsync(SnapshotLocked(), [](absl::Status status) {
    if (!status.ok()) {
      std::fprintf(stderr,
                   "sluice dispatcher: journal compaction failed (the journal stays "
                   "usable, recovery just reads more): %s\n",
                   std::string(status.message()).c_str());
    }
  });
}

void DispatcherState::JournalCoordination(const proto::Update& update) {
  if (journal_ == nullptr) return;
  coordination_unsynced_->fetch_add(1, std::memory_order_acq_rel);
  // A failed write stays counted: replies then wait on a Sync, which reports the failure.
  Journal(update, [unsynced = coordination_unsynced_](absl::Status durable) {
    if (durable.ok()) unsynced->fetch_sub(1, std::memory_order_acq_rel);
  });
}

proto::Snapshot DispatcherState::SnapshotLocked() const {
  proto::Snapshot snapshot;
  snapshot.set_next_id(next_id_);
  for (const auto& [id, pipeline] : datasets_) {
    proto::Update::RegisterDataset* d = snapshot.add_datasets();
    d->set_dataset_id(id);
    *d->mutable_pipeline() = pipeline;
  }
  for (const auto& [id, job] : jobs_) {
    proto::Update::CreateJob* j = snapshot.add_jobs();
    j->set_job_id(id);
    j->set_job_name(job.name);
    j->set_dataset_id(job.dataset_id);
    j->set_mode(job.mode);
    j->set_elements_per_split(job.elements_per_split);
    j->set_num_consumers(job.num_consumers);
    j->set_round_horizon(job.journaled_horizon);
    j->set_shuffle_seed(job.shuffle_seed);
    for (int c = 1; c < job.num_clients; ++c) snapshot.add_clients()->set_job_id(id);
    for (const auto& [client, last] : job.clients) {
      proto::Update::AddClient* live = snapshot.add_live_clients();
      live->set_job_id(id);
      live->set_client_id(client);
    }
    if (job.released) snapshot.add_released_job_ids(id);
    for (const auto& [repetition, listed] : job.pass_files) {
      proto::Update::PassFiles* files = snapshot.add_pass_files();
      files->set_job_id(id);
      files->set_repetition(repetition);
      files->mutable_files()->Assign(listed->begin(), listed->end());
    }
    job.delivered.ForEachSpan(
        [&snapshot, id](int64_t first, int64_t last, const DeliveryLog::Ranges& ranges) {
          proto::Snapshot::DeliveredSpan* span = snapshot.add_delivered();
          span->set_job_id(id);
          span->set_first_key(first);
          span->set_last_key(last);
          for (const auto& [begin, end] : ranges) {
            proto::OrdinalRange* range = span->add_ranges();
            range->set_begin(begin);
            range->set_end(end);
          }
        });
    std::map<int64_t, std::pair<int64_t, bool>> cursors;
    for (const auto& [repetition, next] : job.restored_cursors) cursors[repetition] = {next, false};
    for (const auto& [repetition, provider] : job.providers) {
      if (provider != nullptr) cursors[repetition] = {provider->next_split_index(), false};
    }
    for (const auto& [repetition, cursor] : cursors) {
      proto::Update::SplitCursor* c = snapshot.add_cursors();
      c->set_job_id(id);
      c->set_repetition(repetition);
      c->set_next_split_index(cursor.first);
    }
    for (int64_t task_id : job.task_ids) {
      for (const auto& [repetition, next] : tasks_.at(task_id).recovery_next) {
        proto::Update::SplitCursor* c = snapshot.add_cursors();
        c->set_job_id(id);
        c->set_repetition(repetition);
        c->set_next_split_index(next);
        c->set_leased_by_task(task_id);
        c->set_recovery(true);
      }
      for (const auto& [repetition, ranges] : tasks_.at(task_id).lease_ranges) {
        for (const auto& [first, next] : ranges) {
          proto::Update::SplitCursor* c = snapshot.add_cursors();
          c->set_job_id(id);
          c->set_repetition(repetition);
          c->set_next_split_index(next);
          c->set_leased_by_task(task_id);
          c->set_first_split_index(first);
        }
      }
    }
    for (const auto& [key, lease] : job.last_leases) {
      proto::Update::SplitCursor* c = snapshot.add_cursors();
      c->set_job_id(id);
      c->set_repetition(key.second);
      c->set_next_split_index(lease.next);
      c->set_end_of_splits(lease.end);
      c->set_leased_by_task(key.first);
      c->set_first_split_index(lease.first);
      c->set_lease_seq(lease.seq);
      auto task = tasks_.find(key.first);
      c->set_recovery(task != tasks_.end() && task->second.recovery);
    }
  }
  for (const auto& [address, worker] : workers_) {
    proto::Update::RegisterWorker* w = snapshot.add_workers();
    w->set_address(address);
    w->set_uid(worker.uid);
  }
  for (const auto& [id, task] : tasks_) {
    proto::Update::CreateTask* t = snapshot.add_tasks();
    t->set_task_id(id);
    t->set_job_id(task.job_id);
    t->set_worker_address(task.worker_address);
    t->set_starting_round(task.starting_round);
    t->set_ending_round(task.ending_round);
    t->set_ended_read_all(task.ended_read_all);
    t->set_recovery(task.recovery);
    t->set_recovers_task_id(task.recovers_task_id);
    for (const auto& [repetition, splits] : task.recovery_splits) {
      proto::Update::ReissuedPass* pass = t->add_reissued();
      pass->set_repetition(repetition);
      for (const proto::Split& split : splits) *pass->add_splits() = split;
    }
    if (task.finished) snapshot.add_finished_task_ids(id);
    if (task.lost) snapshot.add_lost_task_ids(id);
  }
  for (int64_t id : collected_jobs_) snapshot.add_collected_job_ids(id);
  for (const auto& [name, id] : collected_job_names_) {
    (*snapshot.mutable_collected_job_names())[name] = id;
  }
  return snapshot;
}

absl::Status DispatcherState::Restore(const Recovered& recovered) {
  ChangeLock lock(this);
  if (recovered.snapshot.has_value()) {
    const proto::Snapshot& s = *recovered.snapshot;
    SeeId(s.next_id() - 1);
    proto::Update update;
    for (const auto& d : s.datasets()) {
      *update.mutable_register_dataset() = d;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& j : s.jobs()) {
      *update.mutable_create_job() = j;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& c : s.clients()) {
      *update.mutable_add_client() = c;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& c : s.live_clients()) {
      auto job = jobs_.find(c.job_id());
      if (job == jobs_.end()) return absl::DataLossError("snapshot client of an unknown job");
      job->second.clients[c.client_id()] = absl::Now();
    }
    for (int64_t id : s.released_job_ids()) {
      auto job = jobs_.find(id);
      if (job == jobs_.end()) return absl::DataLossError("snapshot release of an unknown job");
      job->second.released = true;
    }
    for (const auto& w : s.workers()) {
      *update.mutable_register_worker() = w;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& t : s.tasks()) {
      *update.mutable_create_task() = t;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (int64_t id : s.finished_task_ids()) {
      update.mutable_finish_task()->set_task_id(id);
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (int64_t id : s.lost_task_ids()) {
      update.mutable_lose_task()->set_task_id(id);
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& c : s.cursors()) {
      *update.mutable_split_cursor() = c;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& files : s.pass_files()) {
      *update.mutable_pass_files() = files;
      SLUICE_RETURN_IF_ERROR(Apply(update));
    }
    for (const auto& span : s.delivered()) {
      auto job = jobs_.find(span.job_id());
      DeliveryLog::Ranges ranges;
      for (const proto::OrdinalRange& range : span.ranges()) {
        ranges.emplace_back(range.begin(), range.end());
      }
      if (job == jobs_.end() ||
          !job->second.delivered.AppendSpan(span.first_key(), span.last_key(), std::move(ranges))) {
        return absl::DataLossError(absl::StrCat("snapshot delivery span does not fit the state: ",
                                                span.ShortDebugString()));
      }
    }
    // Until session 41 a snapshot left these out: after a compaction and a restart, a
    // collected DYNAMIC job's name was silently made again from its first pass.
    collected_jobs_.insert(s.collected_job_ids().begin(), s.collected_job_ids().end());
    for (const auto& [name, id] : s.collected_job_names()) collected_job_names_[name] = id;
  }
  for (const proto::Update& update : recovered.updates) SLUICE_RETURN_IF_ERROR(Apply(update));
  // Every pass that handed out a split journaled a cursor, and compaction keeps only the
  // passes not yet pruned: passes below the oldest recovered cursor are done.
  for (auto& [id, job] : jobs_) {
    if (!job.restored_cursors.empty()) {
      job.pruned_below_repetition = job.restored_cursors.begin()->first;
      job.delivered.EraseBelow(SplitKey(job.pruned_below_repetition, 0));
      job.pass_files.erase(job.pass_files.begin(),
                           job.pass_files.lower_bound(job.pruned_below_repetition));
    }
  }
  // A DYNAMIC task lost before its splits were re-issued: the loss is journaled, the wait
  // for its clients to confirm is not. It waits again, for the clients restored (they
  // confirm with every heartbeat), unless its job was released (ForgetClient drops the
  // waits then). Not "unless the job looks finished": a job whose other tasks all ended, or
  // that had no other, looks so while its lost task's splits wait. Recovery tasks go only
  // to workers heard from since: a restored one may be the dead one.
  absl::flat_hash_set<int64_t> recovered_tasks;
  for (const auto& [id, task] : tasks_) {
    if (task.recovers_task_id != 0) recovered_tasks.insert(task.recovers_task_id);
  }
  const absl::Time now = absl::Now();
  for (const auto& [id, task] : tasks_) {
    Job& job = jobs_.at(task.job_id);
    if (!task.lost || job.mode != proto::DYNAMIC || recovered_tasks.contains(id) || job.released) {
      continue;
    }
    WaitToReissue(job, id, now, now + config_.client_timeout);
  }
  for (auto& [address, worker] : workers_) worker.unheard_since_restore = true;
  return absl::OkStatus();
}

absl::Status DispatcherState::Apply(const proto::Update& update) {
  auto corrupt = [&update](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("journal update does not fit the state: ", why, ": ",
                                            update.ShortDebugString()));
  };
  switch (update.kind_case()) {
    case proto::Update::kRegisterDataset: {
      const auto& d = update.register_dataset();
      AddDataset(d.dataset_id(), d.pipeline());
      if (absl::StartsWith(d.dataset_id(), "ds")) {
        SeeId(std::strtoll(d.dataset_id().c_str() + 2, nullptr, 10));
      }
      return absl::OkStatus();
    }
    case proto::Update::kCreateJob: {
      const auto& j = update.create_job();
      if (!datasets_.contains(j.dataset_id())) return corrupt("unknown dataset");
      Job job{j.job_id(), j.job_name(), j.dataset_id(), j.mode(), {}, 1, {}};
      job.elements_per_split =
          j.elements_per_split() > 0 ? j.elements_per_split() : config_.elements_per_split;
      job.num_consumers = j.num_consumers();
      job.shuffle_seed = j.shuffle_seed();
      job.journaled_horizon = j.round_horizon();
      job.round_horizon = std::max(kRoundWindow, j.round_horizon());
      job.restored = true;
      if (!job.name.empty()) job_by_name_[job.name] = job.id;
      // Assumed reading until it reports or a client timeout passes (a snapshot's come from
      // live_clients).
      if (j.client_id() != 0) job.clients[j.client_id()] = absl::Now();
      SeeId(j.job_id());
      SeeId(j.client_id());
      jobs_.emplace(job.id, std::move(job));
      return absl::OkStatus();
    }
    case proto::Update::kAddClient: {
      auto it = jobs_.find(update.add_client().job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      it->second.num_clients += 1;
      if (update.add_client().client_id() != 0) {
        it->second.clients[update.add_client().client_id()] = absl::Now();
      }
      SeeId(update.add_client().client_id());
      return absl::OkStatus();
    }
    case proto::Update::kReleaseClient: {
      auto it = jobs_.find(update.release_client().job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      ForgetClient(it->second, update.release_client().client_id());
      return absl::OkStatus();
    }
    case proto::Update::kRegisterWorker: {
      // Soft state starts now: a worker that does not heartbeat again shows as silent.
      WorkerInfo& worker = workers_[update.register_worker().address()];
      worker.last_heartbeat = absl::Now();
      worker.uid = update.register_worker().uid();
      return absl::OkStatus();
    }
    case proto::Update::kCreateTask: {
      const auto& t = update.create_task();
      auto it = jobs_.find(t.job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      AddTask(it->second, t.task_id(), t.worker_address());
      Task& task = tasks_.at(t.task_id());
      task.starting_round = t.starting_round();
      task.ending_round = t.ending_round();
      task.ended_read_all = t.ended_read_all();
      task.lost = t.ending_round() > 0 && !task.ended_read_all;
      task.recovery = t.recovery();
      task.recovers_task_id = t.recovers_task_id();
      // The task it recovers was lost (uncoordinated tasks journal their loss only so).
      if (auto lost = tasks_.find(t.recovers_task_id()); lost != tasks_.end()) {
        lost->second.lost = true;
      }
      for (const auto& pass : t.reissued()) {
        task.recovery_splits[pass.repetition()].assign(pass.splits().begin(), pass.splits().end());
      }
      SeeId(t.task_id());
      return absl::OkStatus();
    }
    case proto::Update::kLoseTask: {
      auto it = tasks_.find(update.lose_task().task_id());
      if (it == tasks_.end()) return corrupt("unknown task");
      it->second.lost = true;
      return absl::OkStatus();
    }
    case proto::Update::kFinishTask: {
      auto it = tasks_.find(update.finish_task().task_id());
      if (it == tasks_.end()) return corrupt("unknown task");
      it->second.finished = true;
      return absl::OkStatus();
    }
    case proto::Update::kSplitCursor: {
      const auto& c = update.split_cursor();
      auto it = jobs_.find(c.job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      if (c.recovery()) {
        auto task = tasks_.find(c.leased_by_task());
        if (task == tasks_.end() || !task->second.recovery) return corrupt("unknown recovery task");
        int64_t& next = task->second.recovery_next[c.repetition()];
        next = std::max(next, c.next_split_index());
        if (c.lease_seq() > 0) {
          it->second.last_leases[{c.leased_by_task(), c.repetition()}] = Job::Lease{
              c.lease_seq(), c.first_split_index(), c.next_split_index(), c.end_of_splits()};
        }
        return absl::OkStatus();
      }
      int64_t& cursor = it->second.restored_cursors[c.repetition()];
      cursor = std::max(cursor, c.next_split_index());
      if (auto task = tasks_.find(c.leased_by_task());
          task != tasks_.end() && c.next_split_index() > c.first_split_index()) {
        AddLeaseRange(task->second.lease_ranges[c.repetition()], c.first_split_index(),
                      c.next_split_index());
      }
      if (c.leased_by_task() != 0 && c.lease_seq() > 0) {
        it->second.last_leases[{c.leased_by_task(), c.repetition()}] = Job::Lease{
            c.lease_seq(), c.first_split_index(), c.next_split_index(), c.end_of_splits()};
      }
      return absl::OkStatus();
    }
    case proto::Update::kRoundHorizon: {
      auto it = jobs_.find(update.round_horizon().job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      const int64_t horizon = update.round_horizon().round_horizon();
      it->second.journaled_horizon = std::max(it->second.journaled_horizon, horizon);
      it->second.round_horizon = std::max(it->second.round_horizon, horizon);
      return absl::OkStatus();
    }
    case proto::Update::kEndTaskRounds: {
      auto it = tasks_.find(update.end_task_rounds().task_id());
      if (it == tasks_.end()) return corrupt("unknown task");
      it->second.ended_read_all = update.end_task_rounds().read_all();
      it->second.lost = !it->second.ended_read_all;
      it->second.ending_round = update.end_task_rounds().ending_round();
      return absl::OkStatus();
    }
    case proto::Update::kRemoveJob:
      RemoveJob(update.remove_job().job_id(), /*journal=*/false);
      return absl::OkStatus();
    case proto::Update::kPassFiles: {
      const auto& listed = update.pass_files();
      auto it = jobs_.find(listed.job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      it->second.pass_files[listed.repetition()] = std::make_shared<const std::vector<std::string>>(
          listed.files().begin(), listed.files().end());
      return absl::OkStatus();
    }
    case proto::Update::kRecordDeliveries: {
      auto it = jobs_.find(update.record_deliveries().job_id());
      if (it == jobs_.end()) return corrupt("unknown job");
      for (const proto::ProvenanceRun& run : update.record_deliveries().runs()) {
        it->second.delivered.Record(run.split_key(), run.first_ordinal(), run.count());
      }
      return absl::OkStatus();
    }
    case proto::Update::KIND_NOT_SET:
      break;
  }
  return corrupt("no kind set");
}

}  // namespace sluice::control
