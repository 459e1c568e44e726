// Counts operator new calls, for tests that hold a path to an allocation budget
// (transport/rpc_allocation_test.cc, control/batch_reader_allocation_test.cc). Linking
// counting_new.cc (the `counting_new_dep` meson dependency) replaces the global operator
// new and delete of that binary with malloc/free-based ones that count; link it only into
// tests that need it.
//
//   const uint64_t before = AllocationsOnThisThread();
//   DoTheWork();
//   EXPECT_EQ(AllocationsOnThisThread() - before, 0u);
#ifndef SLUICE_COMMON_COUNTING_NEW_H_
#define SLUICE_COMMON_COUNTING_NEW_H_

#include <cstdint>

namespace sluice {

// operator new calls made by every thread of the process so far.
[[nodiscard]] uint64_t AllocationsInProcess();
// operator new calls made by the calling thread so far.
[[nodiscard]] uint64_t AllocationsOnThisThread();

}  // namespace sluice

#endif  // SLUICE_COMMON_COUNTING_NEW_H_
