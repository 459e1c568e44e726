// Google Benchmark of the fault-tolerant dispatcher end to end through DispatcherState (the
// journal alone is perf/journal_benchmark.cc):
//   BM_LeasesInMemory         DispatcherState::GetSplit(max_splits = 1, lease_seq 1, 2, ...)
//                             without a journal, one task per calling thread: leases/s
//   BM_LeasesJournaled        the same with a JournalWriter attached; each thread then does
//                             what the RPC handler does (control/dispatcher.cc, HandleDurable):
//                             when journaled_updates() moved, JournalWriter::Sync and wait for
//                             its callback before the next lease ("the reply"). A thread is
//                             one RPC in flight. compact_every: 0 means 10^9 (never here);
//                             prefill: leases made before the timed loop (a dispatcher up
//                             for a while, whose snapshots hold their lease ranges)
//   BM_DeliveryLog            the dispatcher's record of delivered ordinals (DeliveryLog) for
//                             a pass of N whole 256-element splits, each reported in two
//                             halves in shuffled order (several workers), against the map of
//                             per-split range vectors it replaced (arg 0): heap bytes held
//                             at the end (mallinfo2), entries at the end and at the
//                             peak, and time per report
//   BM_RestoreMillionUpdates  Recover(dir) + DispatcherState::Restore of a journal holding
//                             10^6 leases made through DispatcherState (written with
//                             sync = false), then checks the restored state continues the
//                             split cursor and replays a retried lease
//
//   TMPDIR=/disk/of/the/work/dir build/perf/sluice_dispatcher_benchmark --benchmark_min_time=0.5
// Journal files go to a directory under $TMPDIR (or /tmp), removed afterwards: point TMPDIR at
// the disk the dispatcher's --work-dir would use, since fdatasync latency sets the figures.
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "control/delivery_log.h"
#include "control/dispatcher_state.h"
#include "control/journal.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr int64_t kElementsPerSplit = 256;
// range(10^15) has 3.9 * 10^12 splits of 256: more than any run of a benchmark leases.
constexpr char kPipeline[] = "range(1000000000000000)";
// Workers registered, each with one task of the job; calling thread i leases for task i.
constexpr int kWorkers = 64;
constexpr int64_t kNeverCompact = 1'000'000'000;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "sluice_dispatcher_benchmark: %s\n", why.c_str());
  std::abort();
}

std::string MakeTempDir() {
  const char* base = getenv("TMPDIR");
  std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp", "/sluice_db_XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) Die("mkdtemp failed");
  return pattern;
}

// A dispatcher state with one DYNAMIC job over range(10^15) and kWorkers workers, each of which
// got one task of it through its first heartbeat. With `journal`, the set-up is journaled too
// (a restored state needs it).
struct Cluster {
  DispatcherState state{DispatcherConfig{.elements_per_split = kElementsPerSplit}};
  int64_t job_id = 0;
  std::vector<int64_t> tasks;  // tasks[i]: the task of worker i

  Cluster(JournalWriter* journal, int64_t compact_every) {
    if (journal != nullptr) state.AttachJournal(journal, compact_every);
    absl::StatusOr<proto::PipelineDef> pipeline = engine::ParsePipeline(kPipeline);
    if (!pipeline.ok()) Die(pipeline.status().ToString());
    absl::StatusOr<std::string> dataset = state.RegisterDataset(*pipeline);
    if (!dataset.ok()) Die(dataset.status().ToString());
    proto::GetOrCreateJobRequest job;
    job.set_dataset_id(*dataset);
    job.set_mode(proto::DYNAMIC);
    absl::StatusOr<proto::GetOrCreateJobResponse> created = state.GetOrCreateJob(job);
    if (!created.ok()) Die(created.status().ToString());
    job_id = created->job_id();
    for (int w = 0; w < kWorkers; ++w) {
      proto::WorkerHeartbeatRequest heartbeat;
      heartbeat.set_worker_address(absl::StrCat("worker-", w, ":5000"));
      absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(heartbeat);
      if (!response.ok()) Die(response.status().ToString());
      if (response->new_tasks_size() != 1) Die("a new worker did not get exactly one task");
      tasks.push_back(response->new_tasks(0).task_id());
    }
  }

  proto::GetSplitRequest Request(int worker) const {
    proto::GetSplitRequest request;
    request.set_job_id(job_id);
    request.set_task_id(tasks[worker]);
    request.set_max_splits(1);
    return request;
  }
};

