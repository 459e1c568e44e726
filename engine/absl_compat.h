// Bridges std::string_view into Debian 12's Abseil, whose absl::string_view is a
// distinct type (ABSL_OPTION_USE_STD_STRING_VIEW is 0), so StrCat and the
// absl::Status constructors do not accept std::string_view directly.
//
//   std::string_view op = "batch";
//   absl::StrCat("unknown op ", AbslView(op));
#ifndef SLUICE_ENGINE_ABSL_COMPAT_H_
#define SLUICE_ENGINE_ABSL_COMPAT_H_

#include <string_view>

#include "absl/strings/string_view.h"

namespace sluice::engine {

inline absl::string_view AbslView(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view StdView(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_ABSL_COMPAT_H_
