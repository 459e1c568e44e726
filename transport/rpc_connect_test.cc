// RpcEndpoint::ConnectTo in two races. The transport reports a new connection gone before
// Connect has even returned it (the peer died as it was reached): the endpoint must not
// record that connection as the peer's live one, or every later call to the peer would go
// to a dead id. And several threads connect to one peer at once: one connection is made, and
// the others wait for it (two made at once, one closed as a duplicate, lost UCX rendezvous
// replies, rpc.cc).
//
// The races are made certain, not hoped for: the real transport runs under a thin wrapper
// that, inside Connect, aborts the connection it just made and waits until the transport's
// own OnDisconnect for it has reached the endpoint, or holds Connect until the test lets it
// go on.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "google/protobuf/wrappers.pb.h"
#include "transport/bootstrap.h"
#include "transport/rpc.h"
#include "transport/transport_test_util.h"

namespace sluice::transport {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kEcho = 1;

// Forwards to a real transport, which reports to this object; this object forwards to the
// endpoint. While `lose_next_connection` is set, Connect gives up the connection it made and
// returns it only once the endpoint has been told it is gone. While held, Connect waits.
class LosesConnectionsAsTheyOpen final : public ForwardingTransport {
 public:
  // Its real transport's shutdown may still report to OnDisconnect, which locks mu_.
  ~LosesConnectionsAsTheyOpen() override { DestroyInner(); }

  void LoseNextConnection() {
    absl::MutexLock lock(&mu_);
    lose_next_ = true;
  }
  void HoldConnects(bool hold) {
    absl::MutexLock lock(&mu_);
    held_ = hold;
  }
  int connects() {
    absl::MutexLock lock(&mu_);
    return connects_;
  }
  // Waits up to 20 s until `n` connects have reached the transport (a held one counts once
  // it waits); returns whether they did.
  bool WaitForConnects(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return connects_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), absl::Seconds(20));
  }

  // Transport
  absl::StatusOr<ConnectionId> ConnectBefore(const Address& peer, absl::Time before) override {
    {
      absl::MutexLock lock(&mu_);
      ++connects_;
      auto let_go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !held_; };
      if (!mu_.AwaitWithTimeout(absl::Condition(&let_go), absl::Seconds(60))) {
        return absl::DeadlineExceededError("the test never let the connect go on");
      }
    }
    absl::StatusOr<ConnectionId> id = inner().ConnectBefore(peer, before);
    if (!id.ok()) return id;
    {
      absl::MutexLock lock(&mu_);
      if (!std::exchange(lose_next_, false)) return id;
      losing_ = *id;
    }
    // Not under mu_: a transport may report the abort from within Abort.
    inner().Abort(*id, absl::UnavailableError("the peer died as it was reached"));
    absl::MutexLock lock(&mu_);
    auto told = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return losing_ == kNoConnection; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&told), absl::Seconds(10))) {
      return absl::DeadlineExceededError("the transport never reported the aborted connection");
    }
    return id;
  }

  // MessageHandler
  void OnDisconnect(ConnectionId connection, absl::Status why) override {
    ForwardingTransport::OnDisconnect(connection, std::move(why));
    absl::MutexLock lock(&mu_);
    if (connection == losing_) losing_ = kNoConnection;
  }

 private:
  absl::Mutex mu_;
  bool lose_next_ ABSL_GUARDED_BY(mu_) = false;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  int connects_ ABSL_GUARDED_BY(mu_) = 0;
  ConnectionId losing_ ABSL_GUARDED_BY(mu_) = kNoConnection;
};

// What background connects told their callbacks, and when; shared with the callbacks, as a
// failed test leaves before they run.
struct Outcomes {
  void Add(absl::StatusOr<ConnectionId> outcome) {
    absl::MutexLock lock(&mu);
    got.push_back(std::move(outcome));
    at.push_back(absl::Now());
  }
  absl::Mutex mu;
  std::vector<absl::StatusOr<ConnectionId>> got ABSL_GUARDED_BY(mu);
  std::vector<absl::Time> at ABSL_GUARDED_BY(mu);
};

