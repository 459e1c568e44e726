#include "control/dispatcher_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using ::testing::HasSubstr;

proto::PipelineDef Pipeline(const char* text) {
  auto def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

proto::GetOrCreateJobRequest JobRequest(const std::string& dataset, proto::ProcessingMode mode,
                                        const std::string& name) {
  proto::GetOrCreateJobRequest request;
  request.set_dataset_id(dataset);
  request.set_mode(mode);
  request.set_job_name(name);
  return request;
}

// A pattern that matches no file is a failure of the data (FailedPrecondition, naming it),
// not NotFound: a worker takes NotFound for a job the dispatcher forgot, and told its user
// that the dispatcher had restarted without its state.
TEST(DispatcherStateTest, SplitsOfFilesThatDoNotExistFailAsAPrecondition) {
  const std::string root = ::testing::TempDir();
  DispatcherState state({.data_roots = {root}});
  proto::WorkerHeartbeatRequest beat;
  beat.set_worker_address("ucx://a:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(beat);
  ASSERT_TRUE(joined.ok()) << joined.status();
  absl::StatusOr<std::string> dataset = state.RegisterDataset(
      Pipeline("list_files('no-such-file-*.tfrecord') | interleave(tfrecord()) | batch(2)"));
  ASSERT_TRUE(dataset.ok()) << dataset.status();
  absl::StatusOr<proto::GetOrCreateJobResponse> job =
      state.GetOrCreateJob(JobRequest(*dataset, proto::DYNAMIC, ""));
  ASSERT_TRUE(job.ok()) << job.status();
  joined = state.WorkerHeartbeat(beat);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->new_tasks_size(), 1);
  proto::GetSplitRequest lease;
  lease.set_job_id(job->job_id());
  lease.set_task_id(joined->new_tasks(0).task_id());
  lease.set_max_splits(1);
  absl::StatusOr<proto::GetSplitResponse> splits = state.GetSplit(lease);
  ASSERT_FALSE(splits.ok());
  EXPECT_EQ(splits.status().code(), absl::StatusCode::kFailedPrecondition) << splits.status();
  EXPECT_THAT(splits.status().message(), HasSubstr("no files match"));
}

TEST(DispatcherStateTest, SameDefinitionSameDatasetId) {
  DispatcherState state({});
  auto a = state.RegisterDataset(Pipeline("range(10) | batch(2)"));
  auto b = state.RegisterDataset(Pipeline("range(10) | batch(2)"));
  auto c = state.RegisterDataset(Pipeline("range(11) | batch(2)"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(DispatcherStateTest, InvalidPipelineIsRejected) {
  DispatcherState state({});
  auto id = state.RegisterDataset(Pipeline("range(10) | map(cube)"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), HasSubstr("cube"));
}

TEST(DispatcherStateTest, NamedJobsAreSharedAndMustMatch) {
  DispatcherState state({});
  std::string ds = *state.RegisterDataset(Pipeline("range(10)"));
  auto first = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "train"));
  auto second = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "train"));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->job_id(), second->job_id());
  EXPECT_NE(first->client_id(), second->client_id());
  auto anonymous = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, ""));
  ASSERT_TRUE(anonymous.ok());
  EXPECT_NE(anonymous->job_id(), first->job_id());
  auto mismatch = state.GetOrCreateJob(JobRequest(ds, proto::OFF, "train"));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(mismatch.status().message(), HasSubstr("mode dynamic"));
  EXPECT_EQ(state.GetOrCreateJob(JobRequest("nope", proto::OFF, "")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DispatcherStateTest, WorkersGetTasksAndJobsFinishWhenAllTasksDo) {
  DispatcherState state({});
  std::string ds = *state.RegisterDataset(Pipeline("range(10)"));
  proto::WorkerHeartbeatRequest w1;
  w1.set_worker_address("ucx://a:1");
  ASSERT_TRUE(state.WorkerHeartbeat(w1).ok());
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::OFF, ""));
  ASSERT_TRUE(job.ok());
  // A worker registering after the job was created joins it too.
  proto::WorkerHeartbeatRequest w2;
  w2.set_worker_address("ucx://b:1");
  auto r2 = state.WorkerHeartbeat(w2);
  ASSERT_TRUE(r2.ok());
  ASSERT_EQ(r2->new_tasks_size(), 1);
  auto r1 = state.WorkerHeartbeat(w1);
  ASSERT_EQ(r1->new_tasks_size(), 1);
  EXPECT_EQ(r1->new_tasks(0).pipeline().stages_size(), 1);

  proto::ClientHeartbeatRequest c;
  c.set_job_id(job->job_id());
  auto heartbeat = state.ClientHeartbeat(c);
  ASSERT_TRUE(heartbeat.ok());
  EXPECT_EQ(heartbeat->tasks_size(), 2);
  EXPECT_FALSE(heartbeat->job_finished());

  w1.add_current_tasks(r1->new_tasks(0).task_id());
  w1.add_finished_tasks(r1->new_tasks(0).task_id());
  ASSERT_TRUE(state.WorkerHeartbeat(w1).ok());
  EXPECT_FALSE(state.ClientHeartbeat(c)->job_finished());
  w2.add_current_tasks(r2->new_tasks(0).task_id());
  w2.add_finished_tasks(r2->new_tasks(0).task_id());
  auto again = state.WorkerHeartbeat(w2);
  EXPECT_EQ(again->new_tasks_size(), 0);  // a finished task is not handed out again
  EXPECT_TRUE(state.ClientHeartbeat(c)->job_finished());
}

