// What a function plugin includes: the ABI between Sluice processes and shared
// libraries that add named functions, like tf.data's load_op_library. Clients can
// only name functions; the code itself is installed on the workers and loaded at
// start-up (engine/plugin.h, `--plugin path.so`).
//
//   #include "engine/plugin_api.h"
//
//   SLUICE_PLUGIN(registrar) {
//     SLUICE_RETURN_IF_ERROR(registrar.RegisterFunction(
//         "mylib.double", [](sluice::engine::Element in, sluice::engine::Element* out) {
//           ...;
//           return absl::OkStatus();
//         }));
//     return absl::OkStatus();
//   }
//
// SLUICE_PLUGIN defines the two exported C symbols the loader looks for:
// sluice_plugin_abi(), checked first, and sluice_plugin_register(). Build the plugin
// with the same compiler, Abseil and Sluice headers as the process that loads it
// (the ABI record catches the common mismatches), export only those symbols
// (-fvisibility=hidden) and link engine/tensor.cc into it if its functions build
// tensors. Function names should carry a prefix ("mylib.") so plugins cannot clash.
#ifndef SLUICE_ENGINE_PLUGIN_API_H_
#define SLUICE_ENGINE_PLUGIN_API_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "engine/functions.h"
#include "engine/tensor.h"

namespace sluice::engine {

// Bump when anything a plugin and its host share changes incompatibly.
// 2: tensors share buffers (copy-on-write); 3: small buffers inline (Tensor::kInlineBytes)
inline constexpr uint32_t kPluginAbiVersion = 3;

// Compared field by field when a plugin is loaded.
struct PluginAbi {
  uint32_t version;
  uint32_t tensor_size;
  uint32_t function_size;
  uint32_t status_size;
};

inline constexpr PluginAbi kPluginAbi = {kPluginAbiVersion, sizeof(Tensor),
                                         sizeof(FunctionRegistry::Function), sizeof(absl::Status)};

// Handed to a plugin's registration function; calls go back into the host through the
// vtable, so plugins need no host symbols.
class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  // InvalidArgument for an empty name or function; AlreadyExists for a name the process
  // (or this plugin) already has.
  [[nodiscard]] virtual absl::Status RegisterFunction(std::string name,
                                                      FunctionRegistry::Function fn) = 0;
};

}  // namespace sluice::engine

extern "C" {
using SluicePluginAbiFn = const sluice::engine::PluginAbi* (*)();
// Returns 0 on success; otherwise writes a NUL-terminated message into `error`.
using SluicePluginRegisterFn = int (*)(sluice::engine::PluginRegistrar* registrar, char* error,
                                       size_t error_size);
}

#define SLUICE_PLUGIN(registrar)                                                                \
  static ::absl::Status SluicePluginRegisterImpl(::sluice::engine::PluginRegistrar& registrar); \
  extern "C" __attribute__((visibility("default"))) const ::sluice::engine::PluginAbi*          \
  sluice_plugin_abi() {                                                                         \
    return &::sluice::engine::kPluginAbi;                                                       \
  }                                                                                             \
  extern "C" __attribute__((visibility("default"))) int sluice_plugin_register(                 \
      ::sluice::engine::PluginRegistrar* r, char* error, size_t error_size) {                   \
    ::absl::Status s = SluicePluginRegisterImpl(*r);                                            \
    if (s.ok()) return 0;                                                                       \
    std::snprintf(error, error_size, "%s", std::string(s.message()).c_str());                   \
    return 1;                                                                                   \
  }                                                                                             \
  static ::absl::Status SluicePluginRegisterImpl(::sluice::engine::PluginRegistrar& registrar)

#endif  // SLUICE_ENGINE_PLUGIN_API_H_
