// Byte counts as people write them on command lines: 4096, 64KiB, 1MiB, 1.5GB, 16M.
//
// KiB/MiB/GiB/TiB and the short K/M/G/T are powers of 1024; KB/MB/GB/TB are powers of 1000.
// More than 10^15 bytes is refused as such.
//
//   absl::StatusOr<size_t> n = ParseByteSize("1MiB");  // 1048576
#ifndef SLUICE_TOOLS_BYTE_SIZE_H_
#define SLUICE_TOOLS_BYTE_SIZE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::tools {

[[nodiscard]] absl::StatusOr<size_t> ParseByteSize(const std::string& text);
// As ParseByteSize, and "0" too: a bound that is off.
[[nodiscard]] absl::StatusOr<size_t> ParseByteBound(const std::string& text);
// A comma-separated list of sizes.
[[nodiscard]] absl::StatusOr<std::vector<size_t>> ParseByteSizeList(const std::string& text);
// 1048576 -> "1MiB", 1000 -> "1000B".
std::string FormatByteSize(size_t bytes);

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_BYTE_SIZE_H_
