#include "control/processing_mode.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice::control {

const char* ProcessingModeName(proto::ProcessingMode mode) {
  switch (mode) {
    case proto::OFF:
      return "off";
    case proto::DYNAMIC:
      return "dynamic";
    case proto::FILE:
      return "file";
    case proto::DATA:
      return "data";
    case proto::FILE_OR_DATA:
      return "file_or_data";
    case proto::HINT:
      return "hint";
    case proto::PROCESSING_MODE_UNSPECIFIED:
    case proto::ProcessingMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::ProcessingMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "unspecified";
}

const char* ProcessingModeChoices() { return "off|dynamic|file|data|file_or_data|hint"; }

absl::StatusOr<proto::ProcessingMode> ParseProcessingMode(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (proto::ProcessingMode mode :
       {proto::OFF, proto::DYNAMIC, proto::FILE, proto::DATA, proto::FILE_OR_DATA, proto::HINT}) {
    if (lower == ProcessingModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat("processing mode must be one of ",
                                                 ProcessingModeChoices(), ", got '", text, "'"));
}

bool IsStaticSharding(proto::ProcessingMode mode) {
  switch (mode) {
    case proto::FILE:
    case proto::DATA:
    case proto::FILE_OR_DATA:
    case proto::HINT:
      return true;
    case proto::OFF:
    case proto::DYNAMIC:
    case proto::PROCESSING_MODE_UNSPECIFIED:
    case proto::ProcessingMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::ProcessingMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return false;
}

}  // namespace sluice::control
