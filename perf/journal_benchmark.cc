// Google Benchmark of the fault-tolerant dispatcher's costs (control/journal.h):
//   BM_Fdatasync            a 32-byte append + fdatasync: the disk's floor for one batch
//   BM_LeaseInMemory        DispatcherState::GetSplit(max_splits = 1): split leases/s today
//   BM_LeaseJournaled       the same, each lease's SplitCursor update made durable before the
//                           "reply", from many threads (concurrent GetSplit handlers), group
//                           commit; arg sync:0 skips fdatasync (all the cost but the disk)
//   BM_LeaseJournaledAsync  one handler thread that replies from the durable callback, with
//                           up to 4096 leases awaiting durability (timed until all are durable)
//   BM_Recover              Recover() of 10^6 journaled updates (cold:1 drops them from the
//                           page cache first), and BM_RecoverApply: streaming them into a
//                           cursor table, which is what a restarted dispatcher does
//
//   TMPDIR=/disk/of/the/work/dir build/perf/sluice_journal_benchmark --benchmark_filter=Lease
// Journal files go to a directory under $TMPDIR (or /tmp), removed afterwards: point TMPDIR at
// the disk the dispatcher's --work-dir would use, since fdatasync latency sets the figures.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "control/dispatcher_state.h"
#include "control/journal.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr int64_t kElementsPerSplit = 256;

std::string MakeTempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp", "/sluice_jb_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) abort();
  return pattern;
}

// A dispatcher with one DYNAMIC job over a source far larger than any run leases.
struct Dispatcher {
  DispatcherState state{DispatcherConfig{.elements_per_split = kElementsPerSplit}};
  proto::GetSplitRequest request;

  Dispatcher() {
    auto dataset = state.RegisterDataset(*engine::ParsePipeline("range(1000000000000000)"));
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*dataset);
    job.set_mode(proto::DYNAMIC);
    request.set_job_id(state.GetOrCreateJob(job)->job_id());
    // GetSplit serves only the job's tasks: register a worker to get one.
    proto::WorkerHeartbeatRequest worker;
    worker.set_worker_address("ucx://127.0.0.1:1");
    request.set_task_id(state.WorkerHeartbeat(worker)->new_tasks(0).task_id());
    request.set_max_splits(1);
  }

  // One lease, and the journal update recording it.
  proto::Update Lease() {
    absl::StatusOr<proto::GetSplitResponse> response = state.GetSplit(request);
    if (!response.ok() || response->splits_size() != 1) abort();
    proto::Update update;
    proto::Update::SplitCursor* cursor = update.mutable_split_cursor();
    cursor->set_job_id(request.job_id());
    cursor->set_leased_by_task(request.task_id());
    cursor->set_first_split_index(response->split().begin() / kElementsPerSplit);
    cursor->set_next_split_index(response->split().begin() / kElementsPerSplit + 1);
    return update;
  }
};

// Shared by a multi-threaded benchmark's threads: thread 0 builds it before the timed loop
// and destroys it after (Google Benchmark starts and ends the loop on a barrier).
struct Shared {
  std::string dir = MakeTempDir();
  Dispatcher dispatcher;
  std::mutex order;  // the dispatcher's lock: journal order must be lease order
  std::unique_ptr<JournalWriter> journal;

  explicit Shared(const JournalOptions& options) {
    journal = *JournalWriter::Open(dir + "/journal", options);
  }
  ~Shared() {
    journal.reset();
    std::filesystem::remove_all(dir);
  }
};
std::unique_ptr<Shared> g_shared;

// The disk's floor: one 32-byte append and its fdatasync, as one journal batch costs.
void BM_Fdatasync(benchmark::State& state) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/file";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const char bytes[32] = {};
  for (auto _ : state) {
    if (write(fd, bytes, sizeof(bytes)) != sizeof(bytes) || fdatasync(fd) != 0) abort();
  }
  close(fd);
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_Fdatasync)->UseRealTime();

void BM_LeaseInMemory(benchmark::State& state) {
  if (state.thread_index() == 0) g_shared = std::make_unique<Shared>(JournalOptions{});
  for (auto _ : state) {
    benchmark::DoNotOptimize(g_shared->dispatcher.state.GetSplit(g_shared->dispatcher.request));
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) g_shared.reset();
}
BENCHMARK(BM_LeaseInMemory)->Threads(1)->Threads(2)->UseRealTime();

