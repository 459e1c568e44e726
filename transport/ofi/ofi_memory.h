// Memory registered with a libfabric domain (fi_mr_reg) for Transport::RegisterMemory.
//
// A region is entered in its domain's registry, so sends from it and receives into it use
// its descriptor and key instead of registering per message. It holds the domain alive (a
// region may outlive the transport) and closes its fi_mr where the domain's calls run (see
// OfiDomain::RunOnOwner).
//
//   absl::StatusOr<std::unique_ptr<MemoryRegion>> r = OfiMemoryRegion::Register(domain, p, n);
#ifndef SLUICE_TRANSPORT_OFI_OFI_MEMORY_H_
#define SLUICE_TRANSPORT_OFI_OFI_MEMORY_H_

#include <memory>

#include "transport/ofi/ofi_domain.h"
#include "transport/transport.h"

namespace sluice::transport::ofi {

class OfiMemoryRegion final : public MemoryRegion {
 public:
  // Registers on the calling thread, which must be where the domain's calls run.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<MemoryRegion>> Register(
      std::shared_ptr<OfiDomain> domain, void* base, size_t size);
  ~OfiMemoryRegion() override;

  std::byte* base() const override { return base_; }
  size_t size() const override { return size_; }

 private:
  OfiMemoryRegion(std::shared_ptr<OfiDomain> domain, MrPtr mr, void* base, size_t size)
      : domain_(std::move(domain)),
        mr_(std::move(mr)),
        base_(static_cast<std::byte*>(base)),
        size_(size) {}
  std::shared_ptr<OfiDomain> domain_;
  MrPtr mr_;
  std::byte* base_;
  size_t size_;
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_MEMORY_H_
