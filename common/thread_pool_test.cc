#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace sluice {
namespace {

TEST(ThreadPoolTest, ShutdownRunsWhatWasQueuedThenJoins) {
  ThreadPool pool("test", 1);
  absl::Notification release;
  std::atomic<int> ran{0};
  pool.Schedule([&] {
    release.WaitForNotification();
    ran.fetch_add(1);
  });
  for (int i = 0; i < 5; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  std::thread releaser([&] {
    absl::SleepFor(absl::Milliseconds(50));
    release.Notify();
  });
  pool.Shutdown();
  EXPECT_EQ(ran.load(), 6) << "Shutdown returned before the queue was drained";
  releaser.join();
}

// An owner tearing down may still be handed work by a thread it has not stopped yet.
TEST(ThreadPoolTest, AClosureScheduledAfterShutdownRunsOnTheCallersThread) {
  ThreadPool pool("test", 2);
  pool.Shutdown();
  std::thread::id ran_on;
  pool.Schedule([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  pool.Shutdown();  // a second call returns at once
}

}  // namespace
}  // namespace sluice
