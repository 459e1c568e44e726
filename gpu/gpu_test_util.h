// Helpers shared by the gpu/ tests (not part of the library).
//
//   TEST(X, NeedsADevice) {
//     SLUICE_SKIP_WITHOUT_GPU();
//     ...
//   }
//   ExpectNoGpuError(DeviceBuffer::Allocate(0, 64).status(), "DeviceBuffer::Allocate");
//   std::vector<std::byte> bytes = RandomEncodedBatch(rng, /*rows=*/100);
#ifndef SLUICE_GPU_GPU_TEST_UTIL_H_
#define SLUICE_GPU_GPU_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/batch_layout.h"
#include "engine/tensor.h"
#include "gpu/cuda_probe.h"

#define SLUICE_SKIP_WITHOUT_GPU()                                             \
  do {                                                                        \
    if (!::sluice::gpu::ProbeCuda().available) {                              \
      GTEST_SKIP() << "no usable GPU: " << ::sluice::gpu::ProbeCuda().reason; \
    }                                                                         \
  } while (false)

namespace sluice::gpu::testing {

// `status` is the error of something that needs a GPU, on a machine without one: it must be
// FailedPrecondition, name `who` and carry ProbeCuda()'s reason.
inline void ExpectNoGpuError(const absl::Status& status, const std::string& who) {
  ASSERT_FALSE(ProbeCuda().available) << "only meaningful without a GPU";
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  std::string message(status.message());
  EXPECT_NE(message.find(who + " needs a CUDA device"), std::string::npos) << message;
  EXPECT_NE(message.find(ProbeCuda().reason), std::string::npos) << message;
}

// Random bytes, e.g. to copy through the engine.
inline std::vector<std::byte> RandomBytes(std::mt19937_64& rng, size_t n) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(rng() & 0xff);
  return out;
}

// An encoded batch (engine/batch_layout.h) of `rows` rows: int64 ids, float32 [rows, 3]
// features with random values, and one string per row, so tensors sit at several offsets.
inline std::vector<std::byte> RandomEncodedBatch(std::mt19937_64& rng, int64_t rows) {
  std::vector<int64_t> ids(rows);
  std::vector<float> features(rows * 3);
  std::vector<std::string> names(rows);
  for (int64_t i = 0; i < rows; ++i) {
    ids[i] = static_cast<int64_t>(rng());
    for (int j = 0; j < 3; ++j) {
      features[i * 3 + j] = std::uniform_real_distribution<float>(-1, 1)(rng);
    }
    names[i] = std::string(rng() % 17, static_cast<char>('a' + rng() % 26));
  }
  engine::Element batch = {engine::Tensor::FromVector<int64_t>({rows}, ids),
                           engine::Tensor::FromVector<float>({rows, 3}, features),
                           engine::Tensor::FromStrings({rows}, names)};
  std::vector<std::byte> out(engine::EncodedBatchSize(batch));
  absl::StatusOr<size_t> n = engine::EncodeBatch(batch, out);
  EXPECT_TRUE(n.ok()) << n.status();
  out.resize(n.ok() ? *n : 0);
  return out;
}

}  // namespace sluice::gpu::testing

#endif  // SLUICE_GPU_GPU_TEST_UTIL_H_
