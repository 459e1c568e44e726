// BatchReader::Next(): what it hands out, when the read is done, and how it waits for a
// fetch (driving the transport itself, polling, or asleep until a reply or a retry is
// due), and what a read that waits is waiting on. The fetches themselves are in
// batch_reader.cc.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/batch_reader.h"
#include "transport/spin_wait.h"

namespace sluice::control {

bool BatchReader::WaitsOnlyForTheDispatcher() const {
  if (job_finished_ || outstanding_ > 0 || !ready_.empty() || tasks_.empty()) return false;
  for (const Task& task : tasks_) {
    if (!task.ended) return false;
  }
  return true;
}

bool BatchReader::Done() const {
  if (options_.max_batches > 0 && batches_handed_out_ >= options_.max_batches) return true;
  if (!job_finished_ || outstanding_ > 0 || !ready_.empty()) return false;
  for (const Task& task : tasks_) {
    if (!task.ended) return false;
  }
  return true;
}

absl::Duration BatchReader::UntilTheNextRetry() const {
  absl::Duration wait = kRetryLater;
  const absl::Time now = absl::Now();
  for (const Task& task : tasks_) {
    if (task.retry_at > now) wait = std::min(wait, task.retry_at - now);
  }
  return wait;
}

bool BatchReader::DriveUntilAFetchCompletes() {
  uint64_t seen;
  {
    absl::MutexLock lock(&mu_);
    if (!ready_.empty() || !error_.ok() || outstanding_ == 0) return false;
    seen = fetches_completed_.load(std::memory_order_acquire);
  }
  auto completed = [this, seen] {
    return fetches_completed_.load(std::memory_order_acquire) != seen;
  };
  const bool drove = rpc_->transport().DriveUntil([] {}, completed);
  if (drove) {
    driven_waits_.fetch_add(1, std::memory_order_relaxed);
  } else if (rpc_->wait_spin() > absl::ZeroDuration() &&
             transport::SpinUntil(completed, rpc_->wait_spin())) {
    // The progress thread receives: a batch that lands within the spin is taken without the
    // sleep below in Next() and the wake-up it costs the progress thread.
    spun_waits_.fetch_add(1, std::memory_order_relaxed);
  }
  return drove;
}

absl::StatusOr<std::optional<Batch>> BatchReader::Next() {
  {
    absl::MutexLock lock(&mu_);
    ++nexts_waiting_;
  }
  absl::Cleanup done = [this] {
    absl::MutexLock lock(&mu_);
    --nexts_waiting_;
  };
  while (true) {
    Pump();
    // A completed fetch that handed nothing out (an end, a retry, a batch held for order)
    // comes back here to Pump and look again.
    const bool drove = DriveUntilAFetchCompletes();
    std::optional<Ready> ready;
    bool report_and_end = false;
    {
      absl::MutexLock lock(&mu_);
      auto can_return = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !ready_.empty() || !error_.ok() || Done();
      };
      // This thread drives the transport: a wait below would leave the fetches in flight
      // unreceived until it timed out. Coordinated rounds from several workers arrive out of
      // order often, and round r+1 alone hands nothing out.
      if (drove && !can_return() && outstanding_ > 0) continue;
      // The job's end is known from the dispatcher's heartbeat reply: ask for it now.
      if (!can_return() && WaitsOnlyForTheDispatcher()) heartbeat_pacer_.Soon();
      // Wake periodically: new tasks or a retry may need a Pump from this thread.
      // A retry scheduled meanwhile (retry_scheduled_) ends the wait too: its Pump is due
      // sooner than the wake-up.
      retry_scheduled_ = false;
      auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return can_return() || retry_scheduled_;
      };
      if (!wake()) mu_.AwaitWithTimeout(absl::Condition(&wake), UntilTheNextRetry());
      if (!ready_.empty()) {
        ready.emplace(std::move(ready_.front()));
        ready_.pop_front();
        ++batches_handed_out_;
      } else if (!error_.ok()) {
        return error_;
      } else if (Done()) {
        if (unreported_.empty() || final_report_sent_) return std::optional<Batch>();
        final_report_sent_ = true;
        report_and_end = true;
      }
    }
    if (report_and_end) {
      // The job is over, so nothing will be re-issued: a failed report loses nothing, and
      // is not tried again.
      (void)HeartbeatOnce(std::min(kFinalReportTimeout, options_.request_timeout));
      return std::optional<Batch>();
    }
    if (!ready) continue;
    absl::StatusOr<engine::BatchView> view =
        engine::BatchView::Parse(std::span<const std::byte>(ready->slab.data(), ready->size));
    if (!view.ok()) {
      // It was counted as delivered, so the read cannot go on as if nothing was lost.
      absl::MutexLock lock(&mu_);
      Fail(absl::DataLossError(absl::StrCat("batch from worker ", *ready->worker,
                                            " is malformed: ", view.status().message())));
      return error_;
    }
    return std::optional<Batch>(Batch(std::move(ready->slab), *std::move(view),
                                      std::move(ready->worker), ready->index, ready->fetch_latency,
                                      ready->round, ready->task));
  }
}

