#include "tools/host_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "transport/progress_mode.h"

namespace sluice::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A host with nothing to change: shared memory with CMA, no RDMA, huge pages, room in
// /dev/shm, libfabric, no GPU.
HostFacts HealthyHost() {
  HostFacts facts;
  facts.ucx.version = "1.13.1";
  facts.ucx.transports = {"self", "tcp", "sysv", "posix", "cma"};
  facts.ucx.memory_types = "host";
  facts.cma.syscall_permitted = true;
  facts.huge_pages.enabled = "madvise";
  facts.huge_pages.defrag = "madvise";
  facts.memlock_soft_bytes = facts.memlock_hard_bytes = 8 << 20;
  facts.dev_shm_present = true;
  facts.dev_shm_total_bytes = uint64_t{16} << 30;
  facts.dev_shm_free_bytes = uint64_t{15} << 30;
  facts.usable_cpus = 16;
  facts.ofi = {true, "1.17", {{"tcp;ofi_rxm", ""}, {"shm", ""}}};
  facts.cuda = {true, false, 0, "cudaGetDeviceCount failed: no driver"};
  return facts;
}

const Finding& Topic(const std::vector<Finding>& findings, const std::string& topic) {
  auto it = std::find_if(findings.begin(), findings.end(),
                         [&](const Finding& f) { return f.topic == topic; });
  if (it == findings.end()) {
    ADD_FAILURE() << "no finding on " << topic;
    static const Finding kNone;
    return kNone;
  }
  return *it;
}

int Warnings(const std::vector<Finding>& findings) {
  return static_cast<int>(std::count_if(findings.begin(), findings.end(), [](const Finding& f) {
    return f.severity == Severity::kWarn;
  }));
}

TEST(SelectedKernelChoiceTest, ReadsTheBracketedWord) {
  EXPECT_EQ(SelectedKernelChoice("always [madvise] never"), "madvise");
  EXPECT_EQ(SelectedKernelChoice("[always] madvise never"), "always");
  EXPECT_EQ(SelectedKernelChoice("always defer defer+madvise [madvise] never\n"), "madvise");
  EXPECT_EQ(SelectedKernelChoice(" 1\n"), "1");
  EXPECT_EQ(SelectedKernelChoice(""), "");
}

TEST(AssessHostTest, AHealthyHostHasOneFindingPerTopicAndNoWarning) {
  std::vector<Finding> findings = AssessHost(HealthyHost());
  std::vector<std::string> topics;
  for (const Finding& f : findings) {
    topics.push_back(f.topic);
    if (f.severity != Severity::kWarn) {
      EXPECT_THAT(f.advice, IsEmpty()) << f.topic;
    }
  }
  EXPECT_THAT(topics, ::testing::ElementsAre("ucx", "shared_memory", "cma", "rdma", "huge_pages",
                                             "progress", "dev_shm", "libfabric", "gpu"));
  EXPECT_EQ(Warnings(findings), 0);
  EXPECT_EQ(Topic(findings, "rdma").severity, Severity::kNote);
  EXPECT_THAT(Topic(findings, "ucx").summary, HasSubstr("self,tcp,sysv,posix,cma"));
  EXPECT_THAT(Topic(findings, "progress").summary, HasSubstr("(thread)"));
}

TEST(AssessHostTest, HugePagesTurnedOffInTheKernelIsAWarningWithTheFix) {
  HostFacts facts = HealthyHost();
  facts.huge_pages.enabled = "never";
  const Finding thp = Topic(AssessHost(facts), "huge_pages");
  EXPECT_EQ(thp.severity, Severity::kWarn);
  EXPECT_THAT(thp.advice, HasSubstr("/sys/kernel/mm/transparent_hugepage/enabled"));

  facts.huge_pages.enabled = "always";
  facts.huge_pages.off_by_environment = true;
  EXPECT_EQ(Topic(AssessHost(facts), "huge_pages").severity, Severity::kNote)
      << "a user's own choice is noted, not warned about";
}

TEST(AssessHostTest, AUcxTlsWithoutSharedMemoryIsOneWarningNamingIt) {
  HostFacts facts = HealthyHost();
  facts.ucx.tls = "tcp,self";
  facts.ucx.transports = {"self", "tcp"};
  std::vector<Finding> findings = AssessHost(facts);
  EXPECT_EQ(Topic(findings, "shared_memory").severity, Severity::kWarn);
  EXPECT_THAT(Topic(findings, "shared_memory").advice, HasSubstr("UCX_TLS=tcp,self"));
  EXPECT_EQ(Topic(findings, "cma").severity, Severity::kNote) << "one cause, one warning";
  EXPECT_EQ(Warnings(findings), 1);
}

