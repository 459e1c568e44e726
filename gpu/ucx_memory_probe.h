// Which memory types a UCX context can move data from and into: whether batch payloads could
// land straight in GPU memory (DeviceLanding::kDirect) or must stage through host memory.
//
// Asks ucp_context_query for UCP_ATTR_FIELD_MEMORY_TYPES. A context reports
// UCS_MEMORY_TYPE_CUDA only when UCX was built with CUDA support and its cuda transports
// loaded; Debian 12's UCX 1.13 is built without it.
//
//   absl::StatusOr<UcxMemoryTypes> types = QueryUcxMemoryTypes(context->get());
//   if (types.ok() && types->cuda()) { ... }
//   bool direct = UcxSupportsCudaMemory(context->get());  // false on any query failure
#ifndef SLUICE_GPU_UCX_MEMORY_PROBE_H_
#define SLUICE_GPU_UCX_MEMORY_PROBE_H_

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace sluice::gpu {

struct UcxMemoryTypes {
  // Bit UCS_BIT(t) set for each ucs_memory_type_t t the context supports.
  uint64_t mask = 0;

  [[nodiscard]] bool supports(ucs_memory_type_t type) const {
    return (mask & (uint64_t{1} << type)) != 0;
  }
  [[nodiscard]] bool host() const { return supports(UCS_MEMORY_TYPE_HOST); }
  [[nodiscard]] bool cuda() const { return supports(UCS_MEMORY_TYPE_CUDA); }
  [[nodiscard]] bool cuda_managed() const { return supports(UCS_MEMORY_TYPE_CUDA_MANAGED); }
  // The supported types by UCX's names, e.g. "host" or "host,cuda,cuda-managed".
  [[nodiscard]] std::string ToString() const;
};

// InvalidArgument for a null context; the UCX error when the query fails.
[[nodiscard]] absl::StatusOr<UcxMemoryTypes> QueryUcxMemoryTypes(ucp_context_h context);

// True when the context detects (and can move) CUDA device memory: its memory-type mask,
// set once UCX's cuda_copy is loaded. Not that it can register it for a network transfer
// (that takes GPUDirect RDMA as well): a direct landing (kDirect) must test a registration.
[[nodiscard]] bool UcxSupportsCudaMemory(ucp_context_h context);

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_UCX_MEMORY_PROBE_H_
