// A worker the dispatcher counts as live but this trainer cannot reach (a partition between
// the two, a firewall, a worker whose listener stopped answering) costs the reader nothing
// while other workers serve: its connect is made in the background, so neither Client::Read
// nor any Next() waits out the connect timeout, and once the dispatcher declares that
// worker lost the read goes on (or ends) at its next heartbeat. Over real UCX endpoints; the
// unreachable worker is a listening socket that never answers, registered with the
// dispatcher by a heartbeat.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "control/client.h"
#include "control/dispatcher.h"
#include "control/worker.h"
#include "engine/pipeline_text.h"
#include "transport/bootstrap.h"

namespace sluice::control {
namespace {

constexpr const char* kSharedMemory = "posix,sysv,cma,self";
// The client's connect timeout (the default): what each blocking connect to the silent
// worker cost.
constexpr absl::Duration kConnectTimeout = absl::Seconds(10);
// What Read() or a Next() may take while a worker serves: far below kConnectTimeout, with
// room for a loaded machine.
constexpr absl::Duration kPromptly = absl::Milliseconds(2500);
constexpr absl::Duration kWorkerTimeout = absl::Seconds(2);

class UnreachableWorkerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DispatcherOptions dispatcher_options;
    dispatcher_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
    dispatcher_options.transport.ucx_tls = kSharedMemory;
    // The silent worker is lost this long after its heartbeats stop (SilentWorkerLeaves).
    dispatcher_options.config.worker_timeout = kWorkerTimeout;
    absl::StatusOr<std::unique_ptr<Dispatcher>> dispatcher = Dispatcher::Start(dispatcher_options);
    ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
    dispatcher_ = *std::move(dispatcher);

    WorkerOptions worker_options;
    worker_options.dispatcher = dispatcher_->address();
    worker_options.bind = transport::Address{"ucx", "127.0.0.1", 0};
    worker_options.advertise_host = "127.0.0.1";
    worker_options.transport.ucx_tls = kSharedMemory;
    worker_options.slab_bytes = 1 << 16;
    worker_options.num_slabs = 8;
    absl::StatusOr<std::unique_ptr<Worker>> worker = Worker::Start(worker_options);
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = *std::move(worker);

    // Takes the connection into its backlog and never answers UCX's handshake.
    uint16_t port = 0;
    absl::StatusOr<transport::ScopedFd> silent =
        transport::ListenSocket(transport::Address{"ucx", "127.0.0.1", 0}, &port);
    ASSERT_TRUE(silent.ok()) << silent.status();
    silent_ = *std::move(silent);
    silent_address_ = transport::Address{"ucx", "127.0.0.1", port}.ToString();
    silent_beat_.set_worker_address(silent_address_);
    silent_beat_.set_worker_uid("silent-worker");
    absl::StatusOr<proto::WorkerHeartbeatResponse> joined =
        dispatcher_->state().WorkerHeartbeat(silent_beat_);
    ASSERT_TRUE(joined.ok()) << joined.status();
    silent_beats_ = std::thread([this] {
      while (!silent_stops_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
        (void)dispatcher_->state().WorkerHeartbeat(silent_beat_);
      }
    });

    ClientOptions client_options;
    client_options.dispatcher = dispatcher_->address();
    client_options.transport.ucx_tls = kSharedMemory;
    client_options.timeout = kConnectTimeout;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void TearDown() override {
    SilentWorkerLeaves();
    // A background connect to the silent worker may still wait for its hello: it ends at
    // once (Transport::StopConnecting), and the trainer exits without the connect timeout.
    const absl::Time start = absl::Now();
    client_.reset();
    EXPECT_LT(absl::Now() - start, kPromptly) << "~Client waited for the connect timeout";
  }

  // The silent worker's heartbeats stop, the last one saying it leaves: the dispatcher gives
  // a DYNAMIC task up at once, and the others (an OFF pass restarts with its worker) a
  // worker timeout later.
  void SilentWorkerLeaves() {
    if (!silent_beats_.joinable()) return;
    silent_stops_.Notify();
    silent_beats_.join();
    proto::WorkerHeartbeatRequest leaving = silent_beat_;
    leaving.set_leaving(true);
    ASSERT_TRUE(dispatcher_->state().WorkerHeartbeat(leaving).ok());
  }

