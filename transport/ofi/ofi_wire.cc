#include "transport/ofi/ofi_wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::transport::ofi {

namespace {
// Distinguishes an ofi peer's hello from a ucx peer's (same bootstrap, other scheme).
constexpr uint32_t kAddressMagic = 0x41464c53;  // "SLFA"
}  // namespace

std::string EncodePeerAddress(const PeerAddress& address) {
  std::string bytes(sizeof(kAddressMagic) + sizeof(address.eager_limit), '\0');
  std::memcpy(bytes.data(), &kAddressMagic, sizeof(kAddressMagic));
  std::memcpy(bytes.data() + sizeof(kAddressMagic), &address.eager_limit,
              sizeof(address.eager_limit));
  return bytes + address.name;
}

absl::StatusOr<PeerAddress> DecodePeerAddress(absl::string_view bytes) {
  PeerAddress address;
  uint32_t magic = 0;
  constexpr size_t kPrefix = sizeof(magic) + sizeof(address.eager_limit);
  if (bytes.size() > kPrefix) std::memcpy(&magic, bytes.data(), sizeof(magic));
  if (magic != kAddressMagic) {
    return absl::InvalidArgumentError(
        "the peer is not an ofi:// transport (a ucx:// peer on the same port?)");
  }
  std::memcpy(&address.eager_limit, bytes.data() + sizeof(magic), sizeof(address.eager_limit));
  address.name = std::string(bytes.substr(kPrefix));
  return address;
}

std::vector<std::byte> EncodeMessage(const WireHeader& wire, absl::string_view header,
                                     Payload payload) {
  WireHeader out = wire;
  out.magic = kWireMagic;
  out.header_size = static_cast<uint32_t>(header.size());
  const size_t inline_bytes = wire.kind == MessageKind::kEager ? payload.size : 0;
  std::vector<std::byte> bytes(sizeof(WireHeader) + header.size() + inline_bytes);
  std::memcpy(bytes.data(), &out, sizeof(out));
  if (!header.empty()) std::memcpy(bytes.data() + sizeof(out), header.data(), header.size());
  if (inline_bytes > 0) {
    std::memcpy(bytes.data() + sizeof(out) + header.size(), payload.data, inline_bytes);
  }
  return bytes;
}

absl::StatusOr<DecodedMessage> DecodeMessage(const std::byte* data, size_t length) {
  DecodedMessage m;
  if (length < sizeof(WireHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("message of ", length, " bytes is shorter than a Sluice wire header"));
  }
  std::memcpy(&m.wire, data, sizeof(WireHeader));
  if (m.wire.magic != kWireMagic) {
    return absl::InvalidArgumentError("message does not come from a Sluice ofi transport");
  }
  const size_t rest = length - sizeof(WireHeader);
  const bool eager = m.wire.kind == MessageKind::kEager;
  if (m.wire.kind != MessageKind::kEager && m.wire.kind != MessageKind::kRendezvous &&
      m.wire.kind != MessageKind::kReadDone) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown message kind ", static_cast<int>(m.wire.kind)));
  }
  const uint64_t inline_bytes = eager ? m.wire.payload_size : 0;
  const uint64_t expected = m.wire.header_size + inline_bytes;
  if (m.wire.header_size > rest || inline_bytes > rest || expected != rest) {
    return absl::InvalidArgumentError(absl::StrCat("message announces ", expected,
                                                   " bytes after its wire header, carries ", rest));
  }
  const auto* header = reinterpret_cast<const char*>(data + sizeof(WireHeader));
  m.header = absl::string_view(header, m.wire.header_size);
  if (eager) m.inline_payload = data + sizeof(WireHeader) + m.wire.header_size;
  return m;
}

}  // namespace sluice::transport::ofi
