#include "absl/strings/str_cat.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport {

absl::StatusOr<std::unique_ptr<Transport>> CreateTransport(absl::string_view scheme,
                                                           const TransportOptions& options,
                                                           MessageHandler* handler) {
  if (scheme == "ucx") {
    auto ucx = ucx::UcxTransport::Create(options, handler);
    if (!ucx.ok()) return ucx.status();
    return std::unique_ptr<Transport>(std::move(*ucx));
  }
  if (scheme == "ofi") {
    return absl::UnimplementedError(
        "the libfabric transport (ofi://) is not built yet; use ucx://");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", scheme, "', expected ucx or ofi"));
}

}  // namespace sluice::transport
