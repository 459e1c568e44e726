// The journal's writer and reader: round trips, concurrent appends and group commit,
// compaction (also under concurrent appends), options, and 10^6 updates.
#include "control/journal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <future>
#include <iostream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/journal_test_util.h"

namespace sluice::control::journal_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(JournalTest, RoundTripAcrossSessions) {
  TempDir tmp;
  const std::vector<proto::Update> first = SomeUpdates(1, 20), second = SomeUpdates(21, 5);
  const std::string file1 = WriteSession(tmp.dir(), first);
  const std::string file2 = WriteSession(tmp.dir(), second);
  EXPECT_NE(file1, file2);  // each open starts a new file
  auto recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ExpectUpdates(recovered->updates, Concat(first, second));
  EXPECT_THAT(recovered->journal_files, ::testing::ElementsAre(file1, file2));
  EXPECT_FALSE(recovered->snapshot.has_value());
  EXPECT_FALSE(recovered->dropped.has_value());
}

TEST(JournalTest, ErrorsNameTheirPaths) {
  TempDir tmp;
  auto missing = Recover(tmp.dir());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(tmp.dir()));

  auto writer = JournalWriter::Open(tmp.dir(), {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  auto second = JournalWriter::Open(tmp.dir(), {});
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(tmp.dir()));
  EXPECT_EQ((*writer)->Write(proto::Update()).code(), absl::StatusCode::kInvalidArgument);

  WriteBytes(tmp.path() + "/file", "x");
  auto not_dir = JournalWriter::Open(tmp.path() + "/file", {});
  EXPECT_FALSE(not_dir.ok());
  EXPECT_THAT(not_dir.status().message(), HasSubstr(tmp.path() + "/file"));
}

