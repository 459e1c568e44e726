#include "transport/ucx/ucx_handles.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::transport::ucx {

absl::Status UcsError(ucs_status_t status, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_REJECTED:
    case UCS_ERR_CANCELED:
      return absl::UnavailableError(message);
    case UCS_ERR_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_NO_DEVICE:
    case UCS_ERR_UNSUPPORTED:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::StatusOr<std::shared_ptr<UcxContext>> UcxContext::Create(const std::string& tls) {
  ucp_config_t* raw_config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &raw_config); s != UCS_OK) {
    return UcsError(s, "ucp_config_read");
  }
  UcxConfigPtr config(raw_config);
  std::string effective_tls = tls;
  if (!tls.empty()) {
    if (ucs_status_t s = ucp_config_modify(config.get(), "TLS", tls.c_str()); s != UCS_OK) {
      return UcsError(s, absl::StrCat("UCX_TLS=", tls));
    }
  } else if (const char* env = std::getenv("UCX_TLS"); env != nullptr) {
    effective_tls = env;
  } else {
    effective_tls = "all";
  }
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  // Memory is registered and deregistered from application threads while the progress
  // thread runs; a shared context makes those calls safe.
  params.mt_workers_shared = 1;
  // AM carries messages, RMA is asked for so memory registration packs keys the
  // rendezvous protocol can use, WAKEUP lets the progress thread sleep on an fd.
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.name = "sluice";
  ucp_context_h context = nullptr;
  if (ucs_status_t s = ucp_init(&params, config.get(), &context); s != UCS_OK) {
    return UcsError(s, absl::StrCat("ucp_init (UCX_TLS=", effective_tls,
                                    "); check `ucx_info -d` for the transports available"));
  }
  return std::shared_ptr<UcxContext>(new UcxContext(context, effective_tls));
}

bool UcxContext::peer_failure_handling() const {
  if (tls_.empty() || tls_ == "all" || tls_[0] == '^') return true;
  for (absl::string_view tl : absl::StrSplit(tls_, ',')) {
    if (tl != "self" && tl != "posix" && tl != "sysv" && tl != "cma" && tl != "sm" && tl != "shm" &&
        tl != "mm" && tl != "knem" && tl != "xpmem") {
      return true;
    }
  }
  return false;
}

UcxContext::~UcxContext() { ucp_cleanup(context_); }

}  // namespace sluice::transport::ucx
