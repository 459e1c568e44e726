#include "engine/functions.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/string_functions.h"

namespace sluice::engine {
namespace {

absl::Status NeedNumeric(std::string_view fn, const Tensor& t) {
  if (IsNumericDType(t.dtype())) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(AbslView(fn), " expects numeric tensors, got ",
                                                 AbslView(DTypeName(t.dtype())),
                                                 ShapeString(t.shape())));
}

// Applies `op` to every value of `t`, producing a tensor of the same dtype and shape.
template <typename Op>
Tensor MapValues(const Tensor& t, Op op) {
  Tensor out = t;
  VisitDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (T& v : out.mutable_values<T>()) v = static_cast<T>(op(v));
  });
  return out;
}

template <typename To>
Tensor Cast(const Tensor& t) {
  absl::StatusOr<Tensor> out = Tensor::Create(DTypeOf<To>::value, t.shape());
  // The shape came from a live tensor, so it is known to be valid.
  Tensor result = *std::move(out);
  VisitDType(t.dtype(), [&](auto tag) {
    using From = typename decltype(tag)::type;
    auto src = t.values<From>();
    auto dst = result.mutable_values<To>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<To>(src[i]);
  });
  return result;
}

// A function applying `op` to every component, which must be numeric.
template <typename Op>
FunctionRegistry::Function NumericComponentWise(std::string name, Op op) {
  return [name = std::move(name), op](Element in, Element* out) -> absl::Status {
    out->reserve(in.size());
    for (Tensor& t : in) {
      SLUICE_RETURN_IF_ERROR(NeedNumeric(name, t));
      out->push_back(op(t));
    }
    return absl::OkStatus();
  };
}

// Unsigned arithmetic for integers keeps overflow defined (wrapping) instead of UB.
template <typename T>
T Square(T v) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(v) * static_cast<U>(v));
  } else {
    return v * v;
  }
}

Tensor SquareTensor(const Tensor& t) {
  return MapValues(t, [](auto v) { return Square(v); });
}

// A predicate over component 0, an integer scalar.
template <typename Pred>
FunctionRegistry::Function IntegerPredicate(std::string name, Pred pred) {
  return [name = std::move(name), pred](Element in, Element* out) -> absl::Status {
    if (in.empty() || !in[0].shape().empty() || !IsNumericDType(in[0].dtype()) ||
        in[0].dtype() == DType::kFloat32 || in[0].dtype() == DType::kFloat64) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " expects an integer scalar as component 0, got ",
                       in.empty() ? "no components" : in[0].DebugString()));
    }
    bool keep = false;
    VisitDType(in[0].dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      keep = pred(static_cast<int64_t>(in[0].values<T>()[0]));
    });
    out->push_back(Tensor::Scalar<uint8_t>(keep ? 1 : 0));
    return absl::OkStatus();
  };
}

FunctionRegistry* MakeBuiltins() {
  auto* r = new FunctionRegistry();
  auto add = [r](std::string name, FunctionRegistry::Function fn) {
    absl::Status s = r->Register(std::move(name), std::move(fn));
    (void)s;  // Names are distinct literals; failure is impossible.
  };
  add("identity", [](Element in, Element* out) {
    *out = std::move(in);
    return absl::OkStatus();
  });
  add("square", NumericComponentWise("square", SquareTensor));
  add("negate", NumericComponentWise("negate", [](const Tensor& t) {
        return MapValues(t, [](auto v) {
          using T = decltype(v);
          if constexpr (std::is_integral_v<T>) {
            return static_cast<T>(std::make_unsigned_t<T>{0} -
                                  static_cast<std::make_unsigned_t<T>>(v));
          } else {
            return -v;
          }
        });
      }));
  add("increment", NumericComponentWise("increment", [](const Tensor& t) {
        return MapValues(t, [](auto v) {
          using T = decltype(v);
          if constexpr (std::is_integral_v<T>) {
            return static_cast<T>(static_cast<std::make_unsigned_t<T>>(v) + 1u);
          } else {
            return static_cast<T>(v + 1);
          }
        });
      }));
  add("cast_int32", NumericComponentWise("cast_int32", Cast<int32_t>));
  add("cast_int64", NumericComponentWise("cast_int64", Cast<int64_t>));
  add("cast_float32", NumericComponentWise("cast_float32", Cast<float>));
  add("cast_float64", NumericComponentWise("cast_float64", Cast<double>));
  add("with_square", [](Element in, Element* out) -> absl::Status {
    for (const Tensor& t : in) SLUICE_RETURN_IF_ERROR(NeedNumeric("with_square", t));
    out->reserve(2 * in.size());
    for (const Tensor& t : in) out->push_back(t);
    for (const Tensor& t : in) out->push_back(SquareTensor(t));
    return absl::OkStatus();
  });
  add("is_even", IntegerPredicate("is_even", [](int64_t v) { return v % 2 == 0; }));
  add("is_odd", IntegerPredicate("is_odd", [](int64_t v) { return v % 2 != 0; }));
  add("normalize_uint8", [](Element in, Element* out) -> absl::Status {
    for (const Tensor& t : in) {
      if (t.dtype() != DType::kUInt8) {
        return absl::InvalidArgumentError(absl::StrCat(
            "normalize_uint8 expects uint8 components, got ", AbslView(DTypeName(t.dtype()))));
      }
      Tensor f = Cast<float>(t);
      for (float& v : f.mutable_values<float>()) v /= 255.0f;
      out->push_back(std::move(f));
    }
    return absl::OkStatus();
  });
  AddStringBuiltins(r);
  return r;
}

}  // namespace

FunctionRegistry::FunctionRegistry(const FunctionRegistry& other) {
  absl::MutexLock lock(&other.mu_);
  functions_ = other.functions_;
}

absl::Status FunctionRegistry::Register(std::string name, Function fn) {
  if (name.empty()) {
    return absl::InvalidArgumentError("function name must be non-empty");
  }
  if (!fn) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "' is empty"));
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = functions_.emplace(std::move(name), std::move(fn));
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("function '", it->first, "' is already registered"));
  }
  return absl::OkStatus();
}

const FunctionRegistry::Function* FunctionRegistry::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionRegistry::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  names.reserve(functions_.size());
  for (const auto& [name, fn] : functions_) names.push_back(name);
  return names;
}

const FunctionRegistry& FunctionRegistry::Builtins() {
  // Leaked on purpose: avoids destruction-order problems with threads still running at exit.
  static const FunctionRegistry* const builtins = MakeBuiltins();
  return *builtins;
}

FunctionRegistry& GlobalFunctions() {
  static FunctionRegistry* const global = new FunctionRegistry(FunctionRegistry::Builtins());
  return *global;
}

}  // namespace sluice::engine
