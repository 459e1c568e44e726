// The baton between a progress thread and callers, with real threads: one holder at a time,
// lending lingers, returning resumes the thread at once, wake-ups reach a sleeping thread.
#include "transport/progress_baton.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"

namespace sluice::transport {
namespace {

// A stand-in for a transport's progress loop: counts its turns, and counts how many threads
// are "inside the engine" at once (must never exceed one).
class FakeProgressThread {
 public:
  explicit FakeProgressThread(ProgressBaton* baton) : baton_(baton) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~FakeProgressThread() {
    stop_.store(true);
    Wake();
    thread_.join();
  }
  void Enter() { max_inside_ = std::max(max_inside_.load(), ++inside_); }
  void Leave() { --inside_; }
  int max_inside() const { return max_inside_.load(); }
  int64_t turns() const { return turns_.load(); }
  // When `sleepy`, the loop sleeps until woken between turns (like epoll_wait).
  void set_sleepy(bool sleepy) { sleepy_.store(sleepy); }
  void Wake() {
    absl::MutexLock lock(&mu_);
    woken_ = true;
  }

 private:
  void Loop() {
    while (!stop_.load()) {
      // Back from callers or not, a turn follows, as in the transports' loops.
      (void)baton_->ParkIfAsked();
      Enter();
      turns_.fetch_add(1);
      Leave();
      if (sleepy_.load() && !baton_->asked()) {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&woken_));
        woken_ = false;
      }
    }
  }

