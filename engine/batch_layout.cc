#include "engine/batch_layout.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sluice::engine {
namespace {

constexpr size_t kFixedHeaderBytes = 24;
constexpr size_t kDescriptorBytes = 24;  // Without dims.

size_t HeaderBytes(const Element& batch) {
  size_t bytes = kFixedHeaderBytes;
  for (const Tensor& t : batch) bytes += kDescriptorBytes + 8 * t.shape().size();
  return bytes;
}

template <typename T>
void Put(std::byte* dest, size_t pos, T value) {
  std::memcpy(dest + pos, &value, sizeof(T));
}

template <typename T>
T Get(std::span<const std::byte> buffer, size_t pos) {
  T value;
  std::memcpy(&value, buffer.data() + pos, sizeof(T));
  return value;
}

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("corrupt batch buffer: ", what));
}

}  // namespace

size_t EncodedBatchSize(const Element& batch) {
  size_t end = HeaderBytes(batch);
  if (batch.empty()) return end;
  for (const Tensor& t : batch) end = AlignUp(end, kBatchDataAlignment) + t.byte_size();
  return end;
}

absl::StatusOr<size_t> EncodeBatch(const Element& batch, std::span<std::byte> dest) {
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch[i].shape().size() > kBatchMaxRank) {
      return absl::InvalidArgumentError(absl::StrCat("tensor ", i, " has rank ",
                                                     batch[i].shape().size(), "; at most ",
                                                     kBatchMaxRank, " is encodable"));
    }
  }
  const size_t header_bytes = HeaderBytes(batch);
  if (header_bytes > std::numeric_limits<uint32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("batch with ", batch.size(), " tensors needs a ",
                                                   header_bytes,
                                                   "-byte header; at most 2^32-1 is encodable"));
  }
  const size_t total = EncodedBatchSize(batch);
  if (dest.size() < total) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch needs ", total, " bytes but the destination holds ", dest.size()));
  }
  std::byte* out = dest.data();
  std::memcpy(out, kBatchMagic, sizeof(kBatchMagic));
  Put<uint32_t>(out, 4, kBatchLayoutVersion);
  Put<uint32_t>(out, 8, static_cast<uint32_t>(batch.size()));
  Put<uint32_t>(out, 12, static_cast<uint32_t>(header_bytes));
  Put<uint64_t>(out, 16, total);
  size_t pos = kFixedHeaderBytes;
  size_t data_end = header_bytes;
  for (const Tensor& t : batch) {
    const size_t offset = AlignUp(data_end, kBatchDataAlignment);
    std::memset(out + pos, 0, 8);  // dtype, rank and the padding.
    Put<uint8_t>(out, pos, static_cast<uint8_t>(t.dtype()));
    Put<uint8_t>(out, pos + 1, static_cast<uint8_t>(t.shape().size()));
    Put<uint64_t>(out, pos + 8, offset);
    Put<uint64_t>(out, pos + 16, t.byte_size());
    pos += kDescriptorBytes;
    for (int64_t d : t.shape()) {
      Put<int64_t>(out, pos, d);
      pos += 8;
    }
    // Zero the alignment gap so encoded bytes are deterministic (no stale memory leaks out).
    std::memset(out + data_end, 0, offset - data_end);
    if (t.byte_size() > 0) std::memcpy(out + offset, t.data(), t.byte_size());
    data_end = offset + t.byte_size();
  }
  return total;
}