// The one split a lease must return.
const proto::Split& OneSplit(const absl::StatusOr<proto::GetSplitResponse>& response) {
  if (!response.ok()) Die(absl::StrCat("GetSplit: ", response.status().ToString()));
  if (response->splits_size() != 1) {
    Die(response->end_of_splits() ? "the source ran out of splits: use a shorter min_time"
                                  : "GetSplit returned no split");
  }
  return response->split();
}

// Leases per second of wall-clock time, from the first lease of any thread to the end of
// the loop (Google Benchmark's items_per_second divides by the threads' mean running time,
// which overstates throughput when 64 threads share 2 cores and do not all run throughout).
// Each thread stores its count in its own slot as its last iteration ends; the loop ends on a
// barrier, so thread 0 reads them all after it.
class WallClock {
 public:
  void Reset() {
    start_ns_.store(INT64_MAX, std::memory_order_relaxed);
    for (Slot& slot : slots_) {
      slot.leases.store(0, std::memory_order_relaxed);
      slot.slowest_ns.store(0, std::memory_order_relaxed);
    }
  }
  void Start() {
    const int64_t now = Now();
    int64_t seen = start_ns_.load(std::memory_order_relaxed);
    while (now < seen && !start_ns_.compare_exchange_weak(seen, now)) {
    }
  }
  void Count(int thread, int64_t leases,
             std::chrono::steady_clock::duration slowest = std::chrono::steady_clock::duration{}) {
    slots_[thread].slowest_ns.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(slowest).count(),
        std::memory_order_relaxed);
    slots_[thread].leases.store(leases, std::memory_order_release);
  }
  // Thread 0, after the loop; the others' counts are in only after their Count, so this waits
  // for a count from each of the `threads`.
  double Rate(int threads) {
    int64_t total = 0;
    const int64_t end = Now();
    for (int t = 0; t < threads; ++t) {
      int64_t leases;
      while ((leases = slots_[t].leases.load(std::memory_order_acquire)) == 0) {
        std::this_thread::yield();
      }
      total += leases;
    }
    return static_cast<double>(total) * 1e9 / static_cast<double>(end - start_ns_.load());
  }
  // The slowest iteration of any thread, in ms; after Rate.
  double slowest_ms(int threads) const {
    int64_t slowest = 0;
    for (int t = 0; t < threads; ++t) {
      slowest = std::max(slowest, slots_[t].slowest_ns.load(std::memory_order_relaxed));
    }
    return static_cast<double>(slowest) / 1e6;
  }

 private:
  static int64_t Now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  struct alignas(64) Slot {
    std::atomic<int64_t> leases{0};
    std::atomic<int64_t> slowest_ns{0};
  };
  std::atomic<int64_t> start_ns_{INT64_MAX};
  std::array<Slot, kWorkers> slots_;
};

void BM_LeasesInMemory(benchmark::State& state) {
  static std::unique_ptr<Cluster> cluster;
  static WallClock wall;
  // Thread 0 builds it before the loop and drops it after: the loop starts and ends on a
  // barrier of all threads.
  if (state.thread_index() == 0) {
    cluster = std::make_unique<Cluster>(nullptr, 0);
    wall.Reset();
  }
  proto::GetSplitRequest request;
  int64_t seq = 0;
  for (auto _ : state) {
    if (seq == 0) {
      wall.Start();
      request = cluster->Request(state.thread_index());
    }
    request.set_lease_seq(++seq);
    benchmark::DoNotOptimize(OneSplit(cluster->state.GetSplit(request)));
  }
  state.SetItemsProcessed(state.iterations());
  wall.Count(state.thread_index(), seq);
  if (state.thread_index() == 0) {
    state.counters["wall_leases/s"] = wall.Rate(state.threads());
    cluster.reset();
  }
}
BENCHMARK(BM_LeasesInMemory)->Threads(1)->Threads(4)->Threads(16)->Threads(64)->UseRealTime();

struct JournaledCluster {
  std::string dir = MakeTempDir();
  std::unique_ptr<JournalWriter> journal;
  std::unique_ptr<Cluster> cluster;
  std::vector<int64_t> seqs = std::vector<int64_t>(kWorkers, 0);  // last lease_seq per task
  JournalWriter::Stats stats_before;
  int64_t updates_before = 0;

