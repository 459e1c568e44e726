// Serializes a protobuf message onto the caller's stack when it fits, for messages sent on
// every batch (a reader's GetElement request, a worker's reply): the RPC layer copies the
// bytes into its frame before it returns, so a std::string per message would only be an
// allocation and a free.
//
//   const size_t size = request.ByteSizeLong();  // caches the size
//   char stack[256];
//   std::string heap;
//   absl::string_view bytes = SerializeCached(request, stack, heap);
#ifndef SLUICE_CONTROL_SERIALIZED_BYTES_H_
#define SLUICE_CONTROL_SERIALIZED_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"

namespace sluice::control {

// Writes `message` into `stack` when it fits, else into `heap` (resized); returns the bytes.
// ByteSizeLong() must have been called since the message last changed: its cached size is
// used.
template <size_t N>
[[nodiscard]] absl::string_view SerializeCached(const google::protobuf::MessageLite& message,
                                                char (&stack)[N], std::string& heap) {
  const size_t size = message.GetCachedSize();
  char* bytes = stack;
  if (size > N) {
    heap.resize(size);
    bytes = heap.data();
  }
  message.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(bytes));
  return absl::string_view(bytes, size);
}

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_SERIALIZED_BYTES_H_
