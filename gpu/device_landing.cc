#include "gpu/device_landing.h"

namespace sluice::gpu {

absl::string_view DeviceLandingName(DeviceLanding landing) {
  switch (landing) {
    case DeviceLanding::kDirect:
      return "direct";
    case DeviceLanding::kStagedThroughPinnedHost:
      return "staged-through-pinned-host";
  }
  return "invalid";
}

DeviceLanding ChooseDeviceLanding(bool ucx_supports_cuda_memory) {
  return ucx_supports_cuda_memory && kSlabPoolTakesDeviceMemory
             ? DeviceLanding::kDirect
             : DeviceLanding::kStagedThroughPinnedHost;
}

}  // namespace sluice::gpu
