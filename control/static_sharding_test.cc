// Static sharding: the worker list, each worker's rewritten pipeline, and the dispatcher
// state that hands those pipelines out and refuses unlisted workers.
#include "control/static_sharding.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "control/processing_mode.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using ::testing::HasSubstr;

proto::PipelineDef Pipeline(const char* text) {
  auto def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : proto::PipelineDef();
}

TEST(WorkerListTest, MatchesHostPortOrHostAndIgnoresTheScheme) {
  WorkerList list({"10.0.0.1:7000", "ucx://10.0.0.1:7001", "10.0.0.9"});
  EXPECT_EQ(list.IndexOf("ucx://10.0.0.1:7000"), 0);
  EXPECT_EQ(list.IndexOf("ofi://10.0.0.1:7001"), 1);
  EXPECT_EQ(list.IndexOf("ucx://10.0.0.9:5555"), 2);
  EXPECT_EQ(list.IndexOf("ucx://10.0.0.1:7002"), std::nullopt);
  EXPECT_EQ(list.IndexOf("ucx://10.0.0.2:7000"), std::nullopt);
  EXPECT_EQ(list.size(), 3);
  EXPECT_EQ(list.ToString(), "10.0.0.1:7000, 10.0.0.1:7001, 10.0.0.9");
}

// `--worker-addresses 'foo,,bar:x'` was taken as given: the empty and the portless-port
// entries could never match a worker, whose registrations were then refused.
TEST(WorkerListTest, CheckNamesTheFirstEntryThatCannotMatchAWorker) {
  EXPECT_TRUE(WorkerList::Check({"10.0.0.1:7000", "ucx://h:1", "h", "[::1]:7000"}).ok());
  absl::Status empty = WorkerList::Check({"foo", "", "bar:x"});
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.message()), ::testing::HasSubstr("worker address 2 ('')"));
  EXPECT_THAT(std::string(WorkerList::Check({"foo", "bar:x"}).message()),
              ::testing::HasSubstr("'bar:x'): the port"));
  EXPECT_FALSE(WorkerList::Check({"h:70000"}).ok());
  EXPECT_FALSE(WorkerList::Check({":7000"}).ok());
  // A repeated entry gave two shares to one worker, or one share to two workers on a host.
  EXPECT_THAT(std::string(WorkerList::Check({"h", "g:1", "ucx://h"}).message()),
              ::testing::HasSubstr("worker address 3 ('ucx://h'): repeats worker address 1"));
  EXPECT_FALSE(WorkerList::Check({"h:1", "h:1"}).ok());
}

// A worker's own host:port entry wins over its host's entry wherever they stand: with
// "h, h:1", h:1 took the host's entry, as did the next worker on h, and both read share 0.
TEST(WorkerListTest, AWorkersOwnPortEntryComesBeforeItsHostsEntry) {
  WorkerList list({"h", "h:1"});
  EXPECT_EQ(list.IndexOf("ucx://h:1"), 1);
  EXPECT_EQ(list.IndexOf("ucx://h:2"), 0);
}

