#include "engine/batch_layout.h"

#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A zeroed, 64-byte aligned buffer, like a registered receive slab.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t size)
      : size_(size), data_(static_cast<std::byte*>(::operator new[](size, std::align_val_t{64}))) {
    std::memset(data_.get(), 0, size);
  }
  std::span<std::byte> span() { return {data_.get(), size_}; }
  std::byte* data() { return data_.get(); }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  size_t size_;
  std::unique_ptr<std::byte[], Free> data_;
};

Element SampleBatch() {
  std::vector<float> f32(2 * 2 * 1 * 1 * 1 * 1 * 1 * 2);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.5f * static_cast<float>(i);
  return {
      Tensor::FromVector<int32_t>({2, 3}, std::vector<int32_t>{1, -2, 3, -4, 5, -6}),
      Tensor::Scalar<double>(3.25),
      Tensor::FromVector<uint8_t>({5}, std::vector<uint8_t>{1, 2, 3, 4, 255}),
      Tensor::FromVector<int64_t>({0, 4}, std::vector<int64_t>{}),
      Tensor::FromVector<float>({2, 2, 1, 1, 1, 1, 1, 2}, f32),
      Tensor::FromVector<int64_t>({3}, std::vector<int64_t>{INT64_MIN, 0, INT64_MAX}),
      Tensor::FromStrings({2, 2}, std::vector<std::string>{"alpha", "", std::string("\0\xff", 2),
                                                           "a longer string of bytes"}),
  };
}

