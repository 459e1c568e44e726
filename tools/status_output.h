// Prints a dispatcher's status (`sluice status`) as a table or as JSON.
//
//   PrintStatus(response, /*json=*/false, std::cout);
#ifndef SLUICE_TOOLS_STATUS_OUTPUT_H_
#define SLUICE_TOOLS_STATUS_OUTPUT_H_

#include <ostream>

#include "control/service.pb.h"
#include "nlohmann/json.hpp"

namespace sluice::tools {

[[nodiscard]] nlohmann::json StatusToJson(const proto::GetStatusResponse& status);
void PrintStatus(const proto::GetStatusResponse& status, bool json, std::ostream& out);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_STATUS_OUTPUT_H_
