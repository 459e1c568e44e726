// TaskRunner: moving a stopped reader's buffered batches out of the worker's pool.
//
// Batches wait in a task's buffer, in registered slabs, until a reader asks for them. A
// reader that stops (a slow trainer, a dead one until its client timeout, a named job whose
// trainers all went away until the job is collected) leaves its buffer holding up to
// buffer_batches slabs, and a few such tasks hold the whole pool while another job's
// pipeline waits for a slab. Buffered batches were not sent, so they cannot be let go as
// kept ones are; they are copied to the heap instead, one copy each, within the worker's
// spill budget (control/spill_budget.h), and sent from there should their readers come back.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "control/task_runner.h"

namespace sluice::control {

void TaskRunner::NoteQuiet(absl::Time now) {
  absl::MutexLock lock(&mu_);
  (void)AskedSinceQuietCheck(now);
}

bool TaskRunner::AskedSinceQuietCheck(absl::Time now) {
  if (requests_ == quiet_check_.requests && waiters_.empty()) return false;
  quiet_check_ = {requests_, now};
  return true;
}

bool TaskRunner::ReadLately(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  return !waiters_.empty() || requests_ != quiet_check_.requests ||
         now - quiet_check_.since < kQuietBeforeSpill;
}

bool TaskRunner::SpillIfQuiet(absl::Time now) {
  std::vector<SpillCopy> copies;
  {
    absl::MutexLock lock(&mu_);
    if (AskedSinceQuietCheck(now) || now - quiet_check_.since < kQuietBeforeSpill) return false;
    copies = PlanSpill();
  }
  if (copies.empty()) return false;
  // Without the lock: a buffer is a few batches of up to a slab each (64 MiB with the
  // defaults), and a reader coming back, or the worker asking this task for its stats or
  // kept batches while another task's producer waits, must not wait for the copies.
  const std::shared_ptr<SpillBudget> budget = options_.spill_budget;
  for (SpillCopy& copy : copies) {
    const size_t size = copy.size;
    copy.to = std::shared_ptr<transport::Slab>(new transport::Slab(transport::Slab::OnHeap(size)),
                                               [budget, size](transport::Slab* slab) {
                                                 delete slab;
                                                 if (budget != nullptr) budget->Give(size);
                                               });
    std::memcpy(copy.to->data(), copy.from->data() + copy.offset, size);
  }
  // `copies` goes after the lock (declared before it): then a slab whose buffered batches
  // all moved goes back to the pool, and a copy no longer needed (its batch was served
  // meanwhile) is freed and its budget given back.
  absl::MutexLock lock(&mu_);
  return PlaceSpilled(copies);
}

std::vector<TaskRunner::SpillCopy> TaskRunner::PlanSpill() {
  std::vector<SpillCopy> copies;
  if (ready_.empty()) return copies;
  // While the producer waits for room it holds the slab it packed the last batch into, and
  // only then is last_slab_ safe to look at from here (the producer writes it outside mu_).
  const transport::Slab* producers = producer_resumes_at_.has_value() ? last_slab_.get() : nullptr;
  struct BufferedSlab {
    const transport::Slab* slab;
    long holders = 0;   // of the shared_ptr
    long buffered = 0;  // of them, entries of ready_
  };
  absl::InlinedVector<BufferedSlab, 8> slabs;
  for (size_t i = 0; i < ready_.size(); ++i) {
    const std::shared_ptr<transport::Slab>& slab = ready_[i].slab;
    if (!slab->pooled()) continue;  // moved before
    auto it = std::find_if(slabs.begin(), slabs.end(),
                           [&](const BufferedSlab& s) { return s.slab == slab.get(); });
    if (it == slabs.end()) {
      it = slabs.insert(slabs.end(), BufferedSlab{slab.get(), slab.use_count()});
    }
    ++it->buffered;
  }
  for (const BufferedSlab& s : slabs) {
    // Anything else holding it (a kept batch, a send in flight, a coordinated round's slot,
    // the producer busy with its next batch) would keep the slab out of the pool anyway:
    // copying its batches would cost memory and give nothing back. Read without the
    // holders' locks: a slab that has just come free waits for the next call.
    if (s.holders > s.buffered + (s.slab == producers ? 1 : 0)) continue;
    // A cached batch served again sits at the same place in every entry: one copy.
    std::vector<SpillCopy> of_slab;
    size_t bytes = 0;
    for (size_t i = 0; i < ready_.size(); ++i) {
      const ReadyBatch& batch = ready_[i];
      if (batch.slab.get() != s.slab) continue;
      const bool seen = std::any_of(of_slab.begin(), of_slab.end(),
                                    [&](const SpillCopy& c) { return c.offset == batch.offset; });
      if (seen) continue;
      of_slab.push_back(SpillCopy{batch.slab, batch.offset, batch.size, nullptr});
      bytes += batch.size;
    }
    // All of the slab's batches or none: moving some would free nothing.
    if (options_.spill_budget != nullptr && !options_.spill_budget->TryTake(bytes)) continue;
    for (SpillCopy& copy : of_slab) copies.push_back(std::move(copy));
  }
  return copies;
}

bool TaskRunner::PlaceSpilled(std::vector<SpillCopy>& copies) {
  // While the copies were made, a reader may have taken some of a slab's batches (its send
  // or kept copy now holds the slab), or the woken producer packed new ones behind them:
  // a slab's copies go in only if it still holds nothing but batches that have one, so
  // that placing them gives the slab back. Copies left out are freed with `copies`.
  const transport::Slab* producers = producer_resumes_at_.has_value() ? last_slab_.get() : nullptr;
  bool any = false;
  for (size_t first = 0; first < copies.size();) {
    const std::shared_ptr<transport::Slab>& from = copies[first].from;
    size_t end = first;  // PlanSpill put a slab's copies together
    while (end < copies.size() && copies[end].from == from) ++end;
    auto copy_of = [&](const ReadyBatch& batch) -> SpillCopy* {
      for (size_t c = first; c < end; ++c) {
        if (copies[c].offset == batch.offset) return &copies[c];
      }
      return nullptr;
    };
    long buffered = 0;
    bool whole = true;
    for (size_t i = 0; i < ready_.size() && whole; ++i) {
      if (ready_[i].slab != from) continue;
      ++buffered;
      whole = copy_of(ready_[i]) != nullptr;
    }
    const long holders =
        buffered + static_cast<long>(end - first) + (from.get() == producers ? 1 : 0);
    if (whole && buffered > 0 && from.use_count() == holders) {
      for (size_t i = 0; i < ready_.size(); ++i) {
        ReadyBatch& batch = ready_[i];
        if (batch.slab != from) continue;
        SpillCopy* copy = copy_of(batch);
        if (copy->to.use_count() == 1) {  // its first placing
          stats_.batches_spilled += 1;
          stats_.bytes_spilled += static_cast<int64_t>(batch.size);
        }
        batch.slab = copy->to;
        batch.offset = 0;
      }
      any = true;
      if (from.get() == producers) {
        // The producer, still waiting for room with the slab, lets go of it.
        drop_last_slab_ = true;
        room_.Signal();
      }
    }
    first = end;
  }
  return any;
}

}  // namespace sluice::control
