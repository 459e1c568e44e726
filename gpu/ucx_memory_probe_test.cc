// QueryUcxMemoryTypes on a real UCX context: host memory is always there, and the CUDA answer
// agrees with UcxSupportsCudaMemory and with the landing choice.
#include "gpu/ucx_memory_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

#include "gpu/device_landing.h"

namespace sluice::gpu {
namespace {

struct ContextCleanup {
  void operator()(ucp_context* c) const { ucp_cleanup(c); }
};
using ContextPtr = std::unique_ptr<ucp_context, ContextCleanup>;

ContextPtr MakeContext() {
  ucp_config_t* config = nullptr;
  if (ucp_config_read(nullptr, nullptr, &config) != UCS_OK) return nullptr;
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM;
  ucp_context_h context = nullptr;
  ucs_status_t status = ucp_init(&params, config, &context);
  ucp_config_release(config);
  return status == UCS_OK ? ContextPtr(context) : nullptr;
}

TEST(UcxMemoryProbeTest, NullContextIsAnError) {
  absl::StatusOr<UcxMemoryTypes> types = QueryUcxMemoryTypes(nullptr);
  EXPECT_EQ(types.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(UcxSupportsCudaMemory(nullptr));
}

TEST(UcxMemoryProbeTest, RealContextSupportsHostMemory) {
  ContextPtr context = MakeContext();
  ASSERT_NE(context, nullptr);
  absl::StatusOr<UcxMemoryTypes> types = QueryUcxMemoryTypes(context.get());
  ASSERT_TRUE(types.ok()) << types.status();
  EXPECT_TRUE(types->host());
  EXPECT_THAT(types->ToString(), ::testing::StartsWith("host"));
  EXPECT_EQ(types->cuda(), UcxSupportsCudaMemory(context.get()));
  EXPECT_EQ(types->cuda(), types->ToString().find("cuda") != std::string::npos);
  // Whatever UCX says, payloads stage through host memory until slabs can live on the device.
  EXPECT_EQ(ChooseDeviceLanding(UcxSupportsCudaMemory(context.get())),
            DeviceLanding::kStagedThroughPinnedHost);
}

TEST(UcxMemoryProbeTest, MaskBitsMapToTypes) {
  UcxMemoryTypes types{(uint64_t{1} << UCS_MEMORY_TYPE_HOST) |
                       (uint64_t{1} << UCS_MEMORY_TYPE_CUDA)};
  EXPECT_TRUE(types.host());
  EXPECT_TRUE(types.cuda());
  EXPECT_FALSE(types.cuda_managed());
  EXPECT_EQ(types.ToString(), "host,cuda");
}

}  // namespace
}  // namespace sluice::gpu
