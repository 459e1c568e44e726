#include "engine/ops/list_files_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/io/data_roots.h"
#include "engine/provenance.h"
#include "engine/random.h"

namespace sluice::engine {

absl::StatusOr<std::vector<std::string>> ListFilesPass(const proto::ListFilesOp& op,
                                                       std::vector<std::string> sorted_files,
                                                       int64_t repetition, uint64_t unseeded_seed) {
  if (sorted_files.empty()) {
    return absl::NotFoundError(
        absl::StrCat("list_files: no files match '", op.pattern(), "' under the data roots"));
  }
  std::vector<std::string> files;
  if (op.shard_count() > 0) {
    if (static_cast<int64_t>(sorted_files.size()) < op.shard_count()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "list_files: FILE sharding over ", op.shard_count(), " workers needs at least ",
          op.shard_count(), " files, but '", op.pattern(), "' matches only ", sorted_files.size()));
    }
    for (size_t i = 0; i < sorted_files.size(); ++i) {
      if (static_cast<int64_t>(i) % op.shard_count() == op.shard_index()) {
        files.push_back(std::move(sorted_files[i]));
      }
    }
  } else {
    files = std::move(sorted_files);
  }
  if (op.shuffle()) {
    Rng rng(
        CombineSeeds(op.has_seed() ? op.seed() : unseeded_seed, static_cast<uint64_t>(repetition)));
    for (size_t i = files.size(); i > 1; --i) {
      std::swap(files[i - 1], files[rng.Uniform(i)]);
    }
  }
  return files;
}

namespace {

class ListFilesIterator : public ElementIterator {
 public:
  explicit ListFilesIterator(const OpBuildArgs& args)
      : op_(args.stage.list_files()),
        roots_(args.context.data_roots),
        feed_(args.context.split_feed),
        repetition_(args.instance),
        seed_(args.stage_seed),
        registry_(args.context.delivered),
        drop_delivered_(args.final_ordinals) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    while (true) {
      // Tracked splits: a file's ordinal is its position within the split.
      if (next_ < files_.size() && delivered_ != nullptr && drop_delivered_) {
        next_ = static_cast<size_t>(delivered_->NextUndelivered(static_cast<int64_t>(next_)));
      }
      if (next_ < files_.size()) break;
      if (done_) {
        *end_of_sequence = true;
        return absl::OkStatus();
      }
      SLUICE_RETURN_IF_ERROR(feed_ == nullptr ? ListAll() : NextSplit());
    }
    out->clear();
    out->push_back(Tensor::StringScalar(files_[next_]));
    if (split_key_ != 0) {
      SetElementProvenance(*out, Provenance::Of(split_key_, static_cast<int64_t>(next_)));
    }
    ++next_;
    *end_of_sequence = false;
    return absl::OkStatus();
  }

 private:
  absl::Status ListAll() {
    SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> sorted, GlobDataFiles(op_.pattern(), roots_));
    SLUICE_ASSIGN_OR_RETURN(files_, ListFilesPass(op_, std::move(sorted), repetition_, seed_));
    next_ = 0;
    done_ = true;
    return absl::OkStatus();
  }

  absl::Status NextSplit() {
    proto::Split split;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(feed_->Next(repetition_, &split, &end));
    if (end) {
      done_ = true;
      return absl::OkStatus();
    }
    if (split.end() - split.begin() != split.files_size() || split.begin() < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "list_files: expected a split carrying its file names (end - begin == names), got [",
          split.begin(), ", ", split.end(), ") with ", split.files_size(), " names"));
    }
    for (const std::string& name : split.files()) {
      if (!MatchesGlob(op_.pattern(), name)) {
        return absl::InvalidArgumentError(absl::StrCat("list_files: split file '", name,
                                                       "' does not match the pattern '",
                                                       op_.pattern(), "'"));
      }
    }
    files_.assign(split.files().begin(), split.files().end());
    next_ = 0;
    split_key_ = split.key();
    delivered_ = TrackSplit(split, registry_.get());
    return absl::OkStatus();
  }

  const proto::ListFilesOp op_;
  const std::vector<std::string> roots_;
  SplitFeed* const feed_;
  const int64_t repetition_;
  const uint64_t seed_;
  const std::shared_ptr<DeliveredRegistry> registry_;
  const bool drop_delivered_;
  std::vector<std::string> files_;
  size_t next_ = 0;
  bool done_ = false;
  // The current split's key (0: untracked) and delivered ordinals (null: none).
  int64_t split_key_ = 0;
  std::shared_ptr<const DeliveredSet> delivered_;
};

}  // namespace

OpDef ListFilesOpDef() {
  OpDef def;
  def.name = "list_files";
  def.op_case = proto::Stage::kListFiles;
  def.is_source = true;
  def.splittable = true;
  def.params = {{"pattern", true},
                {"shuffle", false},
                {"seed", false},
                {"shard_count", false},
                {"shard_index", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::ListFilesOp* op = stage->mutable_list_files();
    SLUICE_ASSIGN_OR_RETURN(std::string pattern, args.GetIdentifier("pattern", ""));
    SLUICE_ASSIGN_OR_RETURN(bool shuffle, args.GetBool("shuffle", false));
    SLUICE_ASSIGN_OR_RETURN(uint64_t seed, args.GetUint("seed", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t shard_count, args.GetInt("shard_count", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t shard_index, args.GetInt("shard_index", 0));
    op->set_pattern(std::move(pattern));
    op->set_shuffle(shuffle);
    op->set_seed(seed);
    op->set_has_seed(args.Has("seed"));
    op->set_shard_count(shard_count);
    op->set_shard_index(shard_index);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::ListFilesOp& op = stage.list_files();
    std::vector<FormattedArg> args = {{"pattern", ArgValue::String(op.pattern()), true}};
    if (op.shuffle()) args.push_back({"shuffle", ArgValue::Bool(true), false});
    if (op.has_seed()) args.push_back({"seed", ArgValue::Unsigned(op.seed()), false});
    if (op.shard_count() != 0) {
      args.push_back({"shard_count", ArgValue::Integer(op.shard_count()), false});
      args.push_back({"shard_index", ArgValue::Integer(op.shard_index()), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::ListFilesOp& op = stage.list_files();
    SLUICE_RETURN_IF_ERROR(CheckGlobPattern(op.pattern()));
    if (!op.has_seed() && op.seed() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("seed is ", op.seed(), " but has_seed is false; set has_seed to use it"));
    }
    if (op.shard_count() < 0 ||
        (op.shard_count() > 0 && (op.shard_index() < 0 || op.shard_index() >= op.shard_count())) ||
        (op.shard_count() == 0 && op.shard_index() != 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("expected shard_count >= 0 and 0 <= shard_index < shard_count, got ",
                       op.shard_count(), " and ", op.shard_index()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage&, int64_t) -> absl::StatusOr<int64_t> {
    return kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    return std::make_unique<ListFilesIterator>(args);
  };
  return def;
}

}  // namespace sluice::engine
