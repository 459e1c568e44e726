#include "engine/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/plugin_api.h"

namespace sluice::engine {
namespace {

// Collects a plugin's functions so they reach the real registry all or none.
class StagingRegistrar : public PluginRegistrar {
 public:
  absl::Status RegisterFunction(std::string name, FunctionRegistry::Function fn) override {
    return staged_.Register(std::move(name), std::move(fn));
  }
  const FunctionRegistry& staged() const { return staged_; }

 private:
  FunctionRegistry staged_;
};

std::string DlError() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

}  // namespace

absl::Status LoadPlugin(const std::string& path, FunctionRegistry* registry) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("plugin '", path, "' does not exist"));
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load plugin '", path, "' as a shared library: ", DlError()));
  }
  auto abi_fn = reinterpret_cast<SluicePluginAbiFn>(dlsym(handle, "sluice_plugin_abi"));
  auto register_fn =
      reinterpret_cast<SluicePluginRegisterFn>(dlsym(handle, "sluice_plugin_register"));
  if (abi_fn == nullptr || register_fn == nullptr) {
    dlclose(handle);
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path,
        "' is not a Sluice plugin: expected it to export sluice_plugin_abi and "
        "sluice_plugin_register (define them with SLUICE_PLUGIN from engine/plugin_api.h)"));
  }
  const PluginAbi* abi = abi_fn();
  if (abi == nullptr || abi->version != kPluginAbi.version ||
      abi->tensor_size != kPluginAbi.tensor_size ||
      abi->function_size != kPluginAbi.function_size ||
      abi->status_size != kPluginAbi.status_size) {
    const std::string seen =
        abi == nullptr ? "no ABI record"
                       : absl::StrCat("version ", abi->version, " (sizes ", abi->tensor_size, "/",
                                      abi->function_size, "/", abi->status_size, ")");
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin '", path, "' was built for another Sluice plugin ABI: expected version ",
        kPluginAbi.version, " (sizes ", kPluginAbi.tensor_size, "/", kPluginAbi.function_size, "/",
        kPluginAbi.status_size, "), got ", seen, "; rebuild it against this Sluice"));
  }
  StagingRegistrar registrar;
  char error[512] = {};
  if (register_fn(&registrar, error, sizeof(error)) != 0) {
    // Its functions may be referenced by nothing, but the plugin's code may have started
    // threads or registered handlers; keeping it loaded is the safe choice.
    return absl::InvalidArgumentError(
        absl::StrCat("plugin '", path, "' failed to register its functions: ", error));
  }
  const std::vector<std::string> names = registrar.staged().Names();
  for (const std::string& name : names) {
    if (registry->Find(name) != nullptr) {
      return absl::AlreadyExistsError(absl::StrCat("plugin '", path, "' registers function '", name,
                                                   "', which is already registered"));
    }
  }
  for (const std::string& name : names) {
    SLUICE_RETURN_IF_ERROR(registry->Register(name, *registrar.staged().Find(name)));
  }
  // Never dlclose: the registered functions' code lives in the library.
  return absl::OkStatus();
}

}  // namespace sluice::engine
