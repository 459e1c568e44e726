// DispatcherState's DYNAMIC split leases: providers per pass, leases numbered so a retry
// gets the same splits, the ranges each task holds (for re-issue), and pruning of passes
// every task has left.
#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/dispatcher_state.h"
#include "engine/cardinality.h"

namespace sluice::control {
namespace {

// A failure of the data itself (a list_files pattern matching nothing, a file gone, no
// data roots here), said to be the dispatcher's: the worker passes it on to the reader,
// whose message named the worker. NotFound becomes FailedPrecondition: a worker takes
// NotFound from GetSplit for a job the dispatcher no longer knows, and told its user the
// dispatcher had restarted without its state.
absl::Status AsSplitFailure(const absl::Status& status, int64_t job_id) {
  if (status.ok()) return status;
  return absl::Status(
      absl::IsNotFound(status) ? absl::StatusCode::kFailedPrecondition : status.code(),
      absl::StrCat("the dispatcher cannot make the splits of job ", job_id, ": ",
                   status.message()));
}

}  // namespace

absl::StatusOr<proto::GetSplitResponse> DispatcherState::GetSplit(
    const proto::GetSplitRequest& request) {
  ChangeLock lock(this);
  auto it = jobs_.find(request.job_id());
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("GetSplit for unknown job ", request.job_id()));
  }
  Job& job = it->second;
  if (job.mode != proto::DYNAMIC) {
    return absl::FailedPreconditionError(
        absl::StrCat("GetSplit for job ", job.id, " which is not in DYNAMIC mode"));
  }
  if (request.repetition() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GetSplit with negative repetition ", request.repetition()));
  }
  if (request.repetition() >= kMaxRepetitions) {
    // Its keys would wrap onto pass 0's: delivery reports dropped, elements read twice
    // after a worker's loss. Said, rather than that.
    return absl::OutOfRangeError(absl::StrCat(
        "job ", job.id, " reached repetition ", request.repetition(), ": a DYNAMIC job tracks ",
        kMaxRepetitions,
        " passes over its source at most, and a small source repeated forever gets there first "
        "(repeat it inside the source, e.g. from_tensor_slices or list_files of more, or read "
        "it in OFF mode)"));
  }
  auto task_it = tasks_.find(request.task_id());
  if (task_it == tasks_.end() || task_it->second.job_id != job.id) {
    return absl::NotFoundError(
        absl::StrCat("GetSplit for task ", request.task_id(), " which job ", job.id, " lacks"));
  }
  Task& task = task_it->second;
  if (task.lost) {
    // Aborted, not FailedPrecondition: the worker ends the task, and a client that hears
    // this from the worker before the dispatcher told it waits for the dispatcher's word
    // (the task is lost, its splits re-issued) instead of failing its read.
    return absl::AbortedError(
        absl::StrCat("task ", task.id,
                     " was given up after its worker missed heartbeats; its splits went "
                     "to another worker"));
  }
  if (task.recovery) return GetRecoverySplits(job, task, request);
  const std::pair<int64_t, int64_t> lease_key{request.task_id(), request.repetition()};
  proto::GetSplitResponse response;
  if (request.lease_seq() > 0) {
    auto last = job.last_leases.find(lease_key);
    if (last != job.last_leases.end() && last->second.seq == request.lease_seq()) {
      // The worker did not get our reply (e.g. we restarted): the same splits again.
      ++leases_replayed_;
      SLUICE_RETURN_IF_ERROR(
          AsSplitFailure(ReplayLease(job, request.repetition(), last->second, &response), job.id));
      for (int i = 0; i < response.splits_size(); ++i) {
        response.mutable_splits(i)->set_key(SplitKey(request.repetition(), last->second.first + i));
      }
      if (response.splits_size() > 0) *response.mutable_split() = response.splits(0);
      if (response.splits_size() == 0 && EndlessJob(job)) {
        // As the first answer did: without it the empty pass would end the task's repeat().
        response.set_next_repetition(LatestRepetition(job, request.repetition()));
      }
      response.set_source_empty(last->second.end && last->second.next == 0);
      return response;
    }
  }
  if (request.repetition() < job.pruned_below_repetition) {
    // A pass every task has left (its provider was dropped): a late starter skips it.
    response.set_end_of_splits(true);
    if (EndlessJob(job)) response.set_next_repetition(LatestRepetition(job, request.repetition()));
    return response;
  }
  absl::StatusOr<split::SplitProvider*> provided = Provider(job, request.repetition());
  if (!provided.ok()) return AsSplitFailure(provided.status(), job.id);
  split::SplitProvider* provider = *provided;
  const int64_t first_split_index = provider->next_split_index();
  const int wanted = std::clamp(request.max_splits(), 1, kMaxSplitsPerLease);
  while (response.splits_size() < wanted) {
    proto::Split split;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(AsSplitFailure(provider->GetNext(&split, &end), job.id));
    if (end) {
      response.set_end_of_splits(true);
      break;
    }
    if (first_split_index + response.splits_size() >= engine::kMaxSplitKeyIndices) {
      // Its key would name a split of the next pass (2^40 splits: raise elements_per_split).
      return AsSplitFailure(
          absl::OutOfRangeError(absl::StrCat("a pass of job ", job.id, " has more than ",
                                             engine::kMaxSplitKeyIndices, " splits")),
          job.id);
    }
    split.set_key(SplitKey(request.repetition(), first_split_index + response.splits_size()));
    *response.add_splits() = std::move(split);
  }
  if (response.splits_size() > 0) *response.mutable_split() = response.splits(0);
  if (response.splits_size() == 0 && EndlessJob(job)) {
    // Others took the whole pass before this task leased any of it; an empty pass would end
    // its repeat(), so it reads where the others are instead.
    response.set_next_repetition(LatestRepetition(job, request.repetition()));
  }
  // Told apart from a pass others exhausted first, which a finite repeat() goes on past.
  response.set_source_empty(response.end_of_splits() && provider->next_split_index() == 0);
  if (response.splits_size() > 0) {
    // Older passes cannot hold this task's unread splits any more: keep the map bounded.
    task.lease_ranges.erase(task.lease_ranges.begin(),
                            task.lease_ranges.lower_bound(request.repetition() - 1));
    std::vector<std::pair<int64_t, int64_t>>& ranges = task.lease_ranges[request.repetition()];
    const bool new_pass = ranges.empty();
    if (!ranges.empty() && ranges.back().second == first_split_index) {
      ranges.back().second = provider->next_split_index();  // one worker leasing alone
    } else {
      ranges.emplace_back(first_split_index, provider->next_split_index());
    }
    // Passes can only be left when some task enters a new one.
    if (new_pass) PruneOldPasses(job);
  }
  if (request.lease_seq() > 0) {
    job.last_leases[lease_key] = Job::Lease{request.lease_seq(), first_split_index,
                                            provider->next_split_index(), response.end_of_splits()};
  }
  if (response.splits_size() > 0 || response.end_of_splits()) {
    proto::Update update;
    proto::Update::SplitCursor* cursor = update.mutable_split_cursor();
    cursor->set_job_id(job.id);
    cursor->set_repetition(request.repetition());
    cursor->set_next_split_index(provider->next_split_index());
    cursor->set_end_of_splits(response.end_of_splits());
    cursor->set_leased_by_task(request.task_id());
    cursor->set_first_split_index(first_split_index);
    cursor->set_lease_seq(request.lease_seq());
    Journal(update);
  }
  return response;
}

