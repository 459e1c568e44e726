#include "engine/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/absl_compat.h"

namespace sluice::engine {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
    case DType::kUInt8:
      return "uint8";
  }
  return "invalid";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kFloat32:
      return 4;
    case DType::kFloat64:
      return 8;
    case DType::kUInt8:
      return 1;
  }
  return 0;
}

bool IsValidDType(uint8_t raw) {
  return raw >= static_cast<uint8_t>(DType::kInt32) && raw <= static_cast<uint8_t>(DType::kUInt8);
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64, DType::kUInt8}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "expected a dtype (int32, int64, float32, float64, uint8), got '", AbslView(name), "'"));
}

absl::StatusOr<int64_t> NumElementsOf(std::span<const int64_t> shape) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("expected non-negative dims, got dim ", i,
                                                     " = ", shape[i], " in shape ",
                                                     ShapeString(shape)));
    }
    if (__builtin_mul_overflow(n, shape[i], &n)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeString(shape), " has more than 2^63-1 elements"));
    }
  }
  return n;
}

std::string ShapeString(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

void Tensor::AlignedFree::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t{kAlignment});
}

Tensor::Tensor() : Tensor(DType::kInt64, {0}, 0) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, int64_t num_elements)
    : dtype_(dtype), shape_(std::move(shape)), num_elements_(num_elements) {
  size_t bytes = byte_size();
  if (bytes > 0) {
    data_.reset(static_cast<std::byte*>(::operator new[](bytes, std::align_val_t{kAlignment})));
    std::memset(data_.get(), 0, bytes);
  }
}

absl::StatusOr<Tensor> Tensor::Create(DType dtype, std::vector<int64_t> shape) {
  if (!IsValidDType(static_cast<uint8_t>(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a valid dtype, got ", static_cast<int>(dtype)));
  }
  auto n = NumElementsOf(shape);
  if (!n.ok()) return n.status();
  // Keep byte sizes representable as int64 so callers can do signed arithmetic on them.
  if (*n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(DTypeSize(dtype))) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor of shape ", ShapeString(shape), " is too large"));
  }
  return Tensor(dtype, std::move(shape), *n);
}

int64_t Tensor::CheckedNumElements(std::span<const int64_t> shape, size_t value_count) {
  auto n = NumElementsOf(shape);
  if (!n.ok() || static_cast<uint64_t>(*n) != value_count) {
    // A programming error, not a data error: the caller built both arguments itself.
    std::fprintf(stderr, "Tensor::FromVector: shape %s needs %lld values, got %zu\n",
                 ShapeString(shape).c_str(), n.ok() ? static_cast<long long>(*n) : -1LL,
                 value_count);
    std::abort();
  }
  return *n;
}

Tensor::Tensor(const Tensor& other) : Tensor(other.dtype_, other.shape_, other.num_elements_) {
  if (other.byte_size() > 0) std::memcpy(data_.get(), other.data_.get(), other.byte_size());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      num_elements_(std::exchange(other.num_elements_, 0)),
      data_(std::move(other.data_)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  dtype_ = other.dtype_;
  shape_ = std::move(other.shape_);
  num_elements_ = std::exchange(other.num_elements_, 0);
  data_ = std::move(other.data_);
  return *this;
}

bool operator==(const Tensor& a, const Tensor& b) {
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ &&
         (a.byte_size() == 0 || std::memcmp(a.data(), b.data(), a.byte_size()) == 0);
}

std::string Tensor::DebugString() const {
  constexpr int64_t kMaxShown = 16;
  std::string out = absl::StrCat(AbslView(DTypeName(dtype_)), ShapeString(shape_), "{");
  VisitDType(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto v = values<T>();
    for (int64_t i = 0; i < num_elements_ && i < kMaxShown; ++i) {
      if (i > 0) out += ", ";
      if constexpr (std::is_same_v<T, uint8_t>) {
        absl::StrAppend(&out, static_cast<int>(v[i]));
      } else {
        absl::StrAppend(&out, v[i]);
      }
    }
  });
  if (num_elements_ > kMaxShown) out += ", ...";
  out += "}";
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.DebugString(); }

std::string ElementDebugString(const Element& element) {
  return absl::StrCat(
      "(",
      absl::StrJoin(element, ", ",
                    [](std::string* out, const Tensor& t) { out->append(t.DebugString()); }),
      ")");
}

}  // namespace sluice::engine
