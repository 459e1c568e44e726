#include "gpu/copy_engine.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "gpu/cuda_probe.h"

#if SLUICE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_error.h"
#endif

namespace sluice::gpu {
namespace {

absl::Status FromCallback(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "DeviceCopyEngine::", what, " called from a copy callback, which would wait on itself"));
}

#if SLUICE_HAVE_CUDA
// Starts one copy on `stream` and records `event` after it.
absl::Status StartCopy(int device, const void* host, size_t bytes, void* device_ptr,
                       cudaStream_t stream, cudaEvent_t event, cudaEvent_t after) {
  SLUICE_ASSIGN_OR_RETURN(ScopedCudaDevice on_device, ScopedCudaDevice::Enter(device));
  if (after != nullptr) {
    SLUICE_RETURN_IF_ERROR(
        internal::CudaCheck(cudaStreamWaitEvent(stream, after, 0), "cudaStreamWaitEvent"));
  }
  SLUICE_RETURN_IF_ERROR(
      internal::CudaCheck(cudaMemcpyAsync(device_ptr, host, bytes, cudaMemcpyHostToDevice, stream),
                          absl::StrCat("cudaMemcpyAsync(", bytes, " bytes host to device)")));
  if (cudaError_t err = cudaEventRecord(event, stream); err != cudaSuccess) {
    // The copy may still be reading `host`: never hand it back to the caller running.
    (void)cudaStreamSynchronize(stream);
    return internal::CudaCheck(err, "cudaEventRecord");
  }
  return absl::OkStatus();
}
#endif

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceCopyEngine>> DeviceCopyEngine::Create(
    const CopyEngineOptions& options) {
  if (options.num_streams < 1 || options.max_in_flight < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeviceCopyEngine needs num_streams >= 1 and max_in_flight >= 1, got ",
                     options.num_streams, " and ", options.max_in_flight));
  }
  SLUICE_RETURN_IF_ERROR(RequireCudaDevice(options.device, "DeviceCopyEngine"));
  std::vector<CudaStreamPtr> streams;
  for (int i = 0; i < options.num_streams; ++i) {
    SLUICE_ASSIGN_OR_RETURN(CudaStreamPtr stream, CreateCudaStream(options.device));
    streams.push_back(std::move(stream));
  }
  std::vector<CudaEventPtr> events;
  for (int i = 0; i < options.max_in_flight; ++i) {
    SLUICE_ASSIGN_OR_RETURN(CudaEventPtr event, CreateCudaEvent(options.device));
    events.push_back(std::move(event));
  }
  return std::unique_ptr<DeviceCopyEngine>(
      new DeviceCopyEngine(options, std::move(streams), std::move(events)));
}

DeviceCopyEngine::DeviceCopyEngine(const CopyEngineOptions& options,
                                   std::vector<CudaStreamPtr> streams,
                                   std::vector<CudaEventPtr> events)
    : options_(options), streams_(std::move(streams)), events_(std::move(events)) {
  for (size_t i = events_.size(); i-- > 0;) free_events_.push_back(i);
  completion_thread_ = std::thread([this] {
    completion_thread_id_.store(std::this_thread::get_id());
    SetCurrentThreadName("sluice-copy");
    CompletionLoop();
  });
}

DeviceCopyEngine::~DeviceCopyEngine() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  completion_thread_.join();  // it drains every copy in flight first
}

absl::Status DeviceCopyEngine::Submit(const void* host, size_t bytes, void* device_ptr,
                                      CopyDone done, CUevent_st* after) {
  if (host == nullptr || device_ptr == nullptr) {
    return absl::InvalidArgumentError("DeviceCopyEngine::Submit: null host or device pointer");
  }
  if (std::this_thread::get_id() == completion_thread_id_.load()) return FromCallback("Submit");
  size_t event;
  size_t stream;
  {
    absl::MutexLock lock(&mu_);
    auto room = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !free_events_.empty(); };
    mu_.Await(absl::Condition(&room));
    if (stop_) return absl::FailedPreconditionError("DeviceCopyEngine is shutting down");
    event = free_events_.back();
    free_events_.pop_back();
    stream = next_stream_++ % streams_.size();
    ++unfinished_;
  }
#if SLUICE_HAVE_CUDA
  absl::Status started = StartCopy(options_.device, host, bytes, device_ptr, streams_[stream].get(),
                                   events_[event].get(), after);
#else
  (void)stream;
  (void)after;
  absl::Status started = absl::FailedPreconditionError("built without CUDA");
#endif
  absl::MutexLock lock(&mu_);
  if (!started.ok()) {
    free_events_.push_back(event);
    --unfinished_;
    return started;
  }
  in_flight_.push_back(InFlight{event, bytes, std::move(done)});
  return absl::OkStatus();
}

absl::Status DeviceCopyEngine::Flush() {
  if (std::this_thread::get_id() == completion_thread_id_.load()) return FromCallback("Flush");
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unfinished_ == 0; };
  mu_.Await(absl::Condition(&idle));
  return absl::OkStatus();
}

CopyEngineCounters DeviceCopyEngine::counters() const {
  return CopyEngineCounters{bytes_copied_.load(), copies_.load(), failed_copies_.load()};
}

void DeviceCopyEngine::CompletionLoop() {
#if SLUICE_HAVE_CUDA
  cudaSetDevice(options_.device);  // Create checked the device exists
#endif
  while (true) {
    CUevent_st* oldest;
    {
      absl::MutexLock lock(&mu_);
      // Stopping waits for unfinished copies, not only those in flight: a Submit between
      // taking its event and listing its copy would otherwise list it after the thread
      // that reports it has gone, and its callback would never run.
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !in_flight_.empty() || (stop_ && unfinished_ == 0);
      };
      mu_.Await(absl::Condition(&work));
      if (in_flight_.empty()) return;  // stopping, and every copy has been reported
      oldest = events_[in_flight_.front().event].get();
    }
    // Blocks (events are cudaEventBlockingSync) without holding the lock, so Submit goes on.
#if SLUICE_HAVE_CUDA
    absl::Status status =
        internal::CudaCheck(cudaEventSynchronize(oldest), "cudaEventSynchronize(copy done)");
#else
    (void)oldest;
    absl::Status status = absl::InternalError("built without CUDA");
#endif
    struct Finished {
      size_t event;
      CopyDone done;
      absl::Status status;
    };
    std::vector<Finished> finished;
    {
      absl::MutexLock lock(&mu_);
      // The oldest copy is done; so is every later one whose event has already fired.
      while (!in_flight_.empty()) {
        InFlight& copy = in_flight_.front();
        if (!finished.empty()) {
#if SLUICE_HAVE_CUDA
          cudaError_t err = cudaEventQuery(events_[copy.event].get());
          if (err == cudaErrorNotReady) break;
          status = internal::CudaCheck(err, "cudaEventQuery(copy done)");
#endif
        }
        if (status.ok()) {
          bytes_copied_.fetch_add(copy.bytes);
          copies_.fetch_add(1);
        } else {
          failed_copies_.fetch_add(1);
        }
        finished.push_back(Finished{copy.event, std::move(copy.done), status});
        in_flight_.pop_front();
      }
    }
    for (Finished& copy : finished) {
      if (copy.done) copy.done(copy.status);
    }
    // Only now does a copy stop counting against max_in_flight.
    absl::MutexLock lock(&mu_);
    for (const Finished& copy : finished) free_events_.push_back(copy.event);
    unfinished_ -= static_cast<int>(finished.size());
  }
}

}  // namespace sluice::gpu
