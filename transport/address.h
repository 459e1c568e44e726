// Peer addresses of the form `SCHEME://HOST:PORT`.
//
// The scheme picks the transport (`ucx`, later `ofi`); HOST is a name, an IPv4 address or a
// bracketed IPv6 address.
//
//   absl::StatusOr<Address> a = ParseAddress("ucx://127.0.0.1:5000");
//   a->host == "127.0.0.1"; a->port == 5000; a->ToString() == "ucx://127.0.0.1:5000"
#ifndef SLUICE_TRANSPORT_ADDRESS_H_
#define SLUICE_TRANSPORT_ADDRESS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::transport {

struct Address {
  std::string scheme = "ucx";
  std::string host;
  uint16_t port = 0;

  [[nodiscard]] std::string ToString() const;
  bool operator==(const Address&) const = default;
  // A key of hash maps without formatting it (ToString) on every lookup.
  template <typename H>
  friend H AbslHashValue(H hash, const Address& address) {
    return H::combine(std::move(hash), address.scheme, address.host, address.port);
  }
};

// Accepts `scheme://host:port`; `host:port` alone means `default_scheme://host:port`.
[[nodiscard]] absl::StatusOr<Address> ParseAddress(absl::string_view text,
                                                   absl::string_view default_scheme = "ucx");

// The local IP address this host would use to reach `peer_host` (no packet is sent).
// Used by workers to advertise an address clients can reach; falls back to 127.0.0.1.
[[nodiscard]] std::string LocalAddressFacing(const std::string& peer_host);

}  // namespace sluice::transport

#endif  // SLUICE_TRANSPORT_ADDRESS_H_
