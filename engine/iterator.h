// Iterators over pipeline elements, and BuildPipeline, which turns a
// PipelineDef into one.
//
//   proto::PipelineDef def = *ParsePipeline("range(10) | map(square) | batch(4)");
//   SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> it,
//                           BuildPipeline(def, PipelineContext{}));
//   Element e;
//   bool end = false;
//   while (true) {
//     SLUICE_RETURN_IF_ERROR(it->GetNext(&e, &end));
//     if (end) break;
//     ...
//   }
//
// In DYNAMIC sharding mode the caller passes a SplitFeed in the context; the
// source then produces only the element indices the feed hands it, which is how
// the dispatcher spreads one pass over the source across many workers.
//
// Iterators are thread-compatible: one consumer at a time.
#ifndef SLUICE_ENGINE_ITERATOR_H_
#define SLUICE_ENGINE_ITERATOR_H_

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

class FunctionRegistry;

class ElementIterator {
 public:
  virtual ~ElementIterator() = default;
  // Sets *end_of_sequence when exhausted (then *out is untouched); further calls keep
  // reporting the end. After an error the iterator's state is unspecified: stop using it.
  [[nodiscard]] virtual absl::Status GetNext(Element* out, bool* end_of_sequence) = 0;
};

// Where a DYNAMIC-mode source gets its splits from (implemented by the control layer over
// the network; the engine knows nothing of it). Called only from the iterator's thread.
class SplitFeed {
 public:
  virtual ~SplitFeed() = default;
  // repetition: which pass over the source this is (0, 1, ...), incremented each time a
  // source is re-created because a repeat restarted its input. Splits hold element
  // indices of the source, [begin, end).
  [[nodiscard]] virtual absl::Status GetNext(int64_t repetition, proto::Split* split,
                                             bool* end_of_splits) = 0;
};

struct PipelineContext {
  // Null: the source produces everything (OFF mode). Must outlive the iterator.
  SplitFeed* split_feed = nullptr;
  // Null: FunctionRegistry::Builtins(). Must outlive the iterator.
  const FunctionRegistry* functions = nullptr;
  // Mixed into shuffle seeds when no seed is given, e.g. a worker id, so that workers
  // started together never share a permutation.
  uint64_t seed_salt = 0;
};

// Validates `def` (ValidatePipeline; plus ValidateSplittable when a split feed is given)
// and builds the iterator chain.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ElementIterator>> BuildPipeline(
    const proto::PipelineDef& def, const PipelineContext& context);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_ITERATOR_H_
