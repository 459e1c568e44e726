// Closed shm endpoints stay mapped while another shm endpoint of the process is open, for a
// bounded time, and all of them go, files included, once the last one closes: through real
// shm transports that talk to each other in this process, as rpc_test's shm cases do.
#include "transport/ofi/shm_endpoint_keeper.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "transport/ofi/shm_names.h"
#include "transport/rpc.h"

namespace sluice::transport::ofi {
namespace {

constexpr uint32_t kEcho = 1;
constexpr uint32_t kBlob = 2;

// This process's region files in /dev/shm.
int OwnShmFiles() {
  const std::string prefix = absl::StrCat(kShmNamePrefix, getpid(), "_");
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    if (absl::StartsWith(entry.path().filename().string(), prefix)) ++count;
  }
  return count;
}

RpcOptions ShmOptions() {
  RpcOptions options;
  options.scheme = "ofi";
  options.transport.ofi_provider = "shm";
  return options;
}

std::unique_ptr<RpcEndpoint> StartServer(Address* address) {
  auto server = RpcEndpoint::Create(ShmOptions());
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  (*server)->Handle(kEcho, [](std::shared_ptr<ServerCall> call) {
    call->Reply(absl::OkStatus(), absl::StrCat("echo:", call->request()));
  });
  // Replies whose payload the client reads from the server (rendezvous), so the server holds
  // responses of the client in its queue when the client closes.
  (*server)->Handle(kBlob, [](std::shared_ptr<ServerCall> call) {
    size_t n = 0;
    if (!absl::SimpleAtoi(call->request(), &n)) n = 1;
    auto blob = std::make_shared<std::vector<uint8_t>>(n);
    std::iota(blob->begin(), blob->end(), uint8_t{3});
    call->Reply(absl::OkStatus(), "blob", Payload{blob->data(), blob->size()},
                [blob](absl::Status) {});
  });
  auto bound = (*server)->Listen(Address{"ofi", "127.0.0.1", 0});
  EXPECT_TRUE(bound.ok()) << bound.status();
  if (!bound.ok()) return nullptr;
  *address = *bound;
  return std::move(*server);
}

// Clients that call and close at once, while the server goes on: each closed client's region
// stays (parked) until the server closes, the server keeps answering, and nothing is left.
TEST(ShmEndpointKeeperTest, ClientsComeAndGoWhileTheServerServes) {
  ASSERT_EQ(ShmEndpointKeeper::parked(), 0u);
  const int files_before = OwnShmFiles();
  // Every client stays parked however slow the machine (48 rounds took 1 s of the 10 s
  // lifetime unloaded).
  ShmEndpointKeeper::SetParkedLifetimeForTesting(absl::Hours(1));
  Address address;
  std::unique_ptr<RpcEndpoint> server = StartServer(&address);
  ASSERT_NE(server, nullptr);
  constexpr int kClients = 48;
  for (int round = 0; round < kClients; ++round) {
    auto client = RpcEndpoint::Create(ShmOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    auto connection = (*client)->ConnectTo(address);
    ASSERT_TRUE(connection.ok()) << connection.status();
    for (size_t size : {size_t{100}, size_t{1} << 16, (size_t{1} << 20) + 7}) {
      auto result = (*client)->Call(*connection, kBlob, std::to_string(size), {});
      ASSERT_TRUE(result.ok()) << "round " << round << ": " << result.status();
      ASSERT_EQ(result->payload.size, size);
      EXPECT_EQ(static_cast<uint8_t>(result->payload.data[size - 1]),
                static_cast<uint8_t>(3 + (size - 1) % 256));
    }
    // Echoes of a few KiB travel by the provider's inject and segmented protocols, whose messages
    // the receiver answers into the sender's response queue.
    for (size_t size : {size_t{600}, size_t{4000}, size_t{8000}}) {
      auto result = (*client)->Call(*connection, kEcho, std::string(size, 'e'), {});
      ASSERT_TRUE(result.ok()) << "round " << round << ": " << result.status();
      ASSERT_EQ(result->response.size(), size + 5);
    }
    client->reset();  // closes right after its last reply, with the server still running
    EXPECT_EQ(ShmEndpointKeeper::parked(), static_cast<size_t>(round + 1));
  }
  // The server still answers, a new client included.
  auto late = RpcEndpoint::Create(ShmOptions());
  ASSERT_TRUE(late.ok()) << late.status();
  auto connection = (*late)->ConnectTo(address);
  ASSERT_TRUE(connection.ok()) << connection.status();
  auto echoed = (*late)->Call(*connection, kEcho, "still here", {});
  ASSERT_TRUE(echoed.ok()) << echoed.status();
  EXPECT_EQ(echoed->response.view(), "echo:still here");
  EXPECT_EQ(OwnShmFiles(), files_before + kClients + 2);  // parked clients, server, late

  late->reset();
  server.reset();
  EXPECT_EQ(ShmEndpointKeeper::parked(), 0u);
  EXPECT_EQ(OwnShmFiles(), files_before);
  ShmEndpointKeeper::SetParkedLifetimeForTesting(ShmEndpointKeeper::kParkedLifetime);
}

// A parked endpoint goes once parked longer than the lifetime, while the server still lives:
// memory stays bounded in a process whose one shm transport outlives many others.
TEST(ShmEndpointKeeperTest, ParkedEndpointsGoAfterTheirLifetime) {
  ASSERT_EQ(ShmEndpointKeeper::parked(), 0u);
  const int files_before = OwnShmFiles();
  // Longer than the transports' address grace (1 s), as kParkedLifetime is.
  ShmEndpointKeeper::SetParkedLifetimeForTesting(absl::Milliseconds(1200));
  Address address;
  std::unique_ptr<RpcEndpoint> server = StartServer(&address);
  ASSERT_NE(server, nullptr);
  for (int round = 0; round < 2; ++round) {
    auto client = RpcEndpoint::Create(ShmOptions());
    ASSERT_TRUE(client.ok()) << client.status();
    auto connection = (*client)->ConnectTo(address);
    ASSERT_TRUE(connection.ok()) << connection.status();
    auto result = (*client)->Call(*connection, kEcho, std::string(4000, 'e'), {});
    ASSERT_TRUE(result.ok()) << result.status();
    client->reset();
    // Only this round's client is parked: the earlier ones outlived the lifetime.
    EXPECT_EQ(ShmEndpointKeeper::parked(), 1u) << "round " << round;
    EXPECT_EQ(OwnShmFiles(), files_before + 2) << "round " << round;  // server + parked
    absl::SleepFor(absl::Milliseconds(1300));
  }
  auto echoed = RpcEndpoint::Create(ShmOptions());
  ASSERT_TRUE(echoed.ok());
  auto connection = (*echoed)->ConnectTo(address);
  ASSERT_TRUE(connection.ok()) << connection.status();
  EXPECT_TRUE((*echoed)->Call(*connection, kEcho, "still here", {}).ok());
  echoed->reset();
  server.reset();
  ShmEndpointKeeper::SetParkedLifetimeForTesting(ShmEndpointKeeper::kParkedLifetime);
  EXPECT_EQ(ShmEndpointKeeper::parked(), 0u);
  EXPECT_EQ(OwnShmFiles(), files_before);
}

}  // namespace
}  // namespace sluice::transport::ofi