TEST(JournalTest, ConcurrentWritersAreAllDurableAndInOrder) {
  TempDir tmp;
  constexpr int kThreads = 8, kPerThread = 3000;
  std::atomic<int> durable{0}, failed{0}, out_of_order{0};
  std::vector<int> last_durable(kThreads, -1);  // touched by callbacks only
  {
    auto writer = JournalWriter::Open(tmp.dir(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          if (t % 2 == 0 && i % 100 == 0) {  // some block, as a synchronous handler would
            if ((*writer)->Write(Cursor(t, i)).ok()) durable += 1;
            continue;
          }
          // Callbacks run on the commit thread, in append order.
          (*writer)->Append(Cursor(t, i), [&, t, i](absl::Status status) {
            if (status.ok()) durable += 1;
            if (!status.ok()) failed += 1;
            if (i <= last_durable[t]) out_of_order += 1;
            last_durable[t] = i;
          });
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_TRUE((*writer)->Flush().ok());
    EXPECT_EQ(durable.load(), kThreads * kPerThread);
    const JournalWriter::Stats stats = (*writer)->stats();
    EXPECT_EQ(stats.records, kThreads * kPerThread);
    EXPECT_LT(stats.batches, stats.records / 4) << "group commit should share syncs";
  }
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(out_of_order.load(), 0);
  auto recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->updates.size(), size_t{kThreads * kPerThread});
  std::vector<int64_t> next(kThreads, 0);
  for (const proto::Update& update : recovered->updates) {
    const auto& cursor = update.split_cursor();
    ASSERT_EQ(cursor.next_split_index(), next[cursor.job_id()]) << "writer " << cursor.job_id();
    next[cursor.job_id()] += 1;
  }
}

TEST(JournalTest, CompactionKeepsSnapshotPlusTail) {
  TempDir tmp;
  const std::vector<proto::Update> before = SomeUpdates(1, 50), after = SomeUpdates(51, 7);
  proto::Snapshot snapshot;
  snapshot.set_next_id(99);
  *snapshot.add_datasets() = before[0].register_dataset();
  *snapshot.add_cursors() = Cursor(2, 51).split_cursor();
  std::string old_file, old_bytes;
  {
    auto writer = JournalWriter::Open(tmp.dir(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (const proto::Update& update : before) (*writer)->Append(update, nullptr);
    old_file = (*writer)->current_path();
    ASSERT_TRUE((*writer)->Flush().ok());
    old_bytes = ReadBytes(old_file);
    ASSERT_TRUE((*writer)->Compact(snapshot).ok());
    EXPECT_NE((*writer)->current_path(), old_file);
    for (const proto::Update& update : after) ASSERT_TRUE((*writer)->Write(update).ok());
  }
  EXPECT_FALSE(fs::exists(old_file));
  auto recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->snapshot.has_value());
  EXPECT_EQ(recovered->snapshot->SerializeAsString(), snapshot.SerializeAsString());
  ExpectUpdates(recovered->updates, after);
  const std::string snapshot_path = recovered->snapshot_path;

  // A crash between steps 3 and 4: the covered file is still there, and ignored.
  WriteBytes(old_file, old_bytes);
  recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ExpectUpdates(recovered->updates, after);
  // A crash before step 3 completed: no snapshot, only its temporary; every file is replayed.
  fs::rename(snapshot_path, snapshot_path + ".tmp");
  recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_FALSE(recovered->snapshot.has_value());
  ExpectUpdates(recovered->updates, Concat(before, after));
  // The next writer removes the temporary; a second compaction deletes everything older.
  {
    auto writer = JournalWriter::Open(tmp.dir(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    EXPECT_FALSE(fs::exists(snapshot_path + ".tmp"));
    ASSERT_TRUE((*writer)->Compact(snapshot).ok());
    ASSERT_TRUE((*writer)->Write(after[0]).ok());
  }
  recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ExpectUpdates(recovered->updates, {after[0]});
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(tmp.dir())) ++files;
  EXPECT_EQ(files, 3);  // LOCK, the snapshot and the journal file after it

  // A corrupt snapshot is DataLoss naming it.
  std::string bytes = ReadBytes(recovered->snapshot_path);
  bytes[bytes.size() / 2] ^= 0x10;
  WriteBytes(recovered->snapshot_path, bytes);
  auto corrupt = Recover(tmp.dir());
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(corrupt.status().message(), HasSubstr(recovered->snapshot_path));
}

// Replays `recovered` into per-writer cursors: false unless each writer's updates continue
// its snapshot cursor exactly (no gap, no overlap).
bool ReplayCursors(const Recovered& recovered, std::vector<int64_t>* next) {
  if (recovered.snapshot.has_value()) {
    for (const auto& cursor : recovered.snapshot->cursors()) {
      (*next)[cursor.job_id()] = cursor.next_split_index();
    }
  }
  for (const proto::Update& update : recovered.updates) {
    const auto& cursor = update.split_cursor();
    if (cursor.next_split_index() != ++(*next)[cursor.job_id()]) return false;
  }
  return true;
}

// Compactions taken while other threads append, each followed by a recovery while the
// appends go on: the cut is exact, so snapshot + later updates hold every update once.
TEST(JournalTest, CompactionUnderConcurrentAppendsCutsExactly) {
  TempDir tmp;
  constexpr int kThreads = 4, kCompactions = 20;
  std::mutex mu;                            // the dispatcher's state lock
  std::vector<int64_t> state(kThreads, 0);  // per writer: the last index appended
  std::atomic<int> compactions{0}, errors{0}, inconsistent{0};
  std::atomic<bool> stop{false};
  {
    auto writer = JournalWriter::Open(tmp.dir(), {.max_delay = absl::Microseconds(200)});
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 1; !stop.load(); ++i) {
          std::lock_guard<std::mutex> lock(mu);
          state[t] = i;
          (*writer)->Append(Cursor(t, i), [&](absl::Status s) { errors += s.ok() ? 0 : 1; });
        }
      });
    }
    threads.emplace_back([&] {
      for (int c = 0; c < kCompactions; ++c) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        auto compacted = std::make_shared<std::promise<void>>();
        std::future<void> done = compacted->get_future();
        {
          std::lock_guard<std::mutex> lock(mu);
          proto::Snapshot snapshot;
          for (int t = 0; t < kThreads; ++t) {
            *snapshot.add_cursors() = Cursor(t, state[t]).split_cursor();
          }
          (*writer)->CompactAsync(std::move(snapshot), [&, compacted](absl::Status s) {
            compactions += s.ok() ? 1 : 0;
            errors += s.ok() ? 0 : 1;
            compacted->set_value();
          });
        }
        done.wait();
        // Recovery while appends continue: the last file may end mid-batch (a torn tail).
        absl::StatusOr<Recovered> recovered = Recover(tmp.dir());
        std::vector<int64_t> next(kThreads);
        if (!recovered.ok() || !ReplayCursors(*recovered, &next)) inconsistent += 1;
      }
      stop = true;
    });
    for (std::thread& thread : threads) thread.join();
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(inconsistent.load(), 0);
  EXPECT_EQ(compactions.load(), kCompactions);
  auto recovered = Recover(tmp.dir());
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(recovered->snapshot.has_value());
  EXPECT_FALSE(recovered->updates.empty());  // appends went on after the last cut
  std::vector<int64_t> next(kThreads);
  EXPECT_TRUE(ReplayCursors(*recovered, &next));
  EXPECT_EQ(next, state);
  int snapshots = 0;
  for (const auto& entry : fs::directory_iterator(tmp.dir())) {
    snapshots += entry.path().extension() == ".pb" ? 1 : 0;
  }
  EXPECT_EQ(snapshots, 1);
}

