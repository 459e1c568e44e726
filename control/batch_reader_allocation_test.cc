// A reader's steady state allocates nothing per batch: small batches are where a
// reader's own work shows, and an allocation is ~100 instructions of a client's ~7,000 per
// batch (perf/batch_instructions.sh). A real local cluster serves one cached 256-byte batch
// forever; the client drives its own transport (caller progress), so a batch's reply, the
// next fetch and the hand-out all run on the reading thread, whose operator new calls are
// counted. The worker's threads are not counted: it lives in this process too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "common/counting_new.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

constexpr char kTls[] = "posix,sysv,cma,self";

TEST(BatchReaderAllocationTest, ACallerDrivenReaderAllocatesAlmostNothingPerBatch) {
  LocalClusterOptions cluster_options;
  cluster_options.num_workers = 1;
  cluster_options.dispatcher.transport.ucx_tls = kTls;
  cluster_options.worker.transport.ucx_tls = kTls;
  auto cluster = LocalCluster::Start(cluster_options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();

  ClientOptions client_options;
  client_options.dispatcher = (*cluster)->dispatcher_address();
  client_options.transport.ucx_tls = kTls;
  client_options.transport.caller_driven_progress = true;
  auto client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  // 32 int64 values: a 256-byte batch, made once and served forever.
  auto pipeline = engine::ParsePipeline("range(32) | batch(32) | take(1) | cache() | repeat()");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto dataset = (*client)->RegisterDataset(*pipeline);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.slab_bytes = 64 << 10;
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();

  auto read_batches = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto batch = (*reader)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      ASSERT_TRUE(batch->has_value());
      const auto values = (**batch).view().tensor(0).values<int64_t>();
      ASSERT_EQ(values.size(), 32u);
      ASSERT_EQ(values[31], 31);
    }
  };
  const uint64_t at_start = AllocationsOnThisThread();
  read_batches(2000);  // warm: pools, tables, connections
  // The count works: setting up and warming allocates.
  const uint64_t warming = AllocationsOnThisThread() - at_start;
  EXPECT_GT(warming, 0u);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  // The fewest over several rounds: a reply the client's progress thread took (it gets the
  // worker back every ~10 ms) is handled there, and a round the VM stalled may fall back on
  // paths that are not what this test is about.
  // Short rounds, many of them: a long one on a busy machine gathers enough of those.
  constexpr int kBatches = 500;
  constexpr int kRounds = 20;
  double best = 1e9;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t before = AllocationsOnThisThread();
    read_batches(kBatches);
    ASSERT_FALSE(::testing::Test::HasFatalFailure());
    best = std::min(best, static_cast<double>(AllocationsOnThisThread() - before) / kBatches);
  }
  // Parsing the batch's layout took two heap blocks and the reply's message one, and the
  // ready queue a std::deque block every 4 batches: 3.25 per batch in session 32, 0 since.
  std::printf(
      "allocations per batch on the reading thread, best of %d rounds: %.3f (warming: %llu)\n",
      kRounds, best, static_cast<unsigned long long>(warming));
  EXPECT_LE(best, 0.05);
}

}  // namespace
}  // namespace sluice::control