absl::StatusOr<BatchView> BatchView::Parse(std::span<const std::byte> buffer) {
  if (reinterpret_cast<uintptr_t>(buffer.data()) % kBatchBufferAlignment != 0) {
    return absl::InvalidArgumentError(absl::StrCat("batch buffer must be ", kBatchBufferAlignment,
                                                   "-byte aligned, got address ",
                                                   reinterpret_cast<uintptr_t>(buffer.data())));
  }
  if (buffer.size() < kFixedHeaderBytes) {
    return Corrupt(absl::StrCat("expected at least the ", kFixedHeaderBytes, "-byte header, got ",
                                buffer.size(), " bytes"));
  }
  if (std::memcmp(buffer.data(), kBatchMagic, sizeof(kBatchMagic)) != 0) {
    return Corrupt("expected magic \"SLB1\" at offset 0");
  }
  const uint32_t version = Get<uint32_t>(buffer, 4);
  if (version < kBatchMinLayoutVersion || version > kBatchLayoutVersion) {
    return Corrupt(absl::StrCat("expected version in [", kBatchMinLayoutVersion, ", ",
                                kBatchLayoutVersion, "], got ", version));
  }
  // Version 1 predates strings.
  const uint8_t max_dtype = static_cast<uint8_t>(version == 1 ? DType::kUInt8 : DType::kString);
  const uint32_t num_tensors = Get<uint32_t>(buffer, 8);
  const uint32_t header_bytes = Get<uint32_t>(buffer, 12);
  const uint64_t total_bytes = Get<uint64_t>(buffer, 16);
  if (header_bytes < kFixedHeaderBytes || header_bytes > buffer.size()) {
    return Corrupt(absl::StrCat("expected header_bytes in [", kFixedHeaderBytes, ", ",
                                buffer.size(), "], got ", header_bytes));
  }
  if (total_bytes < header_bytes || total_bytes > buffer.size()) {
    return Corrupt(absl::StrCat("expected total_bytes in [", header_bytes, ", ", buffer.size(),
                                "], got ", total_bytes));
  }
  // Bound the count before allocating anything sized by it.
  if (num_tensors > (header_bytes - kFixedHeaderBytes) / kDescriptorBytes) {
    return Corrupt(absl::StrCat("num_tensors ", num_tensors, " does not fit in a ", header_bytes,
                                "-byte header"));
  }

  BatchView view;
  view.bytes_ = buffer.first(total_bytes);
  view.tensors_.reserve(num_tensors);
  size_t pos = kFixedHeaderBytes;
  uint64_t data_end = header_bytes;
  for (uint32_t i = 0; i < num_tensors; ++i) {
    // Made only for an error: a batch parses once per fetch, and a label per tensor was
    // about a hundred instructions each.
    auto which = [i] { return absl::StrCat("tensor ", i, ": "); };
    if (header_bytes - pos < kDescriptorBytes) {
      return Corrupt(absl::StrCat(which(), "descriptor runs past header_bytes ", header_bytes));
    }
    const uint8_t raw_dtype = Get<uint8_t>(buffer, pos);
    const uint8_t rank = Get<uint8_t>(buffer, pos + 1);
    const uint64_t offset = Get<uint64_t>(buffer, pos + 8);
    const uint64_t nbytes = Get<uint64_t>(buffer, pos + 16);
    if (!IsValidDType(raw_dtype) || raw_dtype > max_dtype) {
      return Corrupt(absl::StrCat(which(), "expected a dtype in [1, ", static_cast<int>(max_dtype),
                                  "] for version ", version, ", got ",
                                  static_cast<int>(raw_dtype)));
    }
    for (size_t p = 2; p < 8; ++p) {
      if (Get<uint8_t>(buffer, pos + p) != 0) {
        return Corrupt(absl::StrCat(which(), "expected zero padding at descriptor byte ", p));
      }
    }
    if (rank > kBatchMaxRank) {
      return Corrupt(absl::StrCat(which(), "expected rank <= ", kBatchMaxRank, ", got ",
                                  static_cast<int>(rank)));
    }
    pos += kDescriptorBytes;
    if (header_bytes - pos < 8u * rank) {
      return Corrupt(absl::StrCat(which(), "dims run past header_bytes ", header_bytes));
    }
    const size_t dims_begin = view.dims_.size();
    for (uint8_t d = 0; d < rank; ++d) {
      view.dims_.push_back(Get<int64_t>(buffer, pos));
      pos += 8;
    }
    const DType dtype = static_cast<DType>(raw_dtype);
    absl::StatusOr<int64_t> n =
        NumElementsOf(std::span<const int64_t>(view.dims_).subspan(dims_begin, rank));
    if (!n.ok()) return Corrupt(absl::StrCat(which(), n.status().message()));
    if (dtype == DType::kString) {
      uint64_t table_bytes;
      if (__builtin_mul_overflow(static_cast<uint64_t>(*n) + 1, uint64_t{8}, &table_bytes) ||
          nbytes < table_bytes) {
        return Corrupt(absl::StrCat(which(), "expected nbytes >= 8 x (", *n,
                                    " strings + 1) for the offsets table, got ", nbytes));
      }
    } else {
      uint64_t expected_bytes;
      if (__builtin_mul_overflow(static_cast<uint64_t>(*n), DTypeSize(dtype), &expected_bytes) ||
          nbytes != expected_bytes) {
        return Corrupt(absl::StrCat(which(), "expected nbytes = ", *n, " elements x ",
                                    DTypeSize(dtype), " bytes, got ", nbytes));
      }
    }
    if (offset % kBatchDataAlignment != 0) {
      return Corrupt(absl::StrCat(which(), "expected a ", kBatchDataAlignment,
                                  "-byte aligned offset, got ", offset));
    }
    if (offset < data_end || offset > total_bytes || nbytes > total_bytes - offset) {
      return Corrupt(absl::StrCat(which(), "data [", offset, ", +", nbytes,
                                  ") must lie after the previous tensor (", data_end,
                                  ") and within total_bytes ", total_bytes));
    }
    if (dtype == DType::kString) {
      absl::Status strings = CheckStringBuffer(buffer.subspan(offset, nbytes), *n);
      if (!strings.ok()) return Corrupt(absl::StrCat(which(), strings.message()));
    }
    data_end = offset + nbytes;
    view.tensors_.push_back({static_cast<size_t>(offset), static_cast<size_t>(nbytes),
                             static_cast<uint32_t>(dims_begin), rank, dtype});
  }
  if (pos != header_bytes) {
    return Corrupt(absl::StrCat("descriptors end at ", pos, " but header_bytes is ", header_bytes));
  }
  if (data_end != total_bytes) {
    return Corrupt(
        absl::StrCat("tensor data ends at ", data_end, " but total_bytes is ", total_bytes));
  }
  return view;
}

TensorView BatchView::tensor(size_t i) const {
  assert(i < tensors_.size() && "BatchView::tensor: index out of range");
  const Entry& e = tensors_[i];
  return {e.dtype, std::span<const int64_t>(dims_).subspan(e.dims_begin, e.rank),
          bytes_.data() + e.offset, e.nbytes};
}

Element BatchView::ToElement() const {
  Element out;
  out.reserve(tensors_.size());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorView v = tensor(i);
    // Parse validated dtype, shape and bytes, so this cannot fail.
    out.push_back(*Tensor::FromBuffer(v.dtype, std::vector<int64_t>(v.shape.begin(), v.shape.end()),
                                      {v.data, v.nbytes}));
  }
  return out;
}

}  // namespace sluice::engine
