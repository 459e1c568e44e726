// Turns batches into what `sluice read` prints: JSON lines or a summary.
//
//   BatchSink sink(OutputFormat::kJsonLines, std::cout);
//   sink.Add(batch);   // one {"tensors":[{"dtype":..,"shape":[..],"values":[..]}],..} line
//   sink.Finish();     // for kSummary, the totals
#ifndef SLUICE_TOOLS_BATCH_OUTPUT_H_
#define SLUICE_TOOLS_BATCH_OUTPUT_H_

#include <map>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "control/batch_reader.h"
#include "engine/pipeline.pb.h"
#include "nlohmann/json.hpp"

namespace sluice::tools {

enum class OutputFormat { kJsonLines, kSummary };

[[nodiscard]] absl::StatusOr<OutputFormat> ParseOutputFormat(const std::string& text);

// {"tensors":[{"dtype":"int64","shape":[32],"values":[...]}],"worker":"...","task":T,
// "index":N} plus "round":R for coordinated reads. `index` counts within task T. Float NaN
// and infinities are "NaN", "Infinity", "-Infinity" (as in protobuf's JSON mapping); a
// string value that is not UTF-8 is {"base64":"..."}.
[[nodiscard]] nlohmann::json BatchToJson(const control::Batch& batch);
// The same for a batch known only by its view (e.g. copied back from device memory);
// `round` or `task` < 0 leaves it out.
[[nodiscard]] nlohmann::json BatchViewToJson(const engine::BatchView& view,
                                             const std::string& worker, int64_t index,
                                             int64_t round, int64_t task = -1);

// How many batching levels `pipeline`'s elements have: batch, padded_batch and
// bucket_by_sequence_length add one, unbatch takes one off, interleave has its nested
// pipeline's. 0: each element the service sends is one element, not a batch of them.
[[nodiscard]] int BatchNesting(const proto::PipelineDef& pipeline);

// How a read in progress is shown while its batches come (the summary comes at the end).
struct ProgressDisplay {
  enum class Kind {
    kNone,
    kLiveLine,  // one line rewritten every 2 s (a terminal)
    kLogLines,  // a line every `every` (a log: a scheduler's, nohup's, a pipe)
  };
  Kind kind = Kind::kNone;
  absl::Duration every = absl::Seconds(30);  // kLogLines
  std::ostream* out = nullptr;               // null: std::cerr
};

class BatchSink {
 public:
  // `batched`: a batch's elements are the rows of its first tensor (BatchNesting > 0);
  // otherwise each batch the service sends counts as one element.
  BatchSink(OutputFormat format, std::ostream& out, ProgressDisplay progress = {},
            bool batched = true);
  void Add(const control::Batch& batch);
  void Add(const engine::BatchView& view, const std::string& worker, int64_t index, int64_t round,
           int64_t task = -1);
  // Prints the summary (kSummary); returns it as JSON either way.
  nlohmann::json Finish();
  // A write failed, and the errno it left (EPIPE: whoever read the output has gone; ENOSPC:
  // a full disk).
  [[nodiscard]] bool output_failed() const { return out_.fail(); }
  [[nodiscard]] int write_errno() const { return write_errno_; }

 private:
  const OutputFormat format_;
  std::ostream& out_;
  const ProgressDisplay progress_;
  std::ostream& progress_out_;
  const bool batched_;
  const absl::Time start_ = absl::Now();
  absl::Time last_progress_ = absl::Now();
  int64_t batches_ = 0;
  int64_t elements_ = 0;
  int64_t bytes_ = 0;
  std::map<std::string, int64_t> per_worker_;
  int write_errno_ = 0;
};

}  // namespace sluice::tools

#endif  // SLUICE_TOOLS_BATCH_OUTPUT_H_
