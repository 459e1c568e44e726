// Helpers shared by the journal tests (journal_test.cc, journal_crash_test.cc, the dispatcher
// recovery and compaction tests): a temporary directory, leases, sample updates,
// whole-session writes, byte-level file access, and a restart that loses a worker.
//
//   TempDir tmp;
//   std::string file = WriteSession(tmp.dir(), SomeUpdates(1, 10));
//   ExpectUpdates(Recover(tmp.dir())->updates, SomeUpdates(1, 10));
#ifndef SLUICE_CONTROL_JOURNAL_TEST_UTIL_H_
#define SLUICE_CONTROL_JOURNAL_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "control/dispatcher_state.h"
#include "control/journal.h"
#include "engine/pipeline_text.h"

namespace sluice::control::journal_test {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string pattern = absl::StrCat(base != nullptr && *base ? base : "/tmp", "/journal_XXXXXX");
    path_ = mkdtemp(pattern.data()) ? pattern : "";
    EXPECT_FALSE(path_.empty());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string dir() const { return path_ + "/journal"; }

 private:
  std::string path_;
};

// A GetSplit of three splits of pass 0 by `task`, its `seq`th lease.
inline proto::GetSplitRequest Lease(int64_t job, int64_t task, int64_t seq) {
  proto::GetSplitRequest request;
  request.set_job_id(job);
  request.set_task_id(task);
  request.set_repetition(0);
  request.set_max_splits(3);
  request.set_lease_seq(seq);
  return request;
}

// The first element of each split of a lease.
inline std::vector<int64_t> Begins(const proto::GetSplitResponse& response) {
  std::vector<int64_t> begins;
  for (const proto::Split& s : response.splits()) begins.push_back(s.begin());
  return begins;
}

inline proto::Update Cursor(int64_t job, int64_t next) {
  proto::Update update;
  proto::Update::SplitCursor* cursor = update.mutable_split_cursor();
  cursor->set_job_id(job);
  cursor->set_repetition(job % 3);
  cursor->set_next_split_index(next);
  cursor->set_first_split_index(next - 1);
  cursor->set_leased_by_task(job + 1000);
  return update;
}

inline proto::Update Dataset(const std::string& id) {
  proto::Update update;
  update.mutable_register_dataset()->set_dataset_id(id);
  auto pipeline = engine::ParsePipeline("range(1000) | map(square) | batch(8)");
  EXPECT_TRUE(pipeline.ok()) << pipeline.status();
  *update.mutable_register_dataset()->mutable_pipeline() = *pipeline;
  return update;
}

// One of each kind, then cursors.
inline std::vector<proto::Update> SomeUpdates(int64_t first_cursor, int cursors) {
  std::vector<proto::Update> updates = {Dataset("ds1")};
  proto::Update job;
  job.mutable_create_job()->set_job_id(2);
  job.mutable_create_job()->set_job_name("train");
  job.mutable_create_job()->set_dataset_id("ds1");
  job.mutable_create_job()->set_mode(proto::DYNAMIC);
  job.mutable_create_job()->set_elements_per_split(256);
  updates.push_back(job);
  proto::Update worker;
  worker.mutable_register_worker()->set_address("ucx://10.0.0.1:7000");
  updates.push_back(worker);
  proto::Update task;
  task.mutable_create_task()->set_task_id(3);
  task.mutable_create_task()->set_job_id(2);
  task.mutable_create_task()->set_worker_address("ucx://10.0.0.1:7000");
  updates.push_back(task);
  proto::Update client;
  client.mutable_add_client()->set_job_id(2);
  client.mutable_add_client()->set_client_id(4);
  updates.push_back(client);
  for (int i = 0; i < cursors; ++i) updates.push_back(Cursor(2, first_cursor + i));
  proto::Update finish;
  finish.mutable_finish_task()->set_task_id(3);
  updates.push_back(finish);
  return updates;
}

// Writes `updates` in one writer session (one journal file); returns that file.
inline std::string WriteSession(const std::string& dir, const std::vector<proto::Update>& updates) {
  auto writer = JournalWriter::Open(dir, {});
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (const proto::Update& update : updates) EXPECT_TRUE((*writer)->Write(update).ok());
  return (*writer)->current_path();
}

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline uint64_t FramedSize(const proto::Update& update) {
  return journal_internal::kRecordHeaderBytes + update.ByteSizeLong();
}

inline void ExpectUpdates(const std::vector<proto::Update>& got,
                          const std::vector<proto::Update>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].SerializeAsString(), want[i].SerializeAsString()) << "update " << i;
  }
}

inline std::vector<proto::Update> Concat(std::vector<proto::Update> a,
                                         const std::vector<proto::Update>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Worker "ucx://a:1" stays silent past `state`'s worker timeout (which must be under
// 100 ms) while "ucx://b:1" heartbeats. The liveness check runs as of just before b's
// heartbeat, so b stays live however late it runs: a is lost, b is not.
inline void LoseWorkerA(DispatcherState& state) {
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time checked = absl::Now();
  proto::WorkerHeartbeatRequest b;
  b.set_worker_address("ucx://b:1");
  ASSERT_TRUE(state.WorkerHeartbeat(b).ok());
  state.CheckLiveness(checked);
}

// A dispatcher restarted with `config` from the journal in `dir`, into *state; then worker
// a is lost in it (LoseWorkerA).
inline void RestartAndLoseWorkerA(const std::string& dir, const DispatcherConfig& config,
                                  std::unique_ptr<DispatcherState>* state) {
  absl::StatusOr<Recovered> recovered = Recover(dir);
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  *state = std::make_unique<DispatcherState>(config);
  ASSERT_TRUE((*state)->Restore(*recovered).ok());
  LoseWorkerA(**state);
}

}  // namespace sluice::control::journal_test

#endif  // SLUICE_CONTROL_JOURNAL_TEST_UTIL_H_
