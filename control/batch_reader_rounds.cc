// BatchReader's coordinated reads: rounds requested in order from the task that owns each,
// and handed out in round order (a round whose worker was lost is skipped by every consumer
// alike). The per-task reading of the other modes is in batch_reader.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "control/batch_reader.h"

namespace sluice::control {

std::optional<size_t> BatchReader::OwnerOf(int64_t round) const {
  std::vector<size_t> active;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const Task& t = tasks_[i];
    if (t.starting_round <= round && (t.ending_round == 0 || round < t.ending_round)) {
      active.push_back(i);
    }
  }
  if (active.empty()) return std::nullopt;
  // Every consumer orders the rotation alike: by task id.
  std::sort(active.begin(), active.end(),
            [this](size_t a, size_t b) { return tasks_[a].id < tasks_[b].id; });
  return active[static_cast<size_t>(round % static_cast<int64_t>(active.size()))];
}

void BatchReader::PumpRounds() {
  while (true) {
    int64_t round;
    uint64_t fetch_id;
    {
      absl::MutexLock lock(&mu_);
      if (!error_.ok() || stop_.HasBeenNotified()) return;
      // Bounded by bytes as the other modes are (FetchLimit): rounds rotate over the
      // workers, so its floor of one per serving worker keeps every worker's rounds going.
      const int limit = FetchLimit();
      if (outstanding_ >= limit) return;
      const absl::Time now = absl::Now();
      // A round whose worker is being connected to, or could not be reached a moment ago,
      // waits (and keeps its place) while later rounds of other workers go on.
      auto waits = [this, now](std::optional<size_t> owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        if (!owner) return false;
        const Task& task = tasks_[*owner];
        // A recovery task that read all it was given serves no round: skipped below.
        return !task.lost && !(task.recovery && task.end_seen) &&
               (task.connecting || task.retry_at > now);
      };
      auto retry = rounds_to_retry_.begin();
      while (retry != rounds_to_retry_.end() &&
             (retry->second > now || waits(OwnerOf(retry->first)))) {
        ++retry;
      }
      const bool retrying = retry != rounds_to_retry_.end();
      if (retrying) {
        round = retry->first;
      } else {
        // A round to be asked again keeps its place among the requests in flight. Were later
        // rounds to take it, consumers could each end up holding rounds the others cannot
        // ask for, and every round would wait out the round wait: one consumer told "retry
        // later" for rounds 0-3 (its worker did not know the task yet) asked for 4-7
        // meanwhile, while the three others, a moment later, held 0-3.
        if (outstanding_ + static_cast<int>(rounds_to_retry_.size()) >= limit) {
          return;
        }
        round = next_round_to_request_;
        // The horizon moves on with each heartbeat (kRoundWindow rounds past this reader):
        // at the 100 ms interval rounds faster than ~10,000/s would wait for it.
        if (!horizon_beat_asked_ && horizon_lead_ > 0 &&
            round_horizon_ - round < horizon_lead_ / 2) {
          horizon_beat_asked_ = true;
          heartbeat_pacer_.Soon();
        }
        // Within the horizon the dispatcher vouched for, and not too far ahead of the caller.
        const int64_t window = options_.max_outstanding_requests + options_.prefetch_batches;
        if (round > round_horizon_ || round - next_round_ >= window) return;
        // Each round to be asked again keeps a free slab: later rounds that landed early
        // (with a batch the caller holds) could otherwise hold the whole pool, which is
        // the window, and leave the round nothing to land in for ever.
        if (!rounds_to_retry_.empty() && pool_->free_slabs() <= rounds_to_retry_.size()) {
          return;
        }
      }
      std::optional<size_t> owner = OwnerOf(round);
      if (!owner) return;  // no task yet: wait for one
      if (!retrying && waits(owner)) {
        rounds_to_retry_.emplace(round, absl::InfinitePast());
        ++next_round_to_request_;
        continue;
      }
      if (tasks_[*owner].lost || (tasks_[*owner].recovery && tasks_[*owner].end_seen)) {
        // Its worker is gone, or it read all it was given: no consumer can get this round
        // from it.
        rounds_skipped_.insert(round);
        AdvanceRounds();
        if (retrying) {
          rounds_to_retry_.erase(retry);
        } else {
          ++next_round_to_request_;
        }
        continue;
      }
      std::optional<transport::Slab> free_slab = pool_->TryAcquire();
      if (!free_slab) {
        FailIfNoSlabWillComeBack();
        return;
      }
      caller_holds_every_slab_since_ = absl::InfiniteFuture();
      if (retrying) {
        rounds_to_retry_.erase(retry);
      } else {
        ++next_round_to_request_;
      }
      fetch_id = AddFetch(*owner, round, std::move(*free_slab));
    }
    Fetch(fetch_id);
  }
}

