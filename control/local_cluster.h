// A dispatcher and N workers in one process: the embedded default for single-node use,
// demos and tests. Each keeps its own transport instance, so traffic between them takes
// the same UCX path as between processes (shared memory on one host).
//
//   LocalClusterOptions options;
//   options.num_workers = 2;
//   absl::StatusOr<std::unique_ptr<LocalCluster>> cluster = LocalCluster::Start(options);
//   (*cluster)->dispatcher_address();  // give this to a Client
#ifndef SLUICE_CONTROL_LOCAL_CLUSTER_H_
#define SLUICE_CONTROL_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <vector>

#include "control/dispatcher.h"
#include "control/worker.h"

namespace sluice::control {

struct LocalClusterOptions {
  int num_workers = 2;
  std::string scheme = "ucx";  // or "ofi"
  DispatcherOptions dispatcher;
  WorkerOptions worker;  // `dispatcher` and `bind` are filled in
  // Called after each worker started, with how many have: many take a while to start.
  std::function<void(int started)> on_worker_started;
};

class LocalCluster {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      const LocalClusterOptions& options);
  ~LocalCluster();

  [[nodiscard]] const transport::Address& dispatcher_address() const {
    return dispatcher_->address();
  }
  [[nodiscard]] const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }

 private:
  std::unique_ptr<Dispatcher> dispatcher_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_LOCAL_CLUSTER_H_
