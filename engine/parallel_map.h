// Ordered element transforms, sequential or on a pool of threads the iterator owns:
// the machinery behind map(parallel=N), filter(parallel=N) and parse_example.
//
//   auto it = MakeMapIterator(std::move(input),
//       [](Element in, int64_t index, std::optional<Element>* out) {
//         *out = ...;            // or leave empty to drop the element (filter)
//         return absl::OkStatus();
//       },
//       /*parallel=*/4, "map(decode)");
//
// With parallel > 1, up to `parallel` transforms run at once; results (and errors) come out
// in input order, exactly as with parallel = 1, each error at the element it belongs to (an
// input error after the elements pulled before it, then the end). The input is pulled by
// one thread at a time. Destroying the iterator mid-stream cancels the pool and joins its
// threads (each finishes the call it is in). Each output element gets its input's
// provenance (engine/provenance.h); a dropped element's is credited to the next element
// kept (DroppedCredit), so that a filter leaves no holes in what clients report delivered.
//
// Design (parallel > 1). A per-element hand-off through one mutex with notify_all, as the
// pool first did, cost about as much as a 20 µs function: two context switches per element,
// so parallel=2 ran no faster than parallel=1 (perf/RESULTS.md, "Parallel map scaling").
// Now the hand-offs are per chunk and nobody is woken without a reason:
//   - Each worker claims a chunk of consecutive elements and pulls them in one go, then
//     transforms them with no lock held and publishes them at once. The chunk adapts to the
//     measured time per element, so a chunk takes about 200 µs (1 to 16 elements); elements
//     of 200 µs or more still go one at a time.
//   - Results go to a ring of slots indexed by sequence number; the consumer takes a run of
//     ready slots without the lock and hands slots back once per chunk's worth.
//   - The consumer sleeps on a condition variable of its own, waiting for one specific
//     element: the last one missing of those claimed so far (up to parallel chunks), so it
//     wakes about once per parallel chunks. Workers sleep on another and get notify_one,
//     only when a claim can actually succeed.
//   - No spinning: with as many busy workers as cores, a spinning consumer takes a core
//     from them.
// Memory stays bounded by the options: claimed elements (in flight or waiting for the
// consumer) never exceed 2 x parallel chunks, i.e. 2 x parallel elements for slow functions
// and at most 2 x parallel x 16 for fast ones.
#ifndef SLUICE_ENGINE_PARALLEL_MAP_H_
#define SLUICE_ENGINE_PARALLEL_MAP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/iterator.h"

namespace sluice::engine {

// `index` counts the input's elements from 0. Must be thread-safe when parallel > 1.
using ElementTransform =
    std::function<absl::Status(Element in, int64_t index, std::optional<Element>* out)>;

// `label` prefixes the transform's errors, e.g. "map(decode)".
std::unique_ptr<ElementIterator> MakeMapIterator(std::unique_ptr<ElementIterator> input,
                                                 ElementTransform transform, int parallel,
                                                 std::string label);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PARALLEL_MAP_H_