bool DispatcherState::EndlessJob(Job& job) {
  if (!job.endless.has_value()) {
    // repeat() of an input of unknown size is infinite; what is left unknown (a filter
    // after a finite repeat) is taken as infinite only for coordinated reads, which are
    // refused at creation unless infinite anyway.
    absl::StatusOr<int64_t> cardinality = engine::Cardinality(datasets_.at(job.dataset_id));
    job.endless = cardinality.ok() && (*cardinality == engine::kInfinite ||
                                       (job.num_consumers > 0 && *cardinality == engine::kUnknown));
  }
  return *job.endless;
}

int64_t DispatcherState::LatestRepetition(const Job& job, int64_t after) const {
  // A worker whose buffer was full while others read on may find dozens of passes gone:
  // it goes to the newest pass at once (if that one is exhausted too, the next lease
  // points past it), not one pass per lease.
  int64_t latest = std::max(after + 1, job.pruned_below_repetition);
  if (!job.providers.empty()) latest = std::max(latest, job.providers.rbegin()->first);
  // After a restart a pass may be known by its cursor alone until a lease makes its provider.
  if (!job.restored_cursors.empty()) {
    latest = std::max(latest, job.restored_cursors.rbegin()->first);
  }
  return latest;
}

void DispatcherState::PruneOldPasses(Job& job) {
  // Infinite jobs (repeat()) would otherwise keep a provider, leases and a delivery log
  // per pass forever. A pass below every live task's oldest lease can no longer be
  // re-issued, so its state goes; passes stay while a recovery may still need them.
  if (!job.recoveries.empty()) return;
  int64_t oldest = std::numeric_limits<int64_t>::max();
  for (int64_t id : job.task_ids) {
    const Task& task = tasks_.at(id);
    if (task.lost) continue;
    if (task.recovery && !task.finished) return;
    if (!task.lease_ranges.empty()) oldest = std::min(oldest, task.lease_ranges.begin()->first);
  }
  if (oldest == std::numeric_limits<int64_t>::max() || oldest <= job.pruned_below_repetition) {
    return;
  }
  job.pruned_below_repetition = oldest;
  // Lost tasks' leases of those passes went to recovery tasks already (none is pending):
  // kept, a snapshot wrote them as cursors, and a restore took the oldest for the first
  // live pass, handing out the rest of a pass long read.
  for (int64_t id : job.task_ids) {
    Task& task = tasks_.at(id);
    if (task.lost) {
      task.lease_ranges.erase(task.lease_ranges.begin(), task.lease_ranges.lower_bound(oldest));
    }
  }
  job.providers.erase(job.providers.begin(), job.providers.lower_bound(oldest));
  job.restored_cursors.erase(job.restored_cursors.begin(),
                             job.restored_cursors.lower_bound(oldest));
  job.pass_files.erase(job.pass_files.begin(), job.pass_files.lower_bound(oldest));
  job.delivered.EraseBelow(SplitKey(oldest, 0));
  for (auto it = job.last_leases.begin(); it != job.last_leases.end();) {
    it = it->first.second < oldest ? job.last_leases.erase(it) : std::next(it);
  }
}

