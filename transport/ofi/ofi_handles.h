// RAII owners for libfabric objects, and libfabric return codes as absl::Status.
//
// Every fid Sluice opens is held by a FidPtr<T>, whose deleter calls fi_close, so a failure
// half way through set-up unwinds in reverse order of creation (declare owners in the order
// the objects are opened). fi_info lists are owned by FiInfoPtr (fi_freeinfo).
//
//   fid_cq* raw = nullptr;
//   if (int rc = fi_cq_open(domain, &attr, &raw, nullptr); rc != 0)
//     return OfiError(rc, "fi_cq_open");
//   CqPtr cq(raw);  // fi_close on scope exit
#ifndef SLUICE_TRANSPORT_OFI_OFI_HANDLES_H_
#define SLUICE_TRANSPORT_OFI_OFI_HANDLES_H_

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sluice::transport::ofi {

// The libfabric API version Sluice is written against (Debian 12 ships 1.17).
inline constexpr uint32_t kFabricApiVersion = FI_VERSION(1, 17);

// Maps a negative libfabric return code (-FI_E...) to an absl::Status that carries
// fi_strerror's text and `what`. Connection-type failures map to Unavailable so callers treat
// them like a dead peer.
[[nodiscard]] absl::Status OfiError(int64_t rc, absl::string_view what);

template <typename T>
struct FidDeleter {
  void operator()(T* object) const {
    if (object != nullptr) fi_close(&object->fid);
  }
};
template <typename T>
using FidPtr = std::unique_ptr<T, FidDeleter<T>>;

using FabricPtr = FidPtr<fid_fabric>;
using DomainPtr = FidPtr<fid_domain>;
using AvPtr = FidPtr<fid_av>;
using CqPtr = FidPtr<fid_cq>;
using EqPtr = FidPtr<fid_eq>;
using EpPtr = FidPtr<fid_ep>;
using MrPtr = FidPtr<fid_mr>;

struct FiInfoDeleter {
  void operator()(fi_info* info) const { fi_freeinfo(info); }
};
using FiInfoPtr = std::unique_ptr<fi_info, FiInfoDeleter>;

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_HANDLES_H_
