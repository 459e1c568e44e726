#include "common/thread_name.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/synchronization/notification.h"
#include "common/thread_pool.h"

namespace sluice {
namespace {

// Names a new thread `name` and returns what that thread then reads back.
std::string NameReadInThreadNamed(const std::string& name) {
  std::string inside;
  std::thread t([&] {
    SetCurrentThreadName(name);
    inside = CurrentThreadName();
  });
  t.join();
  return inside;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = CurrentThreadName();
  EXPECT_EQ(NameReadInThreadNamed("sluice-test"), "sluice-test");
  EXPECT_EQ(CurrentThreadName(), before);
}

TEST(ThreadNameTest, LongNamesKeepTheirFirstFifteenCharacters) {
  EXPECT_EQ(NameReadInThreadNamed("sluice-producer-task-123456"), "sluice-producer");
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