// OFF mode: a worker killed and restarted (a new process, within the worker timeout) after
// the other worker finished its pass reads its pass again, and the job waits for it. Losing
// the old process's task used to leave every remaining task finished, so the job ended and
// the restarted worker got no task (fault_ucx_mixed lost its whole pass about 1 run in 4).
TEST(DispatcherStateTest, AWorkerRestartedAfterTheOthersFinishedReadsItsPassAgain) {
  DispatcherState state({});
  std::string ds = *state.RegisterDataset(Pipeline("range(10)"));
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::OFF, ""));
  ASSERT_TRUE(job.ok());
  proto::WorkerHeartbeatRequest survivor;
  survivor.set_worker_address("ucx://a:1");
  survivor.set_worker_uid("a-1");
  proto::WorkerHeartbeatRequest victim;
  victim.set_worker_address("ucx://b:1");
  victim.set_worker_uid("b-1");
  auto survivor_tasks = state.WorkerHeartbeat(survivor);
  auto victim_tasks = state.WorkerHeartbeat(victim);
  ASSERT_TRUE(survivor_tasks.ok() && victim_tasks.ok());
  ASSERT_EQ(survivor_tasks->new_tasks_size(), 1);
  ASSERT_EQ(victim_tasks->new_tasks_size(), 1);
  const int64_t old_task = victim_tasks->new_tasks(0).task_id();
  survivor.add_current_tasks(survivor_tasks->new_tasks(0).task_id());
  survivor.add_finished_tasks(survivor_tasks->new_tasks(0).task_id());
  ASSERT_TRUE(state.WorkerHeartbeat(survivor).ok());
  proto::ClientHeartbeatRequest client;
  client.set_job_id(job->job_id());
  EXPECT_FALSE(state.ClientHeartbeat(client)->job_finished()) << "the victim is mid-pass";

  proto::WorkerHeartbeatRequest restarted;
  restarted.set_worker_address("ucx://b:1");
  restarted.set_worker_uid("b-2");
  auto restarted_tasks = state.WorkerHeartbeat(restarted);
  ASSERT_TRUE(restarted_tasks.ok());
  ASSERT_EQ(restarted_tasks->new_tasks_size(), 1) << "the restarted worker reads its pass again";
  const int64_t new_task = restarted_tasks->new_tasks(0).task_id();
  EXPECT_NE(new_task, old_task);
  EXPECT_FALSE(state.ClientHeartbeat(client)->job_finished()) << "the job waits for it";
  restarted.add_current_tasks(new_task);
  restarted.add_finished_tasks(new_task);
  ASSERT_TRUE(state.WorkerHeartbeat(restarted).ok());
  EXPECT_TRUE(state.ClientHeartbeat(client)->job_finished());

  // A worker restarted once its job had finished joins nothing.
  restarted.set_worker_uid("b-3");
  restarted.clear_current_tasks();
  restarted.clear_finished_tasks();
  auto late = state.WorkerHeartbeat(restarted);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->new_tasks_size(), 0);
}