template <typename T>
T Read(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

TEST(BatchLayoutTest, RoundTripsDtypesAndShapesWithAlignedData) {
  const Element batch = SampleBatch();
  const size_t size = EncodedBatchSize(batch);
  AlignedBuffer buf(size);
  absl::StatusOr<size_t> written = EncodeBatch(batch, buf.span());
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(*written, size);

  absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ(view->num_tensors(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    TensorView t = view->tensor(i);
    EXPECT_EQ(t.dtype, batch[i].dtype()) << i;
    EXPECT_THAT(std::vector<int64_t>(t.shape.begin(), t.shape.end()),
                ::testing::ElementsAreArray(batch[i].shape()));
    EXPECT_EQ(t.nbytes, batch[i].byte_size());
    EXPECT_EQ(t.num_elements(), batch[i].num_elements());
    EXPECT_EQ((t.data - buf.data()) % 64, 0) << "tensor " << i << " is not 64-aligned";
    EXPECT_GE(t.data, buf.data() + Read<uint32_t>(buf.data() + 12));  // After the header.
  }
  EXPECT_THAT(view->tensor(0).values<int32_t>(), ElementsAre(1, -2, 3, -4, 5, -6));
  EXPECT_THAT(view->tensor(1).values<double>(), ElementsAre(3.25));
  EXPECT_THAT(view->tensor(2).values<uint8_t>(), ElementsAre(1, 2, 3, 4, 255));
  EXPECT_TRUE(view->tensor(3).values<int64_t>().empty());
  EXPECT_THAT(view->tensor(5).values<int64_t>(), ElementsAre(INT64_MIN, 0, INT64_MAX));
  EXPECT_EQ(view->tensor(6).string_value(0), "alpha");
  EXPECT_EQ(view->tensor(6).string_value(1), "");
  EXPECT_EQ(view->tensor(6).string_value(2), std::string("\0\xff", 2));
  EXPECT_EQ(view->tensor(6).string_value(3), "a longer string of bytes");
  EXPECT_EQ(view->ToElement(), batch);
}

TEST(BatchLayoutTest, HeaderFieldsAreAtTheDocumentedOffsets) {
  const Element batch = {Tensor::FromVector<float>({2, 3}, std::vector<float>(6, 1.0f)),
                         Tensor::Scalar<uint8_t>(9)};
  AlignedBuffer buf(EncodedBatchSize(batch));
  std::memset(buf.data(), 0xab, buf.span().size());  // Gaps must be zeroed by the encoder.
  ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
  const std::byte* p = buf.data();
  EXPECT_EQ(std::memcmp(p, "SLB1", 4), 0);
  EXPECT_EQ(Read<uint32_t>(p + 4), 2u);
  EXPECT_EQ(Read<uint32_t>(p + 8), 2u);
  const uint32_t header_bytes = 24 + (24 + 2 * 8) + 24;  // 88
  EXPECT_EQ(Read<uint32_t>(p + 12), header_bytes);
  // Tensor 0's data at align64(88) = 128 (24 bytes), tensor 1's at 192 (1 byte).
  EXPECT_EQ(Read<uint64_t>(p + 16), 193u);
  EXPECT_EQ(Read<uint8_t>(p + 24), static_cast<uint8_t>(DType::kFloat32));
  EXPECT_EQ(Read<uint8_t>(p + 25), 2u);
  EXPECT_EQ(Read<uint64_t>(p + 32), 128u);
  EXPECT_EQ(Read<uint64_t>(p + 40), 24u);
  EXPECT_EQ(Read<int64_t>(p + 48), 2);
  EXPECT_EQ(Read<int64_t>(p + 56), 3);
  EXPECT_EQ(Read<uint8_t>(p + 64), static_cast<uint8_t>(DType::kUInt8));
  EXPECT_EQ(Read<uint8_t>(p + 65), 0u);
  EXPECT_EQ(Read<uint64_t>(p + 72), 192u);
  EXPECT_EQ(Read<uint64_t>(p + 80), 1u);
  EXPECT_EQ(Read<float>(p + 128), 1.0f);
  EXPECT_EQ(Read<uint8_t>(p + 192), 9u);
  for (size_t gap = 152; gap < 192; ++gap) EXPECT_EQ(Read<uint8_t>(p + gap), 0u) << gap;
}

TEST(BatchLayoutTest, StringTensorIsOffsetsThenBytes) {
  const Element batch = {Tensor::FromStrings({3}, std::vector<std::string>{"ab", "", "cde"})};
  AlignedBuffer buf(EncodedBatchSize(batch));
  ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
  const std::byte* p = buf.data();
  EXPECT_EQ(Read<uint8_t>(p + 24), 6u);           // dtype string
  EXPECT_EQ(Read<uint64_t>(p + 32), 64u);         // data offset: align64(24 + 24 + 8)
  EXPECT_EQ(Read<uint64_t>(p + 40), 4u * 8 + 5);  // 4 offsets + 5 bytes
  EXPECT_EQ(Read<uint64_t>(p + 64), 0u);
  EXPECT_EQ(Read<uint64_t>(p + 72), 2u);
  EXPECT_EQ(Read<uint64_t>(p + 80), 2u);
  EXPECT_EQ(Read<uint64_t>(p + 88), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(p) + 96, 5), "abcde");
  EXPECT_EQ(Read<uint64_t>(p + 16), 101u);  // total_bytes
}

TEST(BatchLayoutTest, Version1BuffersStillParseButCannotHoldStrings) {
  const Element numeric = {Tensor::FromVector<int32_t>({2}, std::vector<int32_t>{4, 5})};
  AlignedBuffer buf(EncodedBatchSize(numeric));
  ASSERT_TRUE(EncodeBatch(numeric, buf.span()).ok());
  const uint32_t v1 = 1;
  std::memcpy(buf.data() + 4, &v1, 4);
  absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_THAT(view->tensor(0).values<int32_t>(), ElementsAre(4, 5));

  const Element strings = {Tensor::StringScalar("x")};
  AlignedBuffer sbuf(EncodedBatchSize(strings));
  ASSERT_TRUE(EncodeBatch(strings, sbuf.span()).ok());
  std::memcpy(sbuf.data() + 4, &v1, 4);
  EXPECT_EQ(BatchView::Parse(sbuf.span()).status().message(),
            "corrupt batch buffer: tensor 0: expected a dtype in [1, 5] for version 1, got 6");
}

TEST(BatchLayoutTest, CorruptStringOffsetsAreRejected) {
  const Element batch = {Tensor::FromStrings({2}, std::vector<std::string>{"ab", "cd"})};
  const size_t size = EncodedBatchSize(batch);
  struct Case {
    size_t offset;
    uint64_t value;
    std::string message;
  };
  // Descriptor at 24 (nbytes at 40), data at 64: offsets at 64, 72, 80, bytes at 88.
  const std::vector<Case> cases = {
      {72, 5, "corrupt batch buffer: tensor 0: expected string offset 1 in [0, 4], got 5"},
      {80, 1, "corrupt batch buffer: tensor 0: expected string offset 2 in [2, 4], got 1"},
      {80, 3,
       "corrupt batch buffer: tensor 0: expected the last string offset to be 4 (the byte region "
       "size), got 3"},
      {64, 1, "corrupt batch buffer: tensor 0: expected string offset 0 in [0, 0], got 1"},
      {40, 8,
       "corrupt batch buffer: tensor 0: expected nbytes >= 8 x (2 strings + 1) for the offsets "
       "table, got 8"},
  };
  for (const Case& c : cases) {
    AlignedBuffer buf(size);
    ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
    std::memcpy(buf.data() + c.offset, &c.value, 8);
    absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument) << c.offset;
    EXPECT_EQ(view.status().message(), c.message) << c.offset;
  }
}

