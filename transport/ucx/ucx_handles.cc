#include "transport/ucx/ucx_handles.h"

#include <ucs/config/global_opts.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

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

bool LoadedUcxAtLeast(unsigned major, unsigned minor) {
  unsigned loaded_major = 0, loaded_minor = 0, loaded_release = 0;
  ucp_get_version(&loaded_major, &loaded_minor, &loaded_release);
  return loaded_major > major || (loaded_major == major && loaded_minor >= minor);
}

namespace {

absl::StatusOr<UcxPeerFailure> ResolveFromEnvironment(UcxPeerFailure requested) {
  if (requested != UcxPeerFailure::kAuto) return requested;
  const char* env = std::getenv("SLUICE_UCX_PEER_FAILURE");
  absl::string_view value = env != nullptr ? env : "";
  if (value.empty() || value == "auto") return UcxPeerFailure::kAuto;
  if (value == "ucx") return UcxPeerFailure::kUcx;
  if (value == "socket") return UcxPeerFailure::kSocketOnly;
  if (value == "local") return UcxPeerFailure::kSocketForLocalPeers;
  return absl::InvalidArgumentError(
      absl::StrCat("SLUICE_UCX_PEER_FAILURE=", value, ": expected auto, ucx, socket or local"));
}

// What a UCX print function writes to a stream, as a string.
template <typename Print>
std::string PrintedBy(Print print) {
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return "";
  print(stream);
  std::fclose(stream);
  std::string printed(text, length);
  std::free(text);
  return printed;
}

void AddOnce(absl::string_view name, std::vector<std::string>* names) {
  if (name.empty()) return;
  if (std::find(names->begin(), names->end(), name) == names->end()) names->emplace_back(name);
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
    AddOnce(resource.substr(0, resource.find('/')), &transports);
  }
  return transports;
}

EndpointInfo ParseEndpointInfo(absl::string_view info) {
  EndpointInfo parsed;
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    if (size_t am_send = line.find("am_send:"); am_send != absl::string_view::npos) {
      parsed.am_send = std::string(absl::StripAsciiWhitespace(line.substr(am_send + 8)));
      continue;
    }
    size_t lane = line.find("lane[");
    if (lane == absl::string_view::npos) continue;
    size_t colon = line.find("]:", lane);
    if (colon == absl::string_view::npos) continue;
    // "3:sysv/memory.0 md[2] ...": resource index, transport, device.
    absl::string_view resource = absl::StripLeadingAsciiWhitespace(line.substr(colon + 2));
    resource = resource.substr(0, resource.find(' '));
    resource = resource.substr(resource.find(':') + 1);  // npos + 1 == 0: no index
    AddOnce(resource.substr(0, resource.find('/')), &parsed.transports);
  }
  return parsed;
}

EndpointInfo DescribeEndpoint(ucp_ep_h ep) {
  return ParseEndpointInfo(PrintedBy([ep](FILE* stream) { ucp_ep_print_info(ep, stream); }));
}

bool TlsMayInclude(absl::string_view tls, absl::string_view transport) {
  std::vector<absl::string_view> names = absl::StrSplit(tls, ',', absl::SkipWhitespace());
  for (absl::string_view& name : names) name = absl::StripAsciiWhitespace(name);
  if (names.empty()) return true;  // unset: UCX's default, all
  const bool excluding = absl::ConsumePrefix(&names.front(), "^");
  // UCX 1.13's aliases: "sm"/"shm" for its shared-memory transports, "mm" for the mapped
  // ones among them.
  const bool shared_memory = transport == "posix" || transport == "sysv" || transport == "cma" ||
                             transport == "knem" || transport == "xpmem";
  const bool mapped = transport == "posix" || transport == "sysv" || transport == "xpmem";
  const bool named = std::any_of(names.begin(), names.end(), [&](absl::string_view name) {
    return name == transport || (shared_memory && (name == "sm" || name == "shm")) ||
           (mapped && name == "mm");
  });
  if (excluding) return !named;
  return named || std::find(names.begin(), names.end(), "all") != names.end();
}

bool TlsMayIncludeTcp(absl::string_view tls) { return TlsMayInclude(tls, "tcp"); }

namespace {

bool Opened(const std::vector<std::string>& transports, absl::string_view name) {
  return std::find(transports.begin(), transports.end(), name) != transports.end();
}

// Shared memory or self: no connection that can fail inside UCX when a peer dies.
bool IsSharedMemoryOrSelf(const std::string& transport) {
  static const auto* kCoveredBySocket =
      new absl::flat_hash_set<std::string>{"self", "posix", "sysv", "cma", "knem", "xpmem"};
  return kCoveredBySocket->contains(transport);
}

}  // namespace

bool UcxContext::SharedMemoryOnly(const std::vector<std::string>& transports) {
  // Empty: the text format changed, and nothing is known.
  return !transports.empty() &&
         std::all_of(transports.begin(), transports.end(), IsSharedMemoryOrSelf);
}

