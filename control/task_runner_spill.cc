// TaskRunner: moving a stopped reader's buffered batches out of the worker's pool.
//
// Batches wait in a task's buffer, in registered slabs, until a reader asks for them. A
// reader that stops (a slow trainer, a dead one until its client timeout, a named job whose
// trainers all went away until the job is collected) leaves its buffer holding up to
// buffer_batches slabs, and a few such tasks hold the whole pool while another job's
// pipeline waits for a slab. Buffered batches were not sent, so they cannot be let go as
// kept ones are; they are copied to the heap instead, one copy each, and sent from there
// should their readers come back.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "control/task_runner.h"

namespace sluice::control {

bool TaskRunner::SpillIfQuiet(absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (requests_ != quiet_check_.requests || !waiters_.empty()) {
    quiet_check_ = {requests_, now};  // asked since: quiet from now on, at the earliest
    return false;
  }
  if (now - quiet_check_.since < kQuietBeforeSpill) return false;
  return SpillBuffered();
}

bool TaskRunner::SpillBuffered() {
  if (ready_.empty()) return false;
  // While the producer waits for room it holds the slab it packed the last batch into, and
  // only then is last_slab_ safe to look at from here (the producer writes it outside mu_).
  const transport::Slab* producers = producer_resumes_at_.has_value() ? last_slab_.get() : nullptr;
  struct BufferedSlab {
    const transport::Slab* slab;
    long holders = 0;   // of the shared_ptr, counted before any batch moves
    long buffered = 0;  // of them, entries of ready_
    bool moves = false;
  };
  absl::InlinedVector<BufferedSlab, 8> slabs;
  auto of = [&slabs](const transport::Slab* slab) {
    return std::find_if(slabs.begin(), slabs.end(),
                        [slab](const BufferedSlab& s) { return s.slab == slab; });
  };
  for (size_t i = 0; i < ready_.size(); ++i) {
    const std::shared_ptr<transport::Slab>& slab = ready_[i].slab;
    if (!slab->pooled()) continue;  // spilled before
    auto it = of(slab.get());
    if (it == slabs.end())
      it = slabs.insert(slabs.end(), BufferedSlab{slab.get(), slab.use_count()});
    ++it->buffered;
  }
  bool any = false;
  for (BufferedSlab& s : slabs) {
    // Anything else holding it (a kept batch, a send in flight, a coordinated round's slot,
    // the producer busy with its next batch) would keep the slab out of the pool anyway:
    // copying its batches would cost memory and give nothing back. Read without the
    // holders' locks: a slab that has just come free waits for the next call.
    s.moves = s.holders <= s.buffered + (s.slab == producers ? 1 : 0);
    any = any || s.moves;
  }
  if (!any) return false;
  // A cached batch served again sits at the same place in every entry: one heap copy each.
  struct Moved {
    const transport::Slab* from;
    size_t offset;
    std::shared_ptr<transport::Slab> to;
  };
  absl::InlinedVector<Moved, 8> moved;
  bool producers_moved = false;
  for (size_t i = 0; i < ready_.size(); ++i) {
    ReadyBatch& batch = ready_[i];
    if (!batch.slab->pooled()) continue;  // moved already
    const transport::Slab* from = batch.slab.get();
    auto s = of(from);
    if (s == slabs.end() || !s->moves) continue;
    producers_moved = producers_moved || from == producers;
    auto same = std::find_if(moved.begin(), moved.end(), [&](const Moved& m) {
      return m.from == from && m.offset == batch.offset;
    });
    if (same == moved.end()) {
      // Under mu_: the task is quiet, so no reader waits on the lock meanwhile; a buffer is
      // a few batches, one copy each.
      auto heap = std::make_shared<transport::Slab>(transport::Slab::OnHeap(batch.size));
      std::memcpy(heap->data(), from->data() + batch.offset, batch.size);
      stats_.batches_spilled += 1;
      stats_.bytes_spilled += static_cast<int64_t>(batch.size);
      same = moved.insert(moved.end(), Moved{from, batch.offset, std::move(heap)});
    }
    batch.slab = same->to;  // the last of them gives the pool's slab back
    batch.offset = 0;
  }
  if (producers_moved) {
    drop_last_slab_ = true;
    room_.Signal();
  }
  return true;
}

}  // namespace sluice::control
