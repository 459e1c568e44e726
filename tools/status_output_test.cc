#include "tools/status_output.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::tools {
namespace {

using ::testing::ElementsAre;

proto::GetStatusResponse StatusWithDatasetsAndJobs() {
  proto::GetStatusResponse status;
  for (const char* id : {"ds13", "ds-12", "ds02", "ds-2", "ds2", "train"}) {
    proto::DatasetStatus* d = status.add_datasets();
    d->set_dataset_id(id);
    d->set_pipeline("range(3)");
  }
  proto::JobStatus* first = status.add_jobs();
  first->set_job_id(2);
  first->set_job_name("a");
  first->set_dataset_id("ds2");
  first->set_mode(proto::OFF);
  first->set_num_clients(10);
  first->set_clients_joined(12);
  proto::JobStatus* second = status.add_jobs();
  second->set_job_id(11);
  second->set_dataset_id("train");
  second->set_mode(proto::DYNAMIC);
  return status;
}

std::vector<std::string> Lines(const proto::GetStatusResponse& status) {
  std::ostringstream out;
  PrintStatus(status, /*json=*/false, out);
  return absl::StrSplit(out.str(), '\n', absl::SkipEmpty());
}

// Datasets came in the dispatcher's hash-table order; numbers in their ids sort as numbers.
TEST(StatusOutputTest, DatasetsAreSortedNaturally) {
  const proto::GetStatusResponse status = StatusWithDatasetsAndJobs();
  std::vector<std::string> ids;
  const nlohmann::json json = StatusToJson(status);
  for (const nlohmann::json& d : json["datasets"]) ids.push_back(d["dataset_id"]);
  EXPECT_THAT(ids, ElementsAre("ds-2", "ds-12", "ds02", "ds2", "ds13", "train"));
  std::vector<std::string> listed;
  for (const std::string& line : Lines(status)) {
    if (line.find(": range(3)") != std::string::npos) listed.push_back(line);
  }
  EXPECT_THAT(listed, ElementsAre("  ds-2: range(3)", "  ds-12: range(3)", "  ds02: range(3)",
                                  "  ds2: range(3)", "  ds13: range(3)", "  train: range(3)"));
}

// "job 2 a" and "job 11 (anonymous)" put their datasets, modes and clients at different
// columns, and "10 client(s) (12 joined)" and "0 client(s)" what followed.
TEST(StatusOutputTest, JobColumnsLineUp) {
  std::vector<std::string> jobs;
  for (const std::string& line : Lines(StatusWithDatasetsAndJobs())) {
    if (line.rfind("  job ", 0) == 0) jobs.push_back(line);
  }
  ASSERT_EQ(jobs.size(), 2u);
  for (const char* column : {"dataset ", "mode ", "tasks "}) {
    EXPECT_EQ(jobs[0].find(column), jobs[1].find(column)) << column << "\n"
                                                          << jobs[0] << "\n"
                                                          << jobs[1];
  }
}

}  // namespace
}  // namespace sluice::tools
