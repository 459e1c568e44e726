#include "tools/status_output.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "control/processing_mode.h"

namespace sluice::tools {
namespace {

double SecondsSince(int64_t unix_ms) {
  return static_cast<double>(absl::ToUnixMillis(absl::Now()) - unix_ms) / 1000.0;
}

// Runs of digits compare as numbers: ds2 before ds12, as people number things.
bool NaturallyBefore(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (absl::ascii_isdigit(a[i]) && absl::ascii_isdigit(b[j])) {
      const size_t a_start = i, b_start = j;
      while (i < a.size() && absl::ascii_isdigit(a[i])) ++i;
      while (j < b.size() && absl::ascii_isdigit(b[j])) ++j;
      std::string_view x = a.substr(a_start, i - a_start), y = b.substr(b_start, j - b_start);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

// The dispatcher lists datasets as its table holds them (no order).
std::vector<const proto::DatasetStatus*> SortedDatasets(const proto::GetStatusResponse& status) {
  std::vector<const proto::DatasetStatus*> sorted;
  for (const proto::DatasetStatus& d : status.datasets()) sorted.push_back(&d);
  std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) {
    // ds02 and ds2 are naturally equal: bytewise, so that the order is always the same.
    if (NaturallyBefore(a->dataset_id(), b->dataset_id())) return true;
    if (NaturallyBefore(b->dataset_id(), a->dataset_id())) return false;
    return a->dataset_id() < b->dataset_id();
  });
  return sorted;
}

std::string PadRight(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

nlohmann::json StatusToJson(const proto::GetStatusResponse& status) {
  nlohmann::json workers = nlohmann::json::array();
  for (const proto::WorkerStatus& w : status.workers()) {
    workers.push_back(
        {{"address", w.address()},
         {"seconds_since_heartbeat", SecondsSince(w.last_heartbeat_unix_ms())},
         {"tasks", std::vector<int64_t>(w.task_ids().begin(), w.task_ids().end())},
         {"batches_served", w.stats().batches_served()},
         {"bytes_served", w.stats().bytes_served()},
         {"bytes_assembled", w.stats().bytes_assembled()},
         {"bytes_assembled_unserved", w.stats().bytes_assembled_unserved()},
         {"bytes_reused", w.stats().bytes_reused()},
         {"buffer_full_waits", w.stats().buffer_full_waits()},
         {"bad_records_skipped", w.stats().bad_records_skipped()},
         {"batches_redelivered", w.stats().batches_redelivered()},
         {"kept_batches_released", w.stats().kept_batches_released()},
         {"batches_with_provenance_in_payload", w.stats().batches_with_provenance_in_payload()},
         {"clients_forgotten", w.stats().clients_forgotten()},
         {"parked_requests_evicted", w.stats().parked_requests_evicted()},
         {"requests_held_too_long", w.stats().requests_held_too_long()},
         {"batches_handed_on", w.stats().batches_handed_on()},
         {"lost_batches_dropped", w.stats().lost_batches_dropped()},
         {"acknowledgements_received", w.stats().acknowledgements_received()},
         {"breaks_reported", w.stats().breaks_reported()},
         {"slab_waits", w.stats().slab_waits()},
         {"batches_spilled", w.stats().batches_spilled()},
         {"bytes_spilled", w.stats().bytes_spilled()},
         {"spilled_bytes_held", w.stats().spilled_bytes_held()},
         {"unacked_batches_forgotten", w.stats().unacked_batches_forgotten()},
         {"lost", w.lost()}});
  }
  nlohmann::json datasets = nlohmann::json::array();
  for (const proto::DatasetStatus* d : SortedDatasets(status)) {
    datasets.push_back({{"dataset_id", d->dataset_id()}, {"pipeline", d->pipeline()}});
  }
  nlohmann::json jobs = nlohmann::json::array();
  for (const proto::JobStatus& j : status.jobs()) {
    jobs.push_back({{"job_id", j.job_id()},
                    {"job_name", j.job_name()},
                    {"dataset_id", j.dataset_id()},
                    {"mode", control::ProcessingModeName(j.mode())},
                    {"clients", j.num_clients()},
                    {"clients_joined", j.clients_joined()},
                    {"tasks", j.num_tasks()},
                    {"finished_tasks", j.finished_tasks()},
                    {"finished", j.finished()},
                    {"released", j.released()},
                    {"lost_tasks", j.lost_tasks()},
                    {"reissued_splits", j.reissued_splits()},
                    {"reissued_splits_partly_read", j.reissued_splits_partly_read()},
                    {"delivery_log_entries", j.delivery_log_entries()},
                    {"workers_awaited", std::vector<std::string>(j.workers_awaited().begin(),
                                                                 j.workers_awaited().end())}});
  }
  return {{"dispatcher_id", status.dispatcher_id()},
          {"workers", workers},
          {"datasets", datasets},
          {"jobs", jobs}};
}

void PrintStatus(const proto::GetStatusResponse& status, bool json, std::ostream& out) {
  if (json) {
    out << StatusToJson(status).dump() << std::endl;
    return;
  }
  out << "dispatcher " << status.dispatcher_id() << "\n";
  int lost = 0;
  for (const proto::WorkerStatus& w : status.workers()) lost += w.lost() ? 1 : 0;
  out << absl::StrFormat("%d worker(s)%s\n", status.workers_size() - lost,
                         lost > 0 ? absl::StrFormat(", %d lost", lost) : "");
  for (const proto::WorkerStatus& w : status.workers()) {
    out << absl::StrFormat(
        "  %-28s heartbeat %5.1fs ago  %d task(s)  %d batches  %.1f MB%s%s%s%s%s%s\n", w.address(),
        SecondsSince(w.last_heartbeat_unix_ms()), w.task_ids_size(), w.stats().batches_served(),
        w.stats().bytes_served() / 1e6, w.lost() ? "  LOST" : "",
        w.stats().bad_records_skipped() > 0
            ? absl::StrFormat("  %d bad records skipped", w.stats().bad_records_skipped())
            : "",
        w.stats().batches_redelivered() > 0
            ? absl::StrFormat("  %d batches served again", w.stats().batches_redelivered())
            : "",
        // Delivery may lose a batch once a connection breaks: the pool is too small.
        w.stats().kept_batches_released() > 0
            ? absl::StrFormat("  %d unacknowledged batches let go (raise --slabs)",
                              w.stats().kept_batches_released())
            : "",
        // Tasks waited for slabs held by other tasks' buffered and kept batches.
        w.stats().slab_waits() > 0
            ? absl::StrFormat("  %d waits for a free slab (raise --slabs)", w.stats().slab_waits())
            : "",
        // Stopped readers' buffers, moved out of the pool for them.
        w.stats().batches_spilled() > 0
            ? absl::StrFormat(
                  "  %d buffered batches of stopped readers moved to the heap (%.1f MB held)",
                  w.stats().batches_spilled(), w.stats().spilled_bytes_held() / 1e6)
            : "");
  }
  out << absl::StrFormat("%d dataset(s)\n", status.datasets_size());
  for (const proto::DatasetStatus* d : SortedDatasets(status)) {
    out << "  " << d->dataset_id() << ": " << d->pipeline() << "\n";
  }
  out << absl::StrFormat("%d job(s)\n", status.jobs_size());
  // Columns as wide as their widest entry, so that job 2 and job 11 line up.
  size_t job_width = 0, name_width = 0, dataset_width = 0, mode_width = 0, clients_width = 0;
  auto name_of = [](const proto::JobStatus& j) {
    return j.job_name().empty() ? std::string("(anonymous)") : j.job_name();
  };
  // Clients that left are not counted, but said while the job has seen more.
  auto clients_of = [](const proto::JobStatus& j) {
    return absl::StrCat(j.num_clients(), " client(s)",
                        j.clients_joined() > j.num_clients()
                            ? absl::StrFormat(" (%d joined)", j.clients_joined())
                            : std::string());
  };
  for (const proto::JobStatus& j : status.jobs()) {
    job_width = std::max(job_width, absl::StrCat("job ", j.job_id()).size());
    name_width = std::max(name_width, name_of(j).size());
    dataset_width = std::max(dataset_width, j.dataset_id().size());
    mode_width =
        std::max(mode_width, std::string_view(control::ProcessingModeName(j.mode())).size());
    clients_width = std::max(clients_width, clients_of(j).size());
  }
  for (const proto::JobStatus& j : status.jobs()) {
    // A lost task is neither done nor running: said apart, with what was handed out again
    // and how much of that had been read (those elements are skipped, not read twice).
    std::string lost;
    if (j.lost_tasks() > 0 || j.reissued_splits() > 0) {
      lost = absl::StrFormat(", %d lost (%d splits re-issued", j.lost_tasks(), j.reissued_splits());
      if (j.reissued_splits_partly_read() > 0) {
        absl::StrAppendFormat(&lost,
                              ", %d of them read in part or whole before: the elements read "
                              "are skipped",
                              j.reissued_splits_partly_read());
      }
      lost += ")";
    }
    out << absl::StrFormat(
        "  %s %s  dataset %s  mode %s  %s  tasks %d/%d done%s%s\n",
        PadRight(absl::StrCat("job ", j.job_id()), job_width), PadRight(name_of(j), name_width),
        PadRight(j.dataset_id(), dataset_width),
        PadRight(control::ProcessingModeName(j.mode()), mode_width),
        PadRight(clients_of(j), clients_width), j.finished_tasks(), j.num_tasks(), lost,
        j.released() ? "  released" : (j.finished() ? "  finished" : ""));
    if (!j.workers_awaited().empty()) {
      out << "    waiting for listed worker(s) that have not joined: "
          << absl::StrJoin(j.workers_awaited(), ", ") << "\n";
    }
  }
}

}  // namespace sluice::tools
