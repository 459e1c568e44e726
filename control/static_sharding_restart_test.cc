// Static shares across a dispatcher restart from its journal, with --worker-addresses host
// entries: a worker not heard from since the restore keeps the entry whose share it was
// still reading, and a share read to its end on one port is not read again on another.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "control/journal_test_util.h"
#include "engine/pipeline_text.h"

namespace sluice::control {
namespace {

using journal_test::TempDir;

proto::WorkerHeartbeatRequest Beat(const std::string& address, const std::string& uid) {
  proto::WorkerHeartbeatRequest request;
  request.set_worker_address(address);
  request.set_worker_uid(uid);
  return request;
}

// Journals a DATA job over host entries "a" and "b" with worker a:1 on share a (still
// reading); `more` adds to it before the journal is flushed.
template <typename F>
void JournalAStaticJob(const std::string& dir, const DispatcherConfig& config, F more) {
  std::unique_ptr<JournalWriter> journal = *JournalWriter::Open(dir, {});
  DispatcherState state(config);
  state.AttachJournal(journal.get(), /*compact_every=*/0);
  proto::GetOrCreateJobRequest job;
  job.set_dataset_id(*state.RegisterDataset(*engine::ParsePipeline("range(100)")));
  job.set_mode(proto::DATA);
  ASSERT_TRUE(state.GetOrCreateJob(job).ok());
  absl::StatusOr<proto::WorkerHeartbeatResponse> a = state.WorkerHeartbeat(Beat("ucx://a:1", "a"));
  ASSERT_TRUE(a.ok() && a->new_tasks_size() == 1) << a.status();
  more(state);
  ASSERT_TRUE(journal->Flush().ok());
}

void Restore(const std::string& dir, DispatcherState* state) {
  absl::StatusOr<Recovered> recovered = Recover(dir);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_TRUE(state->Restore(*recovered).ok());
}

// A worker new to host a heartbeats first after the restore: a:1, unheard yet, was reading
// share a, so the newcomer is told to wait. It was let in, read share a from the start, and
// a:1, refused from then on, was lost with its share half read: read twice.
TEST(StaticShardingRestartTest, AnUnheardWorkerStillReadingKeepsItsEntry) {
  TempDir tmp;
  const DispatcherConfig config{.worker_addresses = {"a", "b"}};
  ASSERT_NO_FATAL_FAILURE(JournalAStaticJob(tmp.dir(), config, [](DispatcherState&) {}));
  DispatcherState state(config);
  ASSERT_NO_FATAL_FAILURE(Restore(tmp.dir(), &state));
  absl::StatusOr<proto::WorkerHeartbeatResponse> newcomer =
      state.WorkerHeartbeat(Beat("ucx://a:2", "new"));
  EXPECT_EQ(newcomer.status().code(), absl::StatusCode::kUnavailable) << newcomer.status();
  EXPECT_TRUE(state.WorkerHeartbeat(Beat("ucx://a:1", "a")).ok());
}

// b:1 read share b to its end and was lost; b:2, on b's entry, got no task. After a restart
// b:2's first heartbeat joins the jobs made while it was lost: it was given share b again.
TEST(StaticShardingRestartTest, AShareReadOnAnotherPortIsNotReadAgainAfterARestart) {
  TempDir tmp;
  const DispatcherConfig config{.worker_addresses = {"a", "b"},
                                .worker_timeout = absl::Milliseconds(50)};
  ASSERT_NO_FATAL_FAILURE(JournalAStaticJob(tmp.dir(), config, [](DispatcherState& state) {
    absl::StatusOr<proto::WorkerHeartbeatResponse> b =
        state.WorkerHeartbeat(Beat("ucx://b:1", "b"));
    ASSERT_TRUE(b.ok() && b->new_tasks_size() == 1) << b.status();
    proto::WorkerHeartbeatRequest finished = Beat("ucx://b:1", "b");
    finished.add_current_tasks(b->new_tasks(0).task_id());
    finished.add_finished_tasks(b->new_tasks(0).task_id());
    ASSERT_TRUE(state.WorkerHeartbeat(finished).ok());
    absl::SleepFor(absl::Milliseconds(100));
    const absl::Time checked = absl::Now();
    ASSERT_TRUE(state.WorkerHeartbeat(Beat("ucx://a:1", "a")).ok());
    state.CheckLiveness(checked);  // b:1 is lost
    absl::StatusOr<proto::WorkerHeartbeatResponse> b2 =
        state.WorkerHeartbeat(Beat("ucx://b:2", "b2"));
    ASSERT_TRUE(b2.ok()) << b2.status();
    ASSERT_EQ(b2->new_tasks_size(), 0);
  }));
  DispatcherState state(config);
  ASSERT_NO_FATAL_FAILURE(Restore(tmp.dir(), &state));
  absl::StatusOr<proto::WorkerHeartbeatResponse> b2 =
      state.WorkerHeartbeat(Beat("ucx://b:2", "b2"));
  ASSERT_TRUE(b2.ok()) << b2.status();
  EXPECT_EQ(b2->new_tasks_size(), 0) << "share b read a second time";
}

}  // namespace
}  // namespace sluice::control
