// The batch path through a real local cluster (UCX endpoints, registered pools): batches
// arrive intact in client-owned registered memory, and the only copy on the way is the
// worker assembling each batch into its slab.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

class DataPathTest : public ::testing::TestWithParam<const char*> {};

// One worker with 1 MiB slabs, everything over `ucx_tls`.
absl::StatusOr<std::unique_ptr<LocalCluster>> StartCluster(const char* ucx_tls) {
  LocalClusterOptions options;
  options.num_workers = 1;
  options.dispatcher.transport.ucx_tls = ucx_tls;
  options.worker.transport.ucx_tls = ucx_tls;
  options.worker.slab_bytes = 1 << 20;
  return LocalCluster::Start(options);
}

// A client of `cluster`'s dispatcher over `ucx_tls`.
absl::StatusOr<std::unique_ptr<Client>> ConnectClient(
    const LocalCluster& cluster, const char* ucx_tls, bool caller_driven_progress = false,
    std::optional<absl::Duration> wait_spin = {}) {
  ClientOptions options;
  options.dispatcher = cluster.dispatcher_address();
  options.transport.ucx_tls = ucx_tls;
  options.transport.caller_driven_progress = caller_driven_progress;
  options.transport.wait_spin = wait_spin;
  return Client::Connect(options);
}

// Parses and registers `pipeline`; returns its dataset id.
absl::StatusOr<std::string> Register(Client& client, std::string_view pipeline) {
  absl::StatusOr<proto::PipelineDef> parsed = engine::ParsePipeline(pipeline);
  if (!parsed.ok()) return parsed.status();
  return client.RegisterDataset(*parsed);
}

// Registers `pipeline` and reads it in OFF mode into 1 MiB landing slabs.
absl::StatusOr<std::unique_ptr<BatchReader>> ReadOff(Client& client, std::string_view pipeline,
                                                     int max_outstanding_requests = 4) {
  absl::StatusOr<std::string> dataset = Register(client, pipeline);
  if (!dataset.ok()) return dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.slab_bytes = 1 << 20;
  read.max_outstanding_requests = max_outstanding_requests;
  return client.Read(*dataset, read);
}

TEST_P(DataPathTest, TransportAddsNoCopyBeyondAssembly) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  // 8192 int64 values per batch: 64 KiB, above the rendezvous threshold.
  auto reader = ReadOff(**client, "range(81920) | batch(8192)");
  ASSERT_TRUE(reader.ok()) << reader.status();

  // Replies to the requests in flight may land out of order (BatchReader's comment): each
  // batch must be one whole run of 8192 values, and every run must come once.
  std::set<int64_t> batch_starts;
  int64_t delivered = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    const engine::BatchView& view = (**batch).view();
    ASSERT_EQ(view.num_tensors(), 1u);
    auto values = view.tensor(0).values<int64_t>();
    ASSERT_EQ(values.size(), 8192u);
    ASSERT_EQ(values[0] % 8192, 0) << values[0];
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(values[i], values[0] + static_cast<int64_t>(i));
    EXPECT_TRUE(batch_starts.insert(values[0]).second) << "batch " << values[0] << " twice";
    delivered += static_cast<int64_t>(view.bytes().size());
    EXPECT_GT((**batch).fetch_latency(), absl::ZeroDuration());
  }
  EXPECT_EQ(batch_starts.size(), 10u);
  EXPECT_EQ((*client)->transport_stats().payload_bytes_copied.load(), 0u);
  EXPECT_EQ((*client)->transport_stats().payload_bytes_received.load(),
            static_cast<uint64_t>(delivered));
  proto::WorkerStats stats = (*cluster)->workers()[0]->stats();
  EXPECT_EQ(stats.bytes_served(), delivered);
  EXPECT_EQ(stats.bytes_assembled(), delivered) << "exactly one copy: assembly into the slab";
  EXPECT_EQ(stats.bytes_assembled_unserved(), 0) << "everything assembled was served";
  EXPECT_EQ(stats.batches_served(), 10);
}

