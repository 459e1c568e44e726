#include "transport/ucx/ucx_queue_probe.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace sluice::transport::ucx {

absl::StatusOr<std::unique_ptr<ReceiveQueueProbe>> ReceiveQueueProbe::Create(
    ucp_context_h context, const std::string& watched_address) {
  std::unique_ptr<ReceiveQueueProbe> probe(new ReceiveQueueProbe());
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  if (ucs_status_t s = ucp_worker_create(context, &worker_params, &worker); s != UCS_OK) {
    return UcsError(s, "ucp_worker_create (receive queue probe)");
  }
  probe->worker_.reset(worker);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  params.address = reinterpret_cast<const ucp_address_t*>(watched_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_NONE;  // shared memory has no other
  if (ucs_status_t s = ucp_ep_create(worker, &params, &probe->ep_); s != UCS_OK) {
    return UcsError(s, "ucp_ep_create (receive queue probe)");
  }
  return probe;
}

ReceiveQueueProbe::~ReceiveQueueProbe() {
  if (ep_ != nullptr) {
    // Forced: a probe stuck behind a dead sender's element would never be flushed. It
    // cancels the queued send, whose callback then runs.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &param);
    if (UCS_PTR_IS_PTR(request)) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (ucp_request_check_status(request) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline) {
        ucp_worker_progress(worker_.get());
      }
      ucp_request_free(request);
    }
  }
  // worker_ is destroyed last (declared first).
}

absl::Status ReceiveQueueProbe::Send(uint64_t number) {
  if (sends_in_flight_ > 0) {
    return absl::FailedPreconditionError("the previous probe has not left yet");
  }
  number_ = number;
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.flags = UCP_AM_SEND_FLAG_EAGER;
  param.user_data = this;
  param.cb.send = [](void* request, ucs_status_t, void* user_data) {
    --static_cast<ReceiveQueueProbe*>(user_data)->sends_in_flight_;
    ucp_request_free(request);
  };
  ucs_status_ptr_t request =
      ucp_am_send_nbx(ep_, kActiveMessageId, nullptr, 0, &number_, sizeof(number_), &param);
  if (UCS_PTR_IS_PTR(request)) {
    ++sends_in_flight_;
    return absl::OkStatus();
  }
  if (UCS_PTR_STATUS(request) != UCS_OK) {
    return UcsError(UCS_PTR_STATUS(request), "receive queue probe send");
  }
  return absl::OkStatus();
}

void ReceiveQueueProbe::Progress() {
  while (ucp_worker_progress(worker_.get()) != 0) {
  }
}

}  // namespace sluice::transport::ucx
