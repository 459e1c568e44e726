#include "engine/functions.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::engine {
namespace {

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

template <typename Op>
FunctionRegistry::Function ComponentWise(Op op) {
  return [op](Element in, Element* out) {
    out->reserve(in.size());
    for (Tensor& t : in) out->push_back(op(t));
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
  add("square", ComponentWise(SquareTensor));
  add("negate", ComponentWise([](const Tensor& t) {
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
  add("increment", ComponentWise([](const Tensor& t) {
        return MapValues(t, [](auto v) {
          using T = decltype(v);
          if constexpr (std::is_integral_v<T>) {
            return static_cast<T>(static_cast<std::make_unsigned_t<T>>(v) + 1u);
          } else {
            return static_cast<T>(v + 1);
          }
        });
      }));
  add("cast_float32", ComponentWise(Cast<float>));
  add("cast_float64", ComponentWise(Cast<double>));
  add("with_square", [](Element in, Element* out) {
    out->reserve(2 * in.size());
    for (const Tensor& t : in) out->push_back(t);
    for (const Tensor& t : in) out->push_back(SquareTensor(t));
    return absl::OkStatus();
  });
  return r;
}

}  // namespace

absl::Status FunctionRegistry::Register(std::string name, Function fn) {
  if (name.empty()) {
    return absl::InvalidArgumentError("function name must be non-empty");
  }
  if (!fn) {
    return absl::InvalidArgumentError(absl::StrCat("function '", name, "' is empty"));
  }
  auto [it, inserted] = functions_.emplace(std::move(name), std::move(fn));
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("function '", it->first, "' is already registered"));
  }
  return absl::OkStatus();
}

const FunctionRegistry::Function* FunctionRegistry::Find(std::string_view name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionRegistry::Names() const {
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

}  // namespace sluice::engine
