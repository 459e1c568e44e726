// Runs a command the way a container whose seccomp profile refuses cross-memory attach
// would: process_vm_readv and process_vm_writev fail with EPERM in it and in every process
// it starts. Tests use it to see what Sluice and `sluice-perf doctor` do on such a host.
//
//   deny_cma sluice-perf doctor --json
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#define SLUICE_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SLUICE_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "deny_cma knows the audit architecture of x86-64 and aarch64 only"
#endif

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: deny_cma COMMAND [ARGS...]\n"
                 "Runs COMMAND with process_vm_readv/process_vm_writev refused (EPERM), as a "
                 "container's seccomp profile may.\n");
    return argc < 2 ? 2 : 0;
  }
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SLUICE_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::fprintf(stderr, "deny_cma: cannot install the seccomp filter: %s\n", std::strerror(errno));
    return 1;
  }
  execvp(argv[1], argv + 1);
  std::fprintf(stderr, "deny_cma: cannot run %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
