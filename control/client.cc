#include "control/client.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "control/service.pb.h"

namespace sluice::control {

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  std::unique_ptr<Client> client(new Client(options));
  transport::RpcOptions rpc_options;
  rpc_options.scheme = options.dispatcher.scheme;
  rpc_options.transport = options.transport;
  rpc_options.transport.connect_timeout = options.timeout;
  SLUICE_ASSIGN_OR_RETURN(client->rpc_, transport::RpcEndpoint::Create(rpc_options));
  proto::GetDispatcherInfoResponse info;
  absl::Status status =
      client->rpc_->CallProto(options.dispatcher, proto::GET_DISPATCHER_INFO,
                              proto::GetDispatcherInfoRequest(), &info, options.timeout);
  if (absl::IsUnimplemented(status)) {
    // A Sluice peer that is not a dispatcher ("unknown method 7" said nothing).
    return absl::FailedPreconditionError(absl::StrCat(
        options.dispatcher.ToString(),
        " is not a dispatcher (it does not answer GetDispatcherInfo: a worker's address?)"));
  }
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("cannot reach the dispatcher at ",
                                     options.dispatcher.ToString(), ": ", status.message()));
  }
  client->dispatcher_id_ = info.dispatcher_id();
  return client;
}

absl::StatusOr<std::string> Client::RegisterDataset(const proto::PipelineDef& pipeline,
                                                    const std::string& dataset_id) {
  proto::RegisterDatasetRequest request;
  *request.mutable_pipeline() = pipeline;
  request.set_dataset_id(dataset_id);
  proto::RegisterDatasetResponse response;
  SLUICE_RETURN_IF_ERROR(rpc_->CallProto(options_.dispatcher, proto::REGISTER_DATASET, request,
                                         &response, options_.timeout));
  return response.dataset_id();
}

absl::StatusOr<std::unique_ptr<BatchReader>> Client::Read(const std::string& dataset_id,
                                                          const ReadOptions& options) {
  return BatchReader::Start(rpc_.get(), options_.dispatcher, dataset_id, options);
}

}  // namespace sluice::control

namespace sluice::control {

absl::StatusOr<proto::GetStatusResponse> Client::GetStatus() {
  proto::GetStatusResponse response;
  SLUICE_RETURN_IF_ERROR(rpc_->CallProto(options_.dispatcher, proto::GET_STATUS,
                                         proto::GetStatusRequest(), &response, options_.timeout));
  return response;
}

}  // namespace sluice::control
