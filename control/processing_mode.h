// Processing modes (tf.data's sharding policies) by name, for flags, errors and `status`.
//
//   absl::StatusOr<proto::ProcessingMode> mode = ParseProcessingMode("file_or_data");
//   if (IsStaticSharding(*mode)) { ... needs the dispatcher's fixed worker list ... }
//   std::cout << ProcessingModeName(*mode);  // "file_or_data"
#ifndef SLUICE_CONTROL_PROCESSING_MODE_H_
#define SLUICE_CONTROL_PROCESSING_MODE_H_

#include <string>

#include "absl/status/statusor.h"
#include "control/service.pb.h"

namespace sluice::control {

// Lower-case name: off, dynamic, file, data, file_or_data, hint ("unspecified" otherwise).
[[nodiscard]] const char* ProcessingModeName(proto::ProcessingMode mode);

// Accepts the names above in any case; InvalidArgument listing them otherwise.
[[nodiscard]] absl::StatusOr<proto::ProcessingMode> ParseProcessingMode(const std::string& text);

// FILE, DATA, FILE_OR_DATA and HINT: each worker of a fixed list reads a fixed share.
[[nodiscard]] bool IsStaticSharding(proto::ProcessingMode mode);

// "off|dynamic|file|data|file_or_data|hint", for --help texts.
[[nodiscard]] const char* ProcessingModeChoices();

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_PROCESSING_MODE_H_
