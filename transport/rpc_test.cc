// Real endpoints (two transport instances, each with its own context and progress thread)
// over shared memory and over TCP on loopback: UCX, and libfabric (ofi://) with the
// tcp;ofi_rxm and shm providers when the build has libfabric.
#include "transport/rpc.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string_view>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "transport/rpc_test_fixture.h"
#include "transport/slab_pool.h"

namespace sluice::transport {
namespace {

using ::testing::HasSubstr;

TEST_P(RpcTest, RequestResponseRoundTrip) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  for (int i = 0; i < 50; ++i) {
    auto result = client_->Call(*connection, kEcho, "hello " + std::to_string(i), {});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->response.view(), "echo:hello " + std::to_string(i));
    EXPECT_EQ(result->payload.size, 0u);
  }
}

TEST_P(RpcTest, BodyLargerThanHeaderLimitTravelsAsPayload) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  std::string big(client_->transport().max_header_size() * 3 + 17, 'x');
  big[5] = 'y';
  auto result = client_->Call(*connection, kEcho, big, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->response.view(), "echo:" + big);
}

// The largest body that still fits the header: a header-only message of the transport's
// whole header limit (UCX sends those as the active message's data, which must stay eager).
TEST_P(RpcTest, BodyAtTheHeaderLimitTravelsInTheHeader) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  constexpr size_t kFrameBytes = 24;  // rpc.cc's Frame
  constexpr size_t kEchoPrefix = 5;   // the reply adds "echo:"
  const size_t limit = client_->transport().max_header_size();
  for (size_t size : {limit - kFrameBytes - kEchoPrefix, limit - kFrameBytes}) {
    std::string body(size, 'h');
    body[size / 2] = 'z';
    auto result = client_->Call(*connection, kEcho, body, {});
    ASSERT_TRUE(result.ok()) << "body of " << size << " bytes: " << result.status();
    EXPECT_EQ(result->response.view(), "echo:" + body);
  }
}

// The same with UCX told to use rendezvous from 256 bytes: a header-only message must still
// go eagerly (its receiver reads the AM's data as the header), as a user's UCX_RNDV_THRESH
// must not turn control messages into ones that are silently dropped.
TEST_P(RpcTest, HeaderOnlyMessagesStayEagerUnderALowRendezvousThreshold) {
  if (std::string_view(GetParam().scheme) != "ucx") GTEST_SKIP() << "a UCX setting";
  setenv("UCX_RNDV_THRESH", "256", 1);
  auto server = RpcEndpoint::Create(options_);
  auto client = RpcEndpoint::Create(options_);
  unsetenv("UCX_RNDV_THRESH");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(client.ok()) << client.status();
  (*server)->Handle(kEcho, [](std::shared_ptr<ServerCall> call) {
    call->Reply(absl::OkStatus(), absl::StrCat("echo:", call->request()));
  });
  auto bound = (*server)->Listen(Address{"ucx", "127.0.0.1", 0});
  ASSERT_TRUE(bound.ok()) << bound.status();
  auto connection = (*client)->ConnectTo(*bound);
  ASSERT_TRUE(connection.ok()) << connection.status();
  const std::string body((*client)->transport().max_header_size() - 24 - 5, 'r');
  CallOptions options;
  options.timeout = absl::Seconds(5);
  auto result = (*client)->Call(*connection, kEcho, body, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->response.view(), "echo:" + body);
}

TEST_P(RpcTest, LargePayloadLandsInChosenRegisteredBufferWithoutCopy) {
  auto pool = SlabPool::Create(client_->transport(), 8 << 20, 2);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto slab = (*pool)->TryAcquire();
  ASSERT_TRUE(slab.has_value());
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  const size_t n = 4 << 20;
  uint64_t copied_before = client_->transport().stats().payload_bytes_copied;
  CallOptions options;
  options.landing = PayloadDestination{slab->data(), slab->capacity()};
  auto result = client_->Call(*connection, kBlob, std::to_string(n), options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->payload.data, slab->data());
  ASSERT_EQ(result->payload.size, n);
  EXPECT_EQ(result->payload.owned, nullptr);
  for (size_t i = 0; i < n; i += 4099) {
    ASSERT_EQ(static_cast<uint8_t>(slab->data()[i]), static_cast<uint8_t>(7 + i)) << i;
  }
  EXPECT_EQ(client_->transport().stats().payload_bytes_copied, copied_before);
}

