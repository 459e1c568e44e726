#include "engine/ops/tfrecord_op.h"

#include <utility>

#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/ops/file_records.h"
#include "engine/pipeline_stats.h"

namespace sluice::engine {
namespace {

class TfRecordRecords : public RecordReader {
 public:
  TfRecordRecords(OpenedDataFile file, TfRecordReaderOptions options)
      : reader_(std::move(file.stream), std::move(file.description), WithPlain(options, file)) {}

  absl::Status Next(std::string_view* record, bool* eof) override {
    return reader_.ReadRecord(record, eof);
  }

 private:
  static TfRecordReaderOptions WithPlain(TfRecordReaderOptions options,
                                         const OpenedDataFile& file) {
    options.read_as_plain = !file.compressed;
    return options;
  }

  TfRecordReader reader_;
};

}  // namespace

OpDef TfRecordOpDef() {
  OpDef def;
  def.name = "tfrecord";
  def.op_case = proto::Stage::kTfrecord;
  def.is_source = true;
  def.splittable = true;
  def.reads_source_element = [](const proto::Stage& stage) {
    return stage.tfrecord().files().empty();
  };
  def.params = {{"files", false}, {"compression", false}, {"skip_bad_records", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::TfRecordOp* op = stage->mutable_tfrecord();
    SLUICE_RETURN_IF_ERROR(FilesFromArgs(args, op->mutable_files()));
    SLUICE_ASSIGN_OR_RETURN(proto::Compression compression, CompressionFromArgs(args));
    SLUICE_ASSIGN_OR_RETURN(bool skip, args.GetBool("skip_bad_records", false));
    op->set_compression(compression);
    op->set_skip_bad_records(skip);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::TfRecordOp& op = stage.tfrecord();
    std::vector<FormattedArg> args;
    AppendFilesAndCompression(op.files(), op.compression(), &args);
    if (op.skip_bad_records()) args.push_back({"skip_bad_records", ArgValue::Bool(true), false});
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    return ValidateFilesAndCompression(stage.tfrecord().files(), stage.tfrecord().compression());
  };
  def.cardinality = [](const proto::Stage&, int64_t) -> absl::StatusOr<int64_t> {
    return kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::TfRecordOp& op = args.stage.tfrecord();
    TfRecordReaderOptions reader_options;
    reader_options.skip_bad_records = op.skip_bad_records();
    PipelineStats* stats = args.context.stats;
    reader_options.on_bad_record = [stats](const absl::Status& error) {
      ReportBadRecord(stats, error);
    };
    FileRecordsOptions options;
    options.op = "tfrecord";
    options.files.assign(op.files().begin(), op.files().end());
    options.compression = op.compression();
    options.sniff = Sniff::kTfRecord;
    options.may_skip_records = op.skip_bad_records();
    options.make_reader =
        [reader_options](OpenedDataFile file) -> absl::StatusOr<std::unique_ptr<RecordReader>> {
      return std::make_unique<TfRecordRecords>(std::move(file), reader_options);
    };
    return MakeFileRecordsIterator(args, std::move(options));
  };
  return def;
}

}  // namespace sluice::engine
