#include "transport/spin_wait.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "transport/progress_mode.h"

namespace sluice::transport {

absl::Duration ResolveWaitSpin(std::optional<absl::Duration> requested) {
  if (requested.has_value()) return std::max(*requested, absl::ZeroDuration());
  return UsableCpus() > kMaxCpusForCallerProgress ? kDefaultWaitSpin : absl::ZeroDuration();
}

absl::StatusOr<std::optional<absl::Duration>> ParseWaitSpin(absl::string_view text) {
  if (text == "auto") return std::optional<absl::Duration>();
  absl::Duration spin;
  if (!absl::ParseDuration(text, &spin) || spin < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "wait spin must be 'auto' or a duration such as 50us or 0, got '", text, "'"));
  }
  return std::optional<absl::Duration>(spin);
}

}  // namespace sluice::transport
