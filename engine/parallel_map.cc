#include "engine/parallel_map.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "engine/input_index_trail.h"
#include "engine/op_registry.h"
#include "engine/provenance.h"

namespace sluice::engine {
namespace {

// A worker's chunk grows until transforming it takes about this long, so that the hand-offs
// (two lock acquisitions per chunk, a wake-up of the consumer per run of chunks) cost a few
// per cent of the work: 20 µs elements go 10 at a time, 200 µs ones one at a time. Also
// the longest a worker keeps pulling to fill a chunk, so a slow input is not held back.
constexpr std::chrono::nanoseconds kChunkTarget{200'000};
// The largest chunk: buffering is at most 2 x parallel x kMaxChunk elements.
constexpr int kMaxChunk = 16;
// The consumer sleeps until up to this many claimed elements are ready.
constexpr int64_t kMaxRun = 64;

// Runs the transform; its output element gets the input's provenance (engine/provenance.h),
// whatever the function did with component 0. When the transform drops the element, its
// provenance goes to *dropped instead, for the next element kept (DroppedCredit).
absl::Status Apply(const ElementTransform& transform, const std::string& label, Element in,
                   int64_t index, std::optional<Element>* out,
                   std::shared_ptr<const Provenance>* dropped) {
  std::shared_ptr<const Provenance> provenance = SharedElementProvenance(in);
  SLUICE_RETURN_IF_ERROR(PrefixStatus(label, transform(std::move(in), index, out)));
  if (provenance == nullptr) return absl::OkStatus();
  if (out->has_value()) {
    SetElementProvenance(**out, std::move(provenance));
  } else {
    *dropped = std::move(provenance);
  }
  return absl::OkStatus();
}

// A failed transform's error says where its input came from, when the input knows
// (ElementIterator::DescribeElement): "record 3 of 'b.tfrecord'" rather than only the 3 of
// parse_example's count across every file.
absl::Status NamingTheInput(const ElementIterator& input, int64_t index, absl::Status status) {
  if (status.ok() || absl::IsCancelled(status)) return status;
  const std::string where = input.DescribeElement(index);
  if (where.empty()) return status;
  return PrefixStatus(absl::StrCat("reading ", where), status);
}

// A map's output element `index`, described by its input (through the elements it dropped),
// so that a stage after the map names the file too: "tfrecord | parse_example | map(f)".
std::string DescribeInput(const ElementIterator& input, const InputIndexTrail& trail,
                          int64_t index) {
  const int64_t input_index = trail.InputIndexOf(index);
  return input_index < 0 ? "" : input.DescribeElement(input_index);
}

class SequentialMapIterator : public ElementIterator {
 public:
  SequentialMapIterator(std::unique_ptr<ElementIterator> input, ElementTransform transform,
                        std::string label)
      : input_(std::move(input)), transform_(std::move(transform)), label_(std::move(label)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      Element in;
      SLUICE_RETURN_IF_ERROR(input_->GetNext(&in, end_of_sequence));
      if (*end_of_sequence) return absl::OkStatus();
      std::optional<Element> result;
      std::shared_ptr<const Provenance> dropped;
      const int64_t index = index_++;
      SLUICE_RETURN_IF_ERROR(NamingTheInput(
          *input_, index, Apply(transform_, label_, std::move(in), index, &result, &dropped)));
      if (result.has_value()) {
        credit_.CreditTo(*result);
        trail_.Produced(index);
        *out = *std::move(result);
        return absl::OkStatus();
      }
      credit_.Drop(dropped.get());
    }
  }

  std::string DescribeElement(int64_t index) const override {
    return DescribeInput(*input_, trail_, index);
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  ElementTransform transform_;
  std::string label_;
  int64_t index_ = 0;
  DroppedCredit credit_;
  InputIndexTrail trail_;
};

// Sequence numbers count the input's elements (plus one for an input error, reported in
// the slot after the last element). Element `seq` lives in slots_[seq % slots_.size()] from
// its claim until the consumer has taken it: the claiming worker fills the slot without the
// lock and publishes it by setting Slot::seq under mu_; the consumer, once it has seen that
// under mu_, reads the slot without the lock and later hands it back by advancing released_.
// Claims never reach past released_ + Window() <= released_ + slots_.size(), so no two live
// elements share a slot.
class ParallelMapIterator : public ElementIterator {
 public:
  ParallelMapIterator(std::unique_ptr<ElementIterator> input, ElementTransform transform,
                      int parallel, std::string label)
      : input_(std::move(input)),
        transform_(std::move(transform)),
        label_(std::move(label)),
        parallel_(parallel),
        slots_(2 * static_cast<size_t>(parallel) * kMaxChunk) {}

  ~ParallelMapIterator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    workers_cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      // Hands slots back once per chunk's worth, so workers rarely wait for room.
      if ((next_take_ == ready_end_ || next_take_ - handed_back_ >= hand_back_every_) &&
          !WaitForResults()) {
        if (!start_failed_.ok()) return start_failed_;
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      Slot& slot = slots_[next_take_++ % slots_.size()];
      absl::Status status = std::exchange(slot.status, absl::OkStatus());
      std::optional<Element> element = std::exchange(slot.element, std::nullopt);
      std::shared_ptr<const Provenance> dropped = std::exchange(slot.dropped, nullptr);
      if (!status.ok()) return status;
      if (element.has_value()) {
        credit_.CreditTo(*element);
        trail_.Produced(next_take_ - 1);
        *out = *std::move(element);
        *end_of_sequence = false;
        return absl::OkStatus();
      }
      credit_.Drop(dropped.get());
    }
  }

  std::string DescribeElement(int64_t index) const override {
    return DescribeInput(*input_, trail_, index);
  }

 private:
  struct Slot {
    int64_t seq = -1;  // Which element the slot holds; set (under mu_) when it is ready.
    absl::Status status;
    std::optional<Element> element;
    std::shared_ptr<const Provenance> dropped;  // The element's, when the transform dropped it.
  };

  // In-flight plus waiting elements at most: 2 x parallel chunks, as 2 x parallel elements
  // were before chunking (and still are for slow elements).
  int64_t Window() const { return 2 * static_cast<int64_t>(parallel_) * chunk_; }
  // A whole chunk fits in the window, and no other worker is pulling.
  bool CanClaim() const { return !input_busy_ && next_input_ + chunk_ <= released_ + Window(); }
  bool Ready(int64_t seq) const { return slots_[seq % slots_.size()].seq == seq; }

  // Hands back the slots taken since the last call and waits until element next_take_ is
  // ready (then ready_end_ is past the run of ready ones) or the input has ended (false).
  bool WaitForResults() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!start_failed_.ok()) return false;  // for good: GetNext says why
    if (threads_.empty()) {
      for (int i = 0; i < parallel_; ++i) {
        try {
          threads_.emplace_back([this] {
            SetCurrentThreadName("sluice-map");
            Work();
          });
        } catch (const std::exception& e) {  // system_error, or bad_alloc for its state
          // Out of threads (or of memory for their stacks): the map goes on with those it
          // has, any one of which claims every chunk in turn. With none it fails, where an
          // uncaught throw would have ended the worker.
          if (!threads_.empty()) break;
          start_failed_ = absl::ResourceExhaustedError(absl::StrCat(
              label_, ": cannot start a thread for its parallel calls (", e.what(), ")"));
          return false;
        }
      }
    }
    released_ = handed_back_ = next_take_;
    hand_back_every_ = chunk_;
    if (workers_waiting_ > 0 && CanClaim()) workers_cv_.notify_one();
    // Sleeps until the elements claimed so far (up to kMaxRun) are all ready, so that it wakes
    // once per run of chunks rather than once per chunk; each time it waits for the last one
    // missing, which is claimed, so the worker that publishes it will wake it.
    const int64_t last =
        std::max(next_take_,
                 std::min(next_input_, next_take_ + std::min<int64_t>(Window() / 2, kMaxRun)) - 1);
    while (!Ready(next_take_)) {
      if (input_done_ && next_take_ >= end_seq_) return false;
      int64_t missing = last;
      while (missing >= next_take_ && Ready(missing)) --missing;
      if (missing < next_take_) break;
      consumer_waits_for_ = missing;
      consumer_cv_.wait(lock);
      consumer_waits_for_ = -1;
    }
    ready_end_ = std::max(ready_end_, next_take_ + 1);
    while (ready_end_ < next_input_ && Ready(ready_end_)) ++ready_end_;
    return true;
  }

