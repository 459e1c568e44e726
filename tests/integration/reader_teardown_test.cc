// A reader linked into a trainer, against a real `sluice dispatcher` process that falls
// silent (SIGSTOP: as a host powered off, no reply and no reset): destroying the reader
// gives up the heartbeat under way instead of waiting out its request timeout.
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "control/client.h"
#include "engine/pipeline_text.h"
#include "tests/integration/cluster.h"
#include "transport/address.h"

namespace sluice::testing {
namespace {

TEST(ReaderTeardownTest, AReaderGoesPromptlyWhenItsDispatcherFallsSilent) {
  Cluster cluster(/*workers=*/0);
  absl::StatusOr<transport::Address> dispatcher = transport::ParseAddress(cluster.address());
  ASSERT_TRUE(dispatcher.ok()) << dispatcher.status();
  control::ClientOptions client_options;
  client_options.dispatcher = *dispatcher;
  absl::StatusOr<std::unique_ptr<control::Client>> client =
      control::Client::Connect(client_options);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<std::string> dataset =
      (*client)->RegisterDataset(*engine::ParsePipeline("range(100) | batch(10)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  control::ReadOptions read;
  read.mode = proto::OFF;
  read.slab_bytes = 1 << 16;
  read.request_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<control::BatchReader>> reader = (*client)->Read(*dataset, read);
  ASSERT_TRUE(reader.ok()) << reader.status();

  ASSERT_EQ(kill(cluster.dispatcher().pid(), SIGSTOP), 0);
  absl::SleepFor(absl::Milliseconds(500));  // a heartbeat (every 100 ms) waits on it now
  const absl::Time start = absl::Now();
  reader->reset();
  const absl::Duration took = absl::Now() - start;
  kill(cluster.dispatcher().pid(), SIGCONT);
  // The release call to the silent dispatcher is bounded by 1 s. Before, the heartbeat's
  // call was waited for: up to the 30 s request timeout.
  EXPECT_LT(took, absl::Seconds(5));
}

}  // namespace
}  // namespace sluice::testing