  // Client::Read, which must not wait for the silent worker either.
  std::unique_ptr<BatchReader> Read(const char* pipeline, ReadOptions options) {
    absl::StatusOr<proto::PipelineDef> parsed = engine::ParsePipeline(pipeline);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed.ok()) return nullptr;
    absl::StatusOr<std::string> dataset = client_->RegisterDataset(*parsed);
    EXPECT_TRUE(dataset.ok()) << dataset.status();
    if (!dataset.ok()) return nullptr;
    options.on_worker_lost = [this](const std::string& worker) {
      absl::MutexLock lock(&lost_mu_);
      lost_.push_back(worker);
    };
    const absl::Time start = absl::Now();
    absl::StatusOr<std::unique_ptr<BatchReader>> reader = client_->Read(*dataset, options);
    EXPECT_LT(absl::Now() - start, kPromptly) << "Read waited for the silent worker";
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  // Next(), timed: nullopt at the end; fails the test on an error.
  std::optional<Batch> TimedNext(BatchReader& reader, absl::Duration* took) {
    const absl::Time start = absl::Now();
    absl::StatusOr<std::optional<Batch>> batch = reader.Next();
    *took = absl::Now() - start;
    EXPECT_TRUE(batch.ok()) << batch.status();
    return batch.ok() ? *std::move(batch) : std::nullopt;
  }

  // The first value of each of the next `n` batches, which must all come from the reachable
  // worker; *slowest: the longest Next() among them.
  std::vector<int64_t> FirstValues(BatchReader& reader, int n, absl::Duration* slowest) {
    std::vector<int64_t> firsts;
    for (int i = 0; i < n; ++i) {
      absl::Duration took;
      std::optional<Batch> batch = TimedNext(reader, &took);
      EXPECT_TRUE(batch.has_value()) << "batch " << i;
      if (!batch.has_value()) break;
      EXPECT_EQ(batch->worker(), worker_->address());
      firsts.push_back(batch->view().tensor(0).values<int64_t>()[0]);
      *slowest = std::max(*slowest, took);
    }
    return firsts;
  }

