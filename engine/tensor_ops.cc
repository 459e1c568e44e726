#include "engine/tensor_ops.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

// Calls copy(src_index, dst_index, count) for every innermost run of `from` placed in the
// leading corner of `to` (both row-major, same rank).
template <typename Copy>
void ForEachRun(std::span<const int64_t> from, std::span<const int64_t> to, Copy copy) {
  const size_t rank = from.size();
  if (rank == 0) {
    copy(0, 0, 1);
    return;
  }
  int64_t runs = 1;
  for (size_t d = 0; d + 1 < rank; ++d) runs *= from[d];
  if (runs == 0 || from[rank - 1] == 0) return;
  std::vector<int64_t> index(rank - 1, 0);
  for (int64_t r = 0; r < runs; ++r) {
    int64_t src = 0, dst = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      src = src * from[d] + index[d];
      dst = dst * to[d] + index[d];
    }
    copy(src * from[rank - 1], dst * to[rank - 1], from[rank - 1]);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < from[d]) break;
      index[d] = 0;
    }
  }
}

// Whether `padding` is a value of T. tf.data requires the padding's dtype to be the
// component's; a cast would pad a uint8 component given -1 with 255, drop 0.5's fraction in
// an int64 one, and is undefined for 1e30 into an integer.
template <typename T>
bool PaddingIsAValueOf(const proto::ScalarValue& padding) {
  switch (padding.value_case()) {
    case proto::ScalarValue::kIntValue:
      if constexpr (std::is_integral_v<T>) return std::in_range<T>(padding.int_value());
      return true;  // any integer is a number of a floating type
    case proto::ScalarValue::kFloatValue: {
      const double v = padding.float_value();
      if constexpr (std::is_integral_v<T>) {
        // [min, max + 1) as doubles: both bounds are powers of two, so exact.
        return v == std::trunc(v) && v >= static_cast<double>(std::numeric_limits<T>::min()) &&
               v < static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
      }
      return std::fabs(v) <= static_cast<double>(std::numeric_limits<T>::max());
    }
    case proto::ScalarValue::kStringValue:
    case proto::ScalarValue::VALUE_NOT_SET:
      return true;
  }
  return true;
}

}  // namespace

Tensor SliceRow(const Tensor& t, int64_t index) {
  assert(!t.shape().empty() && index >= 0 && index < t.shape()[0]);
  std::vector<int64_t> shape(t.shape().begin() + 1, t.shape().end());
  const int64_t per_row = t.shape()[0] == 0 ? 0 : t.num_elements() / t.shape()[0];
  if (t.dtype() == DType::kString) {
    std::vector<std::string_view> values;
    values.reserve(static_cast<size_t>(per_row));
    for (int64_t i = 0; i < per_row; ++i) values.push_back(t.string_value(index * per_row + i));
    return Tensor::FromStrings(std::move(shape), values);
  }
  const size_t row_bytes = static_cast<size_t>(per_row) * DTypeSize(t.dtype());
  Tensor out = *Tensor::FromBuffer(t.dtype(), std::move(shape),
                                   {t.data() + static_cast<size_t>(index) * row_bytes, row_bytes});
  return out;
}

absl::Status CheckPaddingValue(DType dtype, const proto::ScalarValue& padding) {
  const bool is_string = dtype == DType::kString;
  const bool padding_is_string = padding.value_case() == proto::ScalarValue::kStringValue;
  if (padding.value_case() != proto::ScalarValue::VALUE_NOT_SET && is_string != padding_is_string) {
    return absl::InvalidArgumentError(absl::StrCat(
        "padding value ", padding_is_string ? "'" + padding.string_value() + "'" : "number",
        " does not match the component's dtype ", AbslView(DTypeName(dtype))));
  }
  if (is_string) return absl::OkStatus();
  const bool fits = VisitDType(
      dtype, [&](auto tag) { return PaddingIsAValueOf<typename decltype(tag)::type>(padding); });
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "padding value ",
        padding.value_case() == proto::ScalarValue::kIntValue ? absl::StrCat(padding.int_value())
                                                              : absl::StrCat(padding.float_value()),
        " is not a value of the component's dtype ", AbslView(DTypeName(dtype))));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> PadTo(const Tensor& t, std::span<const int64_t> shape,
                             const proto::ScalarValue& padding) {
  if (shape.size() != t.shape().size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pad ", ShapeString(t.shape()), " to ",
                                                   ShapeString(shape), ": ranks differ"));
  }
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < t.shape()[d]) {
      return absl::InvalidArgumentError(absl::StrCat("cannot pad ", ShapeString(t.shape()), " to ",
                                                     ShapeString(shape), ": dim ", d,
                                                     " would shrink"));
    }
  }
  SLUICE_RETURN_IF_ERROR(CheckPaddingValue(t.dtype(), padding));
  const bool is_string = t.dtype() == DType::kString;
  std::vector<int64_t> out_shape(shape.begin(), shape.end());
  if (is_string) {
    SLUICE_ASSIGN_OR_RETURN(int64_t n, NumElementsOf(out_shape));
    if (n > kMaxTensorBytes / 16) {  // a view here, an offset in the tensor
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot pad to ", ShapeString(out_shape), ": ", n, " strings are too many"));
    }
    std::vector<std::string_view> values(static_cast<size_t>(n), padding.string_value());
    ForEachRun(t.shape(), out_shape, [&](int64_t src, int64_t dst, int64_t count) {
      for (int64_t i = 0; i < count; ++i) values[dst + i] = t.string_value(src + i);
    });
    return Tensor::FromStrings(std::move(out_shape), values);
  }
  SLUICE_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(t.dtype(), out_shape));
  VisitDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T fill{};
    switch (padding.value_case()) {
      case proto::ScalarValue::kIntValue:
        fill = static_cast<T>(padding.int_value());
        break;
      case proto::ScalarValue::kFloatValue:
        fill = static_cast<T>(padding.float_value());
        break;
      case proto::ScalarValue::kStringValue:
      case proto::ScalarValue::VALUE_NOT_SET:
        break;
    }
    auto dst = out.mutable_values<T>();
    if (fill != T{}) std::fill(dst.begin(), dst.end(), fill);
    auto src = t.values<T>();
    ForEachRun(t.shape(), out_shape, [&](int64_t s, int64_t d, int64_t count) {
      std::memcpy(&dst[d], &src[s], static_cast<size_t>(count) * sizeof(T));
    });
  });
  return out;
}

proto::ScalarValue IntScalarValue(int64_t v) {
  proto::ScalarValue s;
  s.set_int_value(v);
  return s;
}

proto::ScalarValue FloatScalarValue(double v) {
  proto::ScalarValue s;
  s.set_float_value(v);
  return s;
}

proto::ScalarValue StringScalarValue(std::string v) {
  proto::ScalarValue s;
  s.set_string_value(std::move(v));
  return s;
}

}  // namespace sluice::engine
