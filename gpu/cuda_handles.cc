#include "gpu/cuda_handles.h"

#include "common/status_macros.h"
#include "gpu/cuda_probe.h"

#if SLUICE_HAVE_CUDA
#include <cuda.h>  // driver API types only: its functions come through cudart's entry points
#include <cuda_runtime_api.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {

#if SLUICE_HAVE_CUDA

namespace {

// A driver function through cudart, so that nothing links libcuda (absent where CUDA is
// installed without a GPU); null when this driver lacks it.
void* DriverFunction(const char* name) {
#if CUDART_VERSION >= 12000
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found);
#else
  const cudaError_t err = cudaGetDriverEntryPoint(name, &function, cudaEnableDefault, &found);
#endif
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err == cudaSuccess && found == cudaDriverEntryPointSuccess ? function : nullptr;
#else
  (void)name;
  return nullptr;  // CUDA 11 cannot say which driver functions it has: restored as before
#endif
}

// Whether `device`'s primary context exists, so that making it current creates nothing.
// When the driver cannot say, assumed so (restoring as cudaSetDevice always did).
bool PrimaryContextExists(int device) {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using PrimaryCtxGetState = CUresult (*)(CUdevice, unsigned int*, int*);
  static const auto device_get = reinterpret_cast<DeviceGet>(DriverFunction("cuDeviceGet"));
  static const auto get_state =
      reinterpret_cast<PrimaryCtxGetState>(DriverFunction("cuDevicePrimaryCtxGetState"));
  if (device_get == nullptr || get_state == nullptr) return true;
  CUdevice handle = 0;
  unsigned int flags = 0;
  int active = 0;
  if (device_get(&handle, device) != CUDA_SUCCESS) return true;
  return get_state(handle, &flags, &active) != CUDA_SUCCESS || active != 0;
}

}  // namespace

void CudaStreamDeleter::operator()(CUstream_st* stream) const {
  absl::StatusOr<ScopedCudaDevice> on_device = ScopedCudaDevice::Enter(device);
  if (cudaStreamDestroy(stream) != cudaSuccess) (void)cudaGetLastError();
}

void CudaEventDeleter::operator()(CUevent_st* event) const {
  absl::StatusOr<ScopedCudaDevice> on_device = ScopedCudaDevice::Enter(device);
  if (cudaEventDestroy(event) != cudaSuccess) (void)cudaGetLastError();
}

absl::StatusOr<ScopedCudaDevice> ScopedCudaDevice::Enter(int device) {
  int previous = 0;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(cudaGetDevice(&previous), "cudaGetDevice"));
  if (previous == device) return ScopedCudaDevice(-1);
  // Asked before switching: the switch itself makes `device`'s context, never `previous`'s.
  const bool restore = PrimaryContextExists(previous);
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(cudaSetDevice(device), "cudaSetDevice"));
  return ScopedCudaDevice(restore ? previous : -1);
}

ScopedCudaDevice::~ScopedCudaDevice() {
  if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) (void)cudaGetLastError();
}

absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaStream"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  cudaStream_t stream = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"));
  return CudaStreamPtr(stream, CudaStreamDeleter{device});
}

absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaEvent"));
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  cudaEvent_t event = nullptr;
  SLUICE_RETURN_IF_ERROR(internal::CudaCheck(
      cudaEventCreateWithFlags(&event, cudaEventDisableTiming | cudaEventBlockingSync),
      "cudaEventCreateWithFlags"));
  return CudaEventPtr(event, CudaEventDeleter{device});
}

#else  // !SLUICE_HAVE_CUDA: nothing is ever created, so the deleters never run.

void CudaStreamDeleter::operator()(CUstream_st*) const {}
void CudaEventDeleter::operator()(CUevent_st*) const {}

absl::StatusOr<ScopedCudaDevice> ScopedCudaDevice::Enter(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "ScopedCudaDevice"));
  return ScopedCudaDevice(-1);
}

ScopedCudaDevice::~ScopedCudaDevice() = default;

absl::StatusOr<CudaStreamPtr> CreateCudaStream(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaStream"));
  return CudaStreamPtr();
}

absl::StatusOr<CudaEventPtr> CreateCudaEvent(int device) {
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(device, "CreateCudaEvent"));
  return CudaEventPtr();
}

#endif  // SLUICE_HAVE_CUDA

}  // namespace sluice::gpu