TEST(ProcessingModeTest, NamesRoundTripAndUnknownNamesListTheChoices) {
  for (proto::ProcessingMode mode :
       {proto::OFF, proto::DYNAMIC, proto::FILE, proto::DATA, proto::FILE_OR_DATA, proto::HINT}) {
    absl::StatusOr<proto::ProcessingMode> parsed = ParseProcessingMode(ProcessingModeName(mode));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_EQ(*ParseProcessingMode("FILE_OR_DATA"), proto::FILE_OR_DATA);
  EXPECT_THAT(ParseProcessingMode("round_robin").status().message(),
              HasSubstr("off|dynamic|file|data|file_or_data|hint"));
  EXPECT_TRUE(IsStaticSharding(proto::HINT));
  EXPECT_FALSE(IsStaticSharding(proto::DYNAMIC));
}

TEST(ShardPipelineForWorkerTest, EachPolicyRewritesAsTfDataDoes) {
  const proto::PipelineDef files = Pipeline("tfrecord(files=['a', 'b', 'c']) | batch(2)");
  EXPECT_EQ(engine::FormatPipeline(*ShardPipelineForWorker(files, proto::FILE, 2, 1)),
            engine::FormatPipeline(Pipeline("tfrecord(files=['b']) | batch(2)")));
  EXPECT_EQ(engine::FormatPipeline(*ShardPipelineForWorker(files, proto::FILE_OR_DATA, 2, 0)),
            engine::FormatPipeline(Pipeline("tfrecord(files=['a', 'c']) | batch(2)")));
  const proto::PipelineDef range = Pipeline("range(10) | batch(2)");
  EXPECT_EQ(engine::FormatPipeline(*ShardPipelineForWorker(range, proto::FILE_OR_DATA, 2, 1)),
            engine::FormatPipeline(Pipeline("range(10) | shard(2, 1) | batch(2)")));
  EXPECT_EQ(engine::FormatPipeline(*ShardPipelineForWorker(range, proto::DATA, 2, 0)),
            engine::FormatPipeline(Pipeline("range(10) | shard(2, 0) | batch(2)")));
  const proto::PipelineDef hinted = Pipeline("range(10) | shard(SHARD_HINT, SHARD_HINT)");
  EXPECT_EQ(engine::FormatPipeline(*ShardPipelineForWorker(hinted, proto::HINT, 4, 3)),
            engine::FormatPipeline(Pipeline("range(10) | shard(4, 3)")));
  EXPECT_EQ(ShardPipelineForWorker(range, proto::FILE, 2, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ShardPipelineForWorker(range, proto::DYNAMIC, 2, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

proto::WorkerHeartbeatRequest Heartbeat(const std::string& address) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  return request;
}

TEST(StaticShardingStateTest, ListedWorkersGetTheirShareAndOthersAreRefused) {
  DispatcherState state({.worker_addresses = {"127.0.0.1:7000", "127.0.0.1:7001"}});
  std::string ds = *state.RegisterDataset(Pipeline("tfrecord(files=['a', 'b', 'c'])"));
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(ds);
  request.set_mode(proto::FILE);
  absl::StatusOr<proto::GetOrCreateJobResponse> job = state.GetOrCreateJob(request);
  ASSERT_TRUE(job.ok()) << job.status();

  absl::StatusOr<proto::WorkerHeartbeatResponse> stranger =
      state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7999"));
  ASSERT_EQ(stranger.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(stranger.status().message(), HasSubstr("127.0.0.1:7000, 127.0.0.1:7001"));

  absl::StatusOr<proto::WorkerHeartbeatResponse> second =
      state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7001"));
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_EQ(second->new_tasks_size(), 1);
  EXPECT_EQ(second->new_tasks(0).worker_index(), 1);
  EXPECT_EQ(second->new_tasks(0).num_workers(), 2);
  EXPECT_EQ(engine::FormatPipeline(second->new_tasks(0).pipeline()),
            engine::FormatPipeline(Pipeline("tfrecord(files=['b'])")));

  // One of two listed workers finished: the job waits for the other one's share.
  proto::WorkerHeartbeatRequest done = Heartbeat("ucx://127.0.0.1:7001");
  done.add_current_tasks(second->new_tasks(0).task_id());
  done.add_finished_tasks(second->new_tasks(0).task_id());
  ASSERT_TRUE(state.WorkerHeartbeat(done).ok());
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job->job_id());
  client.set_client_id(job->client_id());
  EXPECT_FALSE(state.ClientHeartbeat(client)->job_finished());
}

TEST(StaticShardingStateTest, StaticJobsNeedAWorkerListAndEnoughFiles) {
  DispatcherState unlisted({});
  std::string ds = *unlisted.RegisterDataset(Pipeline("range(10)"));
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(ds);
  request.set_mode(proto::DATA);
  absl::Status status = unlisted.GetOrCreateJob(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("--worker-addresses"));

  DispatcherState three({.worker_addresses = {"h1", "h2", "h3"}});
  std::string two_files = *three.RegisterDataset(Pipeline("tfrecord(files=['a', 'b'])"));
  request.set_dataset_id(two_files);
  request.set_mode(proto::FILE);
  status = three.GetOrCreateJob(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("needs at least 3 files, got 2"));
}

// Two workers on a host listed once by its name: the second would read the first's share
// (and the job wait for no one to read the other). It is told to try again (Unavailable)
// while the first is live, and takes the share once the first is lost; the first, back,
// is then the one told to wait.
TEST(StaticShardingStateTest, AHostEntryIsReadByOneLiveWorkerAtATime) {
  DispatcherState state(
      {.worker_addresses = {"127.0.0.1", "10.0.0.2"}, .worker_timeout = absl::Milliseconds(50)});
  ASSERT_TRUE(state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7000")).ok());
  absl::StatusOr<proto::WorkerHeartbeatResponse> second =
      state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7001"));
  ASSERT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr("entry '127.0.0.1', which worker ucx://127.0.0.1:7000 reads"));
  // The first one lost (say, restarted on another port): its share goes to the next.
  absl::SleepFor(absl::Milliseconds(100));
  state.CheckLiveness(absl::Now());
  EXPECT_TRUE(state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7001")).ok());
  absl::StatusOr<proto::WorkerHeartbeatResponse> back =
      state.WorkerHeartbeat(Heartbeat("ucx://127.0.0.1:7000"));
  EXPECT_EQ(back.status().code(), absl::StatusCode::kUnavailable) << "two live workers on 0";
}

}  // namespace
}  // namespace sluice::control