TEST(BatchLayoutTest, EmptyBatchIsJustTheHeader) {
  AlignedBuffer buf(EncodedBatchSize({}));
  EXPECT_EQ(EncodedBatchSize({}), 24u);
  ASSERT_TRUE(EncodeBatch({}, buf.span()).ok());
  absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->num_tensors(), 0u);
}

TEST(BatchLayoutTest, EncodeReportsShortDestinationsAndUnencodableRanks) {
  const Element batch = SampleBatch();
  const size_t size = EncodedBatchSize(batch);
  AlignedBuffer buf(size);
  absl::StatusOr<size_t> small = EncodeBatch(batch, buf.span().first(size - 1));
  EXPECT_EQ(small.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(small.status().message(),
            absl::StrCat("batch needs ", size, " bytes but the destination holds ", size - 1));

  Element rank9 = {
      Tensor::FromVector<uint8_t>({1, 1, 1, 1, 1, 1, 1, 1, 1}, std::vector<uint8_t>{7})};
  absl::StatusOr<size_t> deep = EncodeBatch(rank9, buf.span());
  EXPECT_EQ(deep.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(deep.status().message(), "tensor 0 has rank 9; at most 8 is encodable");
}

TEST(BatchLayoutTest, LongerBuffersParseToTheEncodedBytes) {
  const Element batch = SampleBatch();
  const size_t size = EncodedBatchSize(batch);
  AlignedBuffer buf(size + 100);
  ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
  absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(view->bytes().size(), size);
}

TEST(BatchLayoutTest, EveryTruncationIsRejected) {
  const Element batch = SampleBatch();
  const size_t size = EncodedBatchSize(batch);
  AlignedBuffer buf(size);
  ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
  for (size_t len = 0; len < size; ++len) {
    absl::StatusOr<BatchView> view = BatchView::Parse(buf.span().first(len));
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument) << len;
  }
}

TEST(BatchLayoutTest, MisalignedBuffersAreRejected) {
  const Element batch = {Tensor::Scalar<int64_t>(1)};
  AlignedBuffer buf(EncodedBatchSize(batch) + 8);
  std::span<std::byte> shifted = buf.span().subspan(4, EncodedBatchSize(batch));
  ASSERT_TRUE(EncodeBatch(batch, shifted).ok());
  absl::StatusOr<BatchView> view = BatchView::Parse(shifted);
  EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(view.status().message(), HasSubstr("must be 8-byte aligned"));
}

TEST(BatchLayoutTest, SpecificCorruptionsNameTheField) {
  const Element batch = {Tensor::FromVector<int32_t>({2}, std::vector<int32_t>{1, 2}),
                         Tensor::Scalar<int64_t>(5)};
  const size_t size = EncodedBatchSize(batch);
  struct Case {
    size_t offset;
    std::vector<uint8_t> bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {0, {'X'}, "corrupt batch buffer: expected magic \"SLB1\" at offset 0"},
      {4, {3}, "corrupt batch buffer: expected version in [1, 2], got 3"},
      {4, {0}, "corrupt batch buffer: expected version in [1, 2], got 0"},
      {8, {200}, "corrupt batch buffer: num_tensors 200 does not fit in a 80-byte header"},
      {24, {9}, "corrupt batch buffer: tensor 0: expected a dtype in [1, 6] for version 2, got 9"},
      {25, {9}, "corrupt batch buffer: tensor 0: expected rank <= 8, got 9"},
      {27, {1}, "corrupt batch buffer: tensor 0: expected zero padding at descriptor byte 3"},
      {32, {65}, "corrupt batch buffer: tensor 0: expected a 64-byte aligned offset, got 65"},
      {40, {12}, "corrupt batch buffer: tensor 0: expected nbytes = 2 elements x 4 bytes, got 12"},
      {48, {3}, "corrupt batch buffer: tensor 0: expected nbytes = 3 elements x 4 bytes, got 8"},
      {55,
       {0x80},
       "corrupt batch buffer: tensor 0: expected non-negative dims, got dim 0 = "
       "-9223372036854775806 in shape [-9223372036854775806]"},
      {64,
       {0},
       "corrupt batch buffer: tensor 1: data [0, +8) must lie after the previous "
       "tensor (136) and within total_bytes 200"},
      {16,
       {199},
       "corrupt batch buffer: tensor 1: data [192, +8) must lie after the previous "
       "tensor (136) and within total_bytes 199"},
  };
  for (const Case& c : cases) {
    AlignedBuffer buf(size);
    ASSERT_TRUE(EncodeBatch(batch, buf.span()).ok());
    std::memcpy(buf.data() + c.offset, c.bytes.data(), c.bytes.size());
    absl::StatusOr<BatchView> view = BatchView::Parse(buf.span());
    EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument) << c.offset;
    EXPECT_EQ(view.status().message(), c.message) << c.offset;
  }
}

