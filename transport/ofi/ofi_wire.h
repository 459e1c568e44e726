// The messages two libfabric transports exchange, and their encoding.
//
// Every Sluice message is one untagged libfabric message into a receive buffer the peer
// posted in advance. It starts with a fixed WireHeader, then the user's header bytes, then
// (eager kind only) the payload bytes:
//   kEager       header + a payload below the rendezvous threshold, inline
//   kRendezvous  header + where the payload lies in the sender's registered memory; the
//                receiver chooses a destination and fi_reads the payload straight into it
//   kReadDone    receiver to sender: the rendezvous payload was read (or declined, or the
//                read failed); the sender's buffer may be reused
// Both ends run the same build, so fields are host byte order, as in the UCX transport.
//
// The bootstrap hello's address bytes (PeerAddress) carry the endpoint's fi_getname name and
// the largest eager payload its receive buffers hold, so a sender never overruns a peer
// configured with a lower rendezvous threshold.
//
//   std::vector<std::byte> bytes = EncodeMessage(wire, header, payload);
//   absl::StatusOr<DecodedMessage> m = DecodeMessage(bytes.data(), bytes.size());
#ifndef SLUICE_TRANSPORT_OFI_OFI_WIRE_H_
#define SLUICE_TRANSPORT_OFI_OFI_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "transport/transport.h"

namespace sluice::transport::ofi {

enum class MessageKind : uint8_t { kEager = 1, kRendezvous = 2, kReadDone = 3 };
enum class ReadOutcome : uint8_t { kRead = 0, kDeclined = 1, kFailed = 2 };

struct WireHeader {
  uint32_t magic = 0;
  MessageKind kind = MessageKind::kEager;
  ReadOutcome outcome = ReadOutcome::kRead;  // kReadDone only
  uint16_t reserved = 0;
  uint32_t header_size = 0;  // user header bytes after the WireHeader
  uint32_t reserved2 = 0;
  uint64_t token = 0;         // the receiver's id for the connection
  uint64_t payload_size = 0;  // kEager: inline bytes; kRendezvous: bytes to read
  uint64_t op_id = 0;         // kRendezvous, kReadDone: the sender's id for the payload
  uint64_t remote_addr = 0;   // kRendezvous: fi_read address of the payload's first byte
  uint64_t remote_key = 0;    // kRendezvous: its remote key
};
static_assert(sizeof(WireHeader) == 56);

inline constexpr uint32_t kWireMagic = 0x31464c53;  // "SLF1"

struct DecodedMessage {
  WireHeader wire;
  absl::string_view header;
  const std::byte* inline_payload = nullptr;  // kEager only
};

struct PeerAddress {
  uint64_t eager_limit = 0;  // payloads below this may be sent inline
  std::string name;          // the endpoint's address for fi_av_insert
};
[[nodiscard]] std::string EncodePeerAddress(const PeerAddress& address);
[[nodiscard]] absl::StatusOr<PeerAddress> DecodePeerAddress(absl::string_view bytes);

// `payload` is copied in only for kEager.
[[nodiscard]] std::vector<std::byte> EncodeMessage(const WireHeader& wire, absl::string_view header,
                                                   Payload payload);
// Validates a received message; the views point into `data`.
[[nodiscard]] absl::StatusOr<DecodedMessage> DecodeMessage(const std::byte* data, size_t length);

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_WIRE_H_