TEST_P(RpcTest, PayloadLargerThanLandingBufferIsAnError) {
  std::vector<std::byte> small(1024);
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  CallOptions options;
  options.landing = PayloadDestination{small.data(), small.size()};
  auto result = client_->Call(*connection, kBlob, "100000", options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(result.status().message(), HasSubstr("does not fit"));
}

// A reply whose body cannot go with its payload (a header limit) is not sent; its caller is
// told so at once instead of waiting for its deadline, and so is the handler.
TEST_P(RpcTest, AReplyTooLongForItsPayloadFailsTheCallAtOnce) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok()) << connection.status();
  CallOptions patient;
  patient.timeout = absl::Seconds(60);
  const absl::Time start = absl::Now();
  auto result = client_->Call(*connection, kLongBodyAndPayload, "", patient);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "the caller waited for its deadline";
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr("cannot go with a data payload"));
  absl::MutexLock lock(&mu_);
  auto sent = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sent_.has_value(); };
  ASSERT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&sent), absl::Seconds(5)));
  EXPECT_EQ(sent_->code(), absl::StatusCode::kResourceExhausted);
}

TEST_P(RpcTest, UnknownMethodIsUnimplemented) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  auto result = client_->Call(*connection, 999, "", {});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(result.status().message(), HasSubstr("999"));
}

TEST_P(RpcTest, MissingReplyHitsDeadline) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  CallOptions options;
  options.timeout = absl::Milliseconds(200);
  auto start = std::chrono::steady_clock::now();
  auto result = client_->Call(*connection, kNoReply, "", options);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(elapsed, std::chrono::seconds(5));
}

TEST_P(RpcTest, UnreachablePeerFailsInsteadOfHanging) {
  Address nobody{GetParam().scheme, "127.0.0.1", 1};  // nothing listens on port 1
  CallOptions options;
  options.timeout = absl::Seconds(10);
  auto start = std::chrono::steady_clock::now();
  auto connection = client_->ConnectTo(nobody);
  absl::Status status = connection.status();
  if (connection.ok()) status = client_->Call(*connection, kEcho, "x", options).status();
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kDeadlineExceeded)
      << status;
  EXPECT_LT(elapsed, std::chrono::seconds(11));
}

// How an asynchronous call ended; held by its callback, which may run after a failed check
// left the test (the client's teardown ends what is pending).
struct Ended {
  absl::Notification done;
  absl::Status status;
};
CallCallback EndsInto(std::shared_ptr<Ended> ended) {
  return [ended](absl::StatusOr<CallResult> r) {
    ended->status = r.status();
    ended->done.Notify();
  };
}

TEST_P(RpcTest, PeerDeathFailsOutstandingCall) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(client_->Call(*connection, kEcho, "warm-up", {}).ok());
  CallOptions options;
  options.timeout = absl::Seconds(60);
  // Shared with the callback, which the client's teardown runs should the wait below fail.
  auto ended = std::make_shared<Ended>();
  client_->CallAsync(*connection, kNoReply, "", options, EndsInto(ended));
  // Wait until the server holds the call, then let the server die.
  WaitUntilTheServerHoldsACall();
  {
    absl::MutexLock lock(&mu_);
    parked_.clear();
  }
  server_.reset();
  ASSERT_TRUE(ended->done.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "peer failure was not reported";
  EXPECT_EQ(ended->status.code(), absl::StatusCode::kUnavailable) << ended->status;
}