split::SplitOptions DispatcherState::SplitOptionsOf(const Job& job, int64_t repetition) const {
  split::SplitOptions options;
  options.elements_per_split = job.elements_per_split;
  options.data_roots = config_.data_roots;
  options.repetition = repetition;
  options.unseeded_shuffle_seed = job.shuffle_seed;
  if (auto listed = job.pass_files.find(repetition); listed != job.pass_files.end()) {
    options.pass_files = listed->second;
  }
  return options;
}

absl::StatusOr<split::SplitProvider*> DispatcherState::Provider(Job& job, int64_t repetition) {
  auto& provider = job.providers[repetition];
  if (provider != nullptr) return provider.get();
  absl::StatusOr<std::unique_ptr<split::SplitProvider>> made =
      split::CreateSplitProvider(datasets_.at(job.dataset_id), SplitOptionsOf(job, repetition));
  if (!made.ok()) {
    job.providers.erase(repetition);
    return made.status();
  }
  if (std::shared_ptr<const std::vector<std::string>> listed = (*made)->pass_files();
      listed != nullptr && !job.pass_files.contains(repetition)) {
    // The pass's first listing: journaled before any of its splits is handed out.
    job.pass_files[repetition] = listed;
    proto::Update update;
    proto::Update::PassFiles* files = update.mutable_pass_files();
    files->set_job_id(job.id);
    files->set_repetition(repetition);
    files->mutable_files()->Assign(listed->begin(), listed->end());
    Journal(update);
  }
  if (auto cursor = job.restored_cursors.find(repetition); cursor != job.restored_cursors.end()) {
    SLUICE_RETURN_IF_ERROR((*made)->Seek(cursor->second));
  }
  provider = *std::move(made);
  return provider.get();
}

absl::Status DispatcherState::ReplayLease(const Job& job, int64_t repetition,
                                          const Job::Lease& lease,
                                          proto::GetSplitResponse* response) {
  SLUICE_ASSIGN_OR_RETURN(
      std::unique_ptr<split::SplitProvider> replay,
      split::CreateSplitProvider(datasets_.at(job.dataset_id), SplitOptionsOf(job, repetition)));
  SLUICE_RETURN_IF_ERROR(replay->Seek(lease.first));
  for (int64_t i = lease.first; i < lease.next; ++i) {
    proto::Split split;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(replay->GetNext(&split, &end));
    if (end) break;
    *response->add_splits() = std::move(split);
  }
  response->set_end_of_splits(lease.end);
  if (response->splits_size() > 0) *response->mutable_split() = response->splits(0);
  return absl::OkStatus();
}

}  // namespace sluice::control