// A reader that stops early leaves batches assembled in the worker's buffer. They are counted
// apart (a gauge), so that copies per delivered byte can leave them out: `sluice-perf
// service` showed 1.03-1.1 copies per byte for DYNAMIC runs that made exactly one.
TEST_P(DataPathTest, WhatIsAssembledAndNotServedYetIsCountedApart) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  auto reader = ReadOff(**client, "range(819200) | batch(8192)", /*max_outstanding_requests=*/1);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int i = 0; i < 3; ++i) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
  }
  // The pipeline fills the task's buffer behind the reader.
  proto::WorkerStats stats;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  do {
    absl::SleepFor(absl::Milliseconds(10));
    stats = (*cluster)->workers()[0]->stats();
  } while (stats.bytes_assembled_unserved() < 2 * 65536 && absl::Now() < deadline);
  EXPECT_GE(stats.bytes_assembled_unserved(), 2 * 65536) << "the buffer never filled";
  EXPECT_GE(stats.batches_served(), 3);
  EXPECT_EQ(stats.bytes_assembled() - stats.bytes_assembled_unserved(), stats.bytes_served())
      << "each batch served was assembled once, and each one assembled is served or waiting";
}

// A shuffled DYNAMIC batch carries a provenance run per element: 2,000 runs are longer than
// a reply's header may be. They travel after the batch in the payload, and every element
// arrives once. Before, the worker's reply was never sent, and the read failed at its
// deadline (60 s) with "no reply to method 6".
TEST_P(DataPathTest, AShuffledBatchsLongProvenanceTravelsAfterItInThePayload) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int64_t kValues = 20000;
  absl::StatusOr<std::string> dataset = Register(
      **client, absl::StrCat("range(", kValues, ") | shuffle(", kValues, ") | batch(2000)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::DYNAMIC;
  read.slab_bytes = 1 << 20;
  read.request_timeout = absl::Seconds(20);  // a reply that never comes fails in 20 s
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<int> seen(kValues, 0);
  int64_t values = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    for (int64_t v : (**batch).view().tensor(0).values<int64_t>()) {
      ASSERT_TRUE(v >= 0 && v < kValues) << v;
      ++seen[v];
      ++values;
    }
  }
  EXPECT_EQ(values, kValues);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), kValues) << "an element twice or never";
  EXPECT_GT((*cluster)->workers()[0]->stats().batches_with_provenance_in_payload(), 0)
      << "no batch needed its provenance in the payload: the test no longer tests that";
  // The runs reached the dispatcher's delivery log (the reader reports them): without them
  // a re-issue after a worker's loss would serve these elements again.
  absl::StatusOr<proto::GetStatusResponse> status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->jobs_size(), 1);
  EXPECT_GT(status->jobs(0).delivery_log_entries(), 0) << "no delivery was reported";
}

// tf.data's "ideal model speed" set-up: the cached batch is assembled once and every repeat
// is served from that same registered slab, with no copy at all. `rows` int64 values
// 0..rows-1 per batch; a batch of 2 is 16 bytes, a tensor kept inline (never shared), which
// must be recognised as the same batch too.
void ExpectCachedBatchServedFromItsSlab(const char* ucx_tls, int64_t rows) {
  auto cluster = StartCluster(ucx_tls);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, ucx_tls);
  ASSERT_TRUE(client.ok()) << client.status();
  auto reader = ReadOff(**client, absl::StrCat("range(", rows, ") | batch(", rows,
                                               ") | take(1) | cache() | repeat(20)"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t batches = 0;
  int64_t batch_bytes = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    auto values = (**batch).view().tensor(0).values<int64_t>();
    ASSERT_EQ(values.size(), static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) ASSERT_EQ(values[i], i) << "batch " << batches;
    batch_bytes = static_cast<int64_t>((**batch).view().bytes().size());
    ++batches;
  }
  EXPECT_EQ(batches, 20);
  proto::WorkerStats stats = (*cluster)->workers()[0]->stats();
  EXPECT_EQ(stats.bytes_assembled(), batch_bytes) << "assembled once";
  EXPECT_EQ(stats.bytes_reused(), 19 * batch_bytes) << "then served from the same slab";
  EXPECT_EQ(stats.bytes_served(), 20 * batch_bytes);
  if (rows * 8 >= 16 * 1024) {  // above the rendezvous threshold: no copy on receive
    EXPECT_EQ((*client)->transport_stats().payload_bytes_copied.load(), 0u);
  }
}

