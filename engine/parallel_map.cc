#include "engine/parallel_map.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/status_macros.h"
#include "engine/op_registry.h"

namespace sluice::engine {
namespace {

// Runs the transform; its output element gets the input's provenance (engine/provenance.h),
// whatever the function did with component 0.
absl::Status Apply(const ElementTransform& transform, const std::string& label, Element in,
                   int64_t index, std::optional<Element>* out) {
  std::shared_ptr<const Provenance> provenance = SharedElementProvenance(in);
  SLUICE_RETURN_IF_ERROR(PrefixStatus(label, transform(std::move(in), index, out)));
  if (provenance != nullptr && out->has_value()) {
    SetElementProvenance(**out, std::move(provenance));
  }
  return absl::OkStatus();
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
      SLUICE_RETURN_IF_ERROR(Apply(transform_, label_, std::move(in), index_++, &result));
      if (result.has_value()) {
        *out = *std::move(result);
        return absl::OkStatus();
      }
    }
  }

 private:
  std::unique_ptr<ElementIterator> input_;
  ElementTransform transform_;
  std::string label_;
  int64_t index_ = 0;
};

class ParallelMapIterator : public ElementIterator {
 public:
  ParallelMapIterator(std::unique_ptr<ElementIterator> input, ElementTransform transform,
                      int parallel, std::string label)
      : input_(std::move(input)),
        transform_(std::move(transform)),
        label_(std::move(label)),
        parallel_(parallel),
        capacity_(2 * static_cast<int64_t>(parallel)) {}

  ~ParallelMapIterator() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (threads_.empty()) {
      for (int i = 0; i < parallel_; ++i) threads_.emplace_back([this] { Work(); });
    }
    while (true) {
      cv_.wait(lock, [this] {
        return results_.contains(next_output_) || (input_done_ && next_output_ >= end_seq_);
      });
      auto it = results_.find(next_output_);
      if (it == results_.end()) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      Slot slot = std::move(it->second);
      results_.erase(it);
      ++next_output_;
      cv_.notify_all();  // A result slot is free again.
      if (!slot.status.ok()) return slot.status;
      if (slot.element.has_value()) {
        *out = *std::move(slot.element);
        *end_of_sequence = false;
        return absl::OkStatus();
      }
    }
  }

 private:
  struct Slot {
    absl::Status status;
    std::optional<Element> element;
  };

  void Work() {
    while (true) {
      int64_t seq;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] {
          return cancelled_ || input_done_ ||
                 (!input_busy_ && next_input_ - next_output_ < capacity_);
        });
        if (cancelled_ || input_done_) return;
        input_busy_ = true;
        seq = next_input_++;
      }
      Element in;
      bool end = false;
      absl::Status pulled = input_->GetNext(&in, &end);
      {
        std::lock_guard<std::mutex> lock(mu_);
        input_busy_ = false;
        if (!pulled.ok() || end) {
          if (!pulled.ok()) results_[seq] = Slot{pulled, std::nullopt};
          input_done_ = true;
          end_seq_ = pulled.ok() ? seq : seq + 1;
        }
      }
      cv_.notify_all();
      if (!pulled.ok() || end) return;
      Slot slot;
      slot.status = Apply(transform_, label_, std::move(in), seq, &slot.element);
      {
        std::lock_guard<std::mutex> lock(mu_);
        results_[seq] = std::move(slot);
      }
      cv_.notify_all();
    }
  }

  std::unique_ptr<ElementIterator> input_;  // Pulled only by the worker with input_busy_.
  const ElementTransform transform_;
  const std::string label_;
  const int parallel_;
  const int64_t capacity_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Slot> results_;
  int64_t next_input_ = 0;
  int64_t next_output_ = 0;
  int64_t end_seq_ = 0;
  bool input_busy_ = false;
  bool input_done_ = false;
  bool cancelled_ = false;
  std::vector<std::thread> threads_;  // Last: joined before the rest is destroyed.
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