  void Work() {
    std::vector<Element> inputs;
    int64_t first = 0;  // The chunk claimed: [first, first + inputs.size()).
    int64_t chunk_nanos = 0;
    absl::Status pulled;
    while (true) {
      int64_t want;
      {
        std::unique_lock<std::mutex> lock(mu_);
        Publish(first, static_cast<int64_t>(inputs.size()), chunk_nanos, pulled);
        ++workers_waiting_;
        workers_cv_.wait(lock, [this] { return cancelled_ || input_done_ || CanClaim(); });
        --workers_waiting_;
        if (cancelled_ || input_done_) return;
        input_busy_ = true;
        first = next_input_;
        want = chunk_;
      }
      // Only the worker with input_busy_ pulls, so the input sees one caller at a time.
      inputs.clear();
      bool end = false;
      const auto pull_start = std::chrono::steady_clock::now();
      while (static_cast<int64_t>(inputs.size()) < want && !cancelled_.load()) {
        Element in;
        pulled = input_->GetNext(&in, &end);
        if (!pulled.ok() || end) break;
        inputs.push_back(std::move(in));
        // A slow input is not held back to fill a chunk.
        if (std::chrono::steady_clock::now() - pull_start > kChunkTarget) break;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        input_busy_ = false;
        next_input_ = first + static_cast<int64_t>(inputs.size());
        if (!pulled.ok() || end) {
          input_done_ = true;
          // The input's error is reported after the chunk, from the next slot (claimed).
          if (!pulled.ok()) ++next_input_;
          end_seq_ = next_input_;
          workers_cv_.notify_all();  // Let waiting workers exit.
          if (consumer_waits_for_ >= 0) consumer_cv_.notify_one();
        } else if (workers_waiting_ > 0 && CanClaim()) {
          workers_cv_.notify_one();  // The next chunk may be claimed.
        }
      }
      const auto start = std::chrono::steady_clock::now();
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (cancelled_.load()) return;
        Slot& slot = slots_[(first + i) % slots_.size()];
        slot.status = NamingTheInput(*input_, first + static_cast<int64_t>(i),
                                     Apply(transform_, label_, std::move(inputs[i]), first + i,
                                           &slot.element, &slot.dropped));
      }
      chunk_nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    }
  }

  // Under mu_: marks the chunk [first, first + n) ready, and the input's error after it if
  // there is one, then wakes the consumer if it waits for one of them. Adapts chunk_.
  void Publish(int64_t first, int64_t n, int64_t nanos, const absl::Status& pulled) {
    int64_t end = first + n;
    if (!pulled.ok()) slots_[end++ % slots_.size()].status = pulled;
    if (end == first) return;
    for (int64_t seq = first; seq < end; ++seq) slots_[seq % slots_.size()].seq = seq;
    if (consumer_waits_for_ >= first && consumer_waits_for_ < end) consumer_cv_.notify_one();
    if (n > 0) {
      const double sample = static_cast<double>(nanos) / static_cast<double>(n);
      nanos_per_element_ =
          nanos_per_element_ < 0 ? sample : 0.75 * nanos_per_element_ + 0.25 * sample;
      chunk_ = std::clamp(static_cast<int>(static_cast<double>(kChunkTarget.count()) /
                                           std::max(nanos_per_element_, 1.0)),
                          1, kMaxChunk);
    }
  }

  std::unique_ptr<ElementIterator> input_;  // Pulled only by the worker with input_busy_.
  const ElementTransform transform_;
  const std::string label_;
  const int parallel_;
  std::vector<Slot> slots_;  // A ring of 2 x parallel x kMaxChunk.

  // The consumer's own: next element to take, end of the run of ready ones.
  int64_t next_take_ = 0;
  int64_t ready_end_ = 0;
  int64_t handed_back_ = 0;  // The released_ it last set.
  int hand_back_every_ = 1;
  DroppedCredit credit_;
  InputIndexTrail trail_;  // Written by the consumer, read by anyone describing an element.

  std::mutex mu_;
  std::condition_variable consumer_cv_;
  std::condition_variable workers_cv_;
  int64_t next_input_ = 0;         // Next sequence number to claim.
  int64_t released_ = 0;           // Slots before it are free again.
  int64_t end_seq_ = 0;            // With input_done_: no element from here on.
  int chunk_ = 1;                  // Elements per claim.
  double nanos_per_element_ = -1;  // Running average of the transform's time; -1: none yet.
  int workers_waiting_ = 0;
  int64_t consumer_waits_for_ = -1;  // The element the consumer sleeps on, if it does.
  bool input_busy_ = false;
  bool input_done_ = false;
  absl::Status start_failed_;            // No thread could start: the map fails with this.
  std::atomic<bool> cancelled_ = false;  // Written under mu_, also read without it.
  std::vector<std::thread> threads_;     // Last: joined before the rest is destroyed.
};

}  // namespace

std::unique_ptr<ElementIterator> MakeMapIterator(std::unique_ptr<ElementIterator> input,
                                                 ElementTransform transform, int parallel,
                                                 std::string label) {
  if (parallel <= 1) {
    return std::make_unique<SequentialMapIterator>(std::move(input), std::move(transform),
                                                   std::move(label));
  }
  return std::make_unique<ParallelMapIterator>(std::move(input), std::move(transform), parallel,
                                               std::move(label));
}

}  // namespace sluice::engine
