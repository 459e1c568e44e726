// Dense tensors and elements, the values that flow through a Sluice pipeline.
//
// A Tensor owns one contiguous row-major buffer (64-byte aligned, so it can be
// handed to vectorised code or registered with a NIC without copying). An
// Element is a tuple of tensors: one pipeline "row", e.g. (image, label).
//
//   Tensor s = Tensor::Scalar<int64_t>(7);
//   std::vector<float> v = {1, 2, 3, 4, 5, 6};
//   Tensor m = Tensor::FromVector<float>({2, 3}, v);
//   for (float x : m.values<float>()) { ... }
//   Element e = {s, m};
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
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::engine {

enum class DType : uint8_t { kInt32 = 1, kInt64 = 2, kFloat32 = 3, kFloat64 = 4, kUInt8 = 5 };

// "int32", "int64", "float32", "float64", "uint8"; "invalid" for values outside the enum
// (possible when a DType was cast from untrusted bytes).
std::string_view DTypeName(DType dtype);
// Bytes per element; 0 for values outside the enum.
size_t DTypeSize(DType dtype);
// Inverse of DTypeName.
[[nodiscard]] absl::StatusOr<DType> ParseDType(std::string_view name);
// True for the five enumerators; use before trusting a DType decoded from bytes.
bool IsValidDType(uint8_t raw);

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
// written once as a generic lambda. `dtype` must be valid.
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
  }
  assert(false && "VisitDType: invalid dtype");
  return fn(std::type_identity<uint8_t>{});
}

// Product of dims; InvalidArgument for negative dims or an int64 overflow.
[[nodiscard]] absl::StatusOr<int64_t> NumElementsOf(std::span<const int64_t> shape);

// "[2, 3]"; "[]" for scalars.
std::string ShapeString(std::span<const int64_t> shape);

class Tensor {
 public:
  // Alignment of every tensor buffer; also the batch-layout data alignment.
  static constexpr size_t kAlignment = 64;

  // int64 tensor of shape [0] (no elements); exists so containers can default-construct.
  Tensor();

  // A zero-filled tensor; InvalidArgument for negative dims or overflowing sizes.
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
    if (!values.empty()) std::memcpy(t.mutable_data(), values.data(), values.size_bytes());
    return t;
  }
  // Overload so braced lists and std::vector<T> deduce T.
  template <TensorValue T>
  static Tensor FromVector(std::vector<int64_t> shape, const std::vector<T>& values) {
    return FromVector<T>(std::move(shape), std::span<const T>(values));
  }

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  // A moved-from tensor holds no bytes; only assign to or destroy it.
  Tensor(Tensor&& other) noexcept;
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t num_elements() const { return num_elements_; }
  size_t byte_size() const { return static_cast<size_t>(num_elements_) * DTypeSize(dtype_); }
  // Null when byte_size() == 0.
  const std::byte* data() const { return data_.get(); }
  std::byte* mutable_data() { return data_.get(); }

  template <TensorValue T>
  std::span<const T> values() const {
    assert(DTypeOf<T>::value == dtype_ && "Tensor::values<T>: T does not match dtype");
    return {reinterpret_cast<const T*>(data_.get()), static_cast<size_t>(num_elements_)};
  }
  template <TensorValue T>
  std::span<T> mutable_values() {
    assert(DTypeOf<T>::value == dtype_ && "Tensor::mutable_values<T>: T does not match dtype");
    return {reinterpret_cast<T*>(data_.get()), static_cast<size_t>(num_elements_)};
  }

  // "int64[2, 3]{0, 1, 2, 3, 4, 5}", values elided after the first 16.
  std::string DebugString() const;

  // Same dtype, shape and bytes.
  friend bool operator==(const Tensor& a, const Tensor& b);

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };

  Tensor(DType dtype, std::vector<int64_t> shape, int64_t num_elements);
  static int64_t CheckedNumElements(std::span<const int64_t> shape, size_t value_count);

  DType dtype_;
  std::vector<int64_t> shape_;
  int64_t num_elements_;
  std::unique_ptr<std::byte[], AlignedFree> data_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// One pipeline row: a tuple of tensors.
using Element = std::vector<Tensor>;

std::string ElementDebugString(const Element& element);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_TENSOR_H_
