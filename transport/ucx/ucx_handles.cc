#include "transport/ucx/ucx_handles.h"

#include <ucs/config/global_opts.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

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

namespace {

absl::StatusOr<UcxPeerFailure> ResolveFromEnvironment(UcxPeerFailure requested) {
  if (requested != UcxPeerFailure::kAuto) return requested;
  const char* env = std::getenv("SLUICE_UCX_PEER_FAILURE");
  absl::string_view value = env != nullptr ? env : "";
  if (value.empty() || value == "auto") return UcxPeerFailure::kAuto;
  if (value == "ucx") return UcxPeerFailure::kUcx;
  if (value == "socket") return UcxPeerFailure::kSocketOnly;
  return absl::InvalidArgumentError(
      absl::StrCat("SLUICE_UCX_PEER_FAILURE=", value, ": expected auto, ucx or socket"));
}

std::vector<std::string> ContextTransports(ucp_context_h context) {
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return {};
  ucp_context_print_info(context, stream);
  std::fclose(stream);
  std::vector<std::string> transports = ParseContextTransports(absl::string_view(text, length));
  std::free(text);
  return transports;
}

}  // namespace

ScopedUcxLogLevel::ScopedUcxLogLevel(ucs_log_level_t level)
    : saved_(ucs_global_opts.log_component.log_level) {
  ucs_global_opts.log_component.log_level = std::min(saved_, level);
}

ScopedUcxLogLevel::~ScopedUcxLogLevel() { ucs_global_opts.log_component.log_level = saved_; }

std::vector<std::string> ParseContextTransports(absl::string_view info) {
  std::vector<std::string> transports;
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    if (!absl::StrContains(line, "resource")) continue;
    size_t flags_end = line.find(" -- ");
    if (flags_end == absl::string_view::npos) continue;
    absl::string_view resource = absl::StripAsciiWhitespace(line.substr(flags_end + 4));
    absl::string_view name = resource.substr(0, resource.find('/'));
    if (name.empty()) continue;
    if (std::find(transports.begin(), transports.end(), name) == transports.end()) {
      transports.emplace_back(name);
    }
  }
  return transports;
}

bool UcxContext::NeedsUcxPeerFailure(const std::vector<std::string>& transports) {
  // Not tcp: a dead tcp peer surfaces inside UCT as a connection error, and without PEER
  // mode nothing purges the failed endpoint. A fault test then aborted in UCT
  // (`tcp_iface.c:307 Assertion ep->conn_state != UCT_TCP_EP_CONN_STATE_CLOSED`), and UCX
  // documents force-closing an endpoint (what Sluice does to a dead peer's) as requiring
  // PEER mode on both sides. Shared memory has no connection to fail.
  static const auto* kCoveredBySocket =
      new absl::flat_hash_set<std::string>{"self", "posix", "sysv", "cma", "knem", "xpmem"};
  for (const std::string& t : transports) {
    if (!kCoveredBySocket->contains(t)) return true;
  }
  return false;
}

absl::StatusOr<std::shared_ptr<UcxContext>> UcxContext::Create(const std::string& tls,
                                                               UcxPeerFailure peer_failure) {
  SLUICE_ASSIGN_OR_RETURN(UcxPeerFailure resolved, ResolveFromEnvironment(peer_failure));
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
  std::shared_ptr<UcxContext> created(new UcxContext(context, effective_tls));
  created->transports_ = ContextTransports(context);
  switch (resolved) {
    case UcxPeerFailure::kAuto:
      // An empty list means the text format changed: keep UCX's watch, the safe choice.
      created->ucx_peer_failure_ =
          created->transports_.empty() || NeedsUcxPeerFailure(created->transports_);
      break;
    case UcxPeerFailure::kUcx:
      created->ucx_peer_failure_ = true;
      break;
    case UcxPeerFailure::kSocketOnly:
      created->ucx_peer_failure_ = false;
      break;
  }
  return created;
}

UcxContext::~UcxContext() { ucp_cleanup(context_); }

}  // namespace sluice::transport::ucx