void BM_LeaseJournaled(benchmark::State& state) {
  if (state.thread_index() == 0) {
    g_shared = std::make_unique<Shared>(JournalOptions{.sync = state.range(0) != 0});
  }
  for (auto _ : state) {
    absl::Notification durable;
    {
      std::lock_guard<std::mutex> lock(g_shared->order);
      g_shared->journal->Append(g_shared->dispatcher.Lease(), [&](absl::Status status) {
        if (!status.ok()) abort();
        durable.Notify();
      });
    }
    durable.WaitForNotification();  // the reply would go out here
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    const JournalWriter::Stats stats = g_shared->journal->stats();
    state.counters["leases/sync"] = static_cast<double>(stats.records) / stats.batches;
    g_shared.reset();
  }
}
BENCHMARK(BM_LeaseJournaled)
    ->ArgName("sync")
    ->Arg(1)
    ->Arg(0)
    ->Threads(1)
    ->Threads(8)
    ->Threads(64)
    ->Threads(256)
    ->UseRealTime();

void BM_LeaseJournaledAsync(benchmark::State& state) {
  Shared shared(JournalOptions{});
  constexpr int kWindow = 4096, kLeasesPerIteration = 1 << 16;
  std::atomic<int> in_flight{0};
  for (auto _ : state) {
    for (int i = 0; i < kLeasesPerIteration; ++i) {
      while (in_flight.load(std::memory_order_acquire) >= kWindow) std::this_thread::yield();
      in_flight.fetch_add(1, std::memory_order_relaxed);
      shared.journal->Append(shared.dispatcher.Lease(), [&](absl::Status status) {
        if (!status.ok()) abort();
        in_flight.fetch_sub(1, std::memory_order_release);
      });
    }
    // Timed: every lease of the iteration is durable ("replied to") before it ends.
    while (in_flight.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }
  state.SetItemsProcessed(state.iterations() * kLeasesPerIteration);
  const JournalWriter::Stats stats = shared.journal->stats();
  state.counters["leases/sync"] = static_cast<double>(stats.records) / stats.batches;
}
BENCHMARK(BM_LeaseJournaledAsync)->UseRealTime();

// 10^6 journaled cursor updates, written once (group commit from 4 threads).
constexpr int64_t kRecoveryUpdates = 1'000'000;
struct MillionUpdates {
  std::string root = MakeTempDir();
  std::string dir = root + "/journal";
  MillionUpdates() {
    auto journal = *JournalWriter::Open(dir, JournalOptions{});
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t i = t; i < kRecoveryUpdates; i += 4) {
          proto::Update update;
          update.mutable_split_cursor()->set_job_id(1 + i % 64);
          update.mutable_split_cursor()->set_next_split_index(i / 64 + 1);
          update.mutable_split_cursor()->set_first_split_index(i / 64);
          update.mutable_split_cursor()->set_leased_by_task(100 + i % 1000);
          journal->Append(update, nullptr);
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (!journal->Flush().ok()) abort();
  }
  ~MillionUpdates() { std::filesystem::remove_all(root); }

  void DropFromPageCache() const {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const int fd = open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      close(fd);
    }
  }
};
// Made on first use, removed at exit.
MillionUpdates& Million() {
  static MillionUpdates updates;
  return updates;
}

void BM_Recover(benchmark::State& state) {
  MillionUpdates& journal = Million();
  for (auto _ : state) {
    if (state.range(0) != 0) {
      state.PauseTiming();
      journal.DropFromPageCache();
      state.ResumeTiming();
    }
    absl::StatusOr<Recovered> recovered = Recover(journal.dir);
    if (!recovered.ok() || static_cast<int64_t>(recovered->updates.size()) != kRecoveryUpdates) {
      state.SkipWithError("recovery failed");
    }
  }
  state.SetItemsProcessed(state.iterations() * kRecoveryUpdates);
}
BENCHMARK(BM_Recover)
    ->ArgName("cold")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_RecoverApply(benchmark::State& state) {
  MillionUpdates& journal = Million();
  for (auto _ : state) {
    auto reader = *JournalReader::Open(journal.dir);
    absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t> cursors;
    proto::Update update;
    int64_t count = 0;
    while (*reader->Next(&update)) {
      const proto::Update::SplitCursor& cursor = update.split_cursor();
      int64_t& next = cursors[{cursor.job_id(), cursor.repetition()}];
      next = std::max(next, cursor.next_split_index());
      ++count;
    }
    if (count != kRecoveryUpdates) state.SkipWithError("recovery lost updates");
  }
  state.SetItemsProcessed(state.iterations() * kRecoveryUpdates);
}
BENCHMARK(BM_RecoverApply)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace sluice::control

BENCHMARK_MAIN();
