#include "common/counting_new.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> g_allocations{0};
// Trivially initialized: reading it from operator new never allocates.
thread_local uint64_t t_allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  ++t_allocations;
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// GCC sees std::free of what (its inlined) operator new returned and warns, not knowing that
// this operator new is the malloc above.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace sluice {

uint64_t AllocationsInProcess() { return g_allocations.load(std::memory_order_relaxed); }
uint64_t AllocationsOnThisThread() { return t_allocations; }

}  // namespace sluice