// What BatchReader promises about order: a task's batches come in the order its pipeline
// made them, with one request in flight or many. Replies to requests in flight together do
// land out of order: one worker's 31,250 small batches came 3 (shm) and 13 (tcp) times out
// of order before the reader put them back in order. With `caller_driven_progress` the
// reader waiting in Next() receives batches on its own thread (driven_waits() counts the
// waits that ended so); without it the client's progress thread receives every one, and a
// reader given a `wait_spin` polls for each before it sleeps.
void ExpectATasksOrder(const char* ucx_tls, bool caller_driven_progress,
                       std::optional<absl::Duration> wait_spin = {}) {
  auto cluster = StartCluster(ucx_tls);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, ucx_tls, caller_driven_progress, wait_spin);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int64_t kValues = 640000;  // 10,000 batches of 64
  for (int in_flight : {1, 8}) {
    SCOPED_TRACE(absl::StrCat(in_flight, " requests in flight"));
    auto reader = ReadOff(**client, absl::StrCat("range(", kValues, ") | batch(64)"), in_flight);
    ASSERT_TRUE(reader.ok()) << reader.status();
    int64_t next_value = 0;
    while (true) {
      auto batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (!batch->has_value()) break;
      for (int64_t v : (**batch).view().tensor(0).values<int64_t>()) ASSERT_EQ(v, next_value++);
    }
    EXPECT_EQ(next_value, kValues);
    if (caller_driven_progress) {
      EXPECT_GT((*reader)->driven_waits(), 0) << "the reader never received a batch itself";
    } else {
      EXPECT_EQ((*reader)->driven_waits(), 0) << "its progress thread receives every batch";
    }
    if (wait_spin.has_value() && !caller_driven_progress) {
      EXPECT_GT((*reader)->spun_waits(), 0) << "no batch came while the reader polled";
    }
  }
}

TEST_P(DataPathTest, ATasksBatchesComeInTheOrderItMadeThem) {
  ExpectATasksOrder(GetParam(), /*caller_driven_progress=*/false);
}

TEST_P(DataPathTest, AReaderThatDrivesProgressReceivesItsBatchesItselfInOrder) {
  ExpectATasksOrder(GetParam(), /*caller_driven_progress=*/true);
}

TEST_P(DataPathTest, AReaderThatPollsBeforeItSleepsGetsItsBatchesInOrder) {
  ExpectATasksOrder(GetParam(), /*caller_driven_progress=*/false, absl::Microseconds(200));
}

TEST_P(DataPathTest, RepeatedCachedBatchIsServedFromItsSlabWithoutCopies) {
  ExpectCachedBatchServedFromItsSlab(GetParam(), 8192);
}

TEST_P(DataPathTest, RepeatedSmallCachedBatchIsServedFromItsSlabToo) {
  ExpectCachedBatchServedFromItsSlab(GetParam(), 2);
}

