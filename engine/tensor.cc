#include "engine/tensor.h"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
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
    case DType::kString:
      return "string";
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
    case DType::kString:
      return 0;
  }
  return 0;
}

bool IsValidDType(uint8_t raw) {
  return raw >= static_cast<uint8_t>(DType::kInt32) && raw <= static_cast<uint8_t>(DType::kString);
}

bool IsNumericDType(DType dtype) {
  return IsValidDType(static_cast<uint8_t>(dtype)) && dtype != DType::kString;
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kInt32, DType::kInt64, DType::kFloat32, DType::kFloat64, DType::kUInt8,
                  DType::kString}) {
    if (DTypeName(d) == name) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected a dtype (int32, int64, float32, float64, uint8, string), got '",
                   AbslView(name), "'"));
}

namespace {

uint64_t OffsetAt(const std::byte* buffer, int64_t i) {
  uint64_t v;
  std::memcpy(&v, buffer + 8 * i, sizeof(v));
  return v;
}

// Bytes of the offsets table of `n` strings; false when it overflows.
bool OffsetsBytes(int64_t n, uint64_t* bytes) {
  return n >= 0 && !__builtin_mul_overflow(static_cast<uint64_t>(n) + 1, uint64_t{8}, bytes);
}

}  // namespace

absl::Status CheckStringBuffer(std::span<const std::byte> buffer, int64_t num_elements) {
  uint64_t table;
  if (!OffsetsBytes(num_elements, &table) || table > buffer.size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected a string offsets table of ",
                                                   num_elements, " + 1 entries, but the ",
                                                   "tensor holds only ", buffer.size(), " bytes"));
  }
  const uint64_t region = buffer.size() - table;
  uint64_t previous = 0;
  for (int64_t i = 0; i <= num_elements; ++i) {
    const uint64_t offset = OffsetAt(buffer.data(), i);
    if ((i == 0 && offset != 0) || offset < previous || offset > region) {
      return absl::InvalidArgumentError(absl::StrCat("expected string offset ", i, " in [",
                                                     previous, ", ", i == 0 ? 0 : region, "], got ",
                                                     offset));
    }
    previous = offset;
  }
  if (previous != region) {
    return absl::InvalidArgumentError(absl::StrCat("expected the last string offset to be ", region,
                                                   " (the byte region size), got ", previous));
  }
  return absl::OkStatus();
}

std::string_view StringAt(const std::byte* buffer, int64_t num_elements, int64_t i) {
  const uint64_t begin = OffsetAt(buffer, i);
  const uint64_t end = OffsetAt(buffer, i + 1);
  const char* bytes = reinterpret_cast<const char*>(buffer) + 8 * (num_elements + 1);
  return {bytes + begin, static_cast<size_t>(end - begin)};
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
    : Tensor(dtype, std::move(shape), num_elements,
             dtype == DType::kString ? 8 * (static_cast<size_t>(num_elements) + 1)
                                     : static_cast<size_t>(num_elements) * DTypeSize(dtype)) {}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, int64_t num_elements, size_t byte_size)
    : dtype_(dtype), shape_(std::move(shape)), num_elements_(num_elements), byte_size_(byte_size) {
  if (is_inline()) {
    std::memset(inline_, 0, byte_size_);
  } else {
    data_.reset(static_cast<std::byte*>(::operator new[](byte_size_, std::align_val_t{kAlignment})),
                AlignedFree{});
    std::memset(data_.get(), 0, byte_size_);
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
  const int64_t per_element = dtype == DType::kString ? 8 : DTypeSize(dtype);
  if (*n >= std::numeric_limits<int64_t>::max() / per_element) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor of shape ", ShapeString(shape), " is too large"));
  }
  if (*n * per_element > kMaxTensorBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "a tensor of shape ", ShapeString(shape), " would take ", *n * per_element,
        " bytes, above the limit of ", kMaxTensorBytes, " (a padded shape or length too large?)"));
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

Tensor Tensor::FromStrings(std::vector<int64_t> shape, std::span<const std::string_view> values) {
  const int64_t n = CheckedNumElements(shape, values.size());
  size_t total = 0;
  for (std::string_view v : values) total += v.size();
  const size_t table = 8 * (values.size() + 1);
  Tensor t(DType::kString, std::move(shape), n, table + total);
  std::byte* out = t.mutable_data();
  uint64_t offset = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    offset += values[i].size();
    std::memcpy(out + 8 * (i + 1), &offset, sizeof(offset));  // offsets[0] stays 0.
  }
  char* bytes = reinterpret_cast<char*>(out) + table;
  for (std::string_view v : values) {
    if (!v.empty()) std::memcpy(bytes, v.data(), v.size());
    bytes += v.size();
  }
  return t;
}

