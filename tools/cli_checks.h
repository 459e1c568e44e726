// CLI11 checks shared by `sluice` and `sluice-perf`.
//
//   app->add_option("--iterations", n, "...")->check(AtLeast(1));
#ifndef SLUICE_TOOLS_CLI_CHECKS_H_
#define SLUICE_TOOLS_CLI_CHECKS_H_

#include <arpa/inet.h>

#include <cctype>
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

// A host name (letters, digits, '-' and '_' in dot-separated labels of 1-63, 253 in all) or
// an IPv4 or IPv6 address: what peers are told to connect to, so a typo is refused here
// rather than by every reader that fails to resolve it.
inline CLI::Validator HostName() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        in6_addr ip;
        if (inet_pton(AF_INET, text.c_str(), &ip) == 1 ||
            inet_pton(AF_INET6, text.c_str(), &ip) == 1) {
          return "";
        }
        const std::string bad = "'" + text + "' is not a host name or an IP address";
        if (text.empty() || text.size() > 253) return bad;
        size_t label = 0;
        for (const char c : text) {
          if (c == '.') {
            if (label == 0) return bad;
            label = 0;
          } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
            if (++label > 63) return bad;
          } else {
            return bad;
          }
        }
        return "";
      },
      "HOST");
}

// The first word on the command line that is neither an option of `app`, an option's
// value, nor one of its subcommands: what a user took for a command ("sluice bogus" was
// told only that a subcommand is required). Empty when there is none.
inline std::string UnknownCommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind('-', 0) == 0) {
      const CLI::Option* option = app.get_option_no_throw(arg.substr(0, arg.find('=')));
      if (option != nullptr && option->get_type_size() != 0 && arg.find('=') == std::string::npos) {
        ++i;  // its value
      }
      continue;
    }
    for (const CLI::App* command : app.get_subcommands({})) {
      if (command->check_name(arg)) return "";
    }
    return arg;
  }
  return "";
}

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_CLI_CHECKS_H_
