// What the RPC layer itself costs a round trip: RpcEndpoint::Call (and CallAsync) against a
// bare Transport message, both over an in-process loopback that hands each message to the
// peer's handler on the sending thread. No byte crosses a process, so the difference between
// the two is the RPC layer's own work (frames, the pending-call table, the ServerCall, the
// callbacks), the part of `sluice-perf transport`'s RPC latency above its bare message
// latency that is CPU rather than waiting. Not a transport benchmark: the loopback moves
// header-only messages and nothing else.
//
//   build/perf/sluice_rpc_benchmark
//   SLUICE_MUTEX_DEADLOCK_CHECKS=1 build/perf/sluice_rpc_benchmark   # as tests run
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "common/mutex_checks.h"
#include "transport/rpc.h"
#include "transport/transport.h"

namespace sluice::transport {
namespace {

constexpr ConnectionId kPeer = 1;
constexpr uint32_t kEcho = 7;

// One end of an in-process pair; Link() joins two.
class Loopback final : public Transport {
 public:
  explicit Loopback(MessageHandler* handler) : handler_(handler) {}
  static void Link(Loopback& a, Loopback& b) {
    a.peer_ = &b;
    b.peer_ = &a;
  }

  absl::string_view scheme() const override { return "loopback"; }
  std::string Describe() const override { return "in-process loopback (header-only messages)"; }
  absl::StatusOr<Address> Listen(const Address& bind) override { return bind; }
  absl::StatusOr<ConnectionId> ConnectBefore(const Address&, absl::Time) override { return kPeer; }
  void StopConnecting() override {}
  void Send(ConnectionId, absl::string_view header, Payload payload, SendCallback done) override {
    if (payload.size != 0 || peer_ == nullptr) {
      if (done) done(absl::UnimplementedError("the loopback moves linked header-only messages"));
      return;
    }
    ++stats_.messages_sent;
    peer_->handler_->OnMessage(kPeer, header, InboundPayload{});
    if (done) done(absl::OkStatus());
  }
  void Close(ConnectionId) override {}
  void Abort(ConnectionId, absl::Status) override {}
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void*, size_t) override {
    return absl::UnimplementedError("the loopback registers no memory");
  }
  size_t max_header_size() const override { return 4096; }
  const TransportStats& stats() const override { return stats_; }
  // Every reply has come by the time `start` returns: messages are delivered as they are sent.
  bool DriveUntil(absl::FunctionRef<void()> start, absl::FunctionRef<bool()> done) override {
    start();
    return done();
  }

 private:
  MessageHandler* handler_;
  Loopback* peer_ = nullptr;
  TransportStats stats_;
};

// A client and an echo server, RPC endpoints over a linked loopback pair.
struct RpcPair {
  std::unique_ptr<RpcEndpoint> client;
  std::unique_ptr<RpcEndpoint> server;
  ConnectionId connection = kNoConnection;

  bool Start(benchmark::State& state) {
    Loopback* ends[2] = {nullptr, nullptr};
    for (int i = 0; i < 2; ++i) {
      auto endpoint = RpcEndpoint::CreateOver(
          RpcOptions{.handler_threads = 1},
          [&ends, i](MessageHandler* handler) -> absl::StatusOr<std::unique_ptr<Transport>> {
            auto loopback = std::make_unique<Loopback>(handler);
            ends[i] = loopback.get();
            return loopback;
          });
      if (!endpoint.ok()) {
        state.SkipWithError(std::string(endpoint.status().message()).c_str());
        return false;
      }
      (i == 0 ? client : server) = *std::move(endpoint);
    }
    Loopback::Link(*ends[0], *ends[1]);
    server->Handle(
        kEcho,
        [](std::shared_ptr<ServerCall> call) { call->Reply(absl::OkStatus(), call->request()); },
        HandlerThread::kInline);
    absl::StatusOr<ConnectionId> connected = client->ConnectTo({"loopback", "peer", 1});
    if (!connected.ok()) {
      state.SkipWithError(std::string(connected.status().message()).c_str());
      return false;
    }
    connection = *connected;
    return true;
  }
};

void BM_RpcCall(benchmark::State& state) {
  RpcPair pair;
  if (!pair.Start(state)) return;
  for (auto _ : state) {
    absl::StatusOr<CallResult> r = pair.client->Call(pair.connection, kEcho, "12345678", {});
    if (!r.ok() || r->response != "12345678") {
      state.SkipWithError("the echo did not come back");
      return;
    }
  }
}
BENCHMARK(BM_RpcCall);

// The data path's form: a callback per call instead of a waiting caller.
void BM_RpcCallAsync(benchmark::State& state) {
  RpcPair pair;
  if (!pair.Start(state)) return;
  int64_t replies = 0;
  for (auto _ : state) {
    pair.client->CallAsync(pair.connection, kEcho, "12345678", {},
                           [&replies](absl::StatusOr<CallResult> r) { replies += r.ok(); });
  }
  if (replies != state.iterations()) state.SkipWithError("an echo did not come back");
}
BENCHMARK(BM_RpcCallAsync);

// The baseline: the same 8 bytes as a bare message each way, driven as
// perf/message_ping_pong.cc drives them.
class Echo final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId from, absl::string_view header, InboundPayload) override {
    transport->Send(from, header, {}, {});
  }
  void OnDisconnect(ConnectionId, absl::Status) override {}
  Transport* transport = nullptr;
};

class Counter final : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override { ++replies; }
  void OnDisconnect(ConnectionId, absl::Status) override {}
  int64_t replies = 0;
};

void BM_BareMessage(benchmark::State& state) {
  Echo echo;
  Counter counter;
  Loopback server(&echo);
  Loopback client(&counter);
  Loopback::Link(client, server);
  echo.transport = &server;
  for (auto _ : state) {
    const int64_t seen = counter.replies;
    const bool drove = client.DriveUntil([&] { client.Send(kPeer, "12345678", {}, {}); },
                                         [&] { return counter.replies > seen; });
    if (!drove) {
      state.SkipWithError("the echo did not come back");
      return;
    }
  }
}
BENCHMARK(BM_BareMessage);

}  // namespace
}  // namespace sluice::transport

// As the sluice binaries run: without Abseil's deadlock detection, which Debian's debug build
// of Abseil otherwise runs on every lock (SLUICE_MUTEX_DEADLOCK_CHECKS=1 keeps it, as tests do).
int main(int argc, char** argv) {
  sluice::ConfigureMutexChecksForProduction();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
