#include "perf/transport_perf.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "perf/message_ping_pong.h"
#include "transport/rpc.h"
#include "transport/slab_pool.h"

namespace sluice::perf {
namespace {

constexpr uint32_t kBlob = 1;
constexpr uint32_t kEcho = 2;
// Replies with the port of the server's MessageEchoServer (message_ping_pong.h).
constexpr uint32_t kMessageEchoPort = 3;

}  // namespace

nlohmann::json TransportPerfResult::ToJson() const {
  auto MeasuredOrNull = [this](double value) -> nlohmann::json {
    return latency_measured ? nlohmann::json(value) : nlohmann::json(nullptr);
  };
  return {{"transport", transport},
          {"ucx_tls", ucx_tls},
          {"ofi_provider", ofi_provider},
          {"progress", progress},
          {"wait_spin_us", wait_spin_us},
          {"ucx_peer_failure", ucx_peer_failure},
          {"transport_description", transport_description},
          {"size", size},
          {"iterations", iterations},
          {"window", window},
          {"seconds", seconds},
          {"bandwidth_mb_s", bandwidth_mb_s},
          // null, not 0, when the latency runs were skipped (--latency-iterations 0)
          {"latency_us", MeasuredOrNull(latency_us)},
          {"round_trip_us", MeasuredOrNull(round_trip_us)},
          {"message_latency_us", MeasuredOrNull(message_latency_us)},
          {"message_round_trip_us", MeasuredOrNull(message_round_trip_us)},
          {"payload_bytes_copied", payload_bytes_copied},
          {"huge_pages", huge_pages}};
}

std::string EffectiveUcxTls(const transport::TransportOptions& options) {
  if (!options.ucx_tls.empty()) return options.ucx_tls;
  const char* env = std::getenv("UCX_TLS");
  return env != nullptr ? env : "all";
}

std::string EffectiveUcxPeerFailure(const transport::TransportOptions& options) {
  switch (options.ucx_peer_failure) {
    case transport::UcxPeerFailure::kAuto:
      break;
    case transport::UcxPeerFailure::kUcx:
      return "ucx";
    case transport::UcxPeerFailure::kSocketOnly:
      return "socket";
    case transport::UcxPeerFailure::kSocketForLocalPeers:
      return "local";
  }
  const char* env = std::getenv("SLUICE_UCX_PEER_FAILURE");
  return env != nullptr && *env != '\0' ? env : "auto";
}

std::string EffectiveOfiProvider(const transport::TransportOptions& options) {
  if (!options.ofi_provider.empty()) return options.ofi_provider;
  const char* env = std::getenv("SLUICE_OFI_PROVIDER");
  return env != nullptr && *env != '\0' ? env : "tcp;ofi_rxm";
}

absl::Status RunTransportPerfServer(const transport::Address& bind,
                                    const transport::TransportOptions& options,
                                    const std::function<void(const transport::Address&)>& on_ready,
                                    const std::function<bool()>& stop) {
  transport::RpcOptions rpc_options;
  rpc_options.scheme = bind.scheme;
  rpc_options.transport = options;
  // One registered source buffer, grown on demand (sizes come from the client). Before the
  // endpoint, whose handlers use them until its destruction has stopped its thread.
  absl::Mutex mu;
  std::shared_ptr<transport::SlabPool> source;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<transport::RpcEndpoint> rpc,
                          transport::RpcEndpoint::Create(rpc_options));
  rpc->Handle(
      kBlob,
      [&](std::shared_ptr<transport::ServerCall> call) {
        size_t size = std::strtoull(std::string(call->request()).c_str(), nullptr, 10);
        std::shared_ptr<transport::Slab> slab;
        {
          absl::MutexLock lock(&mu);
          if (source == nullptr || source->slab_bytes() < size) {
            auto pool = transport::SlabPool::Create(rpc->transport(), std::max<size_t>(size, 1), 1);
            if (!pool.ok()) {
              call->Reply(pool.status());
              return;
            }
            source = *pool;
          }
        }
        // The perf server sends the same bytes concurrently; it never writes them, so one slab
        // serves every request (the pool is only its registration).
        call->Reply(absl::OkStatus(), "", transport::Payload{source->region().base(), size},
                    [keep = source](absl::Status) {});
      },
      transport::HandlerThread::kInline);
  rpc->Handle(
      kEcho,
      [](std::shared_ptr<transport::ServerCall> call) {
        call->Reply(absl::OkStatus(), call->request());
      },
      transport::HandlerThread::kInline);
  MessageEchoServer echo;
  transport::Address echo_bind = bind;
  echo_bind.port = 0;
  SLUICE_ASSIGN_OR_RETURN(transport::Address echo_bound, echo.Start(echo_bind, options));
  rpc->Handle(
      kMessageEchoPort,
      [port = echo_bound.port](std::shared_ptr<transport::ServerCall> call) {
        call->Reply(absl::OkStatus(), std::to_string(port));
      },
      transport::HandlerThread::kInline);
  SLUICE_ASSIGN_OR_RETURN(transport::Address bound, rpc->Listen(bind));
  on_ready(bound);
  while (!stop()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return absl::OkStatus();
}

absl::StatusOr<TransportPerfResult> RunTransportPerfClient(const transport::Address& server,
                                                           const TransportPerfOptions& options) {
  if (options.size == 0 || options.iterations <= 0 || options.window <= 0) {
    return absl::InvalidArgumentError("size, iterations and window must be positive");
  }
  transport::RpcOptions rpc_options;
  rpc_options.scheme = server.scheme;
  rpc_options.transport = options.transport;
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<transport::RpcEndpoint> rpc,
                          transport::RpcEndpoint::Create(rpc_options));
  SLUICE_ASSIGN_OR_RETURN(transport::ConnectionId connection, rpc->ConnectTo(server));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<transport::SlabPool> landing,
                          transport::SlabPool::Create(rpc->transport(), options.size,
                                                      static_cast<size_t>(options.window)));
  const std::string request = std::to_string(options.size);

  // Warm up: connection, registration caches, protocol selection.
  for (int i = 0; i < std::min<int64_t>(options.iterations, 10); ++i) {
    std::optional<transport::Slab> slab = landing->TryAcquire();
    transport::CallOptions call;
    call.landing = {slab->data(), slab->capacity()};
    SLUICE_RETURN_IF_ERROR(rpc->Call(connection, kBlob, request, call).status());
  }

  // Shared with the completion callbacks, which may run after this function has seen the
  // last completion and returned.
  struct Window {
    absl::Mutex mu;
    int64_t issued ABSL_GUARDED_BY(mu) = 0;
    int64_t completed ABSL_GUARDED_BY(mu) = 0;
    absl::Status failure ABSL_GUARDED_BY(mu);
  };
  auto window = std::make_shared<Window>();
  transport::RpcEndpoint* endpoint = rpc.get();
  // `issue` is captured by the callbacks through this pointer, alive while any call is.
  auto issue_ref = std::make_shared<std::function<void()>>();
  *issue_ref = [window, landing, endpoint, connection, request, options,
                weak = std::weak_ptr<std::function<void()>>(issue_ref)] {
    std::optional<transport::Slab> slab;
    {
      absl::MutexLock lock(&window->mu);
      if (window->issued >= options.iterations || !window->failure.ok()) return;
      slab = landing->TryAcquire();
      if (!slab) return;
      ++window->issued;
    }
    auto held = std::make_shared<transport::Slab>(std::move(*slab));
    transport::CallOptions call;
    call.landing = {held->data(), held->capacity()};
    endpoint->CallAsync(
        connection, kBlob, request, call,
        [window, held, weak, size = options.size](absl::StatusOr<transport::CallResult> r) mutable {
          held.reset();  // the slab is free for the next request
          if (r.ok() && r->payload.size != size) r = absl::DataLossError("short payload");
          if (!r.ok()) {
            absl::MutexLock lock(&window->mu);
            if (window->failure.ok()) window->failure = r.status();
          }
          if (auto next = weak.lock()) (*next)();
          absl::MutexLock lock(&window->mu);
          ++window->completed;
        });
  };
  uint64_t copied_before = rpc->transport().stats().payload_bytes_copied;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < options.window; ++i) (*issue_ref)();
  auto last_report = start;
  while (true) {
    absl::MutexLock lock(&window->mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(window->mu) {
      return window->completed >= options.iterations || !window->failure.ok();
    };
    window->mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(1));
    if (done()) break;
    auto now = std::chrono::steady_clock::now();
    if (options.progress && now - last_report > std::chrono::seconds(1)) {
      last_report = now;
      options.progress(static_cast<double>(window->completed) / options.iterations);
    }
  }
  auto end = std::chrono::steady_clock::now();
  {
    absl::MutexLock lock(&window->mu);
    auto drained = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(window->mu) {
      return window->completed == window->issued;
    };
    window->mu.Await(absl::Condition(&drained));
    SLUICE_RETURN_IF_ERROR(window->failure);
  }
  TransportPerfResult result;
  result.transport = server.scheme;
  if (server.scheme == "ofi") {
    result.ofi_provider = EffectiveOfiProvider(options.transport);
  } else {
    result.ucx_tls = EffectiveUcxTls(options.transport);
    result.ucx_peer_failure = EffectiveUcxPeerFailure(options.transport);
  }
  result.progress = options.transport.caller_driven_progress ? "caller" : "thread";
  result.wait_spin_us = absl::ToDoubleMicroseconds(rpc->wait_spin());
  result.transport_description = rpc->transport().Describe();
  result.size = options.size;
  result.iterations = options.iterations;
  result.window = options.window;
  result.seconds = std::chrono::duration<double>(end - start).count();
  result.bandwidth_mb_s =
      static_cast<double>(options.size) * options.iterations / result.seconds / 1e6;
  result.payload_bytes_copied = rpc->transport().stats().payload_bytes_copied - copied_before;
  result.huge_pages = landing->huge_pages_advised();

  if (options.latency_iterations > 0) {
    for (int i = 0; i < 100; ++i)
      SLUICE_RETURN_IF_ERROR(rpc->Call(connection, kEcho, "12345678", {}).status());
    auto lat_start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < options.latency_iterations; ++i) {
      SLUICE_RETURN_IF_ERROR(rpc->Call(connection, kEcho, "12345678", {}).status());
    }
    double total_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - lat_start)
            .count();
    result.latency_measured = true;
    result.round_trip_us = total_us / options.latency_iterations;
    result.latency_us = result.round_trip_us / 2;

    SLUICE_ASSIGN_OR_RETURN(transport::CallResult port,
                            rpc->Call(connection, kMessageEchoPort, "", {}));
    transport::Address echo = server;
    echo.port = std::atoi(std::string(port.response.view()).c_str());
    SLUICE_ASSIGN_OR_RETURN(
        result.message_round_trip_us,
        MeasureMessageRoundTrip(echo, options.transport, options.latency_iterations));
    result.message_latency_us = result.message_round_trip_us / 2;
  }
  return result;
}

}  // namespace sluice::perf