bool UcxContext::SameHostPeersUseTcp(const std::vector<std::string>& transports) {
  const auto has = [&transports](absl::string_view name) { return Opened(transports, name); };
  return (has("posix") || has("sysv")) && has("tcp") && !has("cma") && !has("knem") &&
         !has("xpmem");
}

PeerWatch UcxContext::ChooseAutomatically(const std::vector<std::string>& transports) {
  // Shared memory has no connection that can fail inside UCX. tcp does: a dead tcp peer
  // surfaces inside UCT as a connection error, and without PEER mode nothing purges the
  // failed endpoint. A fault test then aborted in UCT (`tcp_iface.c:307 Assertion
  // ep->conn_state != UCT_TCP_EP_CONN_STATE_CLOSED`), and UCX documents force-closing an
  // endpoint (what Sluice does to a dead peer's) as requiring PEER mode on both sides.
  // PEER mode would cost a same-host peer its shared memory (UCX 1.13 falls back to tcp
  // over loopback, 2-2.5x slower), and for such a peer UCX picks shared-memory lanes only,
  // so with shared memory and tcp the socket watches same-host peers and UCX the others.
  // With RDMA present UCX watches everyone: which lanes it picks there is not verified.
  if (SharedMemoryOnly(transports)) return PeerWatch::kSocket;
  const auto has = [&transports](absl::string_view name) { return Opened(transports, name); };
  // An active-message lane in shared memory (cma, knem and xpmem move rendezvous data only).
  if (!has("posix") && !has("sysv")) return PeerWatch::kUcx;
  // And a single-copy one for rendezvous data: without it (a seccomp filter refusing
  // process_vm_readv, as in some containers) UCX 1.13 gives a same-host peer's endpoint a
  // tcp lane for large messages, which then needs UCX's watch like any tcp peer. Measured
  // under tests/tools/deny_cma: 1 MiB at 1.9-3.4 GB/s either way, tcp carrying the bytes.
  if (SameHostPeersUseTcp(transports)) return PeerWatch::kUcx;
  for (const std::string& t : transports) {
    if (t != "tcp" && !IsSharedMemoryOrSelf(t)) return PeerWatch::kUcx;
  }
  return PeerWatch::kSocketForLocalPeers;
}

absl::StatusOr<std::shared_ptr<UcxContext>> UcxContext::Create(const std::string& tls,
                                                               UcxPeerFailure peer_failure,
                                                               size_t tcp_segment_bytes) {
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
  // UCX warns on stderr about a transport setting no transport took ("invalid
  // configurations"), so it is handed over only when tcp may be opened.
  if (tcp_segment_bytes > 0 && TlsMayIncludeTcp(effective_tls)) {
    // ucp_config_modify hands names it does not know to the transports, by their own field
    // names: "TX_SEG_SIZE" is UCX_TCP_TX_SEG_SIZE (only tcp has these two; `ucx_info -c -f`).
    const std::string bytes = std::to_string(tcp_segment_bytes);
    for (const char* field : {"TX_SEG_SIZE", "RX_SEG_SIZE"}) {
      const std::string variable = absl::StrCat("UCX_TCP_", field);
      if (std::getenv(variable.c_str()) != nullptr) continue;  // the user's choice wins
      if (ucs_status_t s = ucp_config_modify(config.get(), field, bytes.c_str()); s != UCS_OK) {
        return UcsError(s, absl::StrCat(variable, "=", bytes));
      }
    }
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
  created->transports_ = ParseContextTransports(
      PrintedBy([context](FILE* stream) { ucp_context_print_info(context, stream); }));
  // Unless UCX_TLS left them out on purpose.
  if (SameHostPeersUseTcp(created->transports_) && TlsMayInclude(effective_tls, "cma")) {
    // Once per process: the cause is the host's, and every context would say the same.
    static std::once_flag once;
    std::call_once(once, [] {
      std::fprintf(stderr,
                   "sluice: UCX opened shared memory but no cma (nor knem, xpmem), so "
                   "batches between processes on this host cross tcp on loopback, several "
                   "times slower; `sluice-perf doctor` says why\n");
    });
  }
  switch (resolved) {
    case UcxPeerFailure::kAuto:
      created->peer_watch_ = ChooseAutomatically(created->transports_);
      break;
    case UcxPeerFailure::kUcx:
      created->peer_watch_ = PeerWatch::kUcx;
      break;
    case UcxPeerFailure::kSocketOnly:
      created->peer_watch_ = PeerWatch::kSocket;
      break;
    case UcxPeerFailure::kSocketForLocalPeers:
      created->peer_watch_ = PeerWatch::kSocketForLocalPeers;
      break;
  }
  return created;
}

UcxContext::~UcxContext() { ucp_cleanup(context_); }

}  // namespace sluice::transport::ucx