struct Case {
  const char* name;
  const char* scheme;
  const char* setting;  // UCX_TLS, or the libfabric provider
};

class RpcConnectTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const bool ofi = std::string(GetParam().scheme) == "ofi";
#ifndef SLUICE_HAVE_LIBFABRIC
    if (ofi) GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
#endif
    RpcOptions& options = options_;
    options.scheme = GetParam().scheme;
    (ofi ? options.transport.ofi_provider : options.transport.ucx_tls) = GetParam().setting;
    auto server = RpcEndpoint::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->Handle(kEcho, [](std::shared_ptr<ServerCall> call) {
      call->Reply(absl::OkStatus(), absl::StrCat("echo:", call->request()));
    });
    // A payload above every transport's rendezvous threshold: its receive needs the two
    // sides' endpoints paired (UCX), which a duplicate connection closed at once broke.
    server_->Handle(kBig, [this](std::shared_ptr<ServerCall> call) {
      call->Reply(absl::OkStatus(), "big", Payload{big_.data(), big_.size()});
    });
    auto address = server_->Listen(Address{GetParam().scheme, "127.0.0.1", 0});
    ASSERT_TRUE(address.ok()) << address.status();
    address_ = *address;
    auto client = RpcEndpoint::CreateOver(options, [&](MessageHandler* endpoint) {
      return ForwardingTransport::Make(options, endpoint, &transport_);
    });
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  // A listening socket that takes connections into its backlog and never answers: a peer
  // behind a partition that drops what follows the TCP handshake. Open while *socket is.
  // Call under ASSERT_NO_FATAL_FAILURE.
  void SilentPeer(ScopedFd* socket, Address* address) {
    uint16_t port = 0;
    absl::StatusOr<ScopedFd> silent =
        ListenSocket(Address{GetParam().scheme, "127.0.0.1", 0}, &port);
    ASSERT_TRUE(silent.ok()) << silent.status();
    *socket = *std::move(silent);
    *address = Address{GetParam().scheme, "127.0.0.1", port};
  }

  static constexpr uint32_t kBig = 2;
  RpcOptions options_;
  const std::string big_ = std::string(1 << 18, 'b');
  std::unique_ptr<RpcEndpoint> server_;
  Address address_;
  LosesConnectionsAsTheyOpen* transport_ = nullptr;  // the client's
  std::unique_ptr<RpcEndpoint> client_;
};

TEST_P(RpcConnectTest, AConnectionReportedGoneBeforeItIsRecordedIsNotHandedOut) {
  transport_->LoseNextConnection();
  auto lost = client_->ConnectTo(address_);
  ASSERT_FALSE(lost.ok()) << "connection " << *lost << " was handed out after it was reported gone";
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kUnavailable) << lost.status();
  EXPECT_THAT(lost.status().message(), HasSubstr("closed as it opened"));
  EXPECT_THAT(lost.status().message(), HasSubstr("the peer died as it was reached"));

  // The next attempt connects afresh, and that connection works and is kept.
  auto again = client_->ConnectTo(address_);
  ASSERT_TRUE(again.ok()) << again.status();
  auto echo = client_->Call(*again, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.view(), "echo:after");
  auto kept = client_->ConnectTo(address_);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(*kept, *again);
}

