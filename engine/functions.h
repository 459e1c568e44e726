// Named element functions that `map` stages apply.
//
// Pipelines travel between processes as protos, so a map stage cannot carry
// code; it names a function that every worker resolves in its registry.
// Workers start from the built-ins and may add their own:
//
//   FunctionRegistry registry = FunctionRegistry::Builtins();  // a copy
//   SLUICE_RETURN_IF_ERROR(registry.Register(
//       "double", [](Element in, Element* out) { ...; return absl::OkStatus(); }));
//   const FunctionRegistry::Function* fn = registry.Find("square");
//
// Thread-compatible: Register must not race with anything; Find is safe from
// many threads once registration is done.
#ifndef SLUICE_ENGINE_FUNCTIONS_H_
#define SLUICE_ENGINE_FUNCTIONS_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/tensor.h"

namespace sluice::engine {

class FunctionRegistry {
 public:
  // `in` is passed by value so functions can move tensors through without copying; `*out`
  // is empty on entry.
  using Function = std::function<absl::Status(Element in, Element* out)>;

  FunctionRegistry() = default;

  // InvalidArgument for an empty name or function; AlreadyExists for a duplicate name.
  [[nodiscard]] absl::Status Register(std::string name, Function fn);
  // Null when absent. The pointer stays valid until the registry is destroyed.
  const Function* Find(std::string_view name) const;
  // Sorted.
  std::vector<std::string> Names() const;

  // identity, square, negate, increment (+1), cast_float32, cast_float64, and with_square.
  // All are element-wise on every component; with_square maps (a, b, ...) to
  // (a, b, ..., a*a, b*b, ...), so a 1-component element x becomes (x, x*x).
  static const FunctionRegistry& Builtins();

 private:
  // std::map: Find's pointers must survive later insertions, and Names() is sorted for free.
  std::map<std::string, Function, std::less<>> functions_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_FUNCTIONS_H_
