// What a reader tells its user when a worker of its job is lost, by processing mode: the
// same event re-reads nothing (DYNAMIC), ends one worker's pass short (OFF), or stops the
// read until the worker is back (static sharding), and `sluice read` used to say none of it.
//
//   options.on_worker_lost = [&](const std::string& worker) {
//     std::cerr << "sluice read: " << WorkerLostNotice(mode, coordinated, worker) << "\n";
//   };
//   ...
//   if (auto end = CutShortNotice(mode, reader->tasks_lost())) std::cerr << *end << "\n";
#ifndef SLUICE_TOOLS_WORKER_LOSS_NOTICE_H_
#define SLUICE_TOOLS_WORKER_LOSS_NOTICE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "control/service.pb.h"

namespace sluice::tools {

// One line, without a trailing newline, naming `worker` and what its loss costs this read.
[[nodiscard]] std::string WorkerLostNotice(proto::ProcessingMode mode, bool coordinated,
                                           const std::string& worker);

// One line naming a --worker-addresses entry of the dispatcher that no worker has joined,
// whose static shard the read waits for.
[[nodiscard]] std::string WorkerAwaitedNotice(const std::string& listed_worker);

// Said once a read ended after `tasks_lost` of its tasks were lost, where that means a
// pass it holds is partial (OFF mode); nullopt otherwise.
[[nodiscard]] std::optional<std::string> CutShortNotice(proto::ProcessingMode mode,
                                                        int64_t tasks_lost);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_WORKER_LOSS_NOTICE_H_