// A pipeline faster than its reader fills the task's buffer (4 batches) and then waits for
// half of it to go, not for every single batch: each wake-up is a context switch on the
// cores the transport polls on.
TEST_P(DataPathTest, FullBufferWakesThePipelineOncePerHalfBuffer) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int kBatches = 200;
  auto reader = ReadOff(
      **client,
      absl::StrCat("range(1024) | batch(1024) | take(1) | cache() | repeat(", kBatches, ")"));
  ASSERT_TRUE(reader.ok()) << reader.status();
  int batches = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    ++batches;
    // A reader slower than the cached pipeline, so that the buffer fills.
    absl::SleepFor(absl::Microseconds(200));
  }
  ASSERT_EQ(batches, kBatches);
  const int64_t waits = (*cluster)->workers()[0]->stats().buffer_full_waits();
  EXPECT_GT(waits, 0) << "the pipeline never found its buffer full";
  // Refilling after each batch taken would wait about kBatches - 4 times.
  EXPECT_LE(waits, kBatches / 2 + 2);
}

// A coordinated consumer that stops while its rounds wait at the worker for the other
// consumer gives them up at once; before, it waited out the round wait for their replies.
TEST_P(DataPathTest, AStoppingReaderGivesUpTheRoundsItAskedFor) {
  LocalClusterOptions options;
  options.num_workers = 1;
  options.dispatcher.transport.ucx_tls = GetParam();
  options.dispatcher.config.round_wait = absl::Seconds(60);
  options.worker.transport.ucx_tls = GetParam();
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> dataset = Register(**client, "range(100) | repeat()");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.job_name = "rounds";
  read.num_consumers = 2;  // consumer 1 never comes
  read.consumer_index = 0;
  read.slab_bytes = 1 << 16;
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // It requests its first rounds as soon as a heartbeat names the task (every 100 ms).
  absl::SleepFor(absl::Seconds(1));
  // What `sluice read` says of the wait: "waiting on 1 task(s)" told nothing of the rounds.
  EXPECT_THAT((*reader)->DescribeWait(),
              ::testing::HasSubstr("waiting for round 0 as consumer 0 of 2 of job 'rounds'"));
  const absl::Time stop = absl::Now();
  reader->reset();
  EXPECT_LT(absl::Now() - stop, absl::Seconds(10)) << "it waited for the rounds it asked for";
}

// A reader that stops mid-read reports with its release what it received since its last
// heartbeat: the dispatcher stops waiting for a released reader's reports, so without them
// those elements would be read again by the job's other readers after a worker loss.
TEST_P(DataPathTest, AStoppingReaderReportsItsLastDeliveries) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> dataset = Register(**client, "range(1000) | batch(10)");
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::DYNAMIC;
  read.job_name = "shared";  // kept (with its log) after this reader leaves
  read.slab_bytes = 1 << 16;
  read.heartbeat_interval = absl::Seconds(30);  // no heartbeat reports what it reads
  const absl::Time started = absl::Now();
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int i = 0; i < 3; ++i) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->has_value());
  }
  reader->reset();
  ASSERT_LT(absl::Now() - started, absl::Seconds(20)) << "a heartbeat may have reported them";
  absl::StatusOr<proto::GetStatusResponse> status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->jobs_size(), 1);
  EXPECT_GT(status->jobs(0).delivery_log_entries(), 0) << "what it read was not reported";
}

// After reading 256 KiB batches with max_outstanding_requests = 8: a 768 KiB `budget`
// allowed two fetches in flight; none (0) let the reader keep more going.
void ExpectFetchesInFlight(const BatchReader& reader, size_t budget) {
  if (budget > 0) {
    EXPECT_EQ(reader.fetch_limit(), 2);
    EXPECT_GE(reader.peak_fetches_after_first_batch(), 1);
    EXPECT_LE(reader.peak_fetches_after_first_batch(), 2);
  } else {
    EXPECT_EQ(reader.fetch_limit(), 8);
    EXPECT_GT(reader.peak_fetches_after_first_batch(), 2);
  }
}

