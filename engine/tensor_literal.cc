#include "engine/tensor_literal.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

bool IsIntegerDType(DType d) {
  return d == DType::kInt32 || d == DType::kInt64 || d == DType::kUInt8;
}

template <typename T>
bool FitsIn(int64_t v) {
  return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         (v < 0 ||
          static_cast<uint64_t>(v) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
}

// Flattened leaves of a nested list, and its shape.
struct Flat {
  std::vector<int64_t> shape;
  std::vector<const ArgValue*> leaves;
};

absl::Status Flatten(const ArgValue& v, size_t depth, std::string_view what, Flat* flat) {
  if (v.kind != ArgValue::Kind::kList) {
    if (v.kind != ArgValue::Kind::kInteger && v.kind != ArgValue::Kind::kFloat &&
        v.kind != ArgValue::Kind::kString) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), " expects numbers or quoted strings, got ", v.Describe()));
    }
    if (depth != flat->shape.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), " must be rectangular: found ", v.Describe(), " at depth ",
                       depth, " where lists of depth ", flat->shape.size(), " were seen before"));
    }
    flat->leaves.push_back(&v);
    return absl::OkStatus();
  }
  const auto size = static_cast<int64_t>(v.items.size());
  if (depth == flat->shape.size() && flat->leaves.empty()) {
    flat->shape.push_back(size);
  } else if (depth >= flat->shape.size() || flat->shape[depth] != size) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " must be rectangular: a list at depth ", depth, " has ", size,
                     " items, unlike the lists before it"));
  }
  for (const ArgValue& item : v.items) SLUICE_RETURN_IF_ERROR(Flatten(item, depth + 1, what, flat));
  return absl::OkStatus();
}

ArgValue Nest(const proto::TensorLiteral& lit, DType dtype, size_t dim, int64_t* next) {
  if (dim == static_cast<size_t>(lit.shape_size())) {
    const int64_t i = (*next)++;
    if (dtype == DType::kString) return ArgValue::String(lit.string_values(i));
    if (IsIntegerDType(dtype)) return ArgValue::Integer(lit.int_values(i));
    return ArgValue::Float(lit.float_values(i));
  }
  std::vector<ArgValue> items;
  for (int64_t k = 0; k < lit.shape(static_cast<int>(dim)); ++k) {
    items.push_back(Nest(lit, dtype, dim + 1, next));
  }
  return ArgValue::List(std::move(items));
}

}  // namespace

absl::StatusOr<Tensor> TensorFromLiteral(const proto::TensorLiteral& literal) {
  if (literal.dtype() > 255 || !IsValidDType(static_cast<uint8_t>(literal.dtype()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a dtype in [1, 6], got ", literal.dtype()));
  }
  const auto dtype = static_cast<DType>(literal.dtype());
  std::vector<int64_t> shape(literal.shape().begin(), literal.shape().end());
  SLUICE_ASSIGN_OR_RETURN(int64_t n, NumElementsOf(shape));
  const int ints = literal.int_values_size();
  const int floats = literal.float_values_size();
  const int strings = literal.string_values_size();
  const int64_t given = dtype == DType::kString ? strings : IsIntegerDType(dtype) ? ints : floats;
  if (given != n || ints + floats + strings != given) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", AbslView(DTypeName(dtype)), ShapeString(shape), " literal needs ", n, " values in ",
        dtype == DType::kString ? "string_values"
        : IsIntegerDType(dtype) ? "int_values"
                                : "float_values",
        " and no others; got ", ints, " int, ", floats, " float and ", strings, " string values"));
  }
  if (dtype == DType::kString) {
    return Tensor::FromStrings(
        std::move(shape),
        std::vector<std::string>(literal.string_values().begin(), literal.string_values().end()));
  }
  SLUICE_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  absl::Status status;
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto out = t.mutable_values<T>();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_integral_v<T>) {
        const int64_t v = literal.int_values(static_cast<int>(i));
        if (!FitsIn<T>(v)) {
          status = absl::InvalidArgumentError(absl::StrCat(
              "value ", v, " at index ", i, " does not fit in ", AbslView(DTypeName(dtype))));
          return;
        }
        out[i] = static_cast<T>(v);
      } else {
        out[i] = static_cast<T>(literal.float_values(static_cast<int>(i)));
      }
    }
  });
  if (!status.ok()) return status;
  return t;
}

