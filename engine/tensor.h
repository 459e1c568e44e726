// Dense tensors and elements, the values that flow through a Sluice pipeline.
//
// A Tensor owns one contiguous row-major buffer. Buffers over kInlineBytes are 64-byte
// aligned heap blocks, so they can be handed to vectorised code or registered with a NIC
// without copying; smaller ones (scalars, short vectors) live inside the Tensor itself,
// 16-byte aligned, so a pipeline of scalars allocates nothing per element. An Element is a
// tuple of tensors: one pipeline "row", e.g. (image, label).
//
//   Tensor s = Tensor::Scalar<int64_t>(7);
//   std::vector<float> v = {1, 2, 3, 4, 5, 6};
//   Tensor m = Tensor::FromVector<float>({2, 3}, v);
//   for (float x : m.values<float>()) { ... }
//   Tensor names = Tensor::FromStrings({2}, std::vector<std::string>{"ada", "bob"});
//   std::string_view first = names.string_value(0);
//   Element e = {s, m, names};
//
// String tensors (DType::kString) hold N variable-length byte strings (any bytes, not
// necessarily UTF-8) in the same single buffer, laid out exactly as on the wire (see
// batch_layout.h): N + 1 little-endian uint64 offsets, then the bytes of all strings
// back to back; string i is bytes [offsets[i], offsets[i + 1]) of the byte region, and
// offsets[0] == 0. byte_size() is 8 * (N + 1) + total string bytes.
//
// A tensor may also carry the provenance of its element (engine/provenance.h: which
// DYNAMIC split elements it was made from). By convention only component 0 of an Element
// carries it (ElementProvenance); copies and moves keep it, operator== ignores it, and
// without DYNAMIC tracking it is a null pointer.
#ifndef SLUICE_ENGINE_TENSOR_H_
#define SLUICE_ENGINE_TENSOR_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::engine {

class Provenance;  // engine/provenance.h

enum class DType : uint8_t {
  kInt32 = 1,
  kInt64 = 2,
  kFloat32 = 3,
  kFloat64 = 4,
  kUInt8 = 5,
  // Variable-length byte strings; see the layout above. Batch layout version 2 and later.
  kString = 6,
};

// "int32", "int64", "float32", "float64", "uint8", "string"; "invalid" for values outside
// the enum (possible when a DType was cast from untrusted bytes).
std::string_view DTypeName(DType dtype);
// Bytes per element; 0 for kString (no fixed size) and for values outside the enum.
size_t DTypeSize(DType dtype);
// Inverse of DTypeName.
[[nodiscard]] absl::StatusOr<DType> ParseDType(std::string_view name);
// True for the six enumerators; use before trusting a DType decoded from bytes.
bool IsValidDType(uint8_t raw);
// True for every valid dtype except kString.
bool IsNumericDType(DType dtype);

// Checks that `buffer` is a well-formed string-tensor buffer of `num_elements` strings
// (offsets table present, offsets[0] == 0, non-decreasing, last == byte region size).
// Safe on untrusted bytes; `buffer` must be 8-byte aligned. InvalidArgument naming the
// first bad offset.
[[nodiscard]] absl::Status CheckStringBuffer(std::span<const std::byte> buffer,
                                             int64_t num_elements);
// String i of a buffer that passed CheckStringBuffer.
std::string_view StringAt(const std::byte* buffer, int64_t num_elements, int64_t i);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};
template <>
struct DTypeOf<uint8_t> {
  static constexpr DType value = DType::kUInt8;
};

template <typename T>
concept TensorValue = requires {
  DTypeOf<T>::value;
};

// Calls fn(std::type_identity<T>{}) with the C++ type of `dtype`, so element-wise code is
// written once as a generic lambda. `dtype` must be numeric (IsNumericDType): check for
// kString first, string values are reached through string_value().
template <typename Fn>
decltype(auto) VisitDType(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt32:
      return fn(std::type_identity<int32_t>{});
    case DType::kInt64:
      return fn(std::type_identity<int64_t>{});
    case DType::kFloat32:
      return fn(std::type_identity<float>{});
    case DType::kFloat64:
      return fn(std::type_identity<double>{});
    case DType::kUInt8:
      return fn(std::type_identity<uint8_t>{});
    case DType::kString:
      break;
  }
  assert(false && "VisitDType: needs a numeric dtype");
  return fn(std::type_identity<uint8_t>{});
}

