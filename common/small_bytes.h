// Bytes held inside the object up to a fixed size, on the heap beyond it: a short message
// (an RPC request or reply, tens of bytes) costs no allocation where a std::string past its
// 15-byte small-string buffer costs one each time.
//
//   SmallBytes<128> reply(serialized);          // copied in
//   message.ParseFromArray(reply.data(), static_cast<int>(reply.size()));
//
// Moves copy the inline bytes (all of them: a fixed-size copy is cheaper than a call), so a
// view taken before a move points into the moved-from object.
#ifndef SLUICE_COMMON_SMALL_BYTES_H_
#define SLUICE_COMMON_SMALL_BYTES_H_

#include <cstddef>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace sluice {

template <size_t kInlineBytes>
class SmallBytes {
 public:
  SmallBytes() = default;
  explicit SmallBytes(absl::string_view bytes) { assign(bytes); }
  SmallBytes(const SmallBytes& other) { assign(other.view()); }
  SmallBytes(SmallBytes&& other) noexcept { TakeFrom(other); }
  SmallBytes& operator=(const SmallBytes& other) {
    if (this != &other) assign(other.view());
    return *this;
  }
  SmallBytes& operator=(SmallBytes&& other) noexcept {
    if (this != &other) TakeFrom(other);
    return *this;
  }

  void assign(absl::string_view bytes) {
    if (bytes.size() <= kInlineBytes) {
      // memmove: `bytes` may be a view of these very bytes.
      if (!bytes.empty()) std::memmove(inline_, bytes.data(), bytes.size());
    } else {
      heap_.assign(bytes.data(), bytes.size());
    }
    size_ = bytes.size();
  }

  [[nodiscard]] const char* data() const { return is_inline() ? inline_ : heap_.data(); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] bool is_inline() const { return size_ <= kInlineBytes; }
  [[nodiscard]] absl::string_view view() const { return absl::string_view(data(), size_); }
  operator absl::string_view() const { return view(); }  // NOLINT: a view, as std::string has

  friend bool operator==(const SmallBytes& a, absl::string_view b) { return a.view() == b; }

 private:
  void TakeFrom(SmallBytes& other) {
    if (other.is_inline()) {
      // All of it: a copy of constant size is a few vector moves, where one of the used
      // bytes only is a call to memcpy (a reply is moved 3-4 times on its way). The bytes
      // past size_ may never have been written; memcpy copies them as they are, and
      // nothing reads them. Zeroing them at construction instead cost every reply ~15
      // instructions.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
      std::memcpy(inline_, other.inline_, kInlineBytes);
#pragma GCC diagnostic pop
    } else {
      heap_ = std::move(other.heap_);
    }
    size_ = other.size_;
    other.size_ = 0;
  }

  size_t size_ = 0;
  std::string heap_;           // used when size_ > kInlineBytes
  char inline_[kInlineBytes];  // bytes past size_ are copied by moves, never read
};

}  // namespace sluice

#endif  // SLUICE_COMMON_SMALL_BYTES_H_
