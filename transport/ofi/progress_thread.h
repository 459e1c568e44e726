// The one thread that owns a libfabric transport's fids, and the queue other threads use to
// hand it work.
//
// libfabric objects are opened with FI_THREAD_DOMAIN: the application serialises every call
// in a domain. Sluice does that by making all calls from this thread. It runs a loop of
// "drain the task queue, call `progress`, sleep when idle for `spin`"; sleeping is an epoll
// wait on an eventfd (new tasks), the watched file descriptors, and the completion queue's
// wait fd when the provider has one. `can_block` (fi_trywait) is asked before every sleep so
// a completion that arrived meanwhile is never slept through. Providers without a wait fd
// (shm) are polled: the sleep grows from kMinPollSleep to kMaxPollSleep while idle and
// resets on activity. Posting writes the eventfd only when the thread sleeps.
//
//   ProgressThread::Hooks hooks{.progress = [&] { return ep->Progress(); }, ...};
//   auto thread = std::make_shared<ProgressThread>();
//   SLUICE_RETURN_IF_ERROR(thread->Start(std::move(hooks), cq_wait_fd, absl::Microseconds(50)));
//   thread->RunSync([&] { /* runs on the progress thread */ });
#ifndef SLUICE_TRANSPORT_OFI_PROGRESS_THREAD_H_
#define SLUICE_TRANSPORT_OFI_PROGRESS_THREAD_H_

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <thread>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sluice::transport::ofi {

class ProgressThread {
 public:
  struct Hooks {
    // Progresses the provider; returns how many completions it handled.
    std::function<int()> progress;
    // Whether it is safe to sleep on the wait fd now (fi_trywait == FI_SUCCESS).
    std::function<bool()> can_block;
    // A watched file descriptor (other than the wait fd) became readable or hung up.
    std::function<void(int fd)> on_ready;
    // Runs about every kTickInterval.
    std::function<void()> on_tick;
  };
  static constexpr auto kTickInterval = std::chrono::milliseconds(5);
  static constexpr auto kMinPollSleep = std::chrono::microseconds(20);
  static constexpr auto kMaxPollSleep = std::chrono::microseconds(1000);

  ProgressThread() = default;
  ~ProgressThread();
  ProgressThread(const ProgressThread&) = delete;
  ProgressThread& operator=(const ProgressThread&) = delete;

  // `wait_fd` < 0: the provider has no wait object; poll instead. `spin`: how long to keep
  // progressing after the last event before sleeping, growing up to `max_spin` while events
  // follow soon after each sleep (AdaptiveSpin).
  [[nodiscard]] absl::Status Start(Hooks hooks, int wait_fd, absl::Duration spin,
                                   absl::Duration max_spin);
  // Lets the queue drain, then ends the thread. Tasks posted later are refused.
  void Stop();

  // Queues `task` (moved from only when queued); false once the thread has ended, `task`
  // then left as it was, so that the caller can still do what it owes (a send's callback,
  // which a dropped task would never run).
  template <typename Task>
  bool Post(Task&& task) {
    {
      absl::MutexLock lock(&mu_);
      if (exited_) return false;
      queue_.emplace_back(std::forward<Task>(task));
    }
    Wake();
    return true;
  }
  // Runs `task` on the thread and waits; inline when called on it. False when it has ended.
  bool RunSync(const std::function<void()>& task);
  [[nodiscard]] bool OnThread() const {
    return std::this_thread::get_id() == thread_id_.load(std::memory_order_relaxed);
  }
  // Started and not yet stopped.
  [[nodiscard]] bool running() const { return thread_.joinable(); }

  // Progress-thread only: watch a socket for readability / hang-up.
  void Watch(int fd);
  void Unwatch(int fd);

 private:
  void Loop();
  bool DrainQueue();  // false when the loop should end
  void Sleep(std::chrono::microseconds poll_sleep);
  // Handles the watched fds that are ready now, without waiting (on every tick).
  void PollWatched();
  void Dispatch(const epoll_event* ready, int n);
  void Wake();

  Hooks hooks_;
  absl::Duration spin_ = absl::ZeroDuration();
  absl::Duration max_spin_ = absl::ZeroDuration();
  int wait_fd_ = -1;
  int event_fd_ = -1;
  int epoll_fd_ = -1;
  std::thread thread_;
  // Cleared once the thread is joined: a later thread may get the same id, and must not be
  // taken for this one. Atomic, as other threads ask while Stop clears it.
  std::atomic<std::thread::id> thread_id_{};
  // A post sets has_posts_ and writes the eventfd only if sleeping_: the loop sets sleeping_
  // and then re-checks has_posts_ before waiting, so one of the two always sees the other.
  std::atomic<bool> has_posts_{false};
  std::atomic<bool> sleeping_{false};

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool exited_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_PROGRESS_THREAD_H_