TEST(AssessHostTest, MissingCmaNamesTheCauseThatApplies) {
  HostFacts facts = HealthyHost();
  facts.ucx.transports = {"self", "tcp", "sysv", "posix"};

  facts.ucx.tls = "posix,sysv,self,tcp";
  EXPECT_THAT(Topic(AssessHost(facts), "cma").advice, HasSubstr("leaves out cma"));

  facts.ucx.tls.clear();
  facts.cma.syscall_permitted = false;
  facts.cma.refusal = "Operation not permitted";
  const Finding refused = Topic(AssessHost(facts), "cma");
  EXPECT_EQ(refused.severity, Severity::kWarn);
  EXPECT_THAT(refused.advice, HasSubstr("Operation not permitted"));
  EXPECT_THAT(refused.advice, HasSubstr("SYS_PTRACE"));
  EXPECT_THAT(refused.summary, HasSubstr("over tcp on loopback"));
  EXPECT_THAT(refused.advice, HasSubstr("UCX_TLS=posix,sysv,self"));

  facts.ucx.tls = "sm,tcp";  // names cma through UCX's alias: not the cause
  EXPECT_THAT(Topic(AssessHost(facts), "cma").advice, HasSubstr("refused"));
  facts.ucx.tls.clear();

  facts.cma.syscall_permitted = true;
  facts.cma.yama_ptrace_scope = 2;
  EXPECT_THAT(Topic(AssessHost(facts), "cma").advice, HasSubstr("ptrace_scope is 2"));
  facts.cma.yama_ptrace_scope = 3;
  EXPECT_THAT(Topic(AssessHost(facts), "cma").advice, HasSubstr("off until reboot"));

  facts.ucx.transports = {"self", "sysv", "posix"};
  const Finding shm_only = Topic(AssessHost(facts), "cma");
  EXPECT_THAT(shm_only.summary, HasSubstr("bounce buffers"));
  EXPECT_THAT(shm_only.advice, ::testing::Not(HasSubstr("UCX_TLS=posix,sysv,self")));

  facts.ucx.transports.push_back("xpmem");
  EXPECT_EQ(Topic(AssessHost(facts), "cma").severity, Severity::kOk)
      << "xpmem copies once as CMA does";
}

TEST(AssessHostTest, RdmaWithALowMemlockLimitWarnsThatRegistrationWillFail) {
  HostFacts facts = HealthyHost();
  facts.rdma_devices = {"mlx5_0"};
  facts.ucx.transports.push_back("rc_mlx5");
  facts.ucx.transports.push_back("ud_mlx5");
  const Finding low = Topic(AssessHost(facts), "rdma");
  EXPECT_EQ(low.severity, Severity::kWarn);
  EXPECT_THAT(low.summary, HasSubstr("RLIMIT_MEMLOCK is 8MiB"));
  EXPECT_THAT(low.summary, HasSubstr("rc_mlx5,ud_mlx5"));
  EXPECT_THAT(low.advice, HasSubstr("ulimit -l unlimited"));

  facts.cap_ipc_lock = true;
  const Finding lifted = Topic(AssessHost(facts), "rdma");
  EXPECT_EQ(lifted.severity, Severity::kOk);
  EXPECT_THAT(lifted.summary, HasSubstr("CAP_IPC_LOCK"));
  facts.cap_ipc_lock = false;

  facts.memlock_soft_bytes = DefaultWorkerPoolBytes();
  EXPECT_EQ(Topic(AssessHost(facts), "rdma").severity, Severity::kOk);
  facts.memlock_soft_bytes = kUnlimited;
  const Finding unlimited = Topic(AssessHost(facts), "rdma");
  EXPECT_EQ(unlimited.severity, Severity::kOk);
  EXPECT_THAT(unlimited.summary, HasSubstr("RLIMIT_MEMLOCK unlimited"));
}

TEST(AssessHostTest, RdmaDevicesUcxDoesNotUseAreAWarning) {
  HostFacts facts = HealthyHost();
  facts.rdma_devices = {"mlx5_0", "mlx5_1"};
  const Finding unused = Topic(AssessHost(facts), "rdma");
  EXPECT_EQ(unused.severity, Severity::kWarn);
  EXPECT_THAT(unused.summary, HasSubstr("mlx5_0,mlx5_1"));
  EXPECT_THAT(unused.advice, HasSubstr("ibverbs-providers"));
}

TEST(AssessHostTest, ASmallDevShmIsAWarning) {
  HostFacts facts = HealthyHost();
  facts.dev_shm_total_bytes = 64 << 20;  // Docker's default
  facts.dev_shm_free_bytes = 30 << 20;
  const Finding shm = Topic(AssessHost(facts), "dev_shm");
  EXPECT_EQ(shm.severity, Severity::kWarn);
  EXPECT_THAT(shm.summary, HasSubstr("30MiB free of 64MiB"));
  EXPECT_THAT(shm.advice, HasSubstr("--shm-size"));
}

