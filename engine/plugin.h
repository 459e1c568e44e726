// Loads function plugins (shared libraries built with engine/plugin_api.h) into a
// FunctionRegistry, normally GlobalFunctions() at process start-up, so pipelines can
// map/filter with functions the built-ins lack:
//
//   for (const std::string& path : absl::GetFlag(FLAGS_plugin)) {
//     SLUICE_RETURN_IF_ERROR(LoadPlugin(path, &GlobalFunctions()));
//   }
//   ... ParsePipeline("range(10) | map(example.double)") now builds ...
//
// Dispatcher and workers should load the same plugins, so that validation on the
// dispatcher knows the names the workers run. Loaded libraries stay loaded for the
// life of the process (registered functions point into them).
#ifndef SLUICE_ENGINE_PLUGIN_H_
#define SLUICE_ENGINE_PLUGIN_H_

#include <string>

#include "absl/status/status.h"
#include "engine/functions.h"

namespace sluice::engine {

// dlopen()s `path` and registers its functions into `registry`, all or none. Errors name
// the path: NotFound when the file does not exist; InvalidArgument when it cannot be
// loaded (not a shared library, missing symbols) or does not export the Sluice plugin
// symbols; FailedPrecondition when it was built for another plugin ABI; AlreadyExists
// when one of its function names is taken; the plugin's own error when its
// registration fails.
[[nodiscard]] absl::Status LoadPlugin(const std::string& path, FunctionRegistry* registry);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PLUGIN_H_
