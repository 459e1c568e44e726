#include "transport/slab_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace sluice::transport {
namespace {

class NullHandler : public MessageHandler {
  PayloadDestination ChoosePayloadDestination(ConnectionId, absl::string_view, size_t) override {
    return {};
  }
  void OnMessage(ConnectionId, absl::string_view, InboundPayload) override {}
  void OnDisconnect(ConnectionId, absl::Status) override {}
};

TEST(SlabPoolTest, HandsOutDistinctRegisteredSlabsAndTakesThemBack) {
  NullHandler handler;
  TransportOptions options;
  options.ucx_tls = "tcp,self";
  auto transport = CreateTransport("ucx", options, &handler);
  ASSERT_TRUE(transport.ok()) << transport.status();
  auto pool = SlabPool::Create(**transport, 10000, 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->slab_bytes() % 4096, 0u);
  EXPECT_GE((*pool)->slab_bytes(), 10000u);
  std::vector<Slab> taken;
  std::set<std::byte*> seen;
  for (int i = 0; i < 3; ++i) {
    auto slab = (*pool)->TryAcquire();
    ASSERT_TRUE(slab.has_value());
    EXPECT_TRUE((*pool)->region().Contains(slab->data(), slab->capacity()));
    seen.insert(slab->data());
    taken.push_back(std::move(*slab));
  }
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_FALSE((*pool)->Acquire(absl::Milliseconds(20)).has_value());
  taken.pop_back();
  EXPECT_EQ((*pool)->free_slabs(), 1u);
  EXPECT_TRUE((*pool)->TryAcquire().has_value());
}

TEST(SlabPoolTest, RejectsEmptyPools) {
  NullHandler handler;
  auto transport = CreateTransport("ucx", {}, &handler);
  ASSERT_TRUE(transport.ok());
  EXPECT_FALSE(SlabPool::Create(**transport, 0, 4).ok());
  EXPECT_FALSE(SlabPool::Create(**transport, 4096, 0).ok());
}

TEST(TransportFactoryTest, UnknownSchemeIsAnError) {
  NullHandler handler;
  auto t = CreateTransport("carrier-pigeon", {}, &handler);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::transport
