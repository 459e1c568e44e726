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
// With parallel > 1, up to `parallel` transforms run at once and at most 2 x parallel
// results wait for the consumer, so memory stays bounded; results (and errors) come out
// in input order, exactly as with parallel = 1. The input is pulled by one thread at a
// time. Destroying the iterator mid-stream cancels the pool and joins its threads (each
// finishes the call it is in). Each output element gets its input's provenance
// (engine/provenance.h).
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
