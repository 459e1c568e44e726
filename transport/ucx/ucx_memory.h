// Memory registered with a UCX context (ucp_mem_map), released with ucp_mem_unmap.
//
// Holds the context alive: a region may outlive the transport that created it.
//
//   absl::StatusOr<std::unique_ptr<UcxMemoryRegion>> r = UcxMemoryRegion::Map(ctx, p, n);
#ifndef SLUICE_TRANSPORT_UCX_UCX_MEMORY_H_
#define SLUICE_TRANSPORT_UCX_UCX_MEMORY_H_

#include <memory>

#include "transport/transport.h"
#include "transport/ucx/ucx_handles.h"

namespace sluice::transport::ucx {

class UcxMemoryRegion final : public MemoryRegion {
 public:
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<UcxMemoryRegion>> Map(
      std::shared_ptr<UcxContext> context, void* base, size_t size);
  ~UcxMemoryRegion() override;

  std::byte* base() const override { return base_; }
  size_t size() const override { return size_; }
  [[nodiscard]] ucp_mem_h handle() const { return memh_; }

 private:
  UcxMemoryRegion(std::shared_ptr<UcxContext> context, ucp_mem_h memh, void* base, size_t size)
      : context_(std::move(context)),
        memh_(memh),
        base_(static_cast<std::byte*>(base)),
        size_(size) {}
  std::shared_ptr<UcxContext> context_;
  ucp_mem_h memh_;
  std::byte* base_;
  size_t size_;
};

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_MEMORY_H_