TEST(BatchLayoutTest, RandomCorruptionsNeverReadOutOfBounds) {
  const Element batch = SampleBatch();
  const size_t size = EncodedBatchSize(batch);
  AlignedBuffer original(size);
  ASSERT_TRUE(EncodeBatch(batch, original.span()).ok());
  const size_t header_bytes = Read<uint32_t>(original.data() + 12);
  absl::StatusOr<BatchView> parsed = BatchView::Parse(original.span());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const TensorView strings = parsed->tensor(batch.size() - 1);
  ASSERT_EQ(strings.dtype, DType::kString);
  const size_t string_table = static_cast<size_t>(strings.data - original.data());
  const size_t string_table_bytes = 8 * (static_cast<size_t>(strings.num_elements()) + 1);

  std::mt19937_64 rng(20240601);
  int accepted = 0;
  for (int iter = 0; iter < 10000; ++iter) {
    // Exactly `size` bytes, so any read past the end is a heap overflow under ASan.
    AlignedBuffer buf(size);
    std::memcpy(buf.data(), original.data(), size);
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations; ++m) {
      // Mostly the header, where the parser's trust decisions are; often the string
      // tensor's offsets table (the last tensor); sometimes anywhere.
      const size_t where = rng() % 8;
      size_t pos;
      if (where == 0) {
        pos = rng() % size;
      } else if (where <= 2) {
        pos = string_table + rng() % string_table_bytes;
      } else {
        pos = rng() % header_bytes;
      }
      switch (rng() % 3) {
        case 0:
          buf.data()[pos] = static_cast<std::byte>(rng());
          break;
        case 1:
          buf.data()[pos] ^= static_cast<std::byte>(1u << (rng() % 8));
          break;
        default:
          buf.data()[pos] = static_cast<std::byte>(rng() % 2 ? 0xff : 0x00);
          break;
      }
    }
    const size_t len = (rng() % 16 == 0) ? rng() % (size + 1) : size;
    absl::StatusOr<BatchView> view = BatchView::Parse(buf.span().first(len));
    if (!view.ok()) {
      EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
      continue;
    }
    ++accepted;
    // Anything accepted must describe memory inside the buffer; touch all of it.
    uint64_t checksum = 0;
    for (size_t i = 0; i < view->num_tensors(); ++i) {
      TensorView t = view->tensor(i);
      ASSERT_GE(t.data, buf.data());
      ASSERT_LE(t.data + t.nbytes, buf.data() + len);
      for (size_t b = 0; b < t.nbytes; ++b) checksum += static_cast<uint8_t>(t.data[b]);
      ASSERT_LE(t.shape.size(), kBatchMaxRank);
      if (t.dtype == DType::kString) {
        // Accepted offsets must keep every string inside the tensor's bytes.
        for (int64_t e = 0; e < t.num_elements(); ++e) {
          std::string_view s = t.string_value(e);
          ASSERT_GE(reinterpret_cast<const std::byte*>(s.data()), t.data);
          ASSERT_LE(reinterpret_cast<const std::byte*>(s.data() + s.size()), t.data + t.nbytes);
          for (char ch : s) checksum += static_cast<uint8_t>(ch);
        }
      }
    }
    (void)checksum;
  }
  // Data-byte mutations leave the header valid, so some inputs must still parse.
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace sluice::engine