// Large batches do not stream into many landing slabs at once (ReadOptions::
// max_bytes_in_flight): once a batch of a little over 256 KiB was seen, a 768 KiB budget
// allows two fetches in flight, however many max_outstanding_requests would; without the
// budget the reader keeps more going. Every batch comes once, whole, either way.
TEST_P(DataPathTest, LargeBatchesKeepFewerFetchesInFlight) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int64_t kRows = 32768;  // int64 values: 256 KiB of data per batch
  constexpr int64_t kBatches = 40;
  for (size_t budget : {size_t{768} << 10, size_t{0}}) {
    SCOPED_TRACE(budget);
    auto pipeline =
        engine::ParsePipeline(absl::StrCat("range(", kRows * kBatches, ") | batch(", kRows, ")"));
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    auto dataset = (*client)->RegisterDataset(*pipeline);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    ReadOptions read;
    read.mode = proto::OFF;
    read.slab_bytes = 1 << 20;
    read.max_outstanding_requests = 8;
    read.max_bytes_in_flight = budget;
    auto reader = (*client)->Read(*dataset, read);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::set<int64_t> batch_starts;
    while (true) {
      auto batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (!batch->has_value()) break;
      auto values = (**batch).view().tensor(0).values<int64_t>();
      ASSERT_EQ(values.size(), static_cast<size_t>(kRows));
      ASSERT_EQ(values[kRows - 1], values[0] + kRows - 1);
      EXPECT_TRUE(batch_starts.insert(values[0]).second) << "batch " << values[0] << " twice";
    }
    EXPECT_EQ(batch_starts.size(), static_cast<size_t>(kBatches));
    ExpectFetchesInFlight(**reader, budget);
  }
}

// Each acknowledgement travels once, with the next request to its task; before, a reader
// sent every unconfirmed one with every request until a reply confirmed it, so with 8
// requests in flight each went about 8 times, and the worker parsed and looked up each.
TEST_P(DataPathTest, EachAcknowledgementTravelsOnce) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int64_t kBatches = 300;
  constexpr int kInFlight = 8;
  for (int consumers : {0, 1}) {
    SCOPED_TRACE(consumers == 0 ? "uncoordinated" : "coordinated");
    const proto::WorkerStats before = (*cluster)->workers()[0]->stats();
    auto pipeline = engine::ParsePipeline(
        absl::StrCat("range(", kBatches * 16, ") | batch(16)", consumers > 0 ? " | repeat()" : ""));
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    auto dataset = (*client)->RegisterDataset(*pipeline);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    ReadOptions read;
    read.mode = proto::OFF;
    read.job_name = absl::StrCat("acks-", consumers);
    read.num_consumers = consumers;
    read.slab_bytes = 1 << 20;
    read.max_outstanding_requests = kInFlight;
    auto reader = (*client)->Read(*dataset, read);
    ASSERT_TRUE(reader.ok()) << reader.status();
    int64_t read_batches = 0;
    while (read_batches < kBatches) {
      auto batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      if (!batch->has_value()) break;
      ++read_batches;
    }
    ASSERT_EQ(read_batches, kBatches);
    reader->reset();  // stops its requests: the worker's counts settle
    const proto::WorkerStats after = (*cluster)->workers()[0]->stats();
    const int64_t served = after.batches_served() - before.batches_served();
    const int64_t acks = after.acknowledgements_received() - before.acknowledgements_received();
    // Every batch but those that came after the last request is acknowledged, once.
    EXPECT_LE(acks, served);
    EXPECT_GE(acks, kBatches - 2 * kInFlight) << served << " batches served";
  }
}