// Batches stay under max_batch_bytes; a callback may append even when the queue is full.
TEST(JournalTest, OptionsBoundBatchesAndCallbacksMayAppend) {
  TempDir tmp;
  auto writer = JournalWriter::Open(
      tmp.dir(),
      {.max_delay = absl::Milliseconds(1), .max_batch_bytes = 256, .max_pending_bytes = 64});
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::atomic<int> chained{0};
  for (int i = 0; i < 200; ++i) {
    (*writer)->Append(Cursor(1, i), [&, i](absl::Status s) {
      ASSERT_TRUE(s.ok()) << s;
      if (i % 10 == 0) (*writer)->Append(Cursor(2, i), [&](absl::Status) { chained += 1; });
    });
  }
  ASSERT_TRUE((*writer)->Flush().ok());
  ASSERT_TRUE((*writer)->Flush().ok());  // the chained appends joined later batches
  EXPECT_EQ(chained.load(), 20);
  const JournalWriter::Stats stats = (*writer)->stats();
  EXPECT_EQ(stats.records, 220);
  EXPECT_GE(stats.batches, stats.bytes / 256);
}

// Order-sensitive per writer, order-insensitive across writers.
uint64_t Mix(const proto::Update::SplitCursor& cursor) {
  uint64_t x = static_cast<uint64_t>(cursor.job_id()) * 0x9e3779b97f4a7c15ull ^
               static_cast<uint64_t>(cursor.next_split_index()) * 0xc2b2ae3d27d4eb4full;
  return x ^ (x >> 29);
}

TEST(JournalTest, MillionUpdatesGroupCommittedAndRecovered) {
  TempDir tmp;
  constexpr int kThreads = 4, kPerThread = 250'000;
  std::atomic<uint64_t> written_sum{0};
  {
    auto writer = JournalWriter::Open(tmp.dir(), {});
    ASSERT_TRUE(writer.ok()) << writer.status();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        uint64_t sum = 0;
        for (int i = 0; i < kPerThread; ++i) {
          proto::Update update = Cursor(t, i);
          sum += Mix(update.split_cursor());
          (*writer)->Append(update, nullptr);
        }
        written_sum += sum;
      });
    }
    for (std::thread& thread : threads) thread.join();
    ASSERT_TRUE((*writer)->Flush().ok());
    const JournalWriter::Stats stats = (*writer)->stats();
    EXPECT_EQ(stats.records, kThreads * kPerThread);
    std::cout << "1e6 updates: " << stats.batches << " writes+fdatasyncs, " << stats.bytes
              << " bytes\n";
  }
  const absl::Time start = absl::Now();
  auto recovered = Recover(tmp.dir());
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  std::cout << "recovered 1e6 updates in " << took << "\n";
  EXPECT_LT(took, absl::Seconds(10));
  ASSERT_EQ(recovered->updates.size(), size_t{kThreads * kPerThread});
  uint64_t sum = 0;
  std::vector<int64_t> next(kThreads, 0);
  for (const proto::Update& update : recovered->updates) {
    sum += Mix(update.split_cursor());
    ASSERT_EQ(update.split_cursor().next_split_index(), next[update.split_cursor().job_id()]++);
  }
  EXPECT_EQ(sum, written_sum.load());
}

}  // namespace
}  // namespace sluice::control::journal_test