  // `prefill` leases are made first, round robin over the tasks, without waiting for each
  // (a dispatcher that has been up a while: its state holds their lease ranges).
  JournaledCluster(int64_t compact_every, int64_t prefill) {
    absl::StatusOr<std::unique_ptr<JournalWriter>> opened =
        JournalWriter::Open(dir + "/journal", JournalOptions{});
    if (!opened.ok()) Die(opened.status().ToString());
    journal = *std::move(opened);
    cluster = std::make_unique<Cluster>(journal.get(), compact_every);
    for (int64_t i = 0; i < prefill; ++i) {
      const int worker = static_cast<int>(i % kWorkers);
      proto::GetSplitRequest request = cluster->Request(worker);
      request.set_lease_seq(++seqs[worker]);
      OneSplit(cluster->state.GetSplit(request));
    }
    if (!journal->Flush().ok()) Die("journal flush failed");
    stats_before = journal->stats();
    updates_before = cluster->state.journaled_updates();
  }
  ~JournaledCluster() {
    journal.reset();  // writes and syncs what is queued; the state does not use it any more
    cluster.reset();
    std::filesystem::remove_all(dir);
  }
};

void BM_LeasesJournaled(benchmark::State& state) {
  static std::unique_ptr<JournaledCluster> shared;
  static WallClock wall;
  const int64_t compact_every = state.range(0) > 0 ? state.range(0) : kNeverCompact;
  if (state.thread_index() == 0) {
    shared = std::make_unique<JournaledCluster>(compact_every, state.range(1));
    wall.Reset();
  }
  proto::GetSplitRequest request;
  int64_t leases = 0, seq = 0;
  std::chrono::steady_clock::duration slowest{};
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    DispatcherState& dispatcher = shared->cluster->state;
    if (leases == 0) {
      wall.Start();
      request = shared->cluster->Request(state.thread_index());
      seq = shared->seqs[state.thread_index()];
    }
    request.set_lease_seq(++seq);
    // HandleDurable: run the handler; if it journaled, reply only once that is durable.
    const int64_t journaled_before = dispatcher.journaled_updates();
    benchmark::DoNotOptimize(OneSplit(dispatcher.GetSplit(request)));
    if (dispatcher.journaled_updates() != journaled_before) {
      absl::Notification replied;
      absl::Status durable;
      shared->journal->Sync([&](absl::Status status) {
        durable = std::move(status);
        replied.Notify();
      });
      replied.WaitForNotification();
      if (!durable.ok()) Die(absl::StrCat("journal: ", durable.ToString()));
    }
    ++leases;
    slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
  }
  state.SetItemsProcessed(state.iterations());
  wall.Count(state.thread_index(), leases, slowest);
  if (state.thread_index() == 0) {
    state.counters["wall_leases/s"] = wall.Rate(state.threads());
    state.counters["max_reply_ms"] = wall.slowest_ms(state.threads());
    const JournalWriter::Stats stats = shared->journal->stats();
    const int64_t updates = shared->cluster->state.journaled_updates();
    const double journaled = static_cast<double>(updates - shared->updates_before);
    state.counters["fdatasyncs/lease"] = (stats.batches - shared->stats_before.batches) / journaled;
    state.counters["leases"] = journaled;
    state.counters["compactions"] =
        static_cast<double>(updates / compact_every - shared->updates_before / compact_every);
    shared.reset();
  }
}
// compact_every:0 is 10^9 (no compaction). A run leases ~0.5-1 s worth, fewer than 10^5, so
// compact_every:100000 compacts only with prefill, or over a longer run: the last variant is
// a dispatcher that has leased 10^6 splits, timed long enough for several compactions.
BENCHMARK(BM_LeasesJournaled)
    ->ArgNames({"compact_every", "prefill"})
    ->Args({0, 0})
    ->Args({100'000, 0})
    ->Threads(1)
    ->Threads(16)
    ->Threads(64)
    ->UseRealTime();
BENCHMARK(BM_LeasesJournaled)
    ->ArgNames({"compact_every", "prefill"})
    ->Args({0, 1'000'000})
    ->Args({100'000, 1'000'000})
    ->Threads(64)
    ->MinTime(3)
    ->UseRealTime();

// 10^6 leases journaled through DispatcherState (round robin over the kWorkers tasks, each
// with its own lease_seq), without fdatasync so that it is quick to build.
constexpr int64_t kMillion = 1'000'000;
struct MillionLeases {
  std::string root = MakeTempDir();
  std::string dir = root + "/journal";
  double build_seconds = 0;
  // The slowest GetSplit: the one that took a compaction snapshot, under the state's lock.
  double max_lease_seconds = 0;
  int64_t journal_bytes = 0;
  std::vector<int64_t> tasks;
  int64_t job_id = 0;

  explicit MillionLeases(int64_t compact_every) {
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<JournalWriter>> journal =
        JournalWriter::Open(dir, JournalOptions{.sync = false});
    if (!journal.ok()) Die(journal.status().ToString());
    {
      Cluster cluster(journal->get(), compact_every);
      std::vector<int64_t> seqs(kWorkers, 0);
      for (int64_t i = 0; i < kMillion; ++i) {
        const int worker = static_cast<int>(i % kWorkers);
        proto::GetSplitRequest request = cluster.Request(worker);
        request.set_lease_seq(++seqs[worker]);
        const auto before = std::chrono::steady_clock::now();
        absl::StatusOr<proto::GetSplitResponse> response = cluster.state.GetSplit(request);
        max_lease_seconds = std::max(
            max_lease_seconds,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count());
        if (OneSplit(response).begin() != i * kElementsPerSplit) {
          Die("the fixture's leases are out of order");
        }
      }
      if (!(*journal)->Flush().ok()) Die("journal flush failed");
      tasks = cluster.tasks;
      job_id = cluster.job_id;
      journal->reset();  // before the state it is attached to goes
    }
    build_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.is_regular_file()) journal_bytes += static_cast<int64_t>(entry.file_size());
    }
  }
  ~MillionLeases() { std::filesystem::remove_all(root); }
};

// Made on first use (per compaction setting), removed at exit.
MillionLeases& Million(int64_t compact_every) {
  static std::map<int64_t, std::unique_ptr<MillionLeases>> fixtures;
  std::unique_ptr<MillionLeases>& fixture = fixtures[compact_every];
  if (fixture == nullptr) fixture = std::make_unique<MillionLeases>(compact_every);
  return *fixture;
}

// Empty when `restored` continues where the fixture stopped; else what is wrong.
std::string CheckContinues(DispatcherState& restored, const MillionLeases& fixture) {
  // Task 0 leased split i for every i % kWorkers == 0; its last lease (seq kMillion /
  // kWorkers, rounded up) was split 999936. Retrying that seq must return it again.
  const int64_t last_seq = (kMillion + kWorkers - 1) / kWorkers;
  const int64_t last_index = (last_seq - 1) * kWorkers;
  proto::GetSplitRequest retry;
  retry.set_job_id(fixture.job_id);
  retry.set_task_id(fixture.tasks[0]);
  retry.set_max_splits(1);
  retry.set_lease_seq(last_seq);
  absl::StatusOr<proto::GetSplitResponse> again = restored.GetSplit(retry);
  if (!again.ok() || again->splits_size() != 1 ||
      again->split().begin() != last_index * kElementsPerSplit) {
    return absl::StrCat("a retried lease did not return split ", last_index, ": ",
                        again.ok() ? again->ShortDebugString() : again.status().ToString());
  }
  // The next lease (of the task that leased split 999999) starts at split 10^6.
  proto::GetSplitRequest next = retry;
  next.set_task_id(fixture.tasks[kWorkers - 1]);
  next.set_lease_seq(kMillion / kWorkers + 1);
  absl::StatusOr<proto::GetSplitResponse> response = restored.GetSplit(next);
  if (!response.ok() || response->splits_size() != 1 ||
      response->split().begin() != kMillion * kElementsPerSplit) {
    return absl::StrCat(
        "the next lease after recovery is not split ", kMillion, " (begin ",
        kMillion * kElementsPerSplit,
        "): ", response.ok() ? response->ShortDebugString() : response.status().ToString());
  }
  return "";
}

void BM_RestoreMillionUpdates(benchmark::State& state) {
  const int64_t compact_every = state.range(0) > 0 ? state.range(0) : kNeverCompact;
  MillionLeases& fixture = Million(compact_every);
  double recover_seconds = 0, restore_seconds = 0;
  int64_t snapshot_cursors = 0, journal_updates = 0;
  std::unique_ptr<DispatcherState> restored;
  for (auto _ : state) {
    state.PauseTiming();
    restored.reset();  // not timed: a restarting dispatcher starts empty
    restored = std::make_unique<DispatcherState>(
        DispatcherConfig{.elements_per_split = kElementsPerSplit});
    state.ResumeTiming();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<Recovered> recovered = Recover(fixture.dir);
    const auto recovered_at = std::chrono::steady_clock::now();
    if (!recovered.ok()) {
      state.SkipWithError(recovered.status().ToString().c_str());
      break;
    }
    if (absl::Status status = restored->Restore(*recovered); !status.ok()) {
      state.SkipWithError(status.ToString().c_str());
      break;
    }
    const auto restored_at = std::chrono::steady_clock::now();
    recover_seconds += std::chrono::duration<double>(recovered_at - start).count();
    restore_seconds += std::chrono::duration<double>(restored_at - recovered_at).count();
    snapshot_cursors = recovered->snapshot.has_value() ? recovered->snapshot->cursors_size() : 0;
    journal_updates = static_cast<int64_t>(recovered->updates.size());
    state.PauseTiming();
    recovered = absl::UnknownError("");  // freeing the recovered messages is not timed
    state.ResumeTiming();
  }
  if (state.error_occurred()) return;
  if (std::string wrong = CheckContinues(*restored, fixture); !wrong.empty()) {
    state.SkipWithError(wrong.c_str());
    return;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["recover_s"] = recover_seconds / n;
  state.counters["restore_s"] = restore_seconds / n;
  state.counters["seconds"] = (recover_seconds + restore_seconds) / n;
  state.counters["snapshot_cursors"] = static_cast<double>(snapshot_cursors);
  state.counters["journal_updates"] = static_cast<double>(journal_updates);
  state.counters["journal_MB"] = fixture.journal_bytes / 1e6;
  state.counters["fixture_build_s"] = fixture.build_seconds;
  state.counters["fixture_max_lease_ms"] = fixture.max_lease_seconds * 1e3;
}
BENCHMARK(BM_RestoreMillionUpdates)
    ->ArgName("compact_every")
    ->Arg(0)
    ->Arg(100'000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The representation DeliveryLog replaced (session 11): one map node and one vector of
// ranges per split ever reported.
class PerSplitRanges {
 public:
  void Record(int64_t key, int64_t first, int64_t count) {
    std::vector<proto::OrdinalRange>& ranges = splits_[key];
    int64_t begin = first;
    int64_t end = first + count;
    auto lo = std::lower_bound(ranges.begin(), ranges.end(), begin,
                               [](const proto::OrdinalRange& r, int64_t b) { return r.end() < b; });
    auto hi = lo;
    while (hi != ranges.end() && hi->begin() <= end) {
      begin = std::min(begin, hi->begin());
      end = std::max(end, hi->end());
      ++hi;
    }
    proto::OrdinalRange merged;
    merged.set_begin(begin);
    merged.set_end(end);
    ranges.insert(ranges.erase(lo, hi), merged);
  }
  size_t entries() const { return splits_.size(); }

 private:
  std::map<int64_t, std::vector<proto::OrdinalRange>> splits_;
};

template <typename Log>
void RecordPass(benchmark::State& state) {
  const int64_t splits = state.range(1);
  std::vector<int64_t> keys(static_cast<size_t>(splits));
  std::iota(keys.begin(), keys.end(), 1);
  std::shuffle(keys.begin(), keys.end(), std::mt19937(1));
  size_t heap_bytes = 0, entries = 0, peak = 0;
  for (auto _ : state) {
    const size_t heap_before = mallinfo2().uordblks;
    auto log = std::make_unique<Log>();
    for (int64_t key : keys) {
      log->Record(key, 128, 128);
      log->Record(key, 0, 128);
      peak = std::max(peak, log->entries());
    }
    heap_bytes = mallinfo2().uordblks - heap_before;
    entries = log->entries();
    state.PauseTiming();
    log.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * splits * 2);
  state.counters["heap_MB"] = static_cast<double>(heap_bytes) / 1e6;
  state.counters["entries"] = static_cast<double>(entries);
  // Shuffled reports are the worst case: about half the keys wait alone mid-pass.
  state.counters["peak_entries"] = static_cast<double>(peak);
}

void BM_DeliveryLog(benchmark::State& state) {
  if (state.range(0) == 0) {
    RecordPass<PerSplitRanges>(state);
  } else {
    RecordPass<DeliveryLog>(state);
  }
}
BENCHMARK(BM_DeliveryLog)
    ->ArgNames({"compressed", "splits"})
    ->Args({0, 1'000'000})
    ->Args({1, 1'000'000})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sluice::control

BENCHMARK_MAIN();