TEST(AssessHostTest, AnUnusableLibfabricProviderIsNotedWithItsReason) {
  HostFacts facts = HealthyHost();
  facts.ofi.providers[1].error = "no endpoint here";
  const Finding ofi = Topic(AssessHost(facts), "libfabric");
  EXPECT_EQ(ofi.severity, Severity::kNote);
  EXPECT_THAT(ofi.summary, HasSubstr("over tcp;ofi_rxm; not shm: no endpoint here"));
}

TEST(HostReportJsonTest, CountsWarningsAndSpellsUnlimitedLimits) {
  HostFacts facts = HealthyHost();
  facts.huge_pages.enabled = "never";
  facts.memlock_hard_bytes = kUnlimited;
  nlohmann::json report = HostReportJson(facts, AssessHost(facts));
  EXPECT_EQ(report["warnings"], 1);
  EXPECT_EQ(report["findings"].size(), 9u);
  EXPECT_EQ(report["findings"][4]["topic"], "huge_pages");
  EXPECT_EQ(report["findings"][4]["severity"], "warn");
  EXPECT_EQ(report["facts"]["memlock_soft_bytes"], 8 << 20);
  EXPECT_EQ(report["facts"]["memlock_hard_bytes"], "unlimited");
  EXPECT_EQ(report["facts"]["transparent_huge_pages"]["enabled"], "never");
}

// Gathering agrees with what the host says when asked another way.
TEST(GatherHostFactsTest, AgreesWithTheHost) {
  const HostFacts facts = GatherHostFacts();
  EXPECT_THAT(facts.ucx.error, IsEmpty());
  EXPECT_THAT(facts.ucx.transports, ::testing::Not(IsEmpty()));
  EXPECT_EQ(facts.usable_cpus, transport::UsableCpus());
  rlimit memlock{};
  ASSERT_EQ(getrlimit(RLIMIT_MEMLOCK, &memlock), 0);
  if (memlock.rlim_cur != RLIM_INFINITY) {
    EXPECT_EQ(facts.memlock_soft_bytes, memlock.rlim_cur);
  }
  std::string thp;
  std::getline(std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled"), thp);
  if (!thp.empty()) {
    EXPECT_THAT(thp, HasSubstr("[" + facts.huge_pages.enabled + "]"));
  }
  // UCX opens cma only where process_vm_writev works, which the same filters decide.
  if (std::count(facts.ucx.transports.begin(), facts.ucx.transports.end(), "cma") > 0) {
    EXPECT_TRUE(facts.cma.syscall_permitted);
  }
  // The capability through the system call, not /proc.
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct caps[2]{};
  ASSERT_EQ(syscall(SYS_capget, &header, caps), 0);
  EXPECT_EQ(facts.cap_ipc_lock, ((caps[0].effective >> CAP_IPC_LOCK) & 1) != 0);
  EXPECT_TRUE(facts.dev_shm_present);
  EXPECT_LE(facts.dev_shm_free_bytes, facts.dev_shm_total_bytes);
}

// Sets an environment variable for its lifetime, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* outer = std::getenv(name); outer != nullptr) outer_ = outer;
    EXPECT_EQ(setenv(name, value, 1), 0);
  }
  ~ScopedEnv() { EXPECT_EQ(outer_ ? setenv(name_, outer_->c_str(), 1) : unsetenv(name_), 0); }

 private:
  const char* name_;
  std::optional<std::string> outer_;
};

// UCX_TLS and SLUICE_HUGE_PAGES are read from the environment, as every Sluice process does.
TEST(GatherHostFactsTest, FollowsTheEnvironment) {
  const ScopedEnv tls("UCX_TLS", "tcp,self");
  const ScopedEnv huge("SLUICE_HUGE_PAGES", "off");
  const HostFacts facts = GatherHostFacts();
  EXPECT_EQ(facts.ucx.tls, "tcp,self");
  EXPECT_THAT(facts.ucx.transports, ::testing::UnorderedElementsAre("self", "tcp"));
  EXPECT_TRUE(facts.huge_pages.off_by_environment);
  const std::vector<Finding> findings = AssessHost(facts);
  EXPECT_EQ(Topic(findings, "shared_memory").severity, Severity::kWarn);
  if (!facts.huge_pages.enabled.empty()) {
    EXPECT_EQ(Topic(findings, "huge_pages").severity, Severity::kNote);
  }
}

}  // namespace
}  // namespace sluice::tools
