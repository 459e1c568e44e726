// `sluice-perf doctor`: prints AssessHost's findings for this host (tools/host_check.h).
#include <iostream>

#include "absl/strings/str_format.h"
#include "tools/host_check.h"
#include "tools/perf_commands.h"

namespace sluice::tools {

void AddDoctorFlags(CLI::App* app, DoctorFlags& flags) {
  app->add_flag("--json", flags.json,
                "One JSON object: warnings, findings (topic, severity, summary, advice) and the "
                "facts behind them");
  app->add_flag("--strict", flags.strict, "Exit 1 when any finding is a warning");
}

int RunDoctorCommand(const DoctorFlags& flags) {
  const HostFacts facts = GatherHostFacts();
  const std::vector<Finding> findings = AssessHost(facts);
  int warnings = 0;
  for (const Finding& f : findings) warnings += f.severity == Severity::kWarn;
  if (flags.json) {
    std::cout << HostReportJson(facts, findings).dump() << std::endl;
  } else {
    std::cout << "sluice-perf doctor: what this host gives Sluice's data path\n";
    for (const Finding& f : findings) {
      std::cout << absl::StrFormat("%-5s %-14s %s\n", SeverityName(f.severity), f.topic, f.summary);
      if (!f.advice.empty()) std::cout << absl::StrFormat("%-20s -> %s\n", "", f.advice);
    }
    std::cout << absl::StrFormat("%d warning%s (--json gives the facts behind these lines)\n",
                                 warnings, warnings == 1 ? "" : "s");
  }
  return flags.strict && warnings > 0 ? 1 : 0;
}

}  // namespace sluice::tools