// Registers a worker (its first heartbeat) and returns the task it got for the one job.
int64_t TaskOf(DispatcherState& state, const std::string& address) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(request);
  EXPECT_TRUE(response.ok() && response->new_tasks_size() == 1);
  return response.ok() && response->new_tasks_size() > 0 ? response->new_tasks(0).task_id() : 0;
}

TEST(DispatcherStateTest, SplitsAreLeasedInBatches) {
  DispatcherState state({.elements_per_split = 10});
  std::string ds = *state.RegisterDataset(Pipeline("range(95)"));
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, ""));
  proto::GetSplitRequest request;
  request.set_job_id(job->job_id());
  request.set_task_id(TaskOf(state, "ucx://w:1"));
  request.set_max_splits(4);
  auto first = state.GetSplit(request);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->splits_size(), 4);
  EXPECT_FALSE(first->end_of_splits());
  EXPECT_EQ(first->splits(3).begin(), 30);
  auto second = state.GetSplit(request);
  ASSERT_EQ(second->splits_size(), 4);
  auto last = state.GetSplit(request);
  ASSERT_EQ(last->splits_size(), 2);  // [80, 90) and [90, 95)
  EXPECT_EQ(last->splits(1).end(), 95);
  EXPECT_TRUE(last->end_of_splits());
}

// Deliveries are recorded only for splits handed out: a client's report of any other key
// (a bug, or another job's keys) grew the delivery log, and the journal, with every report.
TEST(DispatcherStateTest, ReportsOfSplitsNotHandedOutAreDropped) {
  DispatcherState state({.elements_per_split = 10});
  std::string ds = *state.RegisterDataset(Pipeline("range(95) | repeat(3)"));
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, ""));
  ASSERT_TRUE(job.ok()) << job.status();
  proto::GetSplitRequest request;
  request.set_job_id(job->job_id());
  request.set_task_id(TaskOf(state, "ucx://w:1"));
  request.set_max_splits(2);
  auto leased = state.GetSplit(request);
  ASSERT_TRUE(leased.ok()) << leased.status();
  ASSERT_EQ(leased->splits_size(), 2);
  const int64_t first_key = leased->splits(0).key();
  const int64_t second_key = leased->splits(1).key();
  ASSERT_EQ(second_key, first_key + 1);
  proto::ClientHeartbeatRequest report;
  report.set_job_id(job->job_id());
  report.set_client_id(job->client_id());
  // The next split of the pass, one far beyond it, and the first of a pass not begun.
  for (int64_t key : {second_key + 1, second_key + 1000, first_key + (int64_t{1} << 40)}) {
    proto::ProvenanceRun* run = report.add_delivered();
    run->set_split_key(key);
    run->set_first_ordinal(0);
    run->set_count(3);
  }
  ASSERT_TRUE(state.ClientHeartbeat(report).ok());
  ASSERT_EQ(state.Status().jobs_size(), 1);
  EXPECT_EQ(state.Status().jobs(0).delivery_log_entries(), 0);
  // The splits it was given are recorded.
  report.clear_delivered();
  proto::ProvenanceRun* run = report.add_delivered();
  run->set_split_key(second_key);
  run->set_first_ordinal(0);
  run->set_count(3);
  ASSERT_TRUE(state.ClientHeartbeat(report).ok());
  EXPECT_EQ(state.Status().jobs(0).delivery_log_entries(), 1);
}

