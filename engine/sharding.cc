#include "engine/sharding.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/op_registry.h"
#include "engine/ops/shard_op.h"

namespace sluice::engine {
namespace {

absl::Status CheckWorkers(int64_t num_workers, int64_t worker_index) {
  if (num_workers < 1 || worker_index < 0 || worker_index >= num_workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected num_workers >= 1 and 0 <= worker_index < num_workers, got ",
                     num_workers, " and ", worker_index));
  }
  return absl::OkStatus();
}

absl::Status Rewrite(proto::PipelineDef* def, int64_t n, int64_t i, const std::string& prefix) {
  for (int s = 0; s < def->stages_size(); ++s) {
    proto::Stage* stage = def->mutable_stages(s);
    const std::string label = absl::StrCat(prefix, StageLabel(s, *stage));
    if (stage->has_interleave()) {
      SLUICE_RETURN_IF_ERROR(Rewrite(stage->mutable_interleave()->mutable_nested(), n, i,
                                     absl::StrCat(label, ": nested ")));
    }
    if (!stage->has_shard()) continue;
    proto::ShardOp* shard = stage->mutable_shard();
    if (shard->num_shards() == kShardHint) shard->set_num_shards(n);
    if (shard->index() == kShardHint) shard->set_index(i);
    if (shard->index() >= shard->num_shards()) {
      return absl::InvalidArgumentError(absl::StrCat(
          label, ": after replacing SHARD_HINT with ", n, " workers / worker ", i, ", index ",
          shard->index(), " is not below num_shards ", shard->num_shards()));
    }
  }
  return absl::OkStatus();
}

// Keeps files[j] with j % n == i; FailedPrecondition when there are fewer than n.
absl::Status KeepShare(google::protobuf::RepeatedPtrField<std::string>* files, int64_t n, int64_t i,
                       const std::string& label) {
  if (files->size() < n) {
    return absl::FailedPreconditionError(
        absl::StrCat(label, ": FILE sharding over ", n, " workers needs at least ", n,
                     " files, got ", files->size(), "; use DATA sharding or fewer workers"));
  }
  google::protobuf::RepeatedPtrField<std::string> kept;
  for (int j = 0; j < files->size(); ++j) {
    if (j % n == i) kept.Add(std::move(*files->Mutable(j)));
  }
  files->Swap(&kept);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<proto::PipelineDef> RewriteShardHints(const proto::PipelineDef& def,
                                                     int64_t num_workers, int64_t worker_index) {
  SLUICE_RETURN_IF_ERROR(CheckWorkers(num_workers, worker_index));
  proto::PipelineDef out = def;
  SLUICE_RETURN_IF_ERROR(Rewrite(&out, num_workers, worker_index, ""));
  return out;
}

absl::StatusOr<proto::PipelineDef> ApplyFileSharding(const proto::PipelineDef& def,
                                                     int64_t num_workers, int64_t worker_index) {
  SLUICE_RETURN_IF_ERROR(CheckWorkers(num_workers, worker_index));
  if (def.stages_size() == 0) {
    return absl::FailedPreconditionError("FILE sharding needs a pipeline, got an empty one");
  }
  proto::PipelineDef out = def;
  proto::Stage* source = out.mutable_stages(0);
  const std::string label = StageLabel(0, *source);
  const int64_t n = num_workers, i = worker_index;
  switch (source->op_case()) {
    case proto::Stage::kListFiles: {
      proto::ListFilesOp* op = source->mutable_list_files();
      if (op->shard_count() != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(label, ": already sharded (shard_count ", op->shard_count(), ")"));
      }
      op->set_shard_count(n);
      op->set_shard_index(i);
      return out;
    }
    case proto::Stage::kTfrecord:
      if (source->tfrecord().files().empty()) break;
      SLUICE_RETURN_IF_ERROR(KeepShare(source->mutable_tfrecord()->mutable_files(), n, i, label));
      return out;
    case proto::Stage::kTextLine:
      if (source->text_line().files().empty()) break;
      SLUICE_RETURN_IF_ERROR(KeepShare(source->mutable_text_line()->mutable_files(), n, i, label));
      return out;
    case proto::Stage::kFixedLengthRecord:
      if (source->fixed_length_record().files().empty()) break;
      SLUICE_RETURN_IF_ERROR(
          KeepShare(source->mutable_fixed_length_record()->mutable_files(), n, i, label));
      return out;
    case proto::Stage::kRange:
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
    case proto::Stage::kFromTensorSlices:
    case proto::Stage::OP_NOT_SET:
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      label,
      ": FILE sharding needs a file source as the first stage (list_files, or tfrecord, "
      "text_line or fixed_length_record with files=[...]); use DATA sharding for this "
      "pipeline"));
}

absl::StatusOr<proto::PipelineDef> ApplyDataSharding(const proto::PipelineDef& def,
                                                     int64_t num_workers, int64_t worker_index) {
  SLUICE_RETURN_IF_ERROR(CheckWorkers(num_workers, worker_index));
  if (def.stages_size() == 0) {
    return absl::FailedPreconditionError("DATA sharding needs a pipeline, got an empty one");
  }
  int position = def.stages_size();
  for (int s = 0; s < def.stages_size(); ++s) {
    const proto::Stage& stage = def.stages(s);
    if (stage.has_batch() || stage.has_padded_batch() || stage.has_bucket_by_sequence_length()) {
      position = s;
      break;
    }
  }
  proto::PipelineDef out;
  for (int s = 0; s < def.stages_size(); ++s) {
    if (s == position) {
      proto::ShardOp* shard = out.add_stages()->mutable_shard();
      shard->set_num_shards(num_workers);
      shard->set_index(worker_index);
    }
    *out.add_stages() = def.stages(s);
  }
  if (position == def.stages_size()) {
    proto::ShardOp* shard = out.add_stages()->mutable_shard();
    shard->set_num_shards(num_workers);
    shard->set_index(worker_index);
  }
  return out;
}

}  // namespace sluice::engine
