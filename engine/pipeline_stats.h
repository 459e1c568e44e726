// Counters a running pipeline reports to its owner (e.g. a worker's task), shared
// by all of the pipeline's iterators and threads.
//
//   PipelineStats stats;
//   PipelineContext context;
//   context.stats = &stats;
//   ... run the pipeline ...
//   int64_t skipped = stats.bad_records_skipped();
//   for (const std::string& why : stats.bad_record_messages()) LOG << why;
//
// Thread-safe.
#ifndef SLUICE_ENGINE_PIPELINE_STATS_H_
#define SLUICE_ENGINE_PIPELINE_STATS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace sluice::engine {

// How many of a task's bad-record messages travel to its readers (GetElementResponse).
inline constexpr size_t kBadRecordExamples = 3;

class PipelineStats {
 public:
  // Messages kept by RecordBadRecord; later ones are only counted.
  static constexpr size_t kMaxMessages = 16;

  // Counts a record a reader skipped (skip_bad_records) and keeps its error message.
  void RecordBadRecord(const absl::Status& error);

  int64_t bad_records_skipped() const { return bad_records_.load(std::memory_order_relaxed); }
  // The first kMaxMessages messages, in the order they were recorded.
  std::vector<std::string> bad_record_messages() const;

 private:
  std::atomic<int64_t> bad_records_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> messages_ ABSL_GUARDED_BY(mu_);
};

// Reports a skipped bad record to `stats`, or to stderr when it is null, so skipping is
// never silent.
void ReportBadRecord(PipelineStats* stats, const absl::Status& error);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PIPELINE_STATS_H_