// Product of dims; InvalidArgument for negative dims or an int64 overflow.
[[nodiscard]] absl::StatusOr<int64_t> NumElementsOf(std::span<const int64_t> shape);

// The largest tensor Tensor::Create makes (4 GiB; a string tensor's offsets count 8 bytes
// an element): a shape from a user's pipeline (padded_batch's padded_shapes, a feature's
// length) must fail, not allocate until the worker dies.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 32;

// "[2, 3]"; "[]" for scalars.
std::string ShapeString(std::span<const int64_t> shape);

class Tensor {
 public:
  // Alignment of every heap tensor buffer; also the batch-layout data alignment.
  static constexpr size_t kAlignment = 64;
  // Buffers of at most this many bytes are stored inline (kInlineAlignment-aligned) and
  // never shared: data() then points into the Tensor and moves with it.
  static constexpr size_t kInlineBytes = 16;
  static constexpr size_t kInlineAlignment = 16;

  // int64 tensor of shape [0] (no elements); exists so containers can default-construct.
  Tensor();

  // A zero-filled tensor (all empty strings for kString); InvalidArgument for negative dims
  // or overflowing sizes.
  [[nodiscard]] static absl::StatusOr<Tensor> Create(DType dtype, std::vector<int64_t> shape);

  template <TensorValue T>
  static Tensor Scalar(T value) {
    Tensor t(DTypeOf<T>::value, {}, 1);
    std::memcpy(t.mutable_data(), &value, sizeof(T));
    return t;
  }

  // Precondition (aborts otherwise): values.size() == product(shape), dims >= 0.
  template <TensorValue T>
  static Tensor FromVector(std::vector<int64_t> shape, std::span<const T> values) {
    int64_t n = CheckedNumElements(shape, values.size());
    Tensor t(DTypeOf<T>::value, std::move(shape), n);
    t.CopyIn(values.data(), values.size_bytes());
    return t;
  }
  // Overload so braced lists and std::vector<T> deduce T.
  template <TensorValue T>
  static Tensor FromVector(std::vector<int64_t> shape, const std::vector<T>& values) {
    return FromVector<T>(std::move(shape), std::span<const T>(values));
  }

  // A kString tensor. Precondition (aborts otherwise): values.size() == product(shape).
  static Tensor FromStrings(std::vector<int64_t> shape, std::span<const std::string_view> values);
  static Tensor FromStrings(std::vector<int64_t> shape, const std::vector<std::string>& values);
  static Tensor StringScalar(std::string_view value);

  // A copy of `bytes` in the tensor's buffer form (see above). InvalidArgument when the size
  // does not match product(shape) * dtype size, or a string buffer is malformed
  // (CheckStringBuffer; `bytes` must then be 8-byte aligned).
  [[nodiscard]] static absl::StatusOr<Tensor> FromBuffer(DType dtype, std::vector<int64_t> shape,
                                                         std::span<const std::byte> bytes);

  // Copies share the buffer (copy-on-write): cache, repeat, shuffle and prefetch hand out
  // copies of large tensors without copying bytes; the first mutable_data() or
  // mutable_values() on a shared buffer gives that tensor its own copy.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  // A moved-from tensor holds no bytes; only assign to or destroy it.
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  // Buffer size: num_elements() * DTypeSize(dtype()) for numeric tensors, offsets table plus
  // string bytes for kString.
  size_t byte_size() const { return byte_size_; }
  // Null when byte_size() == 0. An inline buffer (byte_size() <= kInlineBytes) lives in the
  // Tensor: the pointer is valid while this Tensor object lives and is not moved.
  const std::byte* data() const { return is_inline() ? inline_data() : data_.get(); }
  // Unshares the buffer first when a copy shares it; do not keep the pointer across a copy
  // of this tensor (writes through it would show in the copy).
  std::byte* mutable_data() {
    if (is_inline()) return inline_data();
    if (data_.use_count() > 1) Unshare();
    return data_.get();
  }
  // Whether `other` shares this tensor's heap buffer (a copy not yet written to); always
  // false for inline buffers, which are copied with the Tensor.
  bool SharesBufferWith(const Tensor& other) const {
    return data_ != nullptr && data_ == other.data_;
  }

