// UcxContext's choice of who watches for dead peers, on real UCX contexts of this machine.
#include "transport/ucx/ucx_handles.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace sluice::transport::ucx {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseContextTransportsTest, ReadsEachTransportOnceFromResourceLines) {
  constexpr absl::string_view kInfo =
      "#\n"
      "# UCP context\n"
      "#\n"
      "#     md 0  :  self\n"
      "#     md 1  :  tcp\n"
      "#      resource 0  :  md 0  dev 0  flags -- self/memory0\n"
      "#      resource 1  :  md 1  dev 1  flags -- tcp/lo\n"
      "#      resource 2  :  md 1  dev 2  flags -- tcp/eth0\n"
      "#      resource 3  :  md 2  dev 3  flags -- rc_mlx5/mlx5_0:1\n"
      "#   memory: 0.00MB, file descriptors: 2\n";
  EXPECT_THAT(ParseContextTransports(kInfo), ElementsAre("self", "tcp", "rc_mlx5"));
  EXPECT_TRUE(ParseContextTransports("no resources here\n").empty());
}

TEST(UcxContextTest, SharedMemoryAndSelfAreLeftToTheBootstrapSocket) {
  EXPECT_FALSE(UcxContext::NeedsUcxPeerFailure({"self", "posix", "sysv", "cma"}));
  // tcp needs UCX's watch: a dead tcp peer's failed endpoint is otherwise never purged.
  EXPECT_TRUE(UcxContext::NeedsUcxPeerFailure({"self", "tcp", "posix", "sysv", "cma"}));
  EXPECT_TRUE(UcxContext::NeedsUcxPeerFailure({"self", "tcp", "rc_mlx5"}));
  EXPECT_TRUE(UcxContext::NeedsUcxPeerFailure({"ud_verbs"}));
}

TEST(UcxContextTest, AutoOnTcpAsksUcxAndAnExplicitChoiceWins) {
  auto automatic = UcxContext::Create("tcp,self");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_THAT((*automatic)->transports(), Contains("tcp"));
  EXPECT_TRUE((*automatic)->ucx_peer_failure());

  auto shm = UcxContext::Create("posix,sysv,cma,self");
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_FALSE((*shm)->ucx_peer_failure());

  auto ucx = UcxContext::Create("posix,sysv,cma,self", UcxPeerFailure::kUcx);
  ASSERT_TRUE(ucx.ok()) << ucx.status();
  EXPECT_TRUE((*ucx)->ucx_peer_failure());

  auto socket = UcxContext::Create("all", UcxPeerFailure::kSocketOnly);
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_FALSE((*socket)->ucx_peer_failure());
  EXPECT_THAT((*socket)->transports(), Contains("self"));
}

TEST(UcxContextTest, EnvironmentDecidesAutoAndABadValueIsRefused) {
  setenv("SLUICE_UCX_PEER_FAILURE", "ucx", 1);
  auto from_env = UcxContext::Create("posix,sysv,cma,self");  // auto would pick the socket
  setenv("SLUICE_UCX_PEER_FAILURE", "sometimes", 1);
  auto bad = UcxContext::Create("tcp,self");
  auto explicit_choice = UcxContext::Create("tcp,self", UcxPeerFailure::kSocketOnly);
  unsetenv("SLUICE_UCX_PEER_FAILURE");

  ASSERT_TRUE(from_env.ok()) << from_env.status();
  EXPECT_TRUE((*from_env)->ucx_peer_failure());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("SLUICE_UCX_PEER_FAILURE=sometimes"));
  ASSERT_TRUE(explicit_choice.ok()) << explicit_choice.status();
  EXPECT_FALSE((*explicit_choice)->ucx_peer_failure());
}

}  // namespace
}  // namespace sluice::transport::ucx
