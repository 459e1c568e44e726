#include "control/dispatcher.h"

#include "absl/random/random.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "control/proto_handler.h"

namespace sluice::control {

Dispatcher::Dispatcher(const DispatcherOptions& options) : state_(options.config) {
  absl::BitGen gen;
  id_ = absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Start(const DispatcherOptions& options) {
  std::unique_ptr<Dispatcher> d(new Dispatcher(options));
  transport::RpcOptions rpc_options;
  rpc_options.scheme = options.bind.scheme;
  rpc_options.transport = options.transport;
  SLUICE_ASSIGN_OR_RETURN(d->rpc_, transport::RpcEndpoint::Create(rpc_options));
  DispatcherState& state = d->state_;
  transport::RpcEndpoint& rpc = *d->rpc_;
  HandleProto<proto::GetDispatcherInfoRequest, proto::GetDispatcherInfoResponse>(
      rpc, proto::GET_DISPATCHER_INFO, [id = d->id_](const auto&) {
        proto::GetDispatcherInfoResponse response;
        response.set_dispatcher_id(id);
        response.set_version("0.1.0");
        return absl::StatusOr<proto::GetDispatcherInfoResponse>(response);
      });
  HandleProto<proto::RegisterDatasetRequest, proto::RegisterDatasetResponse>(
      rpc, proto::REGISTER_DATASET,
      [&state](const auto& request) -> absl::StatusOr<proto::RegisterDatasetResponse> {
        SLUICE_ASSIGN_OR_RETURN(std::string id, state.RegisterDataset(request.pipeline()));
        proto::RegisterDatasetResponse response;
        response.set_dataset_id(id);
        return response;
      });
  HandleProto<proto::GetOrCreateJobRequest, proto::GetOrCreateJobResponse>(
      rpc, proto::GET_OR_CREATE_JOB, [&state](const auto& r) { return state.GetOrCreateJob(r); });
  HandleProto<proto::ClientHeartbeatRequest, proto::ClientHeartbeatResponse>(
      rpc, proto::CLIENT_HEARTBEAT, [&state](const auto& r) { return state.ClientHeartbeat(r); });
  HandleProto<proto::WorkerHeartbeatRequest, proto::WorkerHeartbeatResponse>(
      rpc, proto::WORKER_HEARTBEAT,
      [&state, id = d->id_](const auto& r) -> absl::StatusOr<proto::WorkerHeartbeatResponse> {
        SLUICE_ASSIGN_OR_RETURN(proto::WorkerHeartbeatResponse response, state.WorkerHeartbeat(r));
        response.set_dispatcher_id(id);
        return response;
      });
  HandleProto<proto::GetStatusRequest, proto::GetStatusResponse>(
      rpc, proto::GET_STATUS,
      [&state, id = d->id_](const auto&) -> absl::StatusOr<proto::GetStatusResponse> {
        proto::GetStatusResponse status = state.Status();
        status.set_dispatcher_id(id);
        return status;
      });
  HandleProto<proto::GetSplitRequest, proto::GetSplitResponse>(
      rpc, proto::GET_SPLIT, [&state](const auto& r) { return state.GetSplit(r); });
  SLUICE_ASSIGN_OR_RETURN(d->address_, rpc.Listen(options.bind));
  return d;
}

}  // namespace sluice::control
