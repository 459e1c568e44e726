#include "engine/io/zlib_input_stream.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

int WindowBits(ZlibFormat format) {
  switch (format) {
    case ZlibFormat::kGzip:
      return 16 + MAX_WBITS;
    case ZlibFormat::kZlib:
      return MAX_WBITS;
    case ZlibFormat::kAuto:
      return 32 + MAX_WBITS;
  }
  return MAX_WBITS;
}

std::string_view FormatName(ZlibFormat format) {
  switch (format) {
    case ZlibFormat::kGzip:
      return "gzip";
    case ZlibFormat::kZlib:
      return "zlib";
    case ZlibFormat::kAuto:
      return "gzip/zlib";
  }
  return "compressed";
}

}  // namespace

ZlibInputStream::ZlibInputStream(std::unique_ptr<InputStream> compressed, ZlibFormat format,
                                 std::string name, size_t input_buffer_bytes)
    : compressed_(std::move(compressed)),
      format_(format),
      name_(std::move(name)),
      input_(std::max<size_t>(input_buffer_bytes, 1)) {
  initialised_ = inflateInit2(&z_, WindowBits(format_)) == Z_OK;
}

ZlibInputStream::~ZlibInputStream() {
  if (initialised_) inflateEnd(&z_);
}

absl::Status ZlibInputStream::Error(std::string_view what) const {
  const uint64_t offset = consumed_base_ - z_.avail_in;
  return absl::DataLossError(absl::StrCat("corrupt ", AbslView(FormatName(format_)), " data in ",
                                          name_, " at compressed offset ", offset, ": ",
                                          AbslView(what)));
}

absl::StatusOr<bool> ZlibInputStream::Refill() {
  if (input_done_) return false;
  SLUICE_ASSIGN_OR_RETURN(size_t got,
                          compressed_->Read(reinterpret_cast<char*>(input_.data()), input_.size()));
  if (got == 0) {
    input_done_ = true;
    return false;
  }
  z_.next_in = input_.data();
  z_.avail_in = static_cast<uInt>(got);
  consumed_base_ += got;
  return true;
}

absl::StatusOr<size_t> ZlibInputStream::Read(char* dest, size_t n) {
  if (!initialised_) {
    return absl::InternalError(absl::StrCat("zlib could not be initialised for ", name_));
  }
  if (!deferred_error_.ok()) return deferred_error_;
  if (finished_ || n == 0) return 0;
  const size_t want = std::min<size_t>(n, std::numeric_limits<uInt>::max());
  z_.next_out = reinterpret_cast<unsigned char*>(dest);
  z_.avail_out = static_cast<uInt>(want);
  // inflate can write good output and fail in the same call (a gzip trailer whose check
  // fails, junk after a zlib stream): that output goes out before the error does, so a
  // reader skipping bad records keeps the records before the damage.
  auto fail = [&](absl::Status error) -> absl::StatusOr<size_t> {
    const size_t produced = want - z_.avail_out;
    if (produced == 0) return error;
    deferred_error_ = std::move(error);
    return produced;
  };
  while (z_.avail_out == want) {
    if (z_.avail_in == 0) {
      SLUICE_ASSIGN_OR_RETURN(bool more, Refill());
      if (!more && consumed_base_ == 0) {
        // An empty file holds no stream, and no records: as TensorFlow reads one, and as
        // compression 'auto' (which finds no header to sniff) does.
        finished_ = true;
        break;
      }
      if (!more) {
        return Error(absl::StrCat("the file ends inside the compressed stream (truncated?)"));
      }
    }
    const int rc = inflate(&z_, Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      if (z_.avail_in == 0) {
        if (absl::Status refilled = Refill().status(); !refilled.ok()) return fail(refilled);
      }
      if (z_.avail_in == 0) {
        finished_ = true;
        break;
      }
      if (format_ == ZlibFormat::kZlib) {
        return fail(Error("unexpected bytes after the end of the zlib stream"));
      }
      // Another gzip member follows.
      if (inflateReset(&z_) != Z_OK) return fail(Error("inflateReset failed"));
      continue;
    }
    if (rc == Z_BUF_ERROR && z_.avail_in == 0) continue;  // Needs input; the loop refills.
    if (rc != Z_OK) return fail(Error(z_.msg != nullptr ? z_.msg : "inflate failed"));
  }
  return want - z_.avail_out;
}

}  // namespace sluice::engine
