#include "gpu/ucx_memory_probe.h"

#include "absl/strings/str_cat.h"

namespace sluice::gpu {

std::string UcxMemoryTypes::ToString() const {
  std::string out;
  for (int t = 0; t < UCS_MEMORY_TYPE_LAST; ++t) {
    if (!supports(static_cast<ucs_memory_type_t>(t))) continue;
    absl::StrAppend(&out, out.empty() ? "" : ",", ucs_memory_type_names[t]);
  }
  return out;
}

absl::StatusOr<UcxMemoryTypes> QueryUcxMemoryTypes(ucp_context_h context) {
  if (context == nullptr) {
    return absl::InvalidArgumentError("QueryUcxMemoryTypes: null ucp_context_h");
  }
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  ucs_status_t status = ucp_context_query(context, &attr);
  if (status != UCS_OK) {
    return absl::InternalError(absl::StrCat(
        "ucp_context_query(UCP_ATTR_FIELD_MEMORY_TYPES) failed: ", ucs_status_string(status)));
  }
  return UcxMemoryTypes{attr.memory_types};
}

bool UcxSupportsCudaMemory(ucp_context_h context) {
  absl::StatusOr<UcxMemoryTypes> types = QueryUcxMemoryTypes(context);
  return types.ok() && types->cuda();
}

}  // namespace sluice::gpu
