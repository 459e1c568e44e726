// Destroying an object that other threads still reach through the pointer that owns it.
//
// unique_ptr::reset nulls its pointer before it runs the destructor. An object whose
// destructor waits for its own threads (a transport flushing its connections, a thread
// pool draining) may meanwhile be used through that pointer by those threads, which then
// find null:
//
//   ~RpcEndpoint() { DestroyInPlace(transport_); }  // an inline handler may still reply
//
// DestroyInPlace runs the destructor with the pointer intact, then nulls it.
#ifndef SLUICE_COMMON_DESTROY_IN_PLACE_H_
#define SLUICE_COMMON_DESTROY_IN_PLACE_H_

#include <memory>

namespace sluice {

template <typename T>
void DestroyInPlace(std::unique_ptr<T>& owner) {
  if (owner == nullptr) return;
  owner.get_deleter()(owner.get());
  (void)owner.release();
}

}  // namespace sluice

#endif  // SLUICE_COMMON_DESTROY_IN_PLACE_H_
