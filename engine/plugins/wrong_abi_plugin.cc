// A plugin built for a different plugin ABI version, for plugin_test: the loader must
// refuse it before calling its registration function.
#include "engine/plugin_api.h"

namespace {
constexpr sluice::engine::PluginAbi kWrongAbi = {
    sluice::engine::kPluginAbiVersion + 998, sluice::engine::kPluginAbi.tensor_size,
    sluice::engine::kPluginAbi.function_size, sluice::engine::kPluginAbi.status_size};
}  // namespace

extern "C" __attribute__((visibility("default"))) const sluice::engine::PluginAbi*
sluice_plugin_abi() {
  return &kWrongAbi;
}

extern "C" __attribute__((visibility("default"))) int sluice_plugin_register(
    sluice::engine::PluginRegistrar*, char* error, size_t error_size) {
  std::snprintf(error, error_size, "must never be called");
  return 1;
}
