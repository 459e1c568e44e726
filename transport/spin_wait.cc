#include "transport/spin_wait.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "transport/progress_mode.h"

namespace sluice::transport {

absl::Duration ResolveWaitSpin(std::optional<absl::Duration> requested) {
  if (requested.has_value()) return std::clamp(*requested, absl::ZeroDuration(), kMaxWaitSpin);
  return UsableCpus() > kMaxCpusForCallerProgress ? kDefaultWaitSpin : absl::ZeroDuration();
}

absl::StatusOr<std::optional<absl::Duration>> ParseWaitSpin(absl::string_view text) {
  if (text == "auto") return std::optional<absl::Duration>();
  absl::Duration spin;
  if (!absl::ParseDuration(text, &spin) || spin < absl::ZeroDuration() || spin > kMaxWaitSpin) {
    return absl::InvalidArgumentError(
        absl::StrCat("wait spin must be 'auto' or a duration from 0 to ",
                     absl::FormatDuration(kMaxWaitSpin), " such as 50us, got '", text, "'"));
  }
  return std::optional<absl::Duration>(spin);
}

}  // namespace sluice::transport
