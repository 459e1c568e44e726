#include "transport/ofi/ofi_memory.h"

#include "common/status_macros.h"

namespace sluice::transport::ofi {

absl::StatusOr<std::unique_ptr<MemoryRegion>> OfiMemoryRegion::Register(
    std::shared_ptr<OfiDomain> domain, void* base, size_t size) {
  SLUICE_ASSIGN_OR_RETURN(MrPtr mr, domain->Register(base, size));
  domain->AddRegion(mr.get(), base, size);
  return std::unique_ptr<MemoryRegion>(
      new OfiMemoryRegion(std::move(domain), std::move(mr), base, size));
}

OfiMemoryRegion::~OfiMemoryRegion() {
  // Out of the registry first, so no new operation picks the key up.
  domain_->RemoveRegion(mr_.get());
  domain_->RunOnOwner([this] { mr_.reset(); });
}

}  // namespace sluice::transport::ofi
