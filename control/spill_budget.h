// The heap bytes a worker's tasks may hold in batches moved out of its slab pool
// (TaskRunner::SpillIfQuiet), shared by all of them.
//
// Moving a stopped reader's buffer to the heap gives its slabs to jobs that read, but the
// heap copy stays until that reader comes back or its job is collected (minutes for a named
// job). Without a bound, jobs started, stopped and spilled one after another would grow the
// worker's memory without limit; with it, memory stays within the pool plus this budget.
//
//   auto budget = std::make_shared<SpillBudget>(256 << 20);
//   if (budget->TryTake(bytes)) { ...copy...; /* when the copy is freed: */ budget->Give(bytes); }
#ifndef SLUICE_CONTROL_SPILL_BUDGET_H_
#define SLUICE_CONTROL_SPILL_BUDGET_H_

#include <atomic>
#include <cstddef>

namespace sluice::control {

class SpillBudget {
 public:
  explicit SpillBudget(size_t max_bytes) : max_bytes_(max_bytes) {}
  SpillBudget(const SpillBudget&) = delete;
  SpillBudget& operator=(const SpillBudget&) = delete;

  // Takes `bytes` of the budget; false, taking nothing, when that would pass it.
  [[nodiscard]] bool TryTake(size_t bytes) {
    size_t held = held_.load(std::memory_order_relaxed);
    do {
      if (bytes > max_bytes_ - held) {  // held <= max_bytes_ always
        refusals_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return true;
  }
  // Gives back what a TryTake took.
  void Give(size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

  [[nodiscard]] size_t held() const { return held_.load(std::memory_order_relaxed); }
  [[nodiscard]] size_t max_bytes() const { return max_bytes_; }
  // TryTake calls that found the budget spent.
  [[nodiscard]] size_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  const size_t max_bytes_;
  std::atomic<size_t> held_{0};
  std::atomic<size_t> refusals_{0};
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_SPILL_BUDGET_H_
