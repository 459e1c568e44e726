#include "control/local_cluster.h"

#include "common/status_macros.h"

namespace sluice::control {

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (options.num_workers < 1) {
    return absl::InvalidArgumentError("a local cluster needs at least one worker");
  }
  auto cluster = std::make_unique<LocalCluster>();
  DispatcherOptions dispatcher_options = options.dispatcher;
  dispatcher_options.bind = transport::Address{options.scheme, "127.0.0.1", 0};
  SLUICE_ASSIGN_OR_RETURN(cluster->dispatcher_, Dispatcher::Start(dispatcher_options));
  for (int i = 0; i < options.num_workers; ++i) {
    WorkerOptions worker_options = options.worker;
    worker_options.dispatcher = cluster->dispatcher_->address();
    worker_options.bind = transport::Address{options.scheme, "127.0.0.1", 0};
    worker_options.advertise_host = "127.0.0.1";
    SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, Worker::Start(worker_options));
    cluster->workers_.push_back(std::move(worker));
    if (options.on_worker_started) options.on_worker_started(i + 1);
  }
  return cluster;
}

LocalCluster::~LocalCluster() {
  workers_.clear();  // workers first: they talk to the dispatcher until they stop
  dispatcher_.reset();
}

}  // namespace sluice::control
