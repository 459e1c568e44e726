// Early-return helpers for absl::Status / absl::StatusOr.
//
// Debian 12's Abseil (20220623) has no RETURN_IF_ERROR / ASSIGN_OR_RETURN, so Sluice
// carries these two macros and nothing more.
//
//   absl::StatusOr<int> Parse(std::string_view s);
//   absl::Status Use(std::string_view s) {
//     SLUICE_ASSIGN_OR_RETURN(int v, Parse(s));
//     SLUICE_RETURN_IF_ERROR(Check(v));
//     return absl::OkStatus();
//   }
#ifndef SLUICE_COMMON_STATUS_MACROS_H_
#define SLUICE_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SLUICE_RETURN_IF_ERROR(expr)                                    \
  do {                                                                  \
    if (::absl::Status sluice_status_ = (expr); !sluice_status_.ok()) { \
      return sluice_status_;                                            \
    }                                                                   \
  } while (false)

#define SLUICE_STATUS_CONCAT_INNER_(a, b) a##b
#define SLUICE_STATUS_CONCAT_(a, b) SLUICE_STATUS_CONCAT_INNER_(a, b)

#define SLUICE_ASSIGN_OR_RETURN(lhs, expr) \
  SLUICE_ASSIGN_OR_RETURN_IMPL_(SLUICE_STATUS_CONCAT_(sluice_statusor_, __LINE__), lhs, expr)

#define SLUICE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()

#endif  // SLUICE_COMMON_STATUS_MACROS_H_
