// Binds a typed protobuf handler to an RPC method.
//
// The request is parsed and validated before the handler sees it: a malformed message gets
// InvalidArgument and changes no state.
//
//   HandleProto<proto::GetSplitRequest, proto::GetSplitResponse>(
//       rpc, proto::GET_SPLIT, [&](const auto& request) { return state.GetSplit(request); });
#ifndef SLUICE_CONTROL_PROTO_HANDLER_H_
#define SLUICE_CONTROL_PROTO_HANDLER_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "transport/rpc.h"

namespace sluice::control {

template <typename Request, typename Response>
void HandleProto(transport::RpcEndpoint& rpc, uint32_t method,
                 std::function<absl::StatusOr<Response>(const Request&)> handler) {
  rpc.Handle(method, [handler = std::move(handler)](std::shared_ptr<transport::ServerCall> call) {
    Request request;
    if (!request.ParseFromArray(call->request().data(), static_cast<int>(call->request().size()))) {
      call->Reply(absl::InvalidArgumentError(
          absl::StrCat("malformed ", Request::descriptor()->name(), " message")));
      return;
    }
    absl::StatusOr<Response> response = handler(request);
    if (!response.ok()) {
      call->Reply(response.status());
      return;
    }
    call->Reply(*response);
  });
}

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_PROTO_HANDLER_H_
