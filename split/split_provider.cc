#include "split/split_provider.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/io/data_roots.h"
#include "engine/ops/from_tensor_slices_op.h"
#include "engine/ops/list_files_op.h"
#include "engine/ops/range_op.h"
#include "engine/pipeline_validate.h"
#include "engine/random.h"

namespace sluice::split {
namespace {

// Splits [0, k), [k, 2k), ... over a source of `num_elements` indexable elements.
class IndexSplitProvider : public SplitProvider {
 public:
  IndexSplitProvider(int64_t num_elements, int64_t elements_per_split)
      : num_elements_(num_elements), elements_per_split_(elements_per_split) {}

  absl::Status GetNext(proto::Split* split, bool* end_of_splits) override {
    if (next_ >= num_elements_) {
      *end_of_splits = true;
      return absl::OkStatus();
    }
    // Subtraction first: next_ + k may overflow near INT64_MAX.
    const int64_t end = next_ + std::min(elements_per_split_, num_elements_ - next_);
    split->set_begin(next_);
    split->set_end(end);
    next_ = end;
    *end_of_splits = false;
    return absl::OkStatus();
  }

  void Reset() override { next_ = 0; }

  int64_t next_split_index() const override {
    // The last split may be short; it still counts as one.
    return next_ / elements_per_split_ + (next_ % elements_per_split_ != 0 ? 1 : 0);
  }

  absl::Status Seek(int64_t split_index) override {
    if (split_index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot seek to split ", split_index));
    }
    // Division first: split_index * k may overflow.
    const int64_t splits =
        num_elements_ / elements_per_split_ + (num_elements_ % elements_per_split_ != 0 ? 1 : 0);
    next_ = split_index >= splits ? num_elements_ : split_index * elements_per_split_;
    return absl::OkStatus();
  }

 private:
  const int64_t num_elements_;
  const int64_t elements_per_split_;
  int64_t next_ = 0;
};

// Index splits over a file list that also carry the files' names.
class FileNameSplitProvider : public SplitProvider {
 public:
  FileNameSplitProvider(std::shared_ptr<const std::vector<std::string>> files,
                        int64_t files_per_split)
      : files_(std::move(files)), indices_(static_cast<int64_t>(files_->size()), files_per_split) {}

  absl::Status GetNext(proto::Split* split, bool* end_of_splits) override {
    SLUICE_RETURN_IF_ERROR(indices_.GetNext(split, end_of_splits));
    if (*end_of_splits) return absl::OkStatus();
    split->clear_files();
    for (int64_t i = split->begin(); i < split->end(); ++i) split->add_files((*files_)[i]);
    return absl::OkStatus();
  }

  void Reset() override { indices_.Reset(); }
  int64_t next_split_index() const override { return indices_.next_split_index(); }
  absl::Status Seek(int64_t split_index) override { return indices_.Seek(split_index); }
  std::shared_ptr<const std::vector<std::string>> pass_files() const override { return files_; }

 private:
  const std::shared_ptr<const std::vector<std::string>> files_;
  IndexSplitProvider indices_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SplitProvider>> CreateSplitProvider(const proto::PipelineDef& def,
                                                                   const SplitOptions& options) {
  if (options.elements_per_split <= 0 || options.files_per_split <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("elements_per_split and files_per_split must be > 0, got ",
                     options.elements_per_split, " and ", options.files_per_split));
  }
  SLUICE_RETURN_IF_ERROR(engine::ValidateSplittable(def));
  const proto::Stage& source = def.stages(0);
  // One case per splittable source op; ValidateSplittable guarantees a match.
  switch (source.op_case()) {
    case proto::Stage::kRange: {
      SLUICE_ASSIGN_OR_RETURN(int64_t length, engine::RangeLength(source.range()));
      return std::make_unique<IndexSplitProvider>(length, options.elements_per_split);
    }
    case proto::Stage::kFromTensorSlices: {
      SLUICE_ASSIGN_OR_RETURN(int64_t length,
                              engine::FromTensorSlicesLength(source.from_tensor_slices()));
      return std::make_unique<IndexSplitProvider>(length, options.elements_per_split);
    }
    case proto::Stage::kTfrecord:
      return std::make_unique<IndexSplitProvider>(source.tfrecord().files_size(),
                                                  options.files_per_split);
    case proto::Stage::kTextLine:
      return std::make_unique<IndexSplitProvider>(source.text_line().files_size(),
                                                  options.files_per_split);
    case proto::Stage::kFixedLengthRecord:
      return std::make_unique<IndexSplitProvider>(source.fixed_length_record().files_size(),
                                                  options.files_per_split);
    case proto::Stage::kListFiles: {
      if (options.pass_files != nullptr) {
        return std::make_unique<FileNameSplitProvider>(options.pass_files, options.files_per_split);
      }
      const proto::ListFilesOp& op = source.list_files();
      SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> sorted,
                              engine::GlobDataFiles(op.pattern(), options.data_roots));
      // Unseeded shuffles are random per job (or per provider), like a worker's unseeded
      // list_files.
      const uint64_t seed =
          options.unseeded_shuffle_seed != 0 ? options.unseeded_shuffle_seed : engine::RandomSeed();
      SLUICE_ASSIGN_OR_RETURN(
          std::vector<std::string> files,
          engine::ListFilesPass(op, std::move(sorted), options.repetition, seed));
      return std::make_unique<FileNameSplitProvider>(
          std::make_shared<const std::vector<std::string>>(std::move(files)),
          options.files_per_split);
    }
    // Not sources, or not splittable: ValidateSplittable has refused them already.
    case proto::Stage::kMap:
    case proto::Stage::kBatch:
    case proto::Stage::kRepeat:
    case proto::Stage::kTake:
    case proto::Stage::kShuffle:
    case proto::Stage::kFilter:
    case proto::Stage::kPrefetch:
    case proto::Stage::kInterleave:
    case proto::Stage::kParseExample:
    case proto::Stage::kPaddedBatch:
    case proto::Stage::kBucketBySequenceLength:
    case proto::Stage::kCache:
    case proto::Stage::kSkip:
    case proto::Stage::kShard:
    case proto::Stage::kUnbatch:
    case proto::Stage::OP_NOT_SET:
      break;
  }
  return absl::UnimplementedError(absl::StrCat("source op field ",
                                               static_cast<int>(source.op_case()),
                                               " is marked splittable but has no split provider"));
}

}  // namespace sluice::split
