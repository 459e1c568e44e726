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

TEST(ParseEndpointInfoTest, ReadsEachLaneTransportOnceAndTheProtocols) {
  constexpr absl::string_view kInfo =
      "#\n"
      "# UCP endpoint \n"
      "#               peer: <no debug data>\n"
      "#                 lane[0]:  3:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  4:posix/memory.0 md[3] -> md[3]/posix/sysdev[255]\n"
      "#                 lane[2]:  5:cma/memory.0 md[4]   -> md[4]/cma/sysdev[255] rma_bw#0\n"
      "#                 lane[3]:  6:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255]\n"
      "#                 am_send: 0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)\n";
  const EndpointInfo info = ParseEndpointInfo(kInfo);
  EXPECT_THAT(info.transports, ElementsAre("sysv", "posix", "cma"));
  EXPECT_EQ(info.am_send, "0..<egr/short>..93..<egr/bcopy>..8256..<rndv>..(inf)");
  EXPECT_THAT(
      ParseEndpointInfo("#  lane[0]:  1:tcp/lo.0 md[1] -> md[1]/tcp am wireup\n").transports,
      ElementsAre("tcp"));
  EXPECT_TRUE(ParseEndpointInfo("# UCP endpoint\n").transports.empty());
  EXPECT_TRUE(ParseEndpointInfo("# UCP endpoint\n").am_send.empty());
}

TEST(TlsMayIncludeTcpTest, ReadsListsExclusionsAndAll) {
  EXPECT_TRUE(TlsMayIncludeTcp("all"));
  EXPECT_TRUE(TlsMayIncludeTcp("tcp,self"));
  EXPECT_TRUE(TlsMayIncludeTcp("self, tcp"));
  EXPECT_TRUE(TlsMayIncludeTcp("^posix,sysv"));
  EXPECT_FALSE(TlsMayIncludeTcp("^tcp"));
  EXPECT_FALSE(TlsMayIncludeTcp("^sysv,tcp"));
  EXPECT_FALSE(TlsMayIncludeTcp("posix,sysv,cma,self"));
  EXPECT_FALSE(TlsMayIncludeTcp("shm,self"));
}

TEST(TlsMayIncludeTest, KnowsUcxsSharedMemoryAliases) {
  EXPECT_TRUE(TlsMayInclude("", "cma")) << "unset: UCX's default, all";
  EXPECT_TRUE(TlsMayInclude("sm,tcp", "cma"));
  EXPECT_TRUE(TlsMayInclude("shm", "posix"));
  EXPECT_TRUE(TlsMayInclude("mm,self", "sysv"));
  EXPECT_FALSE(TlsMayInclude("mm,self", "cma")) << "mm is the mapped transports only";
  EXPECT_TRUE(TlsMayInclude("^tcp", "cma"));
  EXPECT_FALSE(TlsMayInclude("^sm", "cma"));
  EXPECT_FALSE(TlsMayInclude("posix,sysv,tcp,self", "cma"));
  EXPECT_TRUE(TlsMayInclude("posix,sysv,cma,self", "cma"));
}

TEST(UcxContextTest, AutomaticWatchFollowsTheTransports) {
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "posix", "sysv", "cma"}), PeerWatch::kSocket);
  // tcp needs UCX's watch (a dead tcp peer's failed endpoint is otherwise never purged),
  // but same-host peers, which UCX reaches over shared memory, are left to the socket.
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "tcp", "posix", "sysv", "cma"}),
            PeerWatch::kSocketForLocalPeers);
  EXPECT_EQ(UcxContext::ChooseAutomatically({"tcp", "sysv", "xpmem"}),
            PeerWatch::kSocketForLocalPeers);
  // Without a single-copy transport UCX carries a same-host peer's large messages over tcp.
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "tcp", "posix", "sysv"}), PeerWatch::kUcx);
  // Without posix or sysv a same-host peer's messages would go over tcp.
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "tcp", "cma"}), PeerWatch::kUcx);
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "tcp"}), PeerWatch::kUcx);
  EXPECT_EQ(UcxContext::ChooseAutomatically({"self", "tcp", "posix", "rc_mlx5"}), PeerWatch::kUcx);
  EXPECT_EQ(UcxContext::ChooseAutomatically({"ud_verbs"}), PeerWatch::kUcx);
  EXPECT_EQ(UcxContext::ChooseAutomatically({}), PeerWatch::kUcx);
}

