// Runs an input iterator on a background thread, up to `buffer_size` elements ahead
// of the consumer: the prefetch op, and the per-input readers of
// interleave(parallel=true).
//
//   std::unique_ptr<ElementIterator> it =
//       std::make_unique<PrefetchIterator>(std::move(input), /*buffer_size=*/8);
//
// The thread starts at construction. Elements, the end and errors reach the
// consumer in the input's order. Destroying the iterator stops the thread (after
// the input call it is in) and joins it.
#ifndef SLUICE_ENGINE_PREFETCH_ITERATOR_H_
#define SLUICE_ENGINE_PREFETCH_ITERATOR_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/iterator.h"

namespace sluice::engine {

class PrefetchIterator : public ElementIterator {
 public:
  // buffer_size must be >= 1.
  PrefetchIterator(std::unique_ptr<ElementIterator> input, int64_t buffer_size);
  ~PrefetchIterator() override;
  PrefetchIterator(const PrefetchIterator&) = delete;
  PrefetchIterator& operator=(const PrefetchIterator&) = delete;

  [[nodiscard]] absl::Status GetNext(Element* out, bool* end_of_sequence) override;
  // The input's: the buffer hands elements out one for one, in order. Empty once the input
  // has ended (it is released then, with its files).
  [[nodiscard]] std::string DescribeElement(int64_t index) const override;

 private:
  void Produce();

  // Pulled by the producer thread only; released by it under mu_, which DescribeElement
  // holds while it asks the input.
  std::unique_ptr<ElementIterator> input_;
  const size_t buffer_size_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Element> buffer_;
  bool input_done_ = false;
  absl::Status error_;  // Delivered after the buffered elements.
  bool cancelled_ = false;
  std::thread thread_;  // Last: started once everything above exists (if it can be).
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PREFETCH_ITERATOR_H_
