#include "tools/byte_size.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sluice::tools {

namespace {

absl::StatusOr<size_t> ParseBytes(const std::string& text, bool zero_allowed) {
  std::string t(absl::StripAsciiWhitespace(text));
  size_t i = 0;
  while (i < t.size() && (absl::ascii_isdigit(t[i]) || t[i] == '.')) ++i;
  std::string number = t.substr(0, i);
  std::string unit = t.substr(i);
  char* end = nullptr;
  double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a byte size like 4096, 64KiB or 1MiB, got '", text, "'"));
  }
  double scale = 0;
  if (unit.empty() || unit == "B")
    scale = 1;
  else if (unit == "K" || unit == "KiB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "TiB")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "TB")
    scale = 1e12;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown unit '", unit, "' in '", text,
                     "', expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"));
  }
  double bytes = value * scale;
  const double least = zero_allowed ? 0 : 1;
  if (bytes > 1e15) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte size '", text, "' is more than 10^15 bytes (about 909TiB)"));
  }
  if (bytes < least || bytes != std::floor(bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte size '", text, "' must be a whole number of bytes >= ", zero_allowed ? 0 : 1));
  }
  return static_cast<size_t>(bytes);
}

}  // namespace

absl::StatusOr<size_t> ParseByteSize(const std::string& text) {
  return ParseBytes(text, /*zero_allowed=*/false);
}

absl::StatusOr<size_t> ParseByteBound(const std::string& text) {
  return ParseBytes(text, /*zero_allowed=*/true);
}

absl::StatusOr<std::vector<size_t>> ParseByteSizeList(const std::string& text) {
  std::vector<size_t> sizes;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    absl::StatusOr<size_t> size = ParseByteSize(std::string(part));
    if (!size.ok()) return size.status();
    sizes.push_back(*size);
  }
  if (sizes.empty()) return absl::InvalidArgumentError("expected at least one size");
  return sizes;
}

std::string FormatByteSize(size_t bytes) {
  if (bytes >= (1u << 30) && bytes % (1u << 30) == 0) return absl::StrCat(bytes >> 30, "GiB");
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return absl::StrCat(bytes >> 20, "MiB");
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return absl::StrCat(bytes >> 10, "KiB");
  return absl::StrCat(bytes, "B");
}

}  // namespace sluice::tools