TEST(DispatcherStateTest, DynamicSplitsCoverTheSourceOncePerRepetition) {
  DispatcherState state({.elements_per_split = 7});
  std::string ds = *state.RegisterDataset(Pipeline("range(100) | batch(3)"));
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, ""));
  ASSERT_TRUE(job.ok());
  const int64_t task = TaskOf(state, "ucx://w:1");
  for (int repetition = 0; repetition < 2; ++repetition) {
    std::set<int64_t> seen;
    while (true) {
      proto::GetSplitRequest request;
      request.set_job_id(job->job_id());
      request.set_task_id(task);
      request.set_repetition(repetition);
      auto split = state.GetSplit(request);
      ASSERT_TRUE(split.ok()) << split.status();
      if (split->end_of_splits()) break;
      EXPECT_LE(split->split().end() - split->split().begin(), 7);
      for (int64_t i = split->split().begin(); i < split->split().end(); ++i) {
        EXPECT_TRUE(seen.insert(i).second) << i;
      }
    }
    EXPECT_EQ(seen.size(), 100u);
  }
  auto off_job = state.GetOrCreateJob(JobRequest(ds, proto::OFF, ""));
  proto::GetSplitRequest request;
  request.set_job_id(off_job->job_id());
  EXPECT_EQ(state.GetSplit(request).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DispatcherStateTest, UserGivenDatasetIdsMustKeepTheirDefinition) {
  DispatcherState state({});
  EXPECT_EQ(*state.RegisterDataset(Pipeline("range(10)"), "squares"), "squares");
  EXPECT_EQ(*state.RegisterDataset(Pipeline("range(10)"), "squares"), "squares");
  absl::StatusOr<std::string> clash = state.RegisterDataset(Pipeline("range(11)"), "squares");
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(clash.status().message(), HasSubstr("range(0, 10, 1)"));
  // An automatic id never takes a name a user chose.
  EXPECT_NE(*state.RegisterDataset(Pipeline("range(12)")), "squares");
}

TEST(DispatcherStateTest, JobsWithoutClientsAreCollectedAndDynamicNamesNotReused) {
  DispatcherState state(
      {.client_timeout = absl::Milliseconds(20), .job_gc_timeout = absl::Milliseconds(30)});
  std::string ds = *state.RegisterDataset(Pipeline("range(10)"));
  // Liveness as of the client's start: live however late the check runs.
  const absl::Time started = absl::Now();
  auto job = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "epoch"));
  ASSERT_TRUE(job.ok());
  proto::WorkerHeartbeatRequest worker;
  worker.set_worker_address("ucx://w:1");
  const int64_t task = state.WorkerHeartbeat(worker)->new_tasks(0).task_id();

  state.CheckLiveness(started);
  EXPECT_EQ(state.Status().jobs_size(), 1) << "its client is live";
  proto::ReleaseClientRequest release;
  release.set_job_id(job->job_id());
  release.set_client_id(job->client_id());
  ASSERT_TRUE(state.ReleaseClient(release).ok());
  // Until it is collected, the job counts no client reading it, and the one that joined.
  ASSERT_EQ(state.Status().jobs_size(), 1);
  EXPECT_EQ(state.Status().jobs(0).num_clients(), 0) << "a released client still counted";
  EXPECT_EQ(state.Status().jobs(0).clients_joined(), 1);
  state.CheckLiveness(absl::Now());
  absl::SleepFor(absl::Milliseconds(60));
  state.CheckLiveness(absl::Now());
  EXPECT_EQ(state.Status().jobs_size(), 0);

  worker.add_current_tasks(task);
  EXPECT_THAT(state.WorkerHeartbeat(worker)->tasks_to_delete(), ::testing::ElementsAre(task));
  absl::Status reused = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "epoch")).status();
  EXPECT_EQ(reused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(reused.message(), HasSubstr("use a new job name"));
  proto::ClientHeartbeatRequest late;
  late.set_job_id(job->job_id());
  EXPECT_THAT(state.ClientHeartbeat(late).status().message(), HasSubstr("garbage-collected"));
}

