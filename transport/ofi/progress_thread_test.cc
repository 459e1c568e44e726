// The libfabric transport's progress thread: what it runs, and what a post after its end
// leaves to the caller (a send's callback must still be told, not dropped with the task).
#include "transport/ofi/progress_thread.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"

namespace sluice::transport::ofi {
namespace {

ProgressThread::Hooks IdleHooks() {
  return ProgressThread::Hooks{.progress = [] { return 0; },
                               .can_block = [] { return true; },
                               .on_ready = [](int) {},
                               .on_tick = [] {}};
}

// Owns something, as a queued send owns its callback.
struct OwningTask {
  void operator()() { *ran = true; }
  std::unique_ptr<bool> ran = std::make_unique<bool>(false);
};

TEST(ProgressThreadTest, RunsWhatIsPostedOnItsThread) {
  ProgressThread thread;
  ASSERT_TRUE(
      thread.Start(IdleHooks(), /*wait_fd=*/-1, absl::Microseconds(50), absl::Microseconds(500))
          .ok());
  absl::Notification ran;
  bool on_thread = false;
  ASSERT_TRUE(thread.Post([&] {
    on_thread = thread.OnThread();
    ran.Notify();
  }));
  ASSERT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(on_thread);
  EXPECT_FALSE(thread.OnThread());
  thread.Stop();
}

// Refused once the thread has ended, the task stays the caller's, whole: OfiTransport::Send
// then tells its callback the transport is shutting down (before, the task and the callback
// in it were dropped, and the sender never heard).
TEST(ProgressThreadTest, APostAfterTheEndLeavesTheTaskToTheCaller) {
  ProgressThread thread;
  ASSERT_TRUE(
      thread.Start(IdleHooks(), /*wait_fd=*/-1, absl::Microseconds(50), absl::Microseconds(500))
          .ok());
  thread.Stop();
  OwningTask task;
  bool* ran = task.ran.get();
  EXPECT_FALSE(thread.Post(std::move(task)));
  ASSERT_NE(task.ran, nullptr) << "the refused task was taken";  // NOLINT(bugprone-use-after-move)
  EXPECT_FALSE(*ran);
  task();  // the caller can still run what it owes
  EXPECT_TRUE(*ran);
  EXPECT_FALSE(thread.RunSync([] {}));
}

// A thread started once the progress thread has ended may get its id (glibc reuses the
// ids of joined threads): it is not taken for the progress thread, which would have it run
// work inline that belongs on a thread that no longer exists.
TEST(ProgressThreadTest, ALaterThreadIsNotTakenForTheEndedOne) {
  ProgressThread thread;
  ASSERT_TRUE(
      thread.Start(IdleHooks(), /*wait_fd=*/-1, absl::Microseconds(50), absl::Microseconds(500))
          .ok());
  thread.Stop();
  for (int i = 0; i < 20; ++i) {
    bool on_thread = true;
    std::thread later([&] { on_thread = thread.OnThread(); });
    later.join();
    EXPECT_FALSE(on_thread) << "thread " << i;
  }
}

}  // namespace
}  // namespace sluice::transport::ofi
