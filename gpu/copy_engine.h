// Asynchronous host-to-device copies on a few CUDA streams, with a completion callback per
// copy, so that the host memory a batch landed in can be reused as soon as its bytes are on
// the GPU (the next fetch into that slab then overlaps the copies still running).
//
// Copies go round-robin over `num_streams` non-blocking streams; each records an event.
// One completion thread waits on the events in submission order and runs the callbacks.
// At most `max_in_flight` copies are unfinished (submitted, callback not yet returned) at
// once: Submit blocks beyond that.
// For copies to be asynchronous the host memory must be page-locked (PinnedHostBuffer, or
// HostRegistration over e.g. the client's landing slabs); from pageable memory CUDA still
// copies correctly but Submit returns only once the bytes are staged.
//
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<DeviceCopyEngine> engine,
//                           DeviceCopyEngine::Create({.device = 0, .num_streams = 2}));
//   SLUICE_RETURN_IF_ERROR(engine->Submit(slab.data(), n, device_ptr,
//                                         [slab = std::move(slab)](absl::Status s) mutable {
//                                           slab.Release();  // bytes are on the device
//                                         }));
//   SLUICE_RETURN_IF_ERROR(engine->Flush());  // every copy done and its callback run
#ifndef SLUICE_GPU_COPY_ENGINE_H_
#define SLUICE_GPU_COPY_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "gpu/cuda_handles.h"

namespace sluice::gpu {

struct CopyEngineOptions {
  int device = 0;
  int num_streams = 2;
  // Copies allowed between Submit and their callback's return (each holds one CUDA event).
  int max_in_flight = 8;
};

// Runs once per accepted copy on the engine's completion thread: OK when the bytes are on
// the device, else the CUDA error. Must not call Submit or Flush on the same engine.
using CopyDone = std::function<void(absl::Status)>;

struct CopyEngineCounters {
  uint64_t bytes_copied_to_device = 0;  // by copies that completed OK
  uint64_t copies = 0;                  // completed OK
  uint64_t failed_copies = 0;
};

class DeviceCopyEngine {
 public:
  // InvalidArgument for bad options; FailedPrecondition "DeviceCopyEngine needs a CUDA
  // device: <reason>" without a GPU; the CUDA error when streams or events cannot be made.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<DeviceCopyEngine>> Create(
      const CopyEngineOptions& options);
  // Waits for every copy in flight and runs its callback, including that of a Submit still
  // under way on another thread (a Submit that starts once destruction began is a caller's
  // error, as any call on an object being destroyed).
  ~DeviceCopyEngine();
  DeviceCopyEngine(const DeviceCopyEngine&) = delete;
  DeviceCopyEngine& operator=(const DeviceCopyEngine&) = delete;

  // Starts copying `bytes` from `host` to `device_ptr` (on this engine's device) and returns,
  // blocking first while max_in_flight copies are unfinished. Both buffers must stay valid
  // until `done` runs. OK: `done` runs exactly once. Error: the copy was not started and
  // `done` never runs (InvalidArgument for null pointers, FailedPrecondition when called
  // from a callback, the CUDA error otherwise).
  // `after`, when set, is an event recorded on another stream (e.g. DeviceBufferLease::
  // ready_after()): the copy starts on the device only once that event has completed, so the
  // host never waits for work still reading `device_ptr`.
  [[nodiscard]] absl::Status Submit(const void* host, size_t bytes, void* device_ptr, CopyDone done,
                                    CUevent_st* after = nullptr);

  // Returns once every copy submitted so far has finished and its callback has run.
  // FailedPrecondition when called from a callback (it would wait on itself).
  [[nodiscard]] absl::Status Flush();

  [[nodiscard]] CopyEngineCounters counters() const;
  [[nodiscard]] int device() const { return options_.device; }
  [[nodiscard]] int num_streams() const { return options_.num_streams; }

 private:
  struct InFlight {
    size_t event;  // index into events_
    size_t bytes;
    CopyDone done;
  };

  DeviceCopyEngine(const CopyEngineOptions& options, std::vector<CudaStreamPtr> streams,
                   std::vector<CudaEventPtr> events);
  void CompletionLoop();

  const CopyEngineOptions options_;
  const std::vector<CudaStreamPtr> streams_;
  const std::vector<CudaEventPtr> events_;

  mutable absl::Mutex mu_;
  std::deque<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);  // in submission order
  std::vector<size_t> free_events_ ABSL_GUARDED_BY(mu_);
  // Copies between taking an event and their callback having returned (events_ minus
  // free_events_).
  int unfinished_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_stream_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::atomic<uint64_t> bytes_copied_{0};
  std::atomic<uint64_t> copies_{0};
  std::atomic<uint64_t> failed_copies_{0};
  std::thread completion_thread_;
  // The completion thread's id, set once it runs: Submit and Flush compare against it
  // while the destructor joins (and so changes) completion_thread_.
  std::atomic<std::thread::id> completion_thread_id_{};
};

}  // namespace sluice::gpu

#endif  // SLUICE_GPU_COPY_ENGINE_H_
