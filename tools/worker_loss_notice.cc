#include "tools/worker_loss_notice.h"

#include "absl/strings/str_cat.h"

namespace sluice::tools {

std::string WorkerLostNotice(proto::ProcessingMode mode, bool coordinated,
                             const std::string& worker) {
  std::string cost;
  switch (mode) {
    case proto::DYNAMIC:
      cost = "the splits it had not delivered go to another worker; nothing is lost";
      break;
    case proto::OFF:
      cost =
          "its pass over the dataset ends short (in OFF mode no other worker finishes it; it "
          "starts a new pass if it comes back before the job ends)";
      break;
    case proto::FILE:
    case proto::DATA:
    case proto::FILE_OR_DATA:
    case proto::HINT:
      cost =
          "its static shard is read by no other worker: the read waits until it is back "
          "(restart it with the same --port and --advertise-host)";
      break;
    case proto::PROCESSING_MODE_UNSPECIFIED:
    case proto::ProcessingMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::ProcessingMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      cost = "what it had not delivered is not read";
      break;
  }
  return absl::StrCat("worker ", worker, " was lost: ", cost,
                      coordinated ? "; every consumer skips its rounds from now on" : "");
}

std::string WorkerAwaitedNotice(const std::string& listed_worker) {
  return absl::StrCat(
      "waiting for worker ", listed_worker,
      ": it is in the dispatcher's --worker-addresses but has not joined, and its static "
      "shard is read by no other worker (start `sluice worker` with that --port and "
      "--advertise-host)");
}

std::optional<std::string> CutShortNotice(proto::ProcessingMode mode, int64_t tasks_lost) {
  if (mode != proto::OFF || tasks_lost <= 0) return std::nullopt;
  return absl::StrCat(tasks_lost, tasks_lost == 1 ? " pass" : " passes",
                      " ended short when a worker was lost (OFF mode: no other worker finishes "
                      "a pass; a worker that comes back starts a new one)");
}

}  // namespace sluice::tools