TEST(UcxContextTest, SameHostPeersUseTcpOnlyWithoutASingleCopyTransport) {
  EXPECT_TRUE(UcxContext::SameHostPeersUseTcp({"self", "tcp", "sysv", "posix"}));
  EXPECT_TRUE(UcxContext::SameHostPeersUseTcp({"tcp", "posix"}));
  EXPECT_FALSE(UcxContext::SameHostPeersUseTcp({"self", "tcp", "sysv", "posix", "cma"}));
  EXPECT_FALSE(UcxContext::SameHostPeersUseTcp({"tcp", "posix", "knem"}));
  EXPECT_FALSE(UcxContext::SameHostPeersUseTcp({"self", "sysv", "posix"})) << "no tcp";
  EXPECT_FALSE(UcxContext::SameHostPeersUseTcp({"self", "tcp"})) << "no shared memory";
}

TEST(UcxContextTest, OnlySharedMemoryAndSelfNeedNoUcxWatch) {
  EXPECT_TRUE(UcxContext::SharedMemoryOnly({"self", "posix", "sysv", "cma", "knem", "xpmem"}));
  EXPECT_TRUE(UcxContext::SharedMemoryOnly({"cma"}));
  EXPECT_FALSE(UcxContext::SharedMemoryOnly({"posix", "tcp"}));
  EXPECT_FALSE(UcxContext::SharedMemoryOnly({"rc_mlx5"}));
  EXPECT_FALSE(UcxContext::SharedMemoryOnly({}));
}

TEST(UcxContextTest, AutoFollowsTheOpenedTransportsAndAnExplicitChoiceWins) {
  auto automatic = UcxContext::Create("tcp,self");
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_THAT((*automatic)->transports(), Contains("tcp"));
  EXPECT_EQ((*automatic)->peer_watch(), PeerWatch::kUcx);

  auto mixed = UcxContext::Create("tcp,posix,sysv,cma,self");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  EXPECT_EQ((*mixed)->peer_watch(), PeerWatch::kSocketForLocalPeers);
  auto mixed_ucx = UcxContext::Create("tcp,posix,sysv,cma,self", UcxPeerFailure::kUcx);
  ASSERT_TRUE(mixed_ucx.ok()) << mixed_ucx.status();
  EXPECT_EQ((*mixed_ucx)->peer_watch(), PeerWatch::kUcx);

  auto shm = UcxContext::Create("posix,sysv,cma,self");
  ASSERT_TRUE(shm.ok()) << shm.status();
  EXPECT_EQ((*shm)->peer_watch(), PeerWatch::kSocket);

  auto ucx = UcxContext::Create("posix,sysv,cma,self", UcxPeerFailure::kUcx);
  ASSERT_TRUE(ucx.ok()) << ucx.status();
  EXPECT_EQ((*ucx)->peer_watch(), PeerWatch::kUcx);

  auto socket = UcxContext::Create("all", UcxPeerFailure::kSocketOnly);
  ASSERT_TRUE(socket.ok()) << socket.status();
  EXPECT_EQ((*socket)->peer_watch(), PeerWatch::kSocket);
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
  EXPECT_EQ((*from_env)->peer_watch(), PeerWatch::kUcx);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("SLUICE_UCX_PEER_FAILURE=sometimes"));
  ASSERT_TRUE(explicit_choice.ok()) << explicit_choice.status();
  EXPECT_EQ((*explicit_choice)->peer_watch(), PeerWatch::kSocket);
}

}  // namespace
}  // namespace sluice::transport::ucx
