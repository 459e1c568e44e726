#include "transport/ofi/ofi_domain.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sluice::transport::ofi {
namespace {

// Access every Sluice registration needs: local sends and receives, and remote reads (the
// receiver pulls rendezvous payloads, see ofi_transport.h).
constexpr uint64_t kAccess =
    FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;

std::string ChooseProvider(std::string requested) {
  if (!requested.empty()) return requested;
  if (const char* env = std::getenv(kProviderEnv); env != nullptr && *env != '\0') return env;
  return kDefaultProvider;
}

}  // namespace

absl::StatusOr<std::shared_ptr<OfiDomain>> OfiDomain::Open(std::string provider) {
  provider = ChooseProvider(std::move(provider));
  if (absl::StrContains(provider, "sockets")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "libfabric provider '", provider,
        "' is refused: 'sockets' takes ~5 ms per message and hangs with libfabric 1.17; use "
        "'tcp;ofi_rxm' or 'shm'"));
  }
  FiInfoPtr hints(fi_allocinfo());
  if (hints == nullptr) return absl::ResourceExhaustedError("fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ;
  // Every operation context Sluice passes is an fi_context2 (ofi_endpoint.h).
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  // The registration modes Sluice handles. FI_MR_ENDPOINT and FI_MR_RAW are left out, so a
  // provider that needs them is not selected.
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->fabric_attr->prov_name = strdup(provider.c_str());  // fi_freeinfo frees it

  fi_info* list = nullptr;
  if (int rc = fi_getinfo(kFabricApiVersion, nullptr, nullptr, 0, hints.get(), &list); rc != 0) {
    absl::Status why = OfiError(rc, "fi_getinfo");
    return absl::Status(
        rc == -FI_ENODATA ? absl::StatusCode::kFailedPrecondition : why.code(),
        absl::StrCat("libfabric provider '", provider,
                     "' offers no reliable-datagram endpoint with messages and RMA reads here (",
                     why.message(), "); `fi_info -l` lists this machine's providers"));
  }
  FiInfoPtr all(list);
  std::shared_ptr<OfiDomain> domain(new OfiDomain());
  // The first match is the provider's preferred one (for tcp: the first interface; set
  // FI_TCP_IFACE to pick another). fi_dupinfo copies that entry alone.
  domain->info_.reset(fi_dupinfo(list));
  if (domain->info_ == nullptr) return absl::ResourceExhaustedError("fi_dupinfo failed");
  domain->provider_ = domain->info_->fabric_attr->prov_name;
  domain->mr_mode_ = domain->info_->domain_attr->mr_mode;

  fid_fabric* fabric = nullptr;
  if (int rc = fi_fabric(domain->info_->fabric_attr, &fabric, nullptr); rc != 0) {
    return OfiError(rc, absl::StrCat("fi_fabric (", domain->provider_, ")"));
  }
  domain->fabric_.reset(fabric);
  fid_domain* raw = nullptr;
  if (int rc = fi_domain(fabric, domain->info_.get(), &raw, nullptr); rc != 0) {
    return OfiError(rc, absl::StrCat("fi_domain (", domain->provider_, ")"));
  }
  domain->domain_.reset(raw);
  return domain;
}

OfiDomain::~OfiDomain() = default;

absl::StatusOr<MrPtr> OfiDomain::Register(void* base, size_t size) {
  const uint64_t requested_key = (mr_mode_ & FI_MR_PROV_KEY) ? 0 : next_key_.fetch_add(1);
  fid_mr* mr = nullptr;
  if (int rc = fi_mr_reg(domain_.get(), base, size, kAccess, 0, requested_key, 0, &mr, nullptr);
      rc != 0) {
    return OfiError(rc, absl::StrCat("fi_mr_reg of ", size, " bytes (", provider_, ")"));
  }
  return MrPtr(mr);
}

MemoryKey OfiDomain::KeyFor(fid_mr* mr, const void* base, const void* p) const {
  MemoryKey key;
  key.desc = fi_mr_desc(mr);
  key.key = fi_mr_key(mr);
  // With FI_MR_VIRT_ADDR a peer names our bytes by virtual address, otherwise by offset.
  key.remote_addr = (mr_mode_ & FI_MR_VIRT_ADDR)
                        ? reinterpret_cast<uint64_t>(p)
                        : static_cast<uint64_t>(static_cast<const std::byte*>(p) -
                                                static_cast<const std::byte*>(base));
  return key;
}

void OfiDomain::AddRegion(fid_mr* mr, const void* base, size_t size) {
  absl::MutexLock lock(&regions_mu_);
  regions_.push_back(Region{mr, static_cast<const std::byte*>(base), size});
}

void OfiDomain::RemoveRegion(fid_mr* mr) {
  absl::MutexLock lock(&regions_mu_);
  std::erase_if(regions_, [mr](const Region& r) { return r.mr == mr; });
}

std::optional<MemoryKey> OfiDomain::FindRegion(const void* p, size_t size) const {
  auto* b = static_cast<const std::byte*>(p);
  absl::MutexLock lock(&regions_mu_);
  // A handful of regions (slab pools) per process: a scan is cheaper than a tree.
  for (const Region& r : regions_) {
    if (b >= r.base && b + size <= r.base + r.size) return KeyFor(r.mr, r.base, p);
  }
  return std::nullopt;
}

void OfiDomain::SetOwner(std::weak_ptr<ProgressThread> owner) {
  absl::MutexLock lock(&owner_mu_);
  owner_ = std::move(owner);
}

void OfiDomain::RunOnOwner(const std::function<void()>& task) {
  std::shared_ptr<ProgressThread> owner;
  {
    absl::MutexLock lock(&owner_mu_);
    owner = owner_.lock();
  }
  // No lock is held while waiting for the owner: its thread may itself be destroying a region.
  if (owner != nullptr && owner->RunSync(task)) return;
  RunUnowned(task);
}

void OfiDomain::RunUnowned(const std::function<void()>& task) {
  absl::MutexLock lock(&unowned_mu_);
  task();
}

}  // namespace sluice::transport::ofi