// Coordinated reads keep to the same budget: rounds of 256 KiB batches, two in flight under
// 768 KiB, more without it.
TEST_P(DataPathTest, CoordinatedReadsKeepFewerRoundsInFlight) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int64_t kRows = 32768;  // int64 values: 256 KiB of data per batch
  constexpr int kRounds = 40;
  for (size_t budget : {size_t{768} << 10, size_t{0}}) {
    SCOPED_TRACE(budget);
    auto pipeline = engine::ParsePipeline(
        absl::StrCat("range(", kRows * 4, ") | batch(", kRows, ") | repeat()"));
    ASSERT_TRUE(pipeline.ok()) << pipeline.status();
    auto dataset = (*client)->RegisterDataset(*pipeline);
    ASSERT_TRUE(dataset.ok()) << dataset.status();
    ReadOptions read;
    read.mode = proto::OFF;
    read.job_name = absl::StrCat("rounds-", budget);
    read.num_consumers = 1;
    read.slab_bytes = 1 << 20;
    read.max_outstanding_requests = 8;
    read.max_bytes_in_flight = budget;
    auto reader = (*client)->Read(*dataset, read);
    ASSERT_TRUE(reader.ok()) << reader.status();
    for (int round = 0; round < kRounds; ++round) {
      auto batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      ASSERT_TRUE(batch->has_value()) << "round " << round;
      ASSERT_EQ((**batch).round(), round);
      auto values = (**batch).view().tensor(0).values<int64_t>();
      ASSERT_EQ(values.size(), static_cast<size_t>(kRows));
      // One whole batch of the pipeline's four. Which one a round gets follows the order
      // the worker matched the requests in, which need not be the rounds' order.
      EXPECT_EQ(values[0] % kRows, 0) << "round " << round;
      EXPECT_LT(values[0], 4 * kRows) << "round " << round;
      ASSERT_EQ(values[kRows - 1], values[0] + kRows - 1);
    }
    ExpectFetchesInFlight(**reader, budget);
  }
}

// The dispatcher lets a coordinated consumer run kRoundWindow (1024) rounds past the round
// it last reported; a consumer that nears that horizon asks for its next heartbeat at once
// rather than wait out the interval (before, rounds faster than ~10,000/s waited for it).
TEST_P(DataPathTest, CoordinatedReadsOutrunTheHeartbeatInterval) {
  auto cluster = StartCluster(GetParam());
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = ConnectClient(**cluster, GetParam());
  ASSERT_TRUE(client.ok()) << client.status();
  auto pipeline = engine::ParsePipeline("range(64) | repeat()");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto dataset = (*client)->RegisterDataset(*pipeline);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.job_name = "fast-rounds";
  read.num_consumers = 1;
  read.slab_bytes = 1 << 12;
  read.heartbeat_interval = absl::Seconds(8);
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  const absl::Time start = absl::Now();
  constexpr int kRounds = 3000;  // nearly three horizons
  for (int round = 0; round < kRounds; ++round) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(batch->has_value()) << "round " << round;
    ASSERT_EQ((**batch).round(), round);
  }
  // Two heartbeat intervals had it waited at each horizon.
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
}

INSTANTIATE_TEST_SUITE_P(Transports, DataPathTest,
                         ::testing::Values("posix,sysv,cma,self", "tcp,self"));

TEST(StatusTest, DispatcherReportsWorkersDatasetsAndJobs) {
  LocalClusterOptions cluster_options;
  cluster_options.num_workers = 2;
  auto cluster = LocalCluster::Start(cluster_options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ClientOptions client_options;
  client_options.dispatcher = (*cluster)->dispatcher_address();
  auto client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok());
  auto dataset = (*client)->RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)"));
  ASSERT_TRUE(dataset.ok());
  ReadOptions read;
  read.job_name = "status-job";
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok());
  int batches = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok());
    if (!batch->has_value()) break;
    ++batches;
  }
  auto status = (*client)->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->dispatcher_id(), (*client)->dispatcher_id());
  ASSERT_EQ(status->workers_size(), 2);
  ASSERT_EQ(status->datasets_size(), 1);
  EXPECT_THAT(status->datasets(0).pipeline(), ::testing::HasSubstr("batch(10"));
  ASSERT_EQ(status->jobs_size(), 1);
  EXPECT_EQ(status->jobs(0).job_name(), "status-job");
  EXPECT_EQ(status->jobs(0).num_tasks(), 2);
  EXPECT_TRUE(status->jobs(0).finished());
  EXPECT_GE(batches, 10);
}

}  // namespace
}  // namespace sluice::control
