#include "engine/pipeline_stats.h"

#include <iostream>

namespace sluice::engine {

void PipelineStats::RecordBadRecord(const absl::Status& error) {
  bad_records_.fetch_add(1, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  if (messages_.size() < kMaxMessages) messages_.emplace_back(error.message());
}

std::vector<std::string> PipelineStats::bad_record_messages() const {
  absl::MutexLock lock(&mu_);
  return messages_;
}

void ReportBadRecord(PipelineStats* stats, const absl::Status& error) {
  if (stats != nullptr) {
    stats->RecordBadRecord(error);
    return;
  }
  std::cerr << "sluice: skipped a bad record: " << error.message() << "\n";
}

}  // namespace sluice::engine
