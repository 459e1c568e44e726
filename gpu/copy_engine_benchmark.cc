// Staged host-to-device bandwidth: DeviceCopyEngine (async copies over N streams from pinned
// host memory, callbacks on completion) against a plain synchronous cudaMemcpy of the same
// bytes from the same pinned buffer, in the same run. Without a GPU it prints why and exits 0.
//
//   build/gpu/gpu_copy_engine_benchmark --benchmark_min_time=1
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "gpu/copy_engine.h"
#include "gpu/cuda_probe.h"
#include "gpu/device_buffer.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace sluice::gpu {
namespace {

constexpr int kBatchesPerIteration = 16;

// The bytes of kBatchesPerIteration batches of state.range(0) bytes each, pinned on the host,
// and as many device buffers (so copies never wait on each other for memory).
struct Buffers {
  PinnedHostBuffer host;
  std::vector<DeviceBuffer> device;
};

bool MakeBuffers(benchmark::State& state, Buffers* buffers) {
  size_t batch = static_cast<size_t>(state.range(0));
  absl::StatusOr<PinnedHostBuffer> host = PinnedHostBuffer::Allocate(batch * kBatchesPerIteration);
  if (!host.ok()) {
    state.SkipWithError(std::string(host.status().message()).c_str());
    return false;
  }
  buffers->host = std::move(*host);
  for (int i = 0; i < kBatchesPerIteration; ++i) {
    absl::StatusOr<DeviceBuffer> device = DeviceBuffer::Allocate(0, batch);
    if (!device.ok()) {
      state.SkipWithError(std::string(device.status().message()).c_str());
      return false;
    }
    buffers->device.push_back(std::move(*device));
  }
  return true;
}

void BM_StagedCopyEngine(benchmark::State& state) {
  Buffers buffers;
  if (!MakeBuffers(state, &buffers)) return;
  auto engine = DeviceCopyEngine::Create(
      {.num_streams = static_cast<int>(state.range(1)), .max_in_flight = kBatchesPerIteration});
  if (!engine.ok()) {
    state.SkipWithError(std::string(engine.status().message()).c_str());
    return;
  }
  size_t batch = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < kBatchesPerIteration; ++i) {
      absl::Status s = (*engine)->Submit(buffers.host.data() + i * batch, batch,
                                         buffers.device[i].data(), [](absl::Status) {});
      if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    }
    (void)(*engine)->Flush();
  }
  state.SetBytesProcessed(state.iterations() * kBatchesPerIteration * batch);
}

void BM_PlainCudaMemcpy(benchmark::State& state) {
#if SLUICE_HAVE_CUDA
  Buffers buffers;
  if (!MakeBuffers(state, &buffers)) return;
  size_t batch = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    for (int i = 0; i < kBatchesPerIteration; ++i) {
      cudaError_t err = cudaMemcpy(buffers.device[i].data(), buffers.host.data() + i * batch, batch,
                                   cudaMemcpyHostToDevice);
      if (err != cudaSuccess) state.SkipWithError(cudaGetErrorString(err));
    }
  }
  state.SetBytesProcessed(state.iterations() * kBatchesPerIteration * batch);
#else
  state.SkipWithError("built without CUDA");
#endif
}

// Batch sizes 256 KiB .. 16 MiB; the engine with 1, 2 and 4 streams.
BENCHMARK(BM_PlainCudaMemcpy)
    ->ArgsProduct({{256 << 10, 1 << 20, 4 << 20, 16 << 20}, {1}})
    ->UseRealTime();
BENCHMARK(BM_StagedCopyEngine)
    ->ArgsProduct({{256 << 10, 1 << 20, 4 << 20, 16 << 20}, {1, 2, 4}})
    ->UseRealTime();

}  // namespace
}  // namespace sluice::gpu

int main(int argc, char** argv) {
  sluice::gpu::CudaAvailability cuda = sluice::gpu::ProbeCuda();
  if (!cuda.available) {
    std::printf("gpu_copy_engine_benchmark: skipped, no usable GPU: %s\n", cuda.reason.c_str());
    return 0;
  }
  std::printf("gpu_copy_engine_benchmark: %s\n", cuda.reason.c_str());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