  template <TensorValue T>
  std::span<const T> values() const {
    assert(DTypeOf<T>::value == dtype_ && "Tensor::values<T>: T does not match dtype");
    return {reinterpret_cast<const T*>(data()), static_cast<size_t>(num_elements_)};
  }
  template <TensorValue T>
  std::span<T> mutable_values() {
    assert(DTypeOf<T>::value == dtype_ && "Tensor::mutable_values<T>: T does not match dtype");
    return {reinterpret_cast<T*>(mutable_data()), static_cast<size_t>(num_elements_)};
  }

  // String i (0 <= i < num_elements()) of a kString tensor; valid while the tensor lives.
  std::string_view string_value(int64_t i) const {
    assert(dtype_ == DType::kString && "Tensor::string_value: not a string tensor");
    assert(i >= 0 && i < num_elements_ && "Tensor::string_value: index out of range");
    return StringAt(data(), num_elements_, i);
  }
  std::vector<std::string_view> string_values() const;

  // "int64[2, 3]{0, 1, 2, 3, 4, 5}", values elided after the first 16; strings are quoted
  // and C-escaped: string[2]{"a", "b\n"}.
  std::string DebugString() const;

  // The element's provenance (see above); null when it has none.
  const std::shared_ptr<const Provenance>& provenance() const { return provenance_; }
  void set_provenance(std::shared_ptr<const Provenance> provenance) {
    provenance_ = std::move(provenance);
  }

  // Same dtype, shape and bytes (provenance is not compared).
  friend bool operator==(const Tensor& a, const Tensor& b);

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };

  // Zero-filled buffer of the size the dtype needs for `num_elements` (empty strings).
  Tensor(DType dtype, std::vector<int64_t> shape, int64_t num_elements);
  // Zero-filled buffer of exactly `byte_size` bytes.
  Tensor(DType dtype, std::vector<int64_t> shape, int64_t num_elements, size_t byte_size);
  static int64_t CheckedNumElements(std::span<const int64_t> shape, size_t value_count);
  // Gives this tensor its own copy of a shared buffer.
  void Unshare();
  // Copies `size` (== byte_size()) bytes into a new, unshared buffer. Out of line so the
  // compiler does not mistake the heap branch's size for the inline branch's.
  void CopyIn(const void* bytes, size_t size);

  // byte_size_ decides where the bytes are: none (0), inline_, or data_.
  bool is_inline() const { return byte_size_ <= kInlineBytes; }
  std::byte* inline_data() { return byte_size_ == 0 ? nullptr : inline_; }
  const std::byte* inline_data() const { return byte_size_ == 0 ? nullptr : inline_; }

  DType dtype_;
  std::vector<int64_t> shape_;
  int64_t num_elements_;
  size_t byte_size_;
  // Heap buffers only (byte_size_ > kInlineBytes); freed with AlignedFree; shared by copies.
  std::shared_ptr<std::byte[]> data_;
  std::shared_ptr<const Provenance> provenance_;
  alignas(kInlineAlignment) std::byte inline_[kInlineBytes];
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// One pipeline row: a tuple of tensors.
using Element = std::vector<Tensor>;

std::string ElementDebugString(const Element& element);

// An element's provenance is its component 0's: null when it has none or no components.
inline const Provenance* ElementProvenance(const Element& element) {
  return element.empty() ? nullptr : element[0].provenance().get();
}
// The same, shared (copying a null pointer costs nothing).
inline std::shared_ptr<const Provenance> SharedElementProvenance(const Element& element) {
  return element.empty() ? nullptr : element[0].provenance();
}
// Sets component 0's provenance; does nothing for an element without components.
inline void SetElementProvenance(Element& element, std::shared_ptr<const Provenance> provenance) {
  if (!element.empty()) element[0].set_provenance(std::move(provenance));
}

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_TENSOR_H_
