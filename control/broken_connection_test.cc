// A reader whose connections to a worker break (fault injection, ReadOptions::
// disconnect_every_batches) over real UCX endpoints: it tells the worker of each break
// once, however many of its requests failed with it, and its batches still come in the
// order the worker made them, each once.
#include <gtest/gtest.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "control/client.h"
#include "control/local_cluster.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

// Each failed request used to raise the delivery epoch again. A call whose payload was
// landing when its connection broke fails late, after the reader may have sent requests
// over the new connection; its raise made the worker take the batches it had just served
// there for lost too, and one it let go meanwhile passed the sequence floor while still on
// its way: handed out after later ones (FaultToleranceTest, once in CI, saw a task's batch
// 1153 after its 1160). That timing did not come up here in six runs without the fix: this
// test guards the count and the order, not that race.
class BrokenConnectionTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BrokenConnectionTest, EachBreakIsReportedOnceAndTheOrderHolds) {
  LocalClusterOptions options;
  options.num_workers = 1;
  options.dispatcher.transport.ucx_tls = GetParam();
  options.worker.transport.ucx_tls = GetParam();
  options.worker.slab_bytes = 1 << 20;
  auto cluster = LocalCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ClientOptions client_options;
  client_options.dispatcher = (*cluster)->dispatcher_address();
  client_options.transport.ucx_tls = GetParam();
  auto client = Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();

  constexpr int64_t kBatches = 400;
  constexpr int64_t kRows = 8192;  // 64 KiB batches: replies land for a while
  constexpr int kDisconnectEvery = 40;
  constexpr int kInFlight = 8;
  auto pipeline =
      engine::ParsePipeline(absl::StrCat("range(", kBatches * kRows, ") | batch(", kRows, ")"));
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();
  auto dataset = (*client)->RegisterDataset(*pipeline);
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  ReadOptions read;
  read.mode = proto::OFF;
  read.slab_bytes = 1 << 20;
  read.max_outstanding_requests = kInFlight;
  read.disconnect_every_batches = kDisconnectEvery;
  auto reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();
  int64_t next_value = 0;
  while (true) {
    auto batch = (*reader)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    for (int64_t v : (**batch).view().tensor(0).values<int64_t>()) {
      ASSERT_EQ(v, next_value++) << "a batch out of order, or lost, or twice";
    }
  }
  EXPECT_EQ(next_value, kBatches * kRows);
  reader->reset();
  const proto::WorkerStats stats = (*cluster)->workers()[0]->stats();
  // A break every 40 batches accepted, the last with the requests that learn the end (one
  // with no request on its way goes unreported). One more is allowed for a break of the
  // transport's own (a UCX restart); a break reported once per failed request, with up to
  // 8 in flight, is well past it.
  const int64_t breaks = kBatches / kDisconnectEvery;
  EXPECT_GE(stats.breaks_reported(), breaks / 2) << "the breaks went unreported";
  EXPECT_LE(stats.breaks_reported(), breaks + 1) << "a break reported more than once";
  EXPECT_GT(stats.batches_redelivered(), 0) << "no reply was lost with a connection";
}

INSTANTIATE_TEST_SUITE_P(Transports, BrokenConnectionTest,
                         ::testing::Values("posix,sysv,cma,self", "tcp,self"),
                         [](const auto& info) { return info.index == 0 ? "shm" : "tcp"; });

}  // namespace
}  // namespace sluice::control