// Threads that connect to one peer at once (a reader's first fetches from a worker) share
// one connection, made once; the others wait for it, and share its failure too.
TEST_P(RpcConnectTest, ThreadsConnectingAtOnceShareOneConnect) {
  constexpr int kThreads = 4;
  auto connect_at_once = [this] {
    std::vector<absl::StatusOr<ConnectionId>> got(kThreads);
    std::vector<std::thread> threads;
    transport_->HoldConnects(true);
    const int64_t waited_before = client_->connects_waited_for();
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] { got[i] = client_->ConnectTo(address_); });
    }
    // Let the connect go on once one thread makes it and the others wait for it.
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (client_->connects_waited_for() - waited_before < kThreads - 1 &&
           absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(client_->connects_waited_for() - waited_before, kThreads - 1);
    transport_->HoldConnects(false);
    for (std::thread& t : threads) t.join();
    return got;
  };

  transport_->LoseNextConnection();
  std::vector<absl::StatusOr<ConnectionId>> failed = connect_at_once();
  EXPECT_EQ(transport_->connects(), 1);
  for (const absl::StatusOr<ConnectionId>& connection : failed) {
    EXPECT_THAT(connection.status().message(), HasSubstr("closed as it opened"));
  }

  std::vector<absl::StatusOr<ConnectionId>> got = connect_at_once();
  EXPECT_EQ(transport_->connects(), 2) << "each thread made a connection of its own";
  for (const absl::StatusOr<ConnectionId>& connection : got) {
    ASSERT_TRUE(connection.ok()) << connection.status();
    EXPECT_EQ(*connection, *got[0]);
  }
  // Replies with rendezvous payloads, to calls from two threads at once, arrive.
  CallOptions options;
  options.timeout = absl::Seconds(10);
  for (int round = 0; round < 3; ++round) {
    absl::StatusOr<CallResult> other;
    std::thread caller([&] { other = client_->Call(*got[0], kBig, "", options); });
    absl::StatusOr<CallResult> mine = client_->Call(*got[0], kBig, "", options);
    caller.join();
    for (const absl::StatusOr<CallResult>* result : {&mine, &other}) {
      ASSERT_TRUE(result->ok()) << result->status();
      EXPECT_EQ((*result)->payload.size, big_.size());
    }
  }
}

// A connect asked for on the thread that drives the transport (a reader's next fetch, from
// the last reply's callback) while another thread connects to the same peer fails at once,
// to be retried: waiting there could deadlock, as UCX makes the endpoint on that thread.
TEST_P(RpcConnectTest, TheDrivingThreadDoesNotWaitForAnotherThreadsConnect) {
  auto other = RpcEndpoint::Create(options_);
  ASSERT_TRUE(other.ok()) << other.status();
  (*other)->Handle(
      kEcho, [](std::shared_ptr<ServerCall> call) { call->Reply(absl::OkStatus(), "other"); });
  auto other_address = (*other)->Listen(Address{GetParam().scheme, "127.0.0.1", 0});
  ASSERT_TRUE(other_address.ok()) << other_address.status();
  auto to_other = client_->ConnectTo(*other_address);
  ASSERT_TRUE(to_other.ok()) << to_other.status();

  transport_->HoldConnects(true);
  absl::StatusOr<ConnectionId> held;
  std::thread connecting([&] { held = client_->ConnectTo(address_); });
  // Until it is in the transport's Connect: the other server's connect was the first.
  if (!transport_->WaitForConnects(2)) {
    transport_->HoldConnects(false);
    connecting.join();
    FAIL() << "the held connect never started";
  }
  absl::Notification answered;
  absl::StatusOr<ConnectionId> from_callback;
  client_->CallAsync(*to_other, kEcho, "", {}, [&](absl::StatusOr<CallResult>) {
    from_callback = client_->ConnectTo(address_);
    answered.Notify();
  });
  if (!answered.WaitForNotificationWithTimeout(absl::Seconds(5))) {
    // It waits for the held connect, which once let go needs the very thread it blocks:
    // a deadlock, so stop here rather than hang.
    std::fprintf(stderr, "the reply callback waited for another thread's connect\n");
    std::abort();
  }
  transport_->HoldConnects(false);
  connecting.join();
  EXPECT_EQ(from_callback.status().code(), absl::StatusCode::kUnavailable)
      << from_callback.status();
  EXPECT_THAT(from_callback.status().message(), HasSubstr("connect is in progress"));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(transport_->connects(), 2);  // the other server's, and the held one
  auto after = client_->ConnectTo(address_);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(*after, *held);
}

