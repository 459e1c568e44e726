// CLI11 checks shared by `sluice` and `sluice-perf`.
//
//   app->add_option("--iterations", n, "...")->check(AtLeast(1));
#ifndef SLUICE_TOOLS_CLI_CHECKS_H_
#define SLUICE_TOOLS_CLI_CHECKS_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::tools {

// A whole number of at least `min`. CLI11's PositiveNumber and NonNegativeNumber name their
// bound, DBL_MAX, in 300 digits.
inline CLI::Validator AtLeast(int64_t min) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int64_t value = 0;
        if (!absl::SimpleAtoi(text, &value)) return "expects a whole number, got '" + text + "'";
        if (value < min) return absl::StrCat("must be at least ", min, ", got ", text);
        return "";
      },
      absl::StrCat(">= ", min));
}

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_CLI_CHECKS_H_
