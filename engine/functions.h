// Named element functions that `map` and `filter` stages apply.
//
// Pipelines travel between processes as protos, so a map stage cannot carry
// code; it names a function that every worker resolves in its registry.
// Processes start from GlobalFunctions(), the built-ins plus whatever plugins
// (engine/plugin.h) add at start-up:
//
//   FunctionRegistry registry = FunctionRegistry::Builtins();  // a copy
//   SLUICE_RETURN_IF_ERROR(registry.Register(
//       "double", [](Element in, Element* out) { ...; return absl::OkStatus(); }));
//   const FunctionRegistry::Function* fn = registry.Find("square");
//
// Thread-safe: Register and Find may race (a mutex guards the table), and Find's
// pointers stay valid for the registry's lifetime. Functions themselves may be
// called from many threads at once (parallel map), so they must be thread-safe.
#ifndef SLUICE_ENGINE_FUNCTIONS_H_
#define SLUICE_ENGINE_FUNCTIONS_H_

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "engine/tensor.h"

namespace sluice::engine {

class FunctionRegistry {
 public:
  // `in` is passed by value so functions can move tensors through without copying; `*out`
  // is empty on entry.
  using Function = std::function<absl::Status(Element in, Element* out)>;

  FunctionRegistry() = default;
  FunctionRegistry(const FunctionRegistry& other);
  FunctionRegistry& operator=(const FunctionRegistry& other) = delete;

  // InvalidArgument for an empty name or function; AlreadyExists for a duplicate name.
  [[nodiscard]] absl::Status Register(std::string name, Function fn);
  // Null when absent. The pointer stays valid until the registry is destroyed.
  const Function* Find(std::string_view name) const;
  // Sorted.
  std::vector<std::string> Names() const;

  // The built-ins, all element-wise on every component unless noted:
  //   identity; square, negate, increment (+1) (numeric); cast_int32, cast_int64,
  //   cast_float32, cast_float64 (numeric); with_square: (a, b, ...) -> (a, b, ..., a*a,
  //   b*b, ...), so x becomes (x, x*x).
  //   Predicates for `filter` (a uint8 scalar, 1 = keep, from component 0): is_even,
  //   is_odd (integer scalars), non_empty (a string scalar with bytes, or a tensor with
  //   elements).
  //   Parsing (string components; other components pass through): string_length (int64
  //   of the same shape), string_to_int64, string_to_float32 (decimal text, surrounding
  //   whitespace allowed; anything else is an error naming the text), decode_raw_uint8 and
  //   decode_raw_float32 (a string scalar's bytes as a vector; float32 needs a multiple of
  //   4 bytes, little-endian), split_whitespace (a string scalar -> string[k] of tokens).
  //   normalize_uint8: uint8 -> float32 in [0, 1] (x / 255).
  static const FunctionRegistry& Builtins();

 private:
  mutable absl::Mutex mu_;
  // std::map: Find's pointers must survive later insertions, and Names() is sorted for free.
  std::map<std::string, Function, std::less<>> functions_ ABSL_GUARDED_BY(mu_);
};

// The process-wide registry that BuildPipeline and validation use when the pipeline
// context names none: the built-ins plus functions that plugins registered (LoadPlugin).
// Mutable so that start-up code can add to it; register before building pipelines that
// name the new functions.
FunctionRegistry& GlobalFunctions();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_FUNCTIONS_H_