proto::TensorLiteral LiteralFromTensor(const Tensor& tensor) {
  proto::TensorLiteral lit;
  lit.set_dtype(static_cast<uint32_t>(tensor.dtype()));
  for (int64_t d : tensor.shape()) lit.add_shape(d);
  if (tensor.dtype() == DType::kString) {
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      lit.add_string_values(std::string(tensor.string_value(i)));
    }
    return lit;
  }
  VisitDType(tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (T v : tensor.values<T>()) {
      if constexpr (std::is_integral_v<T>) {
        lit.add_int_values(static_cast<int64_t>(v));
      } else {
        lit.add_float_values(static_cast<double>(v));
      }
    }
  });
  return lit;
}

absl::StatusOr<proto::TensorLiteral> LiteralFromArg(const ArgValue& value,
                                                    std::optional<DType> dtype,
                                                    std::string_view what) {
  Flat flat;
  SLUICE_RETURN_IF_ERROR(Flatten(value, 0, what, &flat));
  bool has_float = false, has_string = false, has_int = false;
  for (const ArgValue* leaf : flat.leaves) {
    has_float |= leaf->kind == ArgValue::Kind::kFloat;
    has_string |= leaf->kind == ArgValue::Kind::kString;
    has_int |= leaf->kind == ArgValue::Kind::kInteger;
  }
  if (has_string && (has_float || has_int)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " mixes strings and numbers; use one kind"));
  }
  const DType inferred = has_string              ? DType::kString
                         : has_int && !has_float ? DType::kInt64
                                                 : DType::kFloat32;
  const DType target = dtype.value_or(inferred);
  if ((target == DType::kString) != has_string && !flat.leaves.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " holds ", has_string ? "strings" : "numbers",
                     " but its dtype is ", AbslView(DTypeName(target))));
  }
  if (IsIntegerDType(target) && has_float) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " holds floats but its dtype is ", AbslView(DTypeName(target)),
                     "; write integers or use float32/float64"));
  }
  proto::TensorLiteral lit;
  lit.set_dtype(static_cast<uint32_t>(target));
  for (int64_t d : flat.shape) lit.add_shape(d);
  for (const ArgValue* leaf : flat.leaves) {
    if (target == DType::kString) {
      lit.add_string_values(leaf->text);
    } else if (IsIntegerDType(target)) {
      SLUICE_ASSIGN_OR_RETURN(int64_t v, leaf->AsInt(what));
      lit.add_int_values(v);
    } else {
      SLUICE_ASSIGN_OR_RETURN(double v, leaf->AsDouble(what));
      lit.add_float_values(v);
    }
  }
  absl::StatusOr<Tensor> check = TensorFromLiteral(lit);
  if (!check.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(what), ": ", check.status().message()));
  }
  return lit;
}

ArgValue LiteralToArg(const proto::TensorLiteral& literal) {
  int64_t next = 0;
  return Nest(literal, static_cast<DType>(literal.dtype()), 0, &next);
}

DType LiteralDefaultDType(const proto::TensorLiteral& literal) {
  const auto dtype = static_cast<DType>(literal.dtype());
  if (literal.int_values_size() + literal.float_values_size() + literal.string_values_size() == 0) {
    return DType::kFloat32;
  }
  if (dtype == DType::kString) return DType::kString;
  return IsIntegerDType(dtype) ? DType::kInt64 : DType::kFloat32;
}

absl::Status CheckLiteralIsWritable(const proto::TensorLiteral& literal) {
  for (double v : literal.float_values()) {
    if (!std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("value ", v,
                       " cannot be written in the pipeline text form; use finite "
                       "values"));
    }
  }
  for (int d = 0; d + 1 < literal.shape_size(); ++d) {
    if (literal.shape(d) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape ",
          ShapeString(std::vector<int64_t>(literal.shape().begin(), literal.shape().end())),
          " has a zero dim before the last, which nested lists cannot spell"));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice::engine