// A peer that takes the TCP connection but never answers its hello (a stopped process, or
// a partition that drops what follows the handshake). A call's timeout bounds its connect:
// before, a worker's goodbye (2 s) to such a dispatcher waited out the transport's whole
// connect timeout first.
TEST_P(RpcConnectTest, ACallsTimeoutBoundsItsConnect) {
  ScopedFd silent;
  Address silent_peer;
  ASSERT_NO_FATAL_FAILURE(SilentPeer(&silent, &silent_peer));
  ASSERT_GE(options_.transport.connect_timeout, absl::Seconds(10));
  google::protobuf::StringValue request, response;
  const absl::Time start = absl::Now();
  const absl::Status status =
      client_->CallProto(silent_peer, kEcho, request, &response, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_LT(took, absl::Seconds(5)) << "the connect waited out the transport's connect timeout";

  // So does the deadline of a ConnectTo.
  const absl::Time second = absl::Now();
  absl::StatusOr<ConnectionId> connected =
      client_->ConnectTo(silent_peer, kNoConnection, second + absl::Milliseconds(300));
  EXPECT_EQ(connected.status().code(), absl::StatusCode::kDeadlineExceeded) << connected.status();
  EXPECT_LT(absl::Now() - second, absl::Seconds(5));
}

// A caller whose deadline passes while it waits for another thread's connect to the same
// peer gives up then, and the connect it waited for still completes for its own caller.
TEST_P(RpcConnectTest, AWaitForAnotherThreadsConnectEndsAtTheDeadline) {
  transport_->HoldConnects(true);
  absl::StatusOr<ConnectionId> held;
  std::thread connecting([&] { held = client_->ConnectTo(address_); });
  EXPECT_TRUE(transport_->WaitForConnects(1)) << "the first connect never reached the transport";
  const absl::Time start = absl::Now();
  absl::StatusOr<ConnectionId> impatient =
      client_->ConnectTo(address_, kNoConnection, start + absl::Milliseconds(200));
  const absl::Duration took = absl::Now() - start;
  transport_->HoldConnects(false);
  connecting.join();
  EXPECT_EQ(impatient.status().code(), absl::StatusCode::kDeadlineExceeded) << impatient.status();
  EXPECT_THAT(impatient.status().message(), HasSubstr("another thread connected"));
  EXPECT_LT(took, absl::Seconds(5)) << "it waited for the held connect";
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ(transport_->connects(), 1);
}

// A connect started under a short deadline (a 1 s goodbye) fails at it; a caller that
// waited for it with more time left (a 10 s heartbeat) connects again rather than fail
// with it.
TEST_P(RpcConnectTest, AWaiterWithTimeLeftDoesNotInheritAShorterDeadline) {
  ScopedFd silent;
  Address silent_peer;
  ASSERT_NO_FATAL_FAILURE(SilentPeer(&silent, &silent_peer));
  absl::StatusOr<ConnectionId> hasty;
  std::thread first([&] {
    hasty = client_->ConnectTo(silent_peer, kNoConnection, absl::Now() + absl::Milliseconds(300));
  });
  EXPECT_TRUE(transport_->WaitForConnects(1)) << "the first connect never reached the transport";
  const int64_t waited_before = client_->connects_waited_for();
  const absl::Time start = absl::Now();
  absl::StatusOr<ConnectionId> patient =
      client_->ConnectTo(silent_peer, kNoConnection, start + absl::Seconds(2));
  const absl::Duration took = absl::Now() - start;
  first.join();
  EXPECT_EQ(hasty.status().code(), absl::StatusCode::kDeadlineExceeded) << hasty.status();
  EXPECT_EQ(patient.status().code(), absl::StatusCode::kDeadlineExceeded) << patient.status();
  EXPECT_GE(took, absl::Milliseconds(1500)) << "it failed with the shorter deadline's connect";
  EXPECT_EQ(client_->connects_waited_for() - waited_before, 1) << "it did not wait for the first";
  EXPECT_EQ(transport_->connects(), 2);
}

// LiveConnection only looks: it makes no connection, and finds the one ConnectTo made.
TEST_P(RpcConnectTest, LiveConnectionNeverConnects) {
  EXPECT_EQ(client_->LiveConnection(address_), std::nullopt);
  EXPECT_EQ(transport_->connects(), 0);
  absl::StatusOr<ConnectionId> made = client_->ConnectTo(address_);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(client_->LiveConnection(address_), *made);
  EXPECT_EQ(client_->LiveConnection(address_, *made), *made);
  client_->Disconnect(*made, absl::UnavailableError("given up by the test"));
  EXPECT_EQ(client_->LiveConnection(address_, *made), std::nullopt);
  EXPECT_EQ(transport_->connects(), 1);
}

// A background connect to a peer that never answers returns to its caller at once, and
// reports the failure later, from another thread, when the connect timeout ends.
TEST_P(RpcConnectTest, ABackgroundConnectDoesNotBlockItsCaller) {
  ScopedFd silent;
  Address silent_peer;
  ASSERT_NO_FATAL_FAILURE(SilentPeer(&silent, &silent_peer));
  // Before the endpoint, whose destructor waits for the callback that writes them.
  absl::Notification reported;
  absl::StatusOr<ConnectionId> outcome;
  std::thread::id reported_on;
  RpcOptions options = options_;
  options.transport.connect_timeout = absl::Seconds(1);
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> impatient = RpcEndpoint::Create(options);
  ASSERT_TRUE(impatient.ok()) << impatient.status();
  const absl::Time start = absl::Now();
  (*impatient)->ConnectInBackground(silent_peer, [&](absl::StatusOr<ConnectionId> connected) {
    outcome = std::move(connected);
    reported_on = std::this_thread::get_id();
    reported.Notify();
  });
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(500)) << "the caller waited for the connect";
  ASSERT_TRUE(reported.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDeadlineExceeded) << outcome.status();
  EXPECT_NE(reported_on, std::this_thread::get_id());
}

