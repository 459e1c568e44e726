#include "common/thread_name.h"

#include <pthread.h>

namespace sluice {
namespace {

constexpr size_t kMaxThreadNameLength = 15;  // TASK_COMM_LEN - 1

}  // namespace

void SetCurrentThreadName(absl::string_view name) {
  const std::string kept(name.substr(0, kMaxThreadNameLength));
  // Naming is for people reading `top -H`; a failure changes nothing else.
  (void)pthread_setname_np(pthread_self(), kept.c_str());
}

std::string CurrentThreadName() {
  char name[kMaxThreadNameLength + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return {};
  return name;
}

}  // namespace sluice
