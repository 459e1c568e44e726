#include "engine/ops/text_line_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/io/buffered_reader.h"
#include "engine/ops/file_records.h"

namespace sluice::engine {
namespace {

class LineRecords : public RecordReader {
 public:
  explicit LineRecords(OpenedDataFile file)
      : in_(std::move(file.stream)), name_(std::move(file.description)) {}

  absl::Status Next(std::string_view* record, bool* eof) override {
    absl::Status s = in_.ReadLine(record, eof);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(name_, ": ", s.message()));
    return s;
  }

 private:
  BufferedReader in_;
  std::string name_;
};

}  // namespace

OpDef TextLineOpDef() {
  OpDef def;
  def.name = "text_line";
  def.op_case = proto::Stage::kTextLine;
  def.is_source = true;
  def.splittable = true;
  def.reads_source_element = [](const proto::Stage& stage) {
    return stage.text_line().files().empty();
  };
  def.params = {{"files", false}, {"compression", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::TextLineOp* op = stage->mutable_text_line();
    SLUICE_RETURN_IF_ERROR(FilesFromArgs(args, op->mutable_files()));
    SLUICE_ASSIGN_OR_RETURN(proto::Compression compression, CompressionFromArgs(args));
    op->set_compression(compression);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    std::vector<FormattedArg> args;
    AppendFilesAndCompression(stage.text_line().files(), stage.text_line().compression(), &args);
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) {
    return ValidateFilesAndCompression(stage.text_line().files(), stage.text_line().compression());
  };
  def.cardinality = [](const proto::Stage&, int64_t) -> absl::StatusOr<int64_t> {
    return kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::TextLineOp& op = args.stage.text_line();
    FileRecordsOptions options;
    options.op = "text_line";
    options.files.assign(op.files().begin(), op.files().end());
    options.compression = op.compression();
    options.sniff = Sniff::kGzipMagic;
    options.make_reader = [](OpenedDataFile file) -> absl::StatusOr<std::unique_ptr<RecordReader>> {
      return std::make_unique<LineRecords>(std::move(file));
    };
    return MakeFileRecordsIterator(args, std::move(options));
  };
  return def;
}

}  // namespace sluice::engine