// Nobody can read an anonymous job once its one client released it: its tasks end at once,
// and workers are told to delete them (they held --buffer-batches slabs each until the job's
// garbage collection, and a worker that served a few short reads had no slab left). A named
// job's tasks stay for the clients that may still join it.
TEST(DispatcherStateTest, AnAnonymousJobsTasksEndWhenItsClientReleasesIt) {
  DispatcherState state({});
  std::string ds = *state.RegisterDataset(Pipeline("range(1000000000)"));
  auto anonymous = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, ""));
  auto named = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "kept"));
  ASSERT_TRUE(anonymous.ok() && named.ok());
  proto::WorkerHeartbeatRequest worker;
  worker.set_worker_address("ucx://w:1");
  absl::StatusOr<proto::WorkerHeartbeatResponse> first = state.WorkerHeartbeat(worker);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->new_tasks_size(), 2);
  for (const proto::TaskDef& task : first->new_tasks()) worker.add_current_tasks(task.task_id());
  const int64_t anonymous_task = first->new_tasks(0).job_id() == anonymous->job_id()
                                     ? first->new_tasks(0).task_id()
                                     : first->new_tasks(1).task_id();

  for (const auto* job : {&*anonymous, &*named}) {
    proto::ReleaseClientRequest release;
    release.set_job_id(job->job_id());
    release.set_client_id(job->client_id());
    ASSERT_TRUE(state.ReleaseClient(release).ok());
  }
  absl::StatusOr<proto::WorkerHeartbeatResponse> after = state.WorkerHeartbeat(worker);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(after->tasks_to_delete(), ::testing::ElementsAre(anonymous_task));
  const proto::GetStatusResponse status = state.Status();
  ASSERT_EQ(status.jobs_size(), 2) << "both stay listed until collected";
  for (const proto::JobStatus& job : status.jobs()) {
    EXPECT_EQ(job.released(), job.job_id() == anonymous->job_id()) << job.job_id();
    EXPECT_EQ(job.finished(), job.job_id() == anonymous->job_id()) << job.job_id();
  }
  // A worker that joins later gets a task of the named job only.
  proto::WorkerHeartbeatRequest newcomer;
  newcomer.set_worker_address("ucx://w:2");
  absl::StatusOr<proto::WorkerHeartbeatResponse> joined = state.WorkerHeartbeat(newcomer);
  ASSERT_TRUE(joined.ok()) << joined.status();
  ASSERT_EQ(joined->new_tasks_size(), 1);
  EXPECT_EQ(joined->new_tasks(0).job_id(), named->job_id());
}

// Workers learn which clients still read each job of theirs, so that their tasks can let go
// of what they keep for clients that left (TaskRunner::ForgetClients).
TEST(DispatcherStateTest, WorkerHeartbeatsListTheClientsStillReadingEachJob) {
  DispatcherState state({.client_timeout = absl::Seconds(1)});
  std::string ds = *state.RegisterDataset(Pipeline("range(10)"));
  auto first = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "shared"));
  auto second = state.GetOrCreateJob(JobRequest(ds, proto::DYNAMIC, "shared"));
  auto other = state.GetOrCreateJob(JobRequest(ds, proto::OFF, ""));
  ASSERT_TRUE(first.ok() && second.ok() && other.ok());
  proto::WorkerHeartbeatRequest worker;
  worker.set_worker_address("ucx://w:1");
  auto beat = [&](const absl::StatusOr<proto::GetOrCreateJobResponse>& client) {
    proto::ClientHeartbeatRequest request;
    request.set_job_id(client->job_id());
    request.set_client_id(client->client_id());
    ASSERT_TRUE(state.ClientHeartbeat(request).ok());
  };
  auto listed = [&]() {
    std::map<int64_t, std::set<int64_t>> clients;
    auto response = state.WorkerHeartbeat(worker);
    EXPECT_TRUE(response.ok()) << response.status();
    for (const proto::JobClients& job : response->job_clients()) {
      clients[job.job_id()].insert(job.client_ids().begin(), job.client_ids().end());
    }
    return clients;
  };
  // Jobs created since the dispatcher started are listed at once: it saw each client join
  // (a restored job waits a client timeout: DispatcherRecoveryTest).
  beat(first);
  beat(second);
  beat(other);
  std::map<int64_t, std::set<int64_t>> before = listed();
  EXPECT_EQ(before.size(), 2u) << "one entry per job with a task here";
  EXPECT_EQ(before[first->job_id()], (std::set<int64_t>{first->client_id(), second->client_id()}));
  EXPECT_EQ(before[other->job_id()], (std::set<int64_t>{other->client_id()}));

  proto::ReleaseClientRequest release;
  release.set_job_id(first->job_id());
  release.set_client_id(first->client_id());
  ASSERT_TRUE(state.ReleaseClient(release).ok());
  EXPECT_EQ(listed()[first->job_id()], (std::set<int64_t>{second->client_id()}));

  // Silent past the client timeout: listed no more, though its job is still listed.
  absl::SleepFor(absl::Milliseconds(1200));
  beat(other);
  std::map<int64_t, std::set<int64_t>> after = listed();
  ASSERT_TRUE(after.contains(first->job_id()));
  EXPECT_TRUE(after[first->job_id()].empty());
  EXPECT_EQ(after[other->job_id()], (std::set<int64_t>{other->client_id()}));
}