  ProgressBaton* baton_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleepy_{false};
  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
  std::atomic<int64_t> turns_{0};
  absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

TEST(ProgressBatonTest, OneHolderAtATimeUnderContention) {
  ProgressBaton baton(absl::Microseconds(50));
  FakeProgressThread progress(&baton);
  std::atomic<int> taken{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; i < 2000; ++i) {
        if (!baton.TryTake([] {}, absl::Milliseconds(50))) continue;
        EXPECT_TRUE(baton.HeldByThisThread());
        progress.Enter();
        progress.Leave();
        taken.fetch_add(1);
        ((i + c) % 2 == 0) ? baton.Lend() : baton.Return();
        EXPECT_FALSE(baton.HeldByThisThread());
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(progress.max_inside(), 1);
  EXPECT_GT(taken.load(), 100);
}

TEST(ProgressBatonTest, SecondCallerIsRefusedWhileHeld) {
  ProgressBaton baton(absl::Microseconds(50));
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  bool second = true;
  std::thread([&] { second = baton.TryTake([] {}, absl::Milliseconds(20)); }).join();
  EXPECT_FALSE(second);
  baton.Return();
}

// TryTakeLent takes only a baton lent at that moment: never one the progress thread runs
// with (it would have to be woken and wait), nor one another caller holds.
TEST(ProgressBatonTest, OnlyALentBatonIsTakenWithoutAsking) {
  constexpr absl::Duration kLinger = absl::Milliseconds(10);
  ProgressBaton baton(kLinger);
  FakeProgressThread progress(&baton);
  EXPECT_FALSE(baton.TryTakeLent()) << "taken from the running progress thread";
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  bool second = true;
  std::thread([&] { second = baton.TryTakeLent(); }).join();
  EXPECT_FALSE(second) << "taken from a holding caller";
  baton.Lend();
  const absl::Time lent = absl::Now();
  bool taken = false;
  std::thread([&] {
    taken = baton.TryTakeLent();
    if (taken) {
      EXPECT_TRUE(baton.HeldByThisThread());
      progress.Enter();
      progress.Leave();
      baton.Lend();
    }
  }).join();
  if (absl::Now() - lent < kLinger - absl::Milliseconds(1)) {  // not when the host stalled us
    EXPECT_TRUE(taken) << "a lent baton was refused";
  }
  EXPECT_EQ(progress.max_inside(), 1);
}

TEST(ProgressBatonTest, LentBatonKeepsTheThreadParkedForTheLinger) {
  constexpr absl::Duration kLinger = absl::Milliseconds(10);  // the largest allowed
  ProgressBaton baton(kLinger);
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  baton.Lend();
  const absl::Time lent = absl::Now();
  const int64_t parked_at = progress.turns();
  absl::SleepFor(absl::Milliseconds(2));
  const int64_t turns_soon_after = progress.turns();
  // The next call takes the lent baton at once, without waking anybody.
  int wakes = 0;
  ASSERT_TRUE(baton.TryTake([&] { ++wakes; }, absl::Seconds(5)));
  if (absl::Now() - lent < kLinger - absl::Milliseconds(1)) {  // not when the host stalled us
    EXPECT_EQ(turns_soon_after, parked_at) << "the thread resumed before the linger";
    EXPECT_EQ(wakes, 0) << "a lent baton needed a hand-over";
  }
  baton.Lend();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (progress.turns() == parked_at && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GT(progress.turns(), parked_at) << "the thread never took the baton back";
}

// Callers that keep re-taking the baton within the linger still leave the thread a turn
// every few milliseconds (it has work no caller does: sockets, accepts).
TEST(ProgressBatonTest, BusyCallersCannotKeepTheThreadAwayForLong) {
  ProgressBaton baton(absl::Microseconds(50));  // the thread comes back after 10 ms away
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  baton.Lend();
  const int64_t before = progress.turns();
  // Callers keep taking the baton for at least 200 ms and until the thread had a turn; a
  // loaded machine may not run the thread within the 200 ms, so the bound is 5 s.
  const absl::Time until = absl::Now() + absl::Milliseconds(200);
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  int calls = 0;
  while ((absl::Now() < until || progress.turns() == before) && absl::Now() < give_up) {
    if (baton.TryTake([] {}, absl::Seconds(5))) {
      ++calls;
      baton.Lend();
    }
  }
  EXPECT_GT(calls, 0);
  EXPECT_GT(progress.turns(), before) << "the thread never got a turn in 5 s";
}

// While calls keep coming, the parked thread looks at the baton less and less often (each
// look is a wake-up on a core the callers need). Looking every linger, it would have looked
// about 4,000 times in these 200 ms; backing off to 1 ms, with a turn of its own every 10
// ms, about 300. A loaded machine only makes its sleeps longer.
TEST(ProgressBatonTest, TheParkedThreadLooksLessOftenWhileCallsKeepComing) {
  ProgressBaton baton(absl::Microseconds(50));
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  baton.Lend();
  const uint64_t looks_before = baton.parked_looks();
  const absl::Time until = absl::Now() + absl::Milliseconds(200);
  int calls = 0;
  while (absl::Now() < until) {
    if (baton.TryTake([] {}, absl::Seconds(5))) {
      ++calls;
      baton.Lend();
    }
  }
  const uint64_t looks = baton.parked_looks() - looks_before;
  EXPECT_GT(calls, 100);
  EXPECT_LT(looks, 1000u) << looks << " looks during " << calls << " calls";
  // Once the calls stop, the thread takes the baton back within a few looks.
  const int64_t turns = progress.turns();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (progress.turns() == turns && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GT(progress.turns(), turns) << "the thread never took the baton back";
}

// A caller that holds the baton through each slow reply lends it only for the moment
// between two calls, which the thread's looks (at most every 1 ms) almost never see. Once
// the thread has been away for max_away (10 ms here) it asks for the baton, and the next
// Lend() gives it back: the thread has its turn before the next call can take the baton.
TEST(ProgressBatonTest, CallersHoldingTheBatonThroughSlowRepliesStillLetTheThreadIn) {
  ProgressBaton baton(absl::Microseconds(50));
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  const int64_t before = progress.turns();
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!baton.wants_back() && absl::Now() < give_up) {
  }
  ASSERT_TRUE(baton.wants_back()) << "held for 5 s and the thread never asked for the baton";
  baton.Lend();
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  EXPECT_GT(progress.turns(), before) << "the next call took the baton before the thread's turn";
  baton.Lend();
}

TEST(ProgressBatonTest, ReturnedBatonResumesTheThreadAtOnce) {
  ProgressBaton baton(absl::Seconds(30));
  FakeProgressThread progress(&baton);
  ASSERT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  const int64_t parked_at = progress.turns();
  baton.Return();
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (progress.turns() == parked_at && absl::Now() < deadline)
    absl::SleepFor(absl::Milliseconds(1));
  EXPECT_GT(progress.turns(), parked_at);
}

TEST(ProgressBatonTest, WakesASleepingThreadToHandOver) {
  ProgressBaton baton(absl::Microseconds(50));
  FakeProgressThread progress(&baton);
  progress.set_sleepy(true);
  absl::SleepFor(absl::Milliseconds(20));  // let it fall asleep
  int wakes = 0;
  EXPECT_TRUE(baton.TryTake(
      [&] {
        ++wakes;
        progress.Wake();
      },
      absl::Seconds(5)));
  EXPECT_EQ(wakes, 1);
  baton.Return();
  progress.set_sleepy(false);
  progress.Wake();
}

TEST(ProgressBatonTest, GivesUpWhenTheThreadDoesNotHandOver) {
  ProgressBaton baton(absl::Microseconds(50));
  // No progress thread looks at the baton (one stuck in a long callback).
  const absl::Time start = absl::Now();
  EXPECT_FALSE(baton.TryTake([] {}, absl::Milliseconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_FALSE(baton.asked()) << "a stale request would park the thread for nobody";
  // Once it comes back, the thread hands over to the next caller as usual.
  FakeProgressThread progress(&baton);
  EXPECT_TRUE(baton.TryTake([] {}, absl::Seconds(5)));
  baton.Return();
}

}  // namespace
}  // namespace sluice::transport