Tensor Tensor::FromStrings(std::vector<int64_t> shape, const std::vector<std::string>& values) {
  std::vector<std::string_view> views(values.begin(), values.end());
  return FromStrings(std::move(shape), std::span<const std::string_view>(views));
}

Tensor Tensor::StringScalar(std::string_view value) {
  return FromStrings({}, std::span<const std::string_view>(&value, 1));
}

absl::StatusOr<Tensor> Tensor::FromBuffer(DType dtype, std::vector<int64_t> shape,
                                          std::span<const std::byte> bytes) {
  absl::StatusOr<Tensor> empty = Create(dtype, shape);
  if (!empty.ok()) return empty.status();
  if (dtype == DType::kString) {
    if (absl::Status s = CheckStringBuffer(bytes, empty->num_elements()); !s.ok()) return s;
  } else if (bytes.size() != empty->byte_size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", empty->byte_size(), " bytes for ",
                                                   AbslView(DTypeName(dtype)), ShapeString(shape),
                                                   ", got ", bytes.size()));
  }
  Tensor t(dtype, std::move(shape), empty->num_elements(), bytes.size());
  if (!bytes.empty()) std::memcpy(t.mutable_data(), bytes.data(), bytes.size());
  return t;
}

std::vector<std::string_view> Tensor::string_values() const {
  std::vector<std::string_view> out;
  out.reserve(static_cast<size_t>(num_elements_));
  for (int64_t i = 0; i < num_elements_; ++i) out.push_back(string_value(i));
  return out;
}

Tensor::Tensor(const Tensor& other)
    : dtype_(other.dtype_),
      shape_(other.shape_),
      num_elements_(other.num_elements_),
      byte_size_(other.byte_size_),
      data_(other.data_),
      provenance_(other.provenance_) {
  if (is_inline()) std::memcpy(inline_, other.inline_, byte_size_);
}

void Tensor::CopyIn(const void* bytes, size_t size) {
  if (size > 0) std::memcpy(mutable_data(), bytes, size);
}

void Tensor::Unshare() {
  std::shared_ptr<std::byte[]> own(
      static_cast<std::byte*>(::operator new[](byte_size_, std::align_val_t{kAlignment})),
      AlignedFree{});
  std::memcpy(own.get(), data_.get(), byte_size_);
  data_ = std::move(own);
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  // Member by member, the shape first (the one step that may throw): a tensor assigned the
  // same kind of tensor again, as a replayed cache's element is, reuses its shape's room.
  shape_ = other.shape_;
  dtype_ = other.dtype_;
  num_elements_ = other.num_elements_;
  byte_size_ = other.byte_size_;
  data_ = other.data_;
  provenance_ = other.provenance_;
  if (is_inline()) std::memcpy(inline_, other.inline_, byte_size_);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : dtype_(other.dtype_),
      shape_(std::move(other.shape_)),
      num_elements_(std::exchange(other.num_elements_, 0)),
      byte_size_(std::exchange(other.byte_size_, 0)),
      data_(std::move(other.data_)),
      provenance_(std::move(other.provenance_)) {
  if (is_inline()) std::memcpy(inline_, other.inline_, byte_size_);
}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this == &other) return *this;
  dtype_ = other.dtype_;
  shape_ = std::move(other.shape_);
  num_elements_ = std::exchange(other.num_elements_, 0);
  byte_size_ = std::exchange(other.byte_size_, 0);
  data_ = std::move(other.data_);
  provenance_ = std::move(other.provenance_);
  if (is_inline()) std::memcpy(inline_, other.inline_, byte_size_);
  return *this;
}

bool operator==(const Tensor& a, const Tensor& b) {
  // String buffers are canonical (offsets[0] == 0, bytes packed), so bytes decide equality.
  return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.byte_size_ == b.byte_size_ &&
         (a.byte_size_ == 0 || std::memcmp(a.data(), b.data(), a.byte_size_) == 0);
}

std::string Tensor::DebugString() const {
  constexpr int64_t kMaxShown = 16;
  std::string out = absl::StrCat(AbslView(DTypeName(dtype_)), ShapeString(shape_), "{");
  if (dtype_ == DType::kString) {
    for (int64_t i = 0; i < num_elements_ && i < kMaxShown; ++i) {
      if (i > 0) out += ", ";
      constexpr size_t kMaxBytes = 64;
      const std::string_view v = string_value(i);
      absl::StrAppend(&out, "\"", absl::CHexEscape(AbslView(v.substr(0, kMaxBytes))),
                      v.size() > kMaxBytes ? "\"..." : "\"");
    }
    if (num_elements_ > kMaxShown) out += ", ...";
    return out + "}";
  }
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