// Destroying the endpoint ends a background connect to a peer that never answers at once
// (Transport::StopConnecting), telling its caller Cancelled, rather than wait for the
// connect timeout: a trainer's client with a worker behind a partition exits promptly.
TEST_P(RpcConnectTest, DestroyingTheEndpointEndsABackgroundConnectAtOnce) {
  ScopedFd silent;
  Address silent_peer;
  ASSERT_NO_FATAL_FAILURE(SilentPeer(&silent, &silent_peer));
  // Before the endpoint, whose destructor waits for the callback that writes them.
  absl::Notification reported;
  absl::StatusOr<ConnectionId> outcome;
  ASSERT_GE(options_.transport.connect_timeout, absl::Seconds(10));
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> leaving = RpcEndpoint::Create(options_);
  ASSERT_TRUE(leaving.ok()) << leaving.status();
  (*leaving)->ConnectInBackground(silent_peer, [&](absl::StatusOr<ConnectionId> connected) {
    outcome = std::move(connected);
    reported.Notify();
  });
  absl::SleepFor(absl::Milliseconds(200));  // the connect is under way: the socket is open
  EXPECT_FALSE(reported.HasBeenNotified()) << outcome.status();
  const absl::Time start = absl::Now();
  leaving->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(2)) << "it waited for the connect timeout";
  ASSERT_TRUE(reported.HasBeenNotified());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kCancelled) << outcome.status();
}

