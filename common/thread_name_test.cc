#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "common/thread_pool.h"

namespace sluice {
namespace {

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = CurrentThreadName();
  std::string inside;
  std::thread t([&] {
    SetCurrentThreadName("sluice-test");
    inside = CurrentThreadName();
  });
  t.join();
  EXPECT_EQ(inside, "sluice-test");
  EXPECT_EQ(CurrentThreadName(), before);
}

TEST(ThreadNameTest, LongNamesKeepTheirFirstFifteenCharacters) {
  std::string inside;
  std::thread t([&] {
    SetCurrentThreadName("sluice-producer-task-123456");
    inside = CurrentThreadName();
  });
  t.join();
  EXPECT_EQ(inside, "sluice-producer");
}

TEST(ThreadNameTest, PoolThreadsCarryThePoolName) {
  std::string seen;
  absl::Notification ran;
  {
    ThreadPool pool("rpc", 1);
    pool.Schedule([&] {
      seen = CurrentThreadName();
      ran.Notify();
    });
    ran.WaitForNotification();
  }
  EXPECT_EQ(seen, "sluice-rpc");
}

}  // namespace
}  // namespace sluice
