// TaskRunner's coordinated reads: rounds opened by requests, filled with consecutive batches,
// and each consumer's batch of a round kept until it acknowledges it. The uncoordinated
// serving is in task_runner_delivery.cc.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "control/task_runner.h"

namespace sluice::control {

void TaskRunner::Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
                       RoundRequest request) {
  const int32_t consumer = request.consumer;
  const int64_t round = request.round;
  if (task_.num_consumers() == 0 || consumer < 0 || consumer >= task_.num_consumers() ||
      round < 0) {
    call->Reply(absl::InvalidArgumentError(absl::StrCat(
        "task ", task_.task_id(), " is read by ", task_.num_consumers(),
        " coordinated consumer(s); got a request from consumer ", consumer, " for round ", round)));
    return;
  }
  std::optional<ReadyBatch> again;
  std::optional<Waiter> evicted;
  std::shared_ptr<transport::ServerCall> superseded;
  Waiter waiter{std::move(call), max_batch_bytes, consumer, round, -1, request.epoch};
  {
    absl::MutexLock lock(&mu_);
    const size_t n = static_cast<size_t>(task_.num_consumers());
    if (went_ahead_below_.size() != n) went_ahead_below_.assign(n, 0);
    std::map<int64_t, ReadyBatch>& kept = kept_rounds_[consumer];
    std::set<int64_t>& let_go = rounds_let_go_[consumer];
    stats_.acknowledgements_received += static_cast<int64_t>(request.acked_rounds.size());
    for (int64_t acked : request.acked_rounds) {
      kept.erase(acked);
      let_go.erase(acked);
    }
    VerifyKeptSlabs();
    if (auto it = kept.find(round); it != kept.end()) {
      // Served before, and the reply went nowhere (the consumer asks only once otherwise).
      again.emplace(CopyOf(it->second));
      ++requests_;
      stats_.batches_served += 1;
      stats_.batches_redelivered += 1;
      stats_.bytes_served += static_cast<int64_t>(again->size);
      sends_in_flight_->fetch_add(1);
    } else {
      // A request for a round it already waits for: the earlier one's connection broke.
      auto same = std::find_if(waiters_.begin(), waiters_.end(), [&](const Waiter& w) {
        return w.consumer == consumer && w.round == round;
      });
      if (same != waiters_.end()) {
        superseded = std::move(same->call);
        waiters_.erase(same);
      }
      const bool went_ahead =
          round < went_ahead_below_[static_cast<size_t>(consumer)] && !rounds_.contains(round);
      if (let_go.erase(round) > 0 || went_ahead) ServeRoundAfresh(consumer, round);
      evicted = Park(std::move(waiter));
    }
  }
  if (superseded != nullptr) {
    superseded->Reply(absl::AbortedError(
        absl::StrCat("consumer ", consumer, " asked for round ", round, " again")));
  }
  if (evicted.has_value()) TellToRetry(*evicted);
  if (again.has_value()) Reply(waiter, std::move(*again));
  // Also after serving a round again: its acknowledgements may have let a kept batch go,
  // which a parked request waited on.
  Serve();
}

size_t TaskRunner::rounds_remembered() const {
  absl::MutexLock lock(&mu_);
  return rounds_.size();
}

void TaskRunner::NoteRoundLetGo(int32_t consumer, int64_t round) {
  std::set<int64_t>& let_go = rounds_let_go_[consumer];
  let_go.insert(round);
  if (let_go.size() > kMaxReleasedPerClient) let_go.erase(let_go.begin());
}

TaskRunner::Round& TaskRunner::RequestRound(int64_t round, int32_t consumer, absl::Time now) {
  Round& entry = rounds_[round];
  if (entry.requested.empty()) {
    const size_t n = static_cast<size_t>(task_.num_consumers());
    entry.requested.resize(n);
    entry.batches.resize(n);
    entry.given.resize(n);
    entry.opened = now;
  }
  if (!entry.requested[consumer]) {
    entry.requested[consumer] = true;
    ++entry.num_requested;
  }
  return entry;
}

void TaskRunner::ServeRoundAfresh(int32_t consumer, int64_t round) {
  // The round may be gone (all its batches served), wait for a consumer that never came,
  // holding nothing for this one, or have been opened again by a late consumer's request:
  // waiting would take the round wait, or until the round is forgotten, a minute. The round
  // goes ahead for this consumer as for one late to it: the next batch, and no waiting for
  // the others, who had theirs. Opened anew, it is not forgotten before that batch is ready.
  const absl::Time now = absl::Now();
  Round& entry = RequestRound(round, consumer, now);
  entry.opened = now;
  entry.assigned = true;
  if (entry.given[consumer] && !entry.batches[consumer].has_value()) {
    entry.given[consumer] = false;
    --entry.served;  // served again below, when a batch is ready
  }
}

