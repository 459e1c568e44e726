// The wire and memory format of one batch (an Element) in ONE contiguous
// buffer, so a batch moves as a single RDMA/UCX transfer and is read in place
// on arrival without deserialisation.
//
//   std::vector<std::byte> buf(EncodedBatchSize(batch));   // see alignment note
//   SLUICE_ASSIGN_OR_RETURN(size_t n, EncodeBatch(batch, buf));
//   ... send buf[0, n) ...
//   SLUICE_ASSIGN_OR_RETURN(BatchView view, BatchView::Parse(received));
//   std::span<const float> x = view.tensor(0).values<float>();
//
// Layout (all integers little-endian host order: Sluice runs on x86-64 and
// aarch64 only; Parse rejects nothing on that basis, so do not mix endianness):
//   offset 0   char[4]  magic "SLB1"
//          4   uint32   version (2; Parse also accepts 1)
//          8   uint32   num_tensors
//         12   uint32   header_bytes  (fixed header + all descriptors)
//         16   uint64   total_bytes   (end of the last tensor's data)
//         24   per tensor, a descriptor:
//                uint8 dtype, uint8 rank, 6 zero bytes,
//                uint64 offset (from buffer start), uint64 nbytes,
//                rank x int64 dims
//   then each tensor's data at a 64-byte aligned offset, in tensor order, with
//   zero padding in between.
//
// Numeric tensors' data is product(dims) values, row-major; nbytes is that count
// times the dtype size. A string tensor (dtype 6, version 2 only) of N = product(dims)
// strings stores N + 1 uint64 offsets followed by the string bytes back to back:
// string i is bytes [offsets[i], offsets[i + 1]) of the region after the table,
// offsets[0] == 0, offsets are non-decreasing and offsets[N] is the region's size, so
// nbytes = 8 * (N + 1) + offsets[N]. This is also Tensor's in-memory form (tensor.h).
//
// Versions: 1 had the five numeric dtypes; 2 added strings. Encoders write 2. A
// version-1 reader rejects version-2 buffers by their version field (and would reject
// dtype 6 anyway), so old readers fail cleanly instead of misreading strings.
//
// Parse treats the bytes as untrusted (they come off the network): it checks
// every field before use and never reads outside the buffer.
#ifndef SLUICE_ENGINE_BATCH_LAYOUT_H_
#define SLUICE_ENGINE_BATCH_LAYOUT_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "engine/tensor.h"

namespace sluice::engine {

inline constexpr char kBatchMagic[4] = {'S', 'L', 'B', '1'};
// The version EncodeBatch writes; Parse accepts kBatchMinLayoutVersion up to this.
inline constexpr uint32_t kBatchLayoutVersion = 2;
inline constexpr uint32_t kBatchMinLayoutVersion = 1;
inline constexpr size_t kBatchDataAlignment = 64;
inline constexpr size_t kBatchMaxRank = 8;
// Parse needs the buffer itself aligned this much so values<T>() is well-defined for
// every dtype; 64-aligned buffers additionally make every tensor 64-aligned in memory.
inline constexpr size_t kBatchBufferAlignment = 8;

// `n` rounded up to a multiple of `alignment`: where a tensor's data starts in a batch, and
// where a worker packs the next batch behind another in a slab.
[[nodiscard]] inline constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

// Exact number of bytes EncodeBatch writes for `batch`.
size_t EncodedBatchSize(const Element& batch);

// Writes `batch` to the front of `dest` and returns the bytes written. ResourceExhausted
// (with both sizes) when `dest` is too small; InvalidArgument when a tensor's rank exceeds
// kBatchMaxRank or there are more tensors than the header can describe.
[[nodiscard]] absl::StatusOr<size_t> EncodeBatch(const Element& batch, std::span<std::byte> dest);

// One tensor of a parsed batch. Points into the parsed buffer and the BatchView.
struct TensorView {
  DType dtype;
  std::span<const int64_t> shape;
  const std::byte* data;
  size_t nbytes;

  int64_t num_elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;  // Parse checked this product fits.
    return n;
  }
  template <TensorValue T>
  std::span<const T> values() const {
    assert(DTypeOf<T>::value == dtype && "TensorView::values<T>: T does not match dtype");
    return {reinterpret_cast<const T*>(data), nbytes / sizeof(T)};
  }
  // String i (0 <= i < num_elements()) of a kString tensor; points into the buffer.
  std::string_view string_value(int64_t i) const {
    assert(dtype == DType::kString && "TensorView::string_value: not a string tensor");
    return StringAt(data, num_elements(), i);
  }
};

// A validated, zero-copy view of an encoded batch. Valid while the buffer is alive;
// copying or moving the view is fine (shapes live in the view's own storage, inline for a
// few tensors). A TensorView's shape points into the BatchView it came from: take the
// TensorView again after moving the view (or the Batch holding it).
class BatchView {
 public:
  // InvalidArgument naming the first bad field (magic, version, sizes, an offset out of
  // bounds or misaligned, nbytes != product(shape) * dtype size, rank > 8, a bad dtype, a
  // misaligned buffer, a bad string offset). `buffer` may be longer than total_bytes.
  [[nodiscard]] static absl::StatusOr<BatchView> Parse(std::span<const std::byte> buffer);

  size_t num_tensors() const { return tensors_.size(); }
  // i < num_tensors().
  TensorView tensor(size_t i) const;
  // The encoded bytes, [0, total_bytes).
  std::span<const std::byte> bytes() const { return bytes_; }

  // Copies the batch out into owning tensors.
  Element ToElement() const;

 private:
  struct Entry {
    size_t offset;
    size_t nbytes;
    uint32_t dims_begin;  // each dim is 8 bytes of a header whose size is a uint32
    uint8_t rank;
    DType dtype;
  };

  std::span<const std::byte> bytes_;
  // Inline up to a few tensors: a reader parses every batch it hands out, and two heap
  // blocks per batch were most of the client's allocations.
  absl::InlinedVector<Entry, 4> tensors_;
  // Dims are memcpy'd out of the buffer so the view never type-puns header bytes.
  absl::InlinedVector<int64_t, 8> dims_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_BATCH_LAYOUT_H_