// A peer behind a partition never closes anything; giving up on it must fail what is pending
// at once (not at the deadline) and leave the endpoint able to connect again.
TEST_P(RpcTest, DisconnectFailsPendingCallsAtOnceAndAllowsReconnecting) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  CallOptions options;
  options.timeout = absl::Seconds(60);
  auto ended = std::make_shared<Ended>();
  client_->CallAsync(*connection, kNoReply, "", options, EndsInto(ended));
  WaitUntilTheServerHoldsACall();
  const absl::Time start = absl::Now();
  client_->Disconnect(*connection, absl::UnavailableError("gave up on the peer"));
  ASSERT_TRUE(ended->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(ended->status.code(), absl::StatusCode::kUnavailable) << ended->status;
  EXPECT_THAT(ended->status.message(), HasSubstr("gave up on the peer"));

  auto again = client_->ConnectTo(address_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_NE(*again, *connection);
  auto echo = client_->Call(*again, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.view(), "echo:after");
}

// ConnectTo's `known` connection is taken while it is the live one, and not once it was
// given up (before the transport reported it gone, and after).
TEST_P(RpcTest, AKnownConnectionIsReusedUntilItIsGivenUp) {
  auto first = client_->ConnectTo(address_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto known = client_->ConnectTo(address_, *first);
  ASSERT_TRUE(known.ok()) << known.status();
  EXPECT_EQ(*known, *first);

  client_->Disconnect(*first, absl::UnavailableError("gave up on the peer"));
  auto second = client_->ConnectTo(address_, *first);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE(*second, *first) << "a given-up connection was handed out again";
  auto echo = client_->Call(*second, kEcho, "on the new one", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.view(), "echo:on the new one");
  // The new one is now the known one; the old one stays refused.
  auto again = client_->ConnectTo(address_, *second);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *second);
  auto old = client_->ConnectTo(address_, *first);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(*old, *second);
  // A known connection to another peer is not taken for this one.
  Address elsewhere = address_;
  elsewhere.port = static_cast<uint16_t>(address_.port == 1 ? 2 : 1);
  auto refused = client_->ConnectTo(elsewhere, *second);
  EXPECT_FALSE(refused.ok() && *refused == *second) << "connection to another peer returned";
}
// A reader that stops gives up its own calls at once; another group's calls on the same
// connection go on, and the replies of the cancelled ones, when they come, are dropped.
TEST_P(RpcTest, CancelGroupFailsThatGroupsCallsAtOnceAndNoOthers) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  int mine = 0;
  int other = 0;
  struct Outcome {
    absl::Notification done;
    std::atomic<int> callbacks{0};
    absl::StatusOr<CallResult> result;
  };
  // Shared with the callbacks, which the client's teardown runs should a check fail.
  auto cancelled_outcome = std::make_shared<Outcome>();
  auto kept_outcome = std::make_shared<Outcome>();
  Outcome& cancelled = *cancelled_outcome;
  Outcome& kept = *kept_outcome;
  auto call = [&](const void* group, std::shared_ptr<Outcome> outcome) {
    CallOptions options;
    options.timeout = absl::Seconds(60);
    options.group = group;
    client_->CallAsync(*connection, kNoReply, "", options, [outcome](absl::StatusOr<CallResult> r) {
      if (outcome->callbacks.fetch_add(1) > 0) return;
      outcome->result = std::move(r);
      outcome->done.Notify();
    });
  };
  call(&mine, cancelled_outcome);
  call(&other, kept_outcome);
  WaitUntilTheServerHoldsACall(2);

  const absl::Time start = absl::Now();
  client_->CancelGroup(&mine, absl::CancelledError("the reader stopped"));
  ASSERT_TRUE(cancelled.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(cancelled.result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(cancelled.result.status().message(), HasSubstr("the reader stopped"));
  EXPECT_FALSE(kept.done.HasBeenNotified());

  // The server answers both; only the call still pending hears of it.
  {
    absl::MutexLock lock(&mu_);
    for (auto& parked : parked_) parked->Reply(absl::OkStatus(), "late");
    parked_.clear();
  }
  ASSERT_TRUE(kept.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(kept.result.ok()) << kept.result.status();
  EXPECT_EQ(kept.result->response.view(), "late");
  auto echo = client_->Call(*connection, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(cancelled.callbacks.load(), 1);
  EXPECT_EQ(kept.callbacks.load(), 1);
}

// A reply to a call the client gave up on is dropped before its payload moves: the bytes
// of a whole batch need not cross, and no receive is left in flight. Before, the transport
// received it into a heap buffer only for the RPC layer to throw it away.
TEST_P(RpcTest, AGivenUpCallsReplyPayloadIsNotTransferred) {
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  int group = 0;
  auto given_up = std::make_shared<Ended>();
  CallOptions options;
  options.group = &group;
  client_->CallAsync(*connection, kNoReply, "", options, EndsInto(given_up));
  WaitUntilTheServerHoldsACall();
  client_->CancelGroup(&group, absl::CancelledError("given up"));
  ASSERT_TRUE(given_up->done.WaitForNotificationWithTimeout(absl::Seconds(10)));

  const uint64_t received_before = client_->transport().stats().payload_bytes_received;
  auto blob = std::make_shared<std::vector<uint8_t>>(4 << 20, uint8_t{1});
  auto sent = std::make_shared<absl::Notification>();
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(parked_.size(), 1u);
    parked_[0]->Reply(absl::OkStatus(), "late", Payload{blob->data(), blob->size()},
                      [blob, sent](absl::Status) { sent->Notify(); });
    parked_.clear();
  }
  ASSERT_TRUE(sent->WaitForNotificationWithTimeout(absl::Seconds(10)))
      << "the server's send never completed: its buffer would stay taken";
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       client_->transport().stats().payloads_discarded == 0 && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(client_->transport().stats().payloads_discarded, 1u);
  // The connection carries on.
  auto echo = client_->Call(*connection, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  auto more = client_->Call(*connection, kBlob, "100000", {});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(client_->transport().stats().payload_bytes_received, received_before + 100000);
}

// A server that replies twice (a handler's bug, or a hostile peer): the first reply's
// payload lands whole and ends the call. A second reply that came while it landed used to
// end the call at once (header only: with no payload, while the first still wrote into the
// buffer) or land in the same buffer at the same time (with a payload).
TEST_P(RpcTest, ASecondReplyWhileThePayloadLandsIsDropped) {
  auto pool = SlabPool::Create(client_->transport(), 8 << 20, 1);
  ASSERT_TRUE(pool.ok()) << pool.status();
  auto slab = (*pool)->TryAcquire();
  ASSERT_TRUE(slab.has_value());
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  struct Reply {
    absl::Notification done;
    absl::StatusOr<CallResult> result;
  };
  auto reply = std::make_shared<Reply>();
  CallOptions options;
  options.landing = PayloadDestination{slab->data(), slab->capacity()};
  client_->CallAsync(*connection, kNoReply, "", options, [reply](absl::StatusOr<CallResult> r) {
    reply->result = std::move(r);
    reply->done.Notify();
  });
  WaitUntilTheServerHoldsACall();
  constexpr size_t kBytes = 4 << 20;
  auto first = std::make_shared<std::vector<uint8_t>>(kBytes, uint8_t{1});
  auto second = std::make_shared<std::vector<uint8_t>>(kBytes, uint8_t{2});
  auto sends = std::make_shared<std::atomic<int>>(0);
  {
    absl::MutexLock lock(&mu_);
    ASSERT_EQ(parked_.size(), 1u);
    parked_[0]->Reply(absl::OkStatus(), "first", Payload{first->data(), first->size()},
                      [first, sends](absl::Status) { sends->fetch_add(1); });
    parked_[0]->Reply(absl::OkStatus(), "header only");
    parked_[0]->Reply(absl::OkStatus(), "second", Payload{second->data(), second->size()},
                      [second, sends](absl::Status) { sends->fetch_add(1); });
    parked_.clear();
  }
  ASSERT_TRUE(reply->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(reply->result.ok()) << reply->result.status();
  EXPECT_EQ(reply->result->response.view(), "first");
  ASSERT_EQ(reply->result->payload.size, kBytes);
  for (absl::Time deadline = absl::Now() + absl::Seconds(10);
       sends->load() < 2 && absl::Now() < deadline;) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(sends->load(), 2) << "a server's send never completed";
  absl::SleepFor(absl::Milliseconds(50));  // time for a stray write to land
  const auto* landed = reinterpret_cast<const uint8_t*>(slab->data());
  EXPECT_EQ(std::count(landed, landed + kBytes, uint8_t{1}), static_cast<int64_t>(kBytes))
      << "the second reply wrote into the first's buffer";
  // The connection carries on.
  auto echo = client_->Call(*connection, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
}

TEST_P(RpcTest, ClosingOneOfTwoConnectionsToAPeerKeepsTheOther) {
  // Both connections share the peer's transport address (one AV entry for libfabric).
  auto extra = client_->transport().Connect(address_);
  ASSERT_TRUE(extra.ok()) << extra.status();
  auto connection = client_->ConnectTo(address_);
  ASSERT_TRUE(connection.ok());
  ASSERT_TRUE(client_->Call(*connection, kEcho, "before", {}).ok());
  client_->transport().Close(*extra);
  // Long enough for both sides to retire the closed connection (ticks every 5 ms), and for
  // libfabric transports to drop its address after their grace (1 s).
  const bool ofi = std::string_view(GetParam().scheme) == "ofi";
  std::this_thread::sleep_for(std::chrono::milliseconds(ofi ? 1300 : 100));
  auto result = client_->Call(*connection, kBlob, "100000", {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->payload.size, 100000u);
  auto echo = client_->Call(*connection, kEcho, "after", {});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->response.view(), "echo:after");
}

TEST_P(RpcTest, PeerWithHigherRendezvousThresholdStillFitsOurBuffers) {
  // 40000 bytes are eager for this server but above the client's threshold.
  RpcOptions options = options_;
  options.transport.rendezvous_threshold = 64 * 1024;
  auto server = RpcEndpoint::Create(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto blob = std::make_shared<std::vector<uint8_t>>(40000);
  std::iota(blob->begin(), blob->end(), uint8_t{3});
  (*server)->Handle(kBlob, [blob](std::shared_ptr<ServerCall> call) {
    call->Reply(absl::OkStatus(), "blob", Payload{blob->data(), blob->size()},
                [blob](absl::Status) {});
  });
  auto bound = (*server)->Listen(Address{GetParam().scheme, "127.0.0.1", 0});
  ASSERT_TRUE(bound.ok()) << bound.status();
  auto connection = client_->ConnectTo(*bound);
  ASSERT_TRUE(connection.ok()) << connection.status();
  CallOptions call_options;
  call_options.timeout = absl::Seconds(10);
  auto result = client_->Call(*connection, kBlob, "", call_options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->payload.size, blob->size());
  EXPECT_EQ(std::memcmp(result->payload.data, blob->data(), blob->size()), 0);
}

// The one-line description names the library and who notices dead peers, as resolved.
TEST_P(RpcTest, DescribeNamesTheLibraryAndWhoNoticesDeadPeers) {
  const std::string described = client_->transport().Describe();
  if (std::string_view(GetParam().scheme) == "ofi") {
    EXPECT_THAT(described, HasSubstr("libfabric"));
    EXPECT_THAT(described, HasSubstr(GetParam().setting));
    return;
  }
  EXPECT_THAT(described, HasSubstr("UCX 1."));
  // UcxPeerFailure::kAuto asks UCX to watch tcp peers too; shared memory and self are left
  // to the bootstrap socket alone.
  if (GetParam().peer_failure == UcxPeerFailure::kUcx ||
      std::string_view(GetParam().setting).find("tcp") != std::string_view::npos) {
    EXPECT_THAT(described, HasSubstr("dead peers: UCX (peer mode)"));
  } else {
    EXPECT_THAT(described, HasSubstr("dead peers: bootstrap socket"));
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RpcTest, AllTransportCases(), TransportCaseName);

class NullHandler : public MessageHandler {
 public:
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override {}
};

TEST(OfiProviderTest, UnavailableProviderNamesItAndFiInfo) {
#ifndef SLUICE_HAVE_LIBFABRIC
  GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
#endif
  NullHandler handler;
  TransportOptions options;
  options.ofi_provider = "no-such-provider";
  auto transport = CreateTransport("ofi", options, &handler);
  ASSERT_FALSE(transport.ok());
  EXPECT_THAT(transport.status().message(), HasSubstr("'no-such-provider'"));
  EXPECT_THAT(transport.status().message(), HasSubstr("fi_info -l"));
}

TEST(OfiProviderTest, SocketsProviderIsRefusedEvenFromTheEnvironment) {
#ifndef SLUICE_HAVE_LIBFABRIC
  GTEST_SKIP() << "built without libfabric (libfabric-dev was not found at configure)";
#endif
  NullHandler handler;
  TransportOptions options;
  options.ofi_provider = "sockets";
  auto transport = CreateTransport("ofi", options, &handler);
  ASSERT_FALSE(transport.ok());
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(transport.status().message(), HasSubstr("'sockets'"));

  options.ofi_provider = "";
  setenv("SLUICE_OFI_PROVIDER", "sockets", 1);
  transport = CreateTransport("ofi", options, &handler);
  unsetenv("SLUICE_OFI_PROVIDER");
  ASSERT_FALSE(transport.ok());
  EXPECT_THAT(transport.status().message(), HasSubstr("'sockets'"));
}

TEST(AddressTest, ParsesAndFormats) {
  auto a = ParseAddress("ucx://10.0.0.2:5050");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "10.0.0.2");
  EXPECT_EQ(a->port, 5050);
  EXPECT_EQ(a->ToString(), "ucx://10.0.0.2:5050");
  auto v6 = ParseAddress("ucx://[::1]:7");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "ucx://[::1]:7");
  auto bare = ParseAddress("localhost:9");
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(bare->scheme, "ucx");
}

TEST(AddressTest, RejectsBadInput) {
  EXPECT_THAT(ParseAddress("http://x:1").status().message(), HasSubstr("unknown scheme"));
  EXPECT_THAT(ParseAddress("ucx://host").status().message(), HasSubstr("PORT"));
  EXPECT_THAT(ParseAddress("ucx://host:99999").status().message(), HasSubstr("0..65535"));
  EXPECT_THAT(ParseAddress("ucx://:5").status().message(), HasSubstr("empty host"));
}

}  // namespace
}  // namespace sluice::transport
