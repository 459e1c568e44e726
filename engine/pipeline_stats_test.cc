#include "engine/pipeline_stats.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

TEST(PipelineStatsTest, CountsEveryBadRecordAndKeepsTheFirstMessages) {
  PipelineStats stats;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&stats, t] {
      for (int i = 0; i < 10; ++i) {
        ReportBadRecord(&stats, absl::DataLossError(absl::StrCat("thread ", t, " record ", i)));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(stats.bad_records_skipped(), 40);
  std::vector<std::string> messages = stats.bad_record_messages();
  EXPECT_EQ(messages.size(), PipelineStats::kMaxMessages);
  EXPECT_THAT(messages[0], ::testing::StartsWith("thread "));
}

}  // namespace
}  // namespace sluice::engine
