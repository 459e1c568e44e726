#include "tools/batch_output.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <iostream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace sluice::tools {
namespace {

template <typename T>
nlohmann::json Values(const engine::TensorView& t) {
  nlohmann::json values = nlohmann::json::array();
  for (T v : t.values<T>()) values.push_back(v);
  return values;
}

// JSON has no NaN or infinities (a dump prints null, which reads back as no value): they
// are the strings protobuf's JSON mapping uses.
template <typename T>
nlohmann::json FloatValues(const engine::TensorView& t) {
  nlohmann::json values = nlohmann::json::array();
  for (T v : t.values<T>()) {
    if (std::isnan(v)) {
      values.push_back("NaN");
    } else if (std::isinf(v)) {
      values.push_back(v > 0 ? "Infinity" : "-Infinity");
    } else {
      values.push_back(v);
    }
  }
  return values;
}

// JSON strings must be UTF-8. A value that is not (an image, a serialized proto) is
// {"base64": "..."}: replacing its bad bytes with U+FFFD, as before, lost them for good.
nlohmann::json StringValues(const engine::TensorView& t) {
  nlohmann::json values = nlohmann::json::array();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const std::string_view s = t.string_value(i);
    nlohmann::json text = std::string(s);
    try {
      (void)text.dump();  // throws on bytes that are not UTF-8
      values.push_back(std::move(text));
    } catch (const nlohmann::json::type_error&) {
      values.push_back({{"base64", absl::Base64Escape(absl::string_view(s.data(), s.size()))}});
    }
  }
  return values;
}

nlohmann::json TensorValues(const engine::TensorView& t) {
  switch (t.dtype) {
    case engine::DType::kInt32:
      return Values<int32_t>(t);
    case engine::DType::kInt64:
      return Values<int64_t>(t);
    case engine::DType::kFloat32:
      return FloatValues<float>(t);
    case engine::DType::kFloat64:
      return FloatValues<double>(t);
    case engine::DType::kUInt8:
      return Values<uint8_t>(t);
    case engine::DType::kString:
      return StringValues(t);
  }
  return nlohmann::json::array();
}

}  // namespace

absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text) {
  if (text == "jsonl") return OutputFormat::kJsonLines;
  if (text == "summary") return OutputFormat::kSummary;
  return absl::InvalidArgumentError("--format must be jsonl or summary, got '" + text + "'");
}

nlohmann::json BatchToJson(const control::Batch& batch) {
  return BatchViewToJson(batch.view(), batch.worker(), batch.index(), batch.round(), batch.task());
}

nlohmann::json BatchViewToJson(const engine::BatchView& view, const std::string& worker,
                               int64_t index, int64_t round, int64_t task) {
  nlohmann::json tensors = nlohmann::json::array();
  for (size_t i = 0; i < view.num_tensors(); ++i) {
    engine::TensorView t = view.tensor(i);
    tensors.push_back({{"dtype", std::string(engine::DTypeName(t.dtype))},
                       {"shape", std::vector<int64_t>(t.shape.begin(), t.shape.end())},
                       {"values", TensorValues(t)}});
  }
  nlohmann::json json = {{"tensors", tensors}, {"worker", worker}, {"index", index}};
  if (round >= 0) json["round"] = round;  // coordinated reads
  if (task >= 0) json["task"] = task;
  return json;
}

int BatchNesting(const proto::PipelineDef& pipeline) {
  int nesting = 0;
  for (const proto::Stage& stage : pipeline.stages()) {
    if (stage.has_batch() || stage.has_padded_batch() || stage.has_bucket_by_sequence_length()) {
      ++nesting;
    } else if (stage.has_unbatch()) {
      nesting = std::max(0, nesting - 1);
    } else if (stage.has_interleave()) {
      nesting = BatchNesting(stage.interleave().nested());  // its elements replace the input's
    }
  }
  return nesting;
}

BatchSink::BatchSink(OutputFormat format, std::ostream& out, ProgressDisplay progress, bool batched)
    : format_(format),
      out_(out),
      progress_(progress),
      progress_out_(progress.out != nullptr ? *progress.out : std::cerr),
      batched_(batched) {}

void BatchSink::Add(const control::Batch& batch) {
  Add(batch.view(), batch.worker(), batch.index(), batch.round(), batch.task());
}

void BatchSink::Add(const engine::BatchView& view, const std::string& worker, int64_t index,
                    int64_t round, int64_t task) {
  ++batches_;
  if (view.num_tensors() > 0) {
    engine::TensorView first = view.tensor(0);
    elements_ += !batched_ || first.shape.empty() ? 1 : first.shape[0];
  }
  for (size_t i = 0; i < view.num_tensors(); ++i) bytes_ += view.tensor(i).nbytes;
  ++per_worker_[worker];
  if (format_ == OutputFormat::kJsonLines) {
    // A line per batch as it arrives, so that whoever reads the stream (a pipe, a test
    // watching for stalls) sees the read's progress, not 4 KiB blocks of it. One write per
    // batch is small next to formatting the batch as JSON.
    errno = 0;  // what the write leaves, not an earlier call's
    out_ << BatchViewToJson(view, worker, index, round, task).dump() << '\n';
    out_.flush();
    if (out_.fail() && write_errno_ == 0) write_errno_ = errno;
  }
  switch (progress_.kind) {
    case ProgressDisplay::Kind::kNone:
      break;
    case ProgressDisplay::Kind::kLiveLine:
      if (absl::Now() - last_progress_ > absl::Seconds(2)) {
        last_progress_ = absl::Now();
        const double seconds = absl::ToDoubleSeconds(last_progress_ - start_);
        progress_out_ << absl::StrFormat("\r%d batches, %d elements, %.1f MB/s   ", batches_,
                                         elements_, bytes_ / 1e6 / seconds)
                      << std::flush;
      }
      break;
    case ProgressDisplay::Kind::kLogLines:
      // Without a terminal the live line's \r would pile up in the log: a whole line, seldom.
      if (absl::Now() - last_progress_ >= progress_.every) {
        last_progress_ = absl::Now();
        const double seconds = absl::ToDoubleSeconds(last_progress_ - start_);
        progress_out_ << absl::StrFormat("read %d batches (%d elements) in %.0f s: %.1f MB/s\n",
                                         batches_, elements_, seconds, bytes_ / 1e6 / seconds)
                      << std::flush;
      }
      break;
  }
}

nlohmann::json BatchSink::Finish() {
  double seconds = std::max(1e-9, absl::ToDoubleSeconds(absl::Now() - start_));
  if (progress_.kind == ProgressDisplay::Kind::kLiveLine && batches_ > 0) progress_out_ << "\n";
  nlohmann::json summary = {{"batches", batches_},
                            {"elements", elements_},
                            {"tensor_bytes", bytes_},
                            {"seconds", seconds},
                            {"batches_per_s", batches_ / seconds},
                            {"mb_per_s", bytes_ / 1e6 / seconds},
                            {"per_worker_batches", per_worker_}};
  errno = 0;
  if (format_ == OutputFormat::kSummary) {
    out_ << absl::StrFormat(
        "read %d batches (%d elements, %d tensor bytes) in %.3f s: "
        "%.1f batches/s, %.1f MB/s\n",
        batches_, elements_, bytes_, seconds, batches_ / seconds, bytes_ / 1e6 / seconds);
    for (const auto& [worker, count] : per_worker_) {
      out_ << "  " << worker << ": " << count << " batches\n";
    }
  }
  out_.flush();
  if (out_.fail() && write_errno_ == 0) write_errno_ = errno;
  return summary;
}

}  // namespace sluice::tools
