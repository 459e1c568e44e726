#include "transport/ucx/ucx_memory.h"

#include "absl/strings/str_cat.h"

namespace sluice::transport::ucx {

absl::StatusOr<std::unique_ptr<UcxMemoryRegion>> UcxMemoryRegion::Map(
    std::shared_ptr<UcxContext> context, void* base, size_t size) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = size;
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(context->get(), &params, &memh); s != UCS_OK) {
    return UcsError(s, absl::StrCat("ucp_mem_map of ", size, " bytes"));
  }
  return std::unique_ptr<UcxMemoryRegion>(
      new UcxMemoryRegion(std::move(context), memh, base, size));
}

UcxMemoryRegion::~UcxMemoryRegion() { ucp_mem_unmap(context_->get(), memh_); }

}  // namespace sluice::transport::ucx
