// A DispatcherState journaled into a real journal directory and rebuilt from it: what a
// fault-tolerant dispatcher restarted after kill -9 sees.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "control/dispatcher_state.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using journal_test::TempDir;

proto::GetSplitRequest Lease(int64_t job, int64_t task, int64_t seq) {
  proto::GetSplitRequest request;
  request.set_job_id(job);
  request.set_task_id(task);
  request.set_repetition(0);
  request.set_max_splits(3);
  request.set_lease_seq(seq);
  return request;
}

std::vector<int64_t> Begins(const proto::GetSplitResponse& response) {
  std::vector<int64_t> begins;
  for (const proto::Split& s : response.splits()) begins.push_back(s.begin());
  return begins;
}

struct Journaled {
  int64_t job_id = 0;
  int64_t task_id = 0;
  std::string dataset_id;
  proto::GetSplitResponse third_lease;
};

// Registers a dataset, a named DYNAMIC job and a worker, and leases splits 0..8 in three
// leases of three splits of 10 elements.
Journaled RunLeases(DispatcherState& state) {
  Journaled out;
  out.dataset_id = *state.RegisterDataset(*engine::ParsePipeline("range(1000) | batch(7)"));
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(out.dataset_id);
  job.set_mode(proto::DYNAMIC);
  job.set_job_name("train");
  out.job_id = state.GetOrCreateJob(job)->job_id();
  proto::WorkerHeartbeatRequest heartbeat;
  heartbeat.set_worker_address("ucx://127.0.0.1:7000");
  out.task_id = state.WorkerHeartbeat(heartbeat)->new_tasks(0).task_id();
  for (int64_t seq = 1; seq <= 3; ++seq) {
    absl::StatusOr<proto::GetSplitResponse> lease =
        state.GetSplit(Lease(out.job_id, out.task_id, seq));
    EXPECT_TRUE(lease.ok()) << lease.status();
    if (seq == 3) out.third_lease = *lease;
  }
  return out;
}

void ExpectRestoredStateContinues(const std::string& dir, const Journaled& before,
                                  int64_t compact_every) {
  absl::StatusOr<Recovered> recovered = Recover(dir);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  DispatcherState state({.elements_per_split = 999});  // the journaled split size wins
  ASSERT_TRUE(state.Restore(*recovered).ok());

  // A retried lease (its reply was lost in the crash) gets the same splits.
  absl::StatusOr<proto::GetSplitResponse> retried =
      state.GetSplit(Lease(before.job_id, before.task_id, 3));
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(Begins(*retried), Begins(before.third_lease));
  EXPECT_EQ(Begins(*retried), (std::vector<int64_t>{60, 70, 80}));
  // The next lease continues at the journaled cursor, with the journaled split size.
  absl::StatusOr<proto::GetSplitResponse> next =
      state.GetSplit(Lease(before.job_id, before.task_id, 4));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(Begins(*next), (std::vector<int64_t>{90, 100, 110}))
      << "compact_every " << compact_every;

  // The named job, its task and the dataset survived; new ids do not collide.
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(before.dataset_id);
  job.set_mode(proto::DYNAMIC);
  job.set_job_name("train");
  absl::StatusOr<proto::GetOrCreateJobResponse> rejoined = state.GetOrCreateJob(job);
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  EXPECT_EQ(rejoined->job_id(), before.job_id);
  EXPECT_GT(rejoined->client_id(), before.task_id);
  proto::ClientHeartbeatRequest client;
  client.set_job_id(before.job_id);
  absl::StatusOr<proto::ClientHeartbeatResponse> tasks = state.ClientHeartbeat(client);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->tasks_size(), 1);
  EXPECT_EQ(tasks->tasks(0).task_id(), before.task_id);
  EXPECT_EQ(state.num_workers(), 1);
}

TEST(DispatcherRecoveryTest, RestoredStateRepeatsLostLeasesAndContinuesTheCursor) {
  TempDir tmp;
  Journaled before;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({.elements_per_split = 10});
    state.AttachJournal(journal.get(), /*compact_every=*/0);
    before = RunLeases(state);
    EXPECT_GE(state.journaled_updates(), 7);
    ASSERT_TRUE(journal->Flush().ok());
  }
  ExpectRestoredStateContinues(tmp.dir(), before, 0);
}

TEST(DispatcherRecoveryTest, SnapshotsTakenByCompactionRestoreTheSameState) {
  TempDir tmp;
  Journaled before;
  {
    std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(tmp.dir(), {});
    DispatcherState state({.elements_per_split = 10});
    state.AttachJournal(journal.get(), /*compact_every=*/2);
    before = RunLeases(state);
    ASSERT_TRUE(journal->Flush().ok());
  }
  bool has_snapshot = false;
  for (const auto& entry : std::filesystem::directory_iterator(tmp.dir())) {
    has_snapshot |= entry.path().filename().string().rfind("snapshot_", 0) == 0;
  }
  EXPECT_TRUE(has_snapshot);
  ExpectRestoredStateContinues(tmp.dir(), before, 2);
}

}  // namespace
}  // namespace sluice::control