// Background connects to one peer, asked for while one is under way, share it: one
// connection, each caller told of it once.
TEST_P(RpcConnectTest, BackgroundConnectsToOnePeerShareOneConnect) {
  constexpr int kCallers = 3;
  transport_->HoldConnects(true);
  auto shared = std::make_shared<Outcomes>();
  absl::Mutex& mu = shared->mu;
  const int64_t waited_before = client_->connects_waited_for();
  for (int i = 0; i < kCallers; ++i) {
    client_->ConnectInBackground(address_, [shared](absl::StatusOr<ConnectionId> connected) {
      shared->Add(std::move(connected));
    });
  }
  EXPECT_TRUE(transport_->WaitForConnects(1)) << "the first connect never reached the transport";
  transport_->HoldConnects(false);
  ConnectionId connection = kNoConnection;
  {
    absl::MutexLock lock(&mu);
    std::vector<absl::StatusOr<ConnectionId>>& outcomes = shared->got;
    auto all_told = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      return outcomes.size() >= static_cast<size_t>(kCallers);
    };
    mu.AwaitWithTimeout(absl::Condition(&all_told), absl::Seconds(20));
    ASSERT_EQ(outcomes.size(), static_cast<size_t>(kCallers));
    for (const absl::StatusOr<ConnectionId>& outcome : outcomes) {
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      EXPECT_EQ(*outcome, *outcomes[0]);
    }
    connection = *outcomes[0];
  }
  EXPECT_EQ(transport_->connects(), 1);
  EXPECT_EQ(client_->connects_waited_for(), waited_before) << "a thread per caller connected";
  EXPECT_EQ(client_->LiveConnection(address_), connection);
}

// A caller that asks again from its callback after each failure (as a reader will) is
// answered after a pause, not in a tight loop against a peer that refuses at once. The
// endpoint's end tells the caller still waiting Cancelled, and does not wait for it.
TEST_P(RpcConnectTest, FailedBackgroundConnectsAreRetriedAfterAPause) {
  uint16_t port = 0;
  {
    absl::StatusOr<ScopedFd> taken =
        ListenSocket(Address{GetParam().scheme, "127.0.0.1", 0}, &port);
    ASSERT_TRUE(taken.ok()) << taken.status();
  }  // closed: connects to the port are refused
  const Address refusing{GetParam().scheme, "127.0.0.1", port};
  auto shared = std::make_shared<Outcomes>();
  absl::StatusOr<std::unique_ptr<RpcEndpoint>> endpoint = RpcEndpoint::Create(options_);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  RpcEndpoint* raw = endpoint->get();
  auto ask = std::make_shared<ConnectCallback>();
  *ask = [shared, raw, refusing,
          weak = std::weak_ptr<ConnectCallback>(ask)](absl::StatusOr<ConnectionId> connected) {
    const bool cancelled = absl::IsCancelled(connected.status());
    shared->Add(std::move(connected));
    if (cancelled) return;
    if (std::shared_ptr<ConnectCallback> again = weak.lock()) {
      raw->ConnectInBackground(refusing, *again);
    }
  };
  raw->ConnectInBackground(refusing, *ask);
  {
    absl::MutexLock lock(&shared->mu);
    auto four = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->got.size() >= 4; };
    ASSERT_TRUE(shared->mu.AwaitWithTimeout(absl::Condition(&four), absl::Seconds(20)));
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(shared->got[i].status().code(), absl::StatusCode::kUnavailable)
          << shared->got[i].status();
    }
    EXPECT_GE(shared->at[3] - shared->at[0], absl::Milliseconds(450))
        << "asked again in a tight loop";
  }
  const absl::Time closing = absl::Now();
  endpoint->reset();
  EXPECT_LT(absl::Now() - closing, absl::Seconds(5));
  absl::MutexLock lock(&shared->mu);
  EXPECT_EQ(shared->got.back().status().code(), absl::StatusCode::kCancelled)
      << shared->got.back().status();
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcConnectTest,
                         ::testing::Values(Case{"shm", "ucx", "posix,sysv,cma,self"},
                                           Case{"tcp", "ucx", "tcp,self"},
                                           Case{"ofi_tcp", "ofi", "tcp;ofi_rxm"}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace sluice::transport
