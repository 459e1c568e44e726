#include "engine/prefetch_iterator.h"

#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::engine {

PrefetchIterator::PrefetchIterator(std::unique_ptr<ElementIterator> input, int64_t buffer_size)
    : input_(std::move(input)),
      buffer_size_(static_cast<size_t>(buffer_size < 1 ? 1 : buffer_size)) {
  try {
    thread_ = std::thread([this] { Produce(); });
  } catch (const std::exception& e) {  // system_error, or bad_alloc for its state
    // Out of threads: the first GetNext says so, where an uncaught throw would have ended
    // the worker.
    error_ = absl::ResourceExhaustedError(
        absl::StrCat("prefetch: cannot start its thread (", e.what(), ")"));
    input_done_ = true;
  }
}

PrefetchIterator::~PrefetchIterator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void PrefetchIterator::Produce() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return cancelled_ || buffer_.size() < buffer_size_; });
      if (cancelled_) return;
    }
    Element e;
    bool end = false;
    absl::Status s = input_->GetNext(&e, &end);
    // Released (files and splits) as soon as the input is done, in the step that says so:
    // a consumer told of the end finds it gone. Destroyed outside the lock.
    std::unique_ptr<ElementIterator> done;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!s.ok() || end) {
        error_ = s;
        input_done_ = true;
        done = std::move(input_);
      } else {
        buffer_.push_back(std::move(e));
      }
    }
    cv_.notify_all();
    if (done != nullptr) return;
  }
}

std::string PrefetchIterator::DescribeElement(int64_t index) const {
  std::lock_guard<std::mutex> lock(mu_);
  return input_ == nullptr ? "" : input_->DescribeElement(index);
}

absl::Status PrefetchIterator::GetNext(Element* out, bool* end_of_sequence) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !buffer_.empty() || input_done_; });
  if (!buffer_.empty()) {
    *out = std::move(buffer_.front());
    buffer_.pop_front();
    cv_.notify_all();
    *end_of_sequence = false;
    return absl::OkStatus();
  }
  if (!error_.ok()) return error_;
  *end_of_sequence = true;
  return absl::OkStatus();
}

}  // namespace sluice::engine
