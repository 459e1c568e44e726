// A fixed-size pool of threads running closures in FIFO order.
//
// Used where work may block (RPC handlers) and must stay off a transport's progress thread.
//
//   ThreadPool pool("rpc", 2);   // threads named "sluice-rpc"
//   pool.Schedule([] { HandleRequest(); });
//   pool.Shutdown();  // runs what was queued, then joins (the destructor does too)
//
// After Shutdown a closure scheduled runs at once on the caller's thread: an owner tearing
// down may still be handed work by a thread it has not stopped yet, and that work must
// neither be lost nor touch a pool that is going away.
#ifndef SLUICE_COMMON_THREAD_POOL_H_
#define SLUICE_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/thread_name.h"

namespace sluice {

class ThreadPool {
 public:
  ThreadPool(std::string name, int threads) : name_(std::move(name)) {
    for (int i = 0; i < threads; ++i) {
      threads_.emplace_back([this] {
        SetCurrentThreadName("sluice-" + name_);
        Run();
      });
    }
  }
  ~ThreadPool() { Shutdown(); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> task) {
    if (!TrySchedule(task)) task();
  }

  // Queues `task` unless the pool has shut down; then returns false, `task` untouched.
  [[nodiscard]] bool TrySchedule(std::function<void()>& task) {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
    return true;
  }

  // Runs what was queued and joins the threads; later calls return at once (one that races
  // the first may return before the queue drained). Not from a closure of this pool.
  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    for (auto& t : threads_) t.join();
  }

 private:
  void Run() {
    while (true) {
      std::function<void()> task;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](ThreadPool* p) { return p->stopping_ || !p->tasks_.empty(); }, this));
        if (tasks_.empty()) return;  // stopping and drained
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  const std::string name_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace sluice

#endif  // SLUICE_COMMON_THREAD_POOL_H_
