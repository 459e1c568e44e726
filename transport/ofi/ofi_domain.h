// The libfabric provider, fabric and domain of one transport instance, shared with the memory
// regions registered in it (a region may outlive its transport, as with UCX).
//
// Provider choice: TransportOptions::ofi_provider, else $SLUICE_OFI_PROVIDER, else
// "tcp;ofi_rxm". "shm" is the same-host provider. "sockets" is refused: with libfabric 1.17
// it takes ~5 ms per message and hangs. Sluice asks for reliable-datagram endpoints (FI_EP_RDM)
// with messages and RMA reads, and honours the memory-registration modes the provider reports
// (FI_MR_LOCAL, FI_MR_VIRT_ADDR, FI_MR_PROV_KEY; see ofi_memory.h).
//
// Threading: the domain is opened FI_THREAD_DOMAIN, so its calls must be serialised. While a
// transport lives, they run on its progress thread (RunOnOwner); after it is gone they run
// under a mutex here.
//
//   absl::StatusOr<std::shared_ptr<OfiDomain>> d = OfiDomain::Open("shm");
//   (*d)->provider() == "shm"
#ifndef SLUICE_TRANSPORT_OFI_OFI_DOMAIN_H_
#define SLUICE_TRANSPORT_OFI_OFI_DOMAIN_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "transport/ofi/ofi_handles.h"
#include "transport/ofi/progress_thread.h"

namespace sluice::transport::ofi {

// The default provider, and the environment variable that overrides it.
inline constexpr char kDefaultProvider[] = "tcp;ofi_rxm";
inline constexpr char kProviderEnv[] = "SLUICE_OFI_PROVIDER";

// What a sender needs to let a peer read a buffer, and a reader needs to name its target.
struct MemoryKey {
  void* desc = nullptr;      // local descriptor (fi_mr_desc)
  uint64_t key = 0;          // remote key (fi_mr_key)
  uint64_t remote_addr = 0;  // what a peer passes to fi_read for the buffer's first byte
};

class OfiDomain {
 public:
  // `provider` "" means $SLUICE_OFI_PROVIDER or kDefaultProvider.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<OfiDomain>> Open(std::string provider);
  ~OfiDomain();
  OfiDomain(const OfiDomain&) = delete;
  OfiDomain& operator=(const OfiDomain&) = delete;

  [[nodiscard]] const fi_info* info() const { return info_.get(); }
  [[nodiscard]] fid_fabric* fabric() const { return fabric_.get(); }
  [[nodiscard]] fid_domain* domain() const { return domain_.get(); }
  // The provider as libfabric names it ("tcp;ofi_rxm", "shm").
  [[nodiscard]] const std::string& provider() const { return provider_; }
  // Local buffers must be registered and their descriptor passed (FI_MR_LOCAL).
  [[nodiscard]] bool mr_local() const { return (mr_mode_ & FI_MR_LOCAL) != 0; }

  // Registers [base, base + size) for sends, receives and remote reads. Must run where the
  // domain's calls run (the progress thread, or RunOnOwner).
  [[nodiscard]] absl::StatusOr<MrPtr> Register(void* base, size_t size);
  // The key of `mr` (registered at `base`) for the byte at `p`.
  [[nodiscard]] MemoryKey KeyFor(fid_mr* mr, const void* base, const void* p) const;

  // Long-lived regions (Transport::RegisterMemory), looked up so that a send from or a receive
  // into them needs no registration of its own.
  void AddRegion(fid_mr* mr, const void* base, size_t size);
  void RemoveRegion(fid_mr* mr);
  [[nodiscard]] std::optional<MemoryKey> FindRegion(const void* p, size_t size) const;

  // The progress thread that owns the domain's calls while its transport lives.
  void SetOwner(std::weak_ptr<ProgressThread> owner);
  // Runs `task` on the owner's thread, or under a mutex once there is none.
  void RunOnOwner(const std::function<void()>& task);
  // Runs `task` under that mutex (for the owner itself, after its thread ended).
  void RunUnowned(const std::function<void()>& task);

 private:
  struct Region {
    fid_mr* mr;
    const std::byte* base;
    size_t size;
  };
  OfiDomain() = default;

  FiInfoPtr info_;
  FabricPtr fabric_;
  DomainPtr domain_;
  std::string provider_;
  uint64_t mr_mode_ = 0;
  // Keys for providers that let the application choose them (no FI_MR_PROV_KEY).
  std::atomic<uint64_t> next_key_{1};

  mutable absl::Mutex regions_mu_;
  std::vector<Region> regions_ ABSL_GUARDED_BY(regions_mu_);

  absl::Mutex owner_mu_;
  std::weak_ptr<ProgressThread> owner_ ABSL_GUARDED_BY(owner_mu_);
  absl::Mutex unowned_mu_;
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_DOMAIN_H_