// A consumer that restarts (a new client for a consumer index that had one) joins the others
// at the lowest round a live consumer awaits; a consumer's first client starts at round 0.
TEST(DispatcherStateTest, ARestartedCoordinatedConsumerJoinsTheOthersRound) {
  DispatcherState state({});
  std::string ds = *state.RegisterDataset(Pipeline("range(10) | repeat()"));
  auto consumer = [&](int32_t index) {
    proto::GetOrCreateJobRequest request = JobRequest(ds, proto::OFF, "rounds");
    request.set_num_consumers(3);
    request.set_consumer_index(index);
    absl::StatusOr<proto::GetOrCreateJobResponse> response = state.GetOrCreateJob(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return *response;
  };
  auto beat = [&](const proto::GetOrCreateJobResponse& client, int64_t round) {
    proto::ClientHeartbeatRequest heartbeat;
    heartbeat.set_job_id(client.job_id());
    heartbeat.set_client_id(client.client_id());
    heartbeat.set_current_round(round);
    EXPECT_TRUE(state.ClientHeartbeat(heartbeat).ok());
  };
  std::vector<proto::GetOrCreateJobResponse> clients = {consumer(0), consumer(1), consumer(2)};
  for (const auto& client : clients) EXPECT_EQ(client.starting_round(), 0);
  beat(clients[0], 900);
  beat(clients[1], 700);
  beat(clients[2], 20);  // then it crashed
  const proto::GetOrCreateJobResponse restarted = consumer(2);
  EXPECT_EQ(restarted.starting_round(), 700) << "not its predecessor's 20, nor round 0";
  EXPECT_EQ(restarted.job_id(), clients[0].job_id());
}

// Coordinated reads need an endless pipeline; repeat() of one of unknown size is endless, as
// in tf.data (`list_files | interleave(tfrecord()) | repeat()`, a filter before the repeat).
// It was refused as "an unknown number of elements".
TEST(DispatcherStateTest, CoordinatedReadsTakeARepeatOfAnUnknownSize) {
  DispatcherState state({});
  for (const char* pipeline : {"range(10) | filter(is_even) | repeat() | batch(2)",
                               "range(10) | filter(is_even) | batch(3) | repeat()"}) {
    std::string ds = *state.RegisterDataset(Pipeline(pipeline));
    proto::GetOrCreateJobRequest request = JobRequest(ds, proto::OFF, pipeline);
    request.set_num_consumers(2);
    absl::StatusOr<proto::GetOrCreateJobResponse> job = state.GetOrCreateJob(request);
    EXPECT_TRUE(job.ok()) << pipeline << ": " << job.status();
  }
  std::string finite = *state.RegisterDataset(Pipeline("range(10) | filter(is_even) | repeat(3)"));
  proto::GetOrCreateJobRequest request = JobRequest(finite, proto::OFF, "finite");
  request.set_num_consumers(2);
  EXPECT_THAT(state.GetOrCreateJob(request).status().message(),
              HasSubstr("an unknown number of elements"));
}

// A coordinated round waits, unless told otherwise, long enough for a consumer stuck on a
// lost worker's round to learn of the loss (1.25 x worker_timeout and a little more).
TEST(DispatcherStateTest, CoordinatedTasksWaitForConsumersLongerThanTheWorkerTimeout) {
  auto round_wait_ms = [](const DispatcherConfig& config) -> int64_t {
    DispatcherState state(config);
    std::string ds = *state.RegisterDataset(Pipeline("range(10) | repeat()"));
    proto::GetOrCreateJobRequest request = JobRequest(ds, proto::OFF, "rounds");
    request.set_num_consumers(2);
    EXPECT_TRUE(state.GetOrCreateJob(request).ok());
    proto::WorkerHeartbeatRequest worker;
    worker.set_worker_address("ucx://a:1");
    absl::StatusOr<proto::WorkerHeartbeatResponse> response = state.WorkerHeartbeat(worker);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok() || response->new_tasks_size() != 1) return -1;
    return response->new_tasks(0).round_wait_ms();
  };
  DispatcherConfig config;
  config.worker_timeout = absl::Seconds(2);
  EXPECT_EQ(round_wait_ms(config), 4000);
  config.worker_timeout = absl::Seconds(10);
  EXPECT_EQ(round_wait_ms(config), 16000);
  config.round_wait = absl::Milliseconds(300);
  EXPECT_EQ(round_wait_ms(config), 300);
}

}  // namespace
}  // namespace sluice::control