  std::vector<std::string> lost() {
    absl::MutexLock lock(&lost_mu_);
    return lost_;
  }

  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<Worker> worker_;
  transport::ScopedFd silent_;
  std::string silent_address_;
  proto::WorkerHeartbeatRequest silent_beat_;
  absl::Notification silent_stops_;
  std::thread silent_beats_;
  std::unique_ptr<Client> client_;
  absl::Mutex lost_mu_;
  std::vector<std::string> lost_ ABSL_GUARDED_BY(lost_mu_);
};

// DYNAMIC: the reachable worker takes every split and its batches come at its pace; the
// job ends once the silent worker's task is given up.
TEST_F(UnreachableWorkerTest, DynamicReadsGoOnWithoutTheUnreachableWorker) {
  ReadOptions options;
  options.mode = proto::DYNAMIC;
  options.slab_bytes = 1 << 16;
  options.max_bytes_in_flight = 1;  // one fetch in flight, or one per worker it can ask
  std::unique_ptr<BatchReader> reader = Read("range(200) | batch(10)", options);
  ASSERT_NE(reader, nullptr);
  absl::Duration slowest;
  const std::vector<int64_t> firsts = FirstValues(*reader, 20, &slowest);
  EXPECT_LT(slowest, kPromptly) << "a Next() waited for the silent worker";
  EXPECT_EQ(std::set<int64_t>(firsts.begin(), firsts.end()).size(), 20u);
  EXPECT_TRUE(lost().empty());
  // The silent worker's task counted as a worker serving: two fetches went to the one
  // worker the reader could ask, twice the byte budget.
  EXPECT_EQ(reader->fetch_limit(), 1);
  EXPECT_EQ(reader->peak_fetches_after_first_batch(), 1);

  SilentWorkerLeaves();
  absl::Duration took;
  EXPECT_FALSE(TimedNext(*reader, &took).has_value()) << "a batch beyond the 20 there are";
  EXPECT_LT(took, absl::Seconds(2)) << "the end waited for more than the next heartbeats";
  EXPECT_EQ(lost(), std::vector<std::string>{silent_address_});
}

// OFF: every worker runs the whole pipeline; the reachable worker's pass comes whole.
TEST_F(UnreachableWorkerTest, OffReadsGetTheReachableWorkersWholePass) {
  ReadOptions options;
  options.mode = proto::OFF;
  options.slab_bytes = 1 << 16;
  std::unique_ptr<BatchReader> reader = Read("range(100) | batch(10)", options);
  ASSERT_NE(reader, nullptr);
  absl::Duration slowest;
  const std::vector<int64_t> firsts = FirstValues(*reader, 10, &slowest);
  EXPECT_LT(slowest, kPromptly) << "a Next() waited for the silent worker";
  EXPECT_EQ(firsts, (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  SilentWorkerLeaves();
  absl::Duration took;
  EXPECT_FALSE(TimedNext(*reader, &took).has_value());
  EXPECT_LT(took, kWorkerTimeout + absl::Seconds(3)) << "the end waited for more than the loss";
  EXPECT_EQ(lost(), std::vector<std::string>{silent_address_});
}

// A worker the dispatcher keeps counting as live but this trainer never reaches: each
// connect to it fails (at the connect timeout) and is tried again after a back-off, and
// once it has been unreachable for request_timeout the read fails, naming it. Meanwhile the
// reachable worker's pass came whole, each Next() promptly.
TEST_F(UnreachableWorkerTest, AWorkerNeverReachedFailsTheReadAfterTheRequestTimeout) {
  ClientOptions client_options;
  client_options.dispatcher = dispatcher_->address();
  client_options.transport.ucx_tls = kSharedMemory;
  client_options.timeout = absl::Milliseconds(500);  // each connect to the silent worker
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = *std::move(client);
  ReadOptions options;
  options.mode = proto::OFF;
  options.slab_bytes = 1 << 16;
  options.request_timeout = absl::Seconds(2);
  std::unique_ptr<BatchReader> reader = Read("range(100) | batch(10)", options);
  ASSERT_NE(reader, nullptr);
  absl::Duration slowest;
  EXPECT_EQ(FirstValues(*reader, 10, &slowest),
            (std::vector<int64_t>{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}));
  EXPECT_LT(slowest, kPromptly) << "a Next() waited for the silent worker";

  const absl::Time start = absl::Now();
  absl::StatusOr<std::optional<Batch>> end = reader->Next();
  ASSERT_FALSE(end.ok()) << "the read ended (or went on) without the silent worker's pass";
  EXPECT_THAT(std::string(end.status().message()),
              ::testing::HasSubstr(absl::StrCat("connecting to worker ", silent_address_)));
  EXPECT_LT(absl::Now() - start, options.request_timeout + kPromptly);
  EXPECT_TRUE(lost().empty());
}

// Coordinated reads: the silent worker's rounds cannot come, and the consumer waits for
// them in order; once the worker is declared lost they are skipped at the reader's next
// heartbeat, and the reachable worker's rounds go on at its pace.
TEST_F(UnreachableWorkerTest, CoordinatedRoundsResumeOnceTheWorkerIsLost) {
  ReadOptions options;
  options.mode = proto::OFF;
  options.job_name = "rounds";
  options.num_consumers = 1;
  options.slab_bytes = 1 << 16;
  std::unique_ptr<BatchReader> reader = Read("range(10) | repeat()", options);
  ASSERT_NE(reader, nullptr);
  std::thread leaver([this] {
    absl::SleepFor(absl::Seconds(1));
    SilentWorkerLeaves();
  });
  int64_t last_round = -1;
  int after_loss = 0;
  absl::Duration slowest_after_loss;  // of the Next() calls begun once the loss was heard
  for (int i = 0; i < 40; ++i) {
    const bool lost_before = !lost().empty();
    absl::Duration took;
    std::optional<Batch> batch = TimedNext(*reader, &took);
    if (!batch.has_value()) break;
    EXPECT_EQ(batch->worker(), worker_->address());
    EXPECT_GT(batch->round(), last_round);
    last_round = batch->round();
    if (lost_before) {
      ++after_loss;
      slowest_after_loss = std::max(slowest_after_loss, took);
    }
  }
  leaver.join();
  EXPECT_GE(after_loss, 10) << "the rounds did not resume after the loss";
  EXPECT_LT(slowest_after_loss, kPromptly);
  EXPECT_EQ(lost(), std::vector<std::string>{silent_address_});
}

}  // namespace
}  // namespace sluice::control