bool BatchReader::OnRoundFetched(Task& task, transport::Slab slab, absl::Time sent,
                                 const absl::StatusOr<transport::CallResult>& result, int64_t round,
                                 const Sent& request) {
  if (task.lost) {
    // DYNAMIC: its splits are re-issued less what this consumer reported, so a batch
    // arriving now would come twice. The round is skipped, as rounds of lost tasks are.
    SkipRound(round);
    return true;
  }
  const absl::Time now = absl::Now();
  proto::GetElementResponse response;
  const FetchOutcome outcome = Examine(task, slab, result, round, now, &response);
  if (outcome != FetchOutcome::kReply || response.retry_later()) {
    // The request's acknowledgements may not have been taken: all go again.
    task.CarryAllAgain();
  }
  switch (outcome) {
    case FetchOutcome::kUnreachable:
      // Ask again; if its worker was lost meanwhile, PumpRounds skips the round instead.
      rounds_to_retry_[round] = now + kUnreachableBackoff;
      return false;
    case FetchOutcome::kFailed:
      return false;
    case FetchOutcome::kReply:
      break;
  }
  if (response.retry_later()) {
    rounds_to_retry_[round] = now + kRetryLater;
    return false;
  }
  // Any other reply means the worker took the acknowledgements the request carried.
  std::erase_if(task.unconfirmed, [&request](int64_t acked) {
    return std::find(request.acked.begin(), request.acked.end(), acked) != request.acked.end();
  });
  task.confirmed_epoch = std::max(task.confirmed_epoch, request.epoch);
  if (response.end_of_sequence() && task.recovery) {
    // A recovery task ends with the splits it was given; the dispatcher takes it out of
    // the rotation after the rounds consumers may have been told it serves.
    task.end_seen = true;
    SkipRound(round);
    return true;
  }
  if (response.end_of_sequence()) {
    Fail(absl::FailedPreconditionError(
        absl::StrCat("coordinated reads need an infinite pipeline, but task ", task.id, " on ",
                     *task.worker_text, " reached its end")));
    return false;
  }
  if (round < next_round_ || rounds_ready_.contains(round)) return true;  // had it already
  // Kept by the worker until the next request to it confirms this round.
  task.unconfirmed.push_back(round);
  task.to_carry.push_back(round);
  unreported_.MergeFrom(response.provenance());  // DYNAMIC: what re-issues leave out
  if (options_.disconnect_every_batches > 0 &&
      ++batches_accepted_ % options_.disconnect_every_batches == 0) {
    connection_to_drop_ = task.connection;
  }
  rounds_ready_.emplace(round, Ready{task.worker_text, response.batch_index(), std::move(slab),
                                     response.batch_bytes(), now - sent, round, task.id});
  AdvanceRounds();
  return true;
}

void BatchReader::SkipRound(int64_t round) {
  if (round < next_round_ || rounds_ready_.contains(round)) return;  // had it already
  rounds_skipped_.insert(round);
  AdvanceRounds();
}

void BatchReader::AdvanceRounds() {
  while (true) {
    if (auto skipped = rounds_skipped_.find(next_round_); skipped != rounds_skipped_.end()) {
      rounds_skipped_.erase(skipped);
    } else if (auto ready = rounds_ready_.find(next_round_); ready != rounds_ready_.end()) {
      ready_.push_back(std::move(ready->second));
      rounds_ready_.erase(ready);
    } else {
      return;
    }
    ++next_round_;
  }
}

}  // namespace sluice::control
