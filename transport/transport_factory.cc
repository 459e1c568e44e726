#include "absl/strings/str_cat.h"
#include "transport/transport.h"
#include "transport/ucx/ucx_transport.h"

#ifdef SLUICE_HAVE_LIBFABRIC
#include "transport/ofi/ofi_transport.h"
#endif

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
#ifdef SLUICE_HAVE_LIBFABRIC
    auto ofi = ofi::OfiTransport::Create(options, handler);
    if (!ofi.ok()) return ofi.status();
    return std::unique_ptr<Transport>(std::move(*ofi));
#else
    return absl::UnimplementedError(
        "the libfabric transport (ofi://) is not built yet; use ucx://");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown transport '", scheme, "', expected ucx or ofi"));
}

}  // namespace sluice::transport
