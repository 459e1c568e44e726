// How batch payloads reach GPU memory.
//
//   kDirect                   UCX receives the payload straight into device memory. Needs a
//                             transport whose UCX context registers CUDA memory
//                             (UcxSupportsCudaMemory) AND landing slabs allocated in device
//                             memory: transport::SlabPool mmaps its own host memory and cannot
//                             wrap a cudaMalloc'd region yet, so this is not available.
//   kStagedThroughPinnedHost  the payload lands in the client's registered host slab, made
//                             page-locked for CUDA, and DeviceCopyEngine copies it over.
//
//   DeviceLanding landing = ChooseDeviceLanding(UcxSupportsCudaMemory(context->get()));
//   std::cout << DeviceLandingName(landing);  // "staged-through-pinned-host"
#ifndef SLUICE_GPU_DEVICE_LANDING_H_
#define SLUICE_GPU_DEVICE_LANDING_H_

#include "absl/strings/string_view.h"

namespace sluice::gpu {

enum class DeviceLanding {
  kDirect,
  kStagedThroughPinnedHost,
};

// "direct" or "staged-through-pinned-host".
[[nodiscard]] absl::string_view DeviceLandingName(DeviceLanding landing);

// Whether the transport can land payloads in device memory. TODO(gpu): set once SlabPool can
// wrap externally allocated (device) memory and control::BatchReader can take such a pool.
inline constexpr bool kSlabPoolTakesDeviceMemory = false;

// kDirect only when the UCX context registers CUDA memory and slabs can live on the device;
// otherwise kStagedThroughPinnedHost.
[[nodiscard]] DeviceLanding ChooseDeviceLanding(bool ucx_supports_cuda_memory);

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_DEVICE_LANDING_H_
