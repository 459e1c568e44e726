#include "control/serialized_bytes.h"

#include <string>

#include "control/service.pb.h"
#include "gtest/gtest.h"

namespace sluice::control {
namespace {

TEST(SerializeCachedTest, AShortMessageGoesOnTheStackALongOneOnTheHeap) {
  proto::GetElementRequest request;
  request.set_task_id(7);
  request.ByteSizeLong();
  char stack[64];
  std::string heap;
  absl::string_view bytes = SerializeCached(request, stack, heap);
  EXPECT_EQ(bytes.data(), stack);
  EXPECT_TRUE(heap.empty());
  EXPECT_EQ(std::string(bytes), request.SerializeAsString());

  for (int64_t i = 0; i < 100; ++i) request.add_acked_batch_indices(i * 1000);
  request.ByteSizeLong();
  bytes = SerializeCached(request, stack, heap);
  EXPECT_EQ(bytes.data(), heap.data());
  EXPECT_GT(bytes.size(), sizeof(stack));
  proto::GetElementRequest parsed;
  ASSERT_TRUE(parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  EXPECT_EQ(parsed.acked_batch_indices_size(), 100);
  EXPECT_EQ(parsed.acked_batch_indices(99), 99000);
}

}  // namespace
}  // namespace sluice::control