void BatchReader::FailIfNoSlabWillComeBack() {
  // No batch can land again: said, not waited on.
  if (quarantined_slabs_.size() >= pool_->num_slabs()) {
    Fail(absl::ResourceExhaustedError(absl::StrCat(
        "all ", pool_->num_slabs(),
        " landing slabs are held by receives the transport could not cancel (workers cut off "
        "mid-transfer); the read cannot go on")));
    return;
  }
  // Nothing in flight, ready or held for order: the caller's Batches hold the rest. A
  // Next() from the thread that keeps them would wait for ever; another thread may yet
  // give one back, so this is said only after request_timeout.
  // Counted only while a Next() waits: a caller that holds its batch through a long step
  // and lets it go before it asks again is not stuck.
  if (outstanding_ > 0 || !ready_.empty() || !rounds_ready_.empty() || nexts_waiting_ == 0) {
    caller_holds_every_slab_since_ = absl::InfiniteFuture();
    return;
  }
  const absl::Time now = absl::Now();
  if (caller_holds_every_slab_since_ == absl::InfiniteFuture()) {
    caller_holds_every_slab_since_ = now;
  } else if (now - caller_holds_every_slab_since_ >= options_.request_timeout) {
    Fail(absl::FailedPreconditionError(absl::StrCat(
        "every landing slab the read has (", pool_->num_slabs() - quarantined_slabs_.size(),
        ") has been held by a Batch the caller kept for ",
        absl::FormatDuration(options_.request_timeout),
        ", so no batch can land: let Batches go before asking for more, or raise "
        "ReadOptions::prefetch_batches")));
  }
}

void BatchReader::Interrupt(absl::Status why) {
  absl::MutexLock lock(&mu_);
  // An OK status would fail nothing, and wake no one.
  Fail(why.ok() ? absl::CancelledError("the read was interrupted") : std::move(why));
}

std::string BatchReader::DescribeWait() const {
  absl::MutexLock lock(&mu_);
  if (!error_.ok()) return absl::StrCat("the read failed: ", error_.message());
  int64_t open_tasks = 0;
  int requests = 0;
  std::vector<std::string> workers;  // the first few, for the sentence
  for (const Task& task : tasks_) {
    if (task.ended || task.lost) continue;
    ++open_tasks;
    requests += task.outstanding;
    if (workers.size() < 3 &&
        std::find(workers.begin(), workers.end(), *task.worker_text) == workers.end()) {
      workers.push_back(*task.worker_text);
    }
  }
  const std::string lost =
      tasks_lost_ > 0 ? absl::StrCat("; ", tasks_lost_, " task(s) lost with their workers") : "";
  if (open_tasks > 0 && options_.num_consumers > 1) {
    // The usual cause: a round's worker serves it only once every consumer asked for it.
    return absl::StrCat("waiting for round ", next_round_, " as consumer ", options_.consumer_index,
                        " of ", options_.num_consumers, " of job '", options_.job_name,
                        "': its worker serves a round once every consumer has asked for it, or "
                        "after the dispatcher's --round-wait (1.5 x --worker-timeout + 1s by "
                        "default); are the other consumers reading? (",
                        open_tasks, " task(s), ", requests, " request(s) in flight", lost, ")");
  }
  if (open_tasks > 0) {
    return absl::StrCat("waiting on ", open_tasks, " task(s) at ", absl::StrJoin(workers, ", "),
                        open_tasks > static_cast<int64_t>(workers.size()) ? ", ..." : "", " (",
                        requests, " request(s) in flight)", lost);
  }
  if (workers_listed_ < 0) return "no reply from the dispatcher yet";
  if (workers_listed_ == 0) {
    return absl::StrCat("the job has no task to read and the dispatcher lists no live worker", lost,
                        tasks_.empty()
                            ? absl::StrCat("; the read fails if none joins within ",
                                           absl::FormatDuration(options_.no_worker_timeout))
                            : "");
  }
  return absl::StrCat("the job has no task to read yet; the dispatcher lists ", workers_listed_,
                      " live worker(s)", lost);
}

}  // namespace sluice::control
