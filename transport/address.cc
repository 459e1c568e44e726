#include "transport/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::transport {

std::string Address::ToString() const {
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat(scheme, "://", v6 ? "[" : "", host, v6 ? "]" : "", ":", port);
}

absl::StatusOr<Address> ParseAddress(absl::string_view text, absl::string_view default_scheme) {
  Address address;
  absl::string_view rest = text;
  if (size_t sep = rest.find("://"); sep != absl::string_view::npos) {
    address.scheme = std::string(rest.substr(0, sep));
    rest.remove_prefix(sep + 3);
  } else {
    address.scheme = std::string(default_scheme);
  }
  if (address.scheme != "ucx" && address.scheme != "ofi") {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "': unknown scheme '",
                                                   address.scheme, "', expected ucx:// or ofi://"));
  }
  absl::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == absl::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", text, "': expected [IPv6]:PORT after the scheme"));
    }
    address.host = std::string(rest.substr(1, close - 1));
    port_text = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", text, "': expected HOST:PORT, found no ':PORT'"));
    }
    address.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  }
  uint32_t port = 0;
  if (address.host.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("address '", text, "': empty host"));
  }
  if (!absl::SimpleAtoi(port_text, &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", text, "': port '", port_text, "' is not a number in 0..65535"));
  }
  address.port = static_cast<uint16_t>(port);
  return address;
}

std::string LocalAddressFacing(const std::string& peer_host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(peer_host.c_str(), "9", &hints, &result) != 0 || result == nullptr) {
    return "127.0.0.1";
  }
  std::string local = "127.0.0.1";
  int fd = socket(result->ai_family, SOCK_DGRAM, 0);
  if (fd >= 0 && connect(fd, result->ai_addr, result->ai_addrlen) == 0) {
    sockaddr_storage self{};
    socklen_t len = sizeof(self);
    char text[INET6_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      const void* raw =
          self.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&self)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&self)->sin_addr);
      if (inet_ntop(self.ss_family, raw, text, sizeof(text)) != nullptr) local = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(result);
  return local;
}

}  // namespace sluice::transport
