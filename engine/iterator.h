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
// the dispatcher spreads one pass over the source across many workers. Splits with a
// key are tracked: their elements carry provenance and elements the split lists as
// delivered are not produced again (engine/provenance.h).
//
// File sources (list_files, tfrecord, text_line, fixed_length_record) only open
// files under context.data_roots (engine/io/data_roots.h); without roots every
// file access is refused.
//
// Iterators are thread-compatible: one consumer at a time. Some ops (prefetch,
// parallel map and filter, parallel interleave) run their inputs on threads they
// own; destroying the outermost iterator stops and joins all of them.
#ifndef SLUICE_ENGINE_ITERATOR_H_
#define SLUICE_ENGINE_ITERATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

class DeliveredRegistry;
class FunctionRegistry;

class ElementIterator {
 public:
  virtual ~ElementIterator() = default;
  // Sets *end_of_sequence when exhausted (then *out is untouched); further calls keep
  // reporting the end. After an error the iterator's state is unspecified: stop using it.
  [[nodiscard]] virtual absl::Status GetNext(Element* out, bool* end_of_sequence) = 0;
  // Starts the sequence again from its first element, exactly as a new iterator from the
  // same factory would, where that is cheap (a completed cache's replay); false, the default,
  // where only building a new one can. repeat() asks before rebuilding its input: a worker
  // serving take(1) | cache() | repeat() rebuilt the iterator per batch, 5 allocations.
  [[nodiscard]] virtual bool Rewind() { return false; }
  // Where element `index` of this iterator's output (0: the first GetNext gave) came from,
  // for the errors of a stage after it: "record 7 of 'train-3.tfrecord'" from a file
  // reader, whose records parse_example or a map then fail on. Stages that hand on their
  // input's elements one for one, or drop some, ask their input in turn (map, filter,
  // parse_example, prefetch, take, skip), interleave asks the nested pipeline the element
  // came from, shuffle the input element it was, and batch and padded_batch name their
  // first and last rows; the rest answer empty, as does a reader for an element long past. Safe to
  // call while another thread is in GetNext: a parallel map asks from the thread that failed while
  // another one reads on.
  [[nodiscard]] virtual std::string DescribeElement(int64_t /*index*/) const { return ""; }
};

// Where a DYNAMIC-mode source gets its splits from (implemented by the control layer over
// the network; the engine knows nothing of it). Calls never overlap, but they may come
// from a thread other than the consumer's (the source can run under prefetch or a
// parallel map), and from different threads over time.
class SplitFeed {
 public:
  virtual ~SplitFeed() = default;
  // repetition: which pass over the source this is (0, 1, ...), incremented each time a
  // source is re-created because a repeat restarted its input. Splits hold element
  // indices of the source, [begin, end) (file indices for file readers; list_files
  // splits also carry the file names).
  [[nodiscard]] virtual absl::Status GetNext(int64_t repetition, proto::Split* split,
                                             bool* end_of_splits) = 0;
  // GetNext, counted: what sources call.
  [[nodiscard]] absl::Status Next(int64_t repetition, proto::Split* split, bool* end_of_splits) {
    calls_.fetch_add(1, std::memory_order_relaxed);
    absl::Status got = GetNext(repetition, split, end_of_splits);
    if (got.ok() && !*end_of_splits) handed_out_.fetch_add(1, std::memory_order_relaxed);
    return got;
  }
  // How many times Next was called (a pass whose source never asked did not lease at all).
  [[nodiscard]] int64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  // How many splits Next has handed out, over all repetitions. Any thread; a repeat reads it
  // after its input ended, which comes after the source's calls (through whatever queue
  // joins the two threads).
  [[nodiscard]] int64_t handed_out() const { return handed_out_.load(std::memory_order_relaxed); }
  // After GetNext ended a pass in which this feed handed out no split: whether no reader got
  // any split of it either (its source is empty), so that a repeat ends, rather than others
  // taking them all first, which a repeat goes on past. A feed with no other reader of its
  // splits keeps the default. Called from the thread that reads the repeat.
  [[nodiscard]] virtual bool source_empty() const { return true; }
  // Asks a GetNext that is waiting (e.g. retrying a remote call) to give up soon; called
  // from another thread when the pipeline's owner shuts down.
  virtual void Cancel() {}
  // GetNext has failed: the feed, not the data, ended the pipeline (the dispatcher gave the
  // task up, or stayed out of reach). Any thread.
  [[nodiscard]] virtual bool failed() const { return false; }

 private:
  std::atomic<int64_t> handed_out_{0};
  std::atomic<int64_t> calls_{0};
};

class PipelineStats;

struct PipelineContext {
  // Null: the source produces everything (OFF mode). Must outlive the iterator.
  SplitFeed* split_feed = nullptr;
  // Null: GlobalFunctions() (the built-ins plus loaded plugins). Must outlive the iterator.
  const FunctionRegistry* functions = nullptr;
  // Mixed into shuffle seeds when no seed is given, e.g. a worker id, so that workers
  // started together never share a permutation.
  uint64_t seed_salt = 0;
  // The same on every worker of a job (TaskRunner gives the job's id): seeds what a split
  // must replay alike wherever it is re-issued. An interleave that numbers a DYNAMIC
  // split's elements by their place in its nested pipelines seeds each from this, the split
  // and the outer element, so that an unseeded shuffle in there orders them the same on
  // the worker that takes a lost task over (engine/provenance.h).
  uint64_t replay_seed = 0;
  // Directories whose files the pipeline may read (a worker's --data-root flags). Empty:
  // no file access at all; file sources fail with an error naming the path that says to
  // start the worker with --data-root. Relative paths in pipelines are relative to the
  // first root.
  std::vector<std::string> data_roots;
  // Where ops report counters such as skipped bad records; null: skipped records are
  // reported on stderr. Must outlive the iterator.
  PipelineStats* stats = nullptr;
  // DYNAMIC: the delivered sets of the tracked splits the source received, for the stage
  // that assigns the final ordinals (engine/provenance.h). Null: BuildPipeline makes one
  // per pipeline when there is a split feed; pass one only to share or inspect it.
  std::shared_ptr<DeliveredRegistry> delivered;
};

// Validates `def` (ValidatePipeline with the context's functions; plus ValidateSplittable
// when a split feed is given) and builds the iterator chain.
[[nodiscard]] absl::StatusOr<std::unique_ptr<ElementIterator>> BuildPipeline(
    const proto::PipelineDef& def, const PipelineContext& context);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_ITERATOR_H_