void TaskRunner::KeepRound(const Waiter& waiter, const ReadyBatch& batch) {
  std::map<int64_t, ReadyBatch>& kept = kept_rounds_[waiter.consumer];
  if (kept.size() >= kMaxUnackedPerClient) {
    NoteRoundLetGo(waiter.consumer, kept.begin()->first);
    kept.erase(kept.begin());
    ++stats_.kept_batches_released;
  }
  kept.insert_or_assign(waiter.round, KeptCopyOf(batch));
  while (KeptSlabs() > kept_budget_ && ReleaseOldestKept({})) {
  }
}

void TaskRunner::MatchRounds(Matches& matched, std::vector<Waiter>& ended) {
  const size_t n = static_cast<size_t>(task_.num_consumers());
  const absl::Time now = absl::Now();
  if (absent_.size() != n) absent_.assign(n, false);
  for (const Waiter& w : waiters_) {
    absent_[w.consumer] = false;  // back, if it was missing
    RequestRound(w.round, w.consumer, now);
  }
  // Lowest round first, each taking consecutive batches for the consumers that asked; a
  // consumer that asks after its round went ahead gets the next batch on its own.
  for (auto& [id, round] : rounds_) {
    if (!round.assigned) {
      // Waits round_wait_ for the consumers that did not ask yet, unless they are missing.
      bool waits = false;
      for (size_t c = 0; c < n; ++c) waits = waits || (!round.requested[c] && !absent_[c]);
      if (waits && now - round.opened < round_wait_) continue;
      // At the pipeline's end a round takes what is left (a recovery task's last round):
      // the consumers it cannot serve are told the end instead of waiting for ever.
      if (ready_.size() < round.num_requested && (!produced_all_ || ready_.empty())) break;
      round.assigned = true;
      // A consumer that let a round go without it is missing until it asks again: later
      // rounds do not wait for it (a dead consumer would otherwise slow every round to one
      // per round_wait_).
      for (size_t c = 0; c < n; ++c) absent_[c] = absent_[c] || !round.requested[c];
    }
    for (size_t c = 0; c < n && !ready_.empty(); ++c) {
      if (!round.requested[c] || round.given[c]) continue;
      round.batches[c] = std::move(ready_.front());
      round.given[c] = true;
      ready_.pop_front();
    }
  }
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    auto round = rounds_.find(it->round);
    std::optional<ReadyBatch>& slot = round->second.batches[it->consumer];
    if (!slot.has_value()) {
      // Not assigned yet, or never will be: the pipeline ended first.
      if (produced_all_ && ready_.empty()) {
        ended.push_back(std::move(*it));
        it = waiters_.erase(it);
      } else {
        ++it;
      }
      continue;
    }
    if (it->epoch > 0) KeepRound(*it, *slot);
    matched.emplace_back(std::move(*it), std::move(*slot));
    slot.reset();
    stats_.batches_served += 1;
    stats_.bytes_served += static_cast<int64_t>(matched.back().second.size);
    // Served now, not when the round took it: its consumer's request may have gone.
    if (std::exchange(matched.back().second.assembled, false)) {
      stats_.bytes_assembled_unserved -= static_cast<int64_t>(matched.back().second.size);
    }
    sends_in_flight_->fetch_add(1);
    ++round->second.served;
    it = waiters_.erase(it);
  }
  ForgetRounds(now);
}

void TaskRunner::ForgetRounds(absl::Time now) {
  const size_t n = static_cast<size_t>(task_.num_consumers());
  if (went_ahead_below_.size() != n) went_ahead_below_.assign(n, 0);
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    const auto& [id, round] = *it;
    bool holds_batch = false;
    bool complete = round.assigned;  // every consumer had its batch, or it went ahead
    for (size_t c = 0; c < n; ++c) {
      holds_batch = holds_batch || round.batches[c].has_value();
      complete = complete && (round.given[c] || !round.requested[c]);
    }
    bool done = round.served == n;
    if (!done && complete && !holds_batch) {
      done = true;
      for (size_t c = 0; c < n; ++c) {
        if (!round.requested[c]) went_ahead_below_[c] = std::max(went_ahead_below_[c], id + 1);
      }
    }
    // A consumer's batch that was given but not served, its request gone: after a minute.
    done = done || (round.assigned && !holds_batch &&
                    now - round.opened > std::max(absl::Minutes(1), 5 * round_wait_));
    it = done ? rounds_.erase(it) : std::next(it);
  }
}

}  // namespace sluice::control
