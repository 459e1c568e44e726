#include "transport/ofi/progress_thread.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/thread_name.h"
#include "transport/adaptive_spin.h"

namespace sluice::transport::ofi {

ProgressThread::~ProgressThread() {
  Stop();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (event_fd_ >= 0) close(event_fd_);
}

absl::Status ProgressThread::Start(Hooks hooks, int wait_fd, absl::Duration spin,
                                   absl::Duration max_spin) {
  hooks_ = std::move(hooks);
  spin_ = spin;
  max_spin_ = max_spin;
  wait_fd_ = wait_fd;
  event_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (event_fd_ < 0 || epoll_fd_ < 0) {
    return absl::InternalError(absl::StrCat("eventfd/epoll_create1: ", std::strerror(errno)));
  }
  for (int fd : {event_fd_, wait_fd_}) {
    if (fd < 0) continue;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return absl::InternalError(absl::StrCat("epoll_ctl: ", std::strerror(errno)));
    }
  }
  absl::Notification started;
  thread_ = std::thread([this, &started] {
    thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    SetCurrentThreadName("sluice-ofi");
    // Polled providers sleep for tens of microseconds; the default 50 us timer slack would
    // double those sleeps.
    if (wait_fd_ < 0) prctl(PR_SET_TIMERSLACK, 1UL);
    started.Notify();
    Loop();
  });
  // OnThread() must see the id before any task can ask.
  started.WaitForNotification();
  return absl::OkStatus();
}

void ProgressThread::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  thread_.join();
  thread_id_.store(std::thread::id(), std::memory_order_relaxed);
}

void ProgressThread::Wake() {
  has_posts_.store(true, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    (void)!write(event_fd_, &one, sizeof(one));
  }
}

bool ProgressThread::RunSync(const std::function<void()>& task) {
  if (OnThread()) {
    task();
    return true;
  }
  absl::Notification done;
  if (!Post([&] {
        task();
        done.Notify();
      })) {
    return false;
  }
  done.WaitForNotification();
  return true;
}

void ProgressThread::Watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void ProgressThread::Unwatch(int fd) { epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr); }

bool ProgressThread::DrainQueue() {
  if (!has_posts_.exchange(false, std::memory_order_acq_rel)) return true;
  std::deque<absl::AnyInvocable<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (queue_.empty()) {
        exited_ = true;
        return false;
      }
      has_posts_.store(true);  // come back to see the queue empty before ending
    }
    tasks.swap(queue_);
  }
  for (auto& task : tasks) task();
  return true;
}

void ProgressThread::Loop() {
  auto next_tick = std::chrono::steady_clock::now() + kTickInterval;
  auto poll_sleep = std::chrono::microseconds(kMinPollSleep);
  // Spinning a little after the last event keeps request/response latency low (an epoll
  // wake-up costs tens of microseconds) without burning a core while idle.
  auto last_event = std::chrono::steady_clock::now();
  AdaptiveSpin spin(spin_, max_spin_);
  auto spin_now = absl::ToChronoNanoseconds(spin.current());
  // Set after a sleep: how long it lasted, judged by whether the next turn finds work.
  std::optional<absl::Duration> slept;
  while (DrainQueue()) {
    int events = hooks_.progress();
    auto now = std::chrono::steady_clock::now();
    if (now >= next_tick) {
      hooks_.on_tick();
      next_tick = now + kTickInterval;
      // Watched fds are otherwise seen only in Sleep, which steady traffic never reaches:
      // a busy worker noticed no hang-up and accepted no connection.
      PollWatched();
    }
    const bool active = events > 0 || has_posts_.load(std::memory_order_acquire);
    if (slept.has_value()) {
      spin.Slept(*slept, active);
      spin_now = absl::ToChronoNanoseconds(spin.current());
      slept.reset();
    }
    if (active) {
      last_event = now;
      poll_sleep = kMinPollSleep;
      continue;
    }
    if (now - last_event < spin_now) continue;
    Sleep(poll_sleep);
    slept = absl::FromChrono(std::chrono::steady_clock::now() - now);
    if (wait_fd_ < 0)
      poll_sleep = std::min<std::chrono::microseconds>(poll_sleep * 2, kMaxPollSleep);
  }
}

void ProgressThread::Sleep(std::chrono::microseconds poll_sleep) {
  std::chrono::microseconds timeout = poll_sleep;
  if (wait_fd_ >= 0) {
    if (!hooks_.can_block()) return;  // completions are pending: progress instead
    timeout = kTickInterval;
  }
  timespec ts{};
  ts.tv_sec = timeout.count() / 1000000;
  ts.tv_nsec = (timeout.count() % 1000000) * 1000;
  epoll_event ready[16];
  sleeping_.store(true, std::memory_order_seq_cst);
  int n = 0;
  // A post that raced with going to sleep did not write the eventfd: do not sleep on it.
  if (!has_posts_.load(std::memory_order_seq_cst)) {
    n = epoll_pwait2(epoll_fd_, ready, 16, &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {  // kernel before 5.11: millisecond resolution
      n = epoll_wait(epoll_fd_, ready, 16, static_cast<int>((timeout.count() + 999) / 1000));
    }
  }
  sleeping_.store(false, std::memory_order_release);
  Dispatch(ready, n);
}

void ProgressThread::PollWatched() {
  epoll_event ready[16];
  Dispatch(ready, epoll_wait(epoll_fd_, ready, 16, 0));
}

void ProgressThread::Dispatch(const epoll_event* ready, int n) {
  for (int i = 0; i < n; ++i) {
    int fd = ready[i].data.fd;
    if (fd == event_fd_) {
      uint64_t count;
      (void)!read(event_fd_, &count, sizeof(count));
    } else if (fd != wait_fd_) {
      hooks_.on_ready(fd);
    }
  }
}

}  // namespace sluice::transport::ofi
