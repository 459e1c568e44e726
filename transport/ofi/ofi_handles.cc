#include "transport/ofi/ofi_handles.h"

#include <rdma/fi_errno.h>

#include "absl/strings/str_cat.h"

namespace sluice::transport::ofi {

absl::Status OfiError(int64_t rc, absl::string_view what) {
  const int code = static_cast<int>(rc < 0 ? -rc : rc);
  std::string message = absl::StrCat(what, ": ", fi_strerror(code), " (-", code, ")");
  switch (code) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_ESHUTDOWN:
    case FI_EHOSTUNREACH:
    case FI_EHOSTDOWN:
    case FI_EREMOTEIO:
    case FI_ENETUNREACH:
    case FI_ENETDOWN:
    case FI_EIO:
    case FI_EAGAIN:
      return absl::UnavailableError(message);
    case FI_ETIMEDOUT:
      return absl::DeadlineExceededError(message);
    case FI_ECANCELED:
      return absl::CancelledError(message);
    case FI_ENOMEM:
    case FI_ENOSPC:
    case FI_ETOOSMALL:
    case FI_EMSGSIZE:
      return absl::ResourceExhaustedError(message);
    case FI_EINVAL:
    case FI_EBADFLAGS:
    case FI_ENOKEY:
    case FI_EKEYREJECTED:
      return absl::InvalidArgumentError(message);
    case FI_ENOSYS:
    case FI_EOPNOTSUPP:
      return absl::UnimplementedError(message);
    case FI_ENODATA:
      return absl::NotFoundError(message);
    case FI_EACCES:
    case FI_EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace sluice::transport::ofi
