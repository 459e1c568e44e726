#include "engine/ops/fixed_length_record_op.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/cardinality.h"
#include "engine/io/buffered_reader.h"
#include "engine/ops/file_records.h"

namespace sluice::engine {
namespace {

// Above this a record is surely a mistake (and would be buffered whole).
constexpr int64_t kMaxRecordBytes = int64_t{1} << 30;

class FixedLengthRecords : public RecordReader {
 public:
  FixedLengthRecords(OpenedDataFile file, const proto::FixedLengthRecordOp& op)
      : in_(std::move(file.stream)),
        name_(std::move(file.description)),
        record_(static_cast<size_t>(op.record_bytes())),
        header_(static_cast<uint64_t>(op.header_bytes())),
        footer_(static_cast<size_t>(op.footer_bytes())) {}

  absl::Status Next(std::string_view* record, bool* eof) override {
    if (!header_skipped_) {
      SLUICE_ASSIGN_OR_RETURN(uint64_t skipped, in_.Skip(header_));
      if (skipped < header_) {
        return absl::DataLossError(absl::StrCat(name_, " has ", skipped, " bytes, fewer than its ",
                                                header_, "-byte header"));
      }
      header_skipped_ = true;
    }
    const uint64_t offset = in_.offset();
    SLUICE_ASSIGN_OR_RETURN(std::string_view next, in_.Peek(record_ + footer_));
    if (next.size() == record_ + footer_) {
      *record = next.substr(0, record_);
      in_.Consume(record_);
      *eof = false;
      return absl::OkStatus();
    }
    if (next.size() == footer_) {
      *eof = true;
      return absl::OkStatus();
    }
    if (next.size() < footer_) {
      return absl::DataLossError(absl::StrCat(name_, " ends at offset ", offset + next.size(),
                                              ", inside its ", footer_, "-byte footer"));
    }
    return absl::DataLossError(absl::StrCat("truncated record in ", name_, " at offset ", offset,
                                            ": expected ", record_, " bytes before the ", footer_,
                                            "-byte footer, got ", next.size() - footer_));
  }

 private:
  BufferedReader in_;
  const std::string name_;
  const size_t record_;
  const uint64_t header_;
  const size_t footer_;
  bool header_skipped_ = false;
};

}  // namespace

OpDef FixedLengthRecordOpDef() {
  OpDef def;
  def.name = "fixed_length_record";
  def.op_case = proto::Stage::kFixedLengthRecord;
  def.is_source = true;
  def.splittable = true;
  def.reads_source_element = [](const proto::Stage& stage) {
    return stage.fixed_length_record().files().empty();
  };
  def.params = {{"files", false},
                {"record_bytes", true},
                {"header_bytes", false},
                {"footer_bytes", false},
                {"compression", false}};
  def.from_args = [](const OpArgs& args, proto::Stage* stage) -> absl::Status {
    proto::FixedLengthRecordOp* op = stage->mutable_fixed_length_record();
    SLUICE_RETURN_IF_ERROR(FilesFromArgs(args, op->mutable_files()));
    SLUICE_ASSIGN_OR_RETURN(proto::Compression compression, CompressionFromArgs(args));
    SLUICE_ASSIGN_OR_RETURN(int64_t record_bytes, args.GetInt("record_bytes", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t header_bytes, args.GetInt("header_bytes", 0));
    SLUICE_ASSIGN_OR_RETURN(int64_t footer_bytes, args.GetInt("footer_bytes", 0));
    op->set_compression(compression);
    op->set_record_bytes(record_bytes);
    op->set_header_bytes(header_bytes);
    op->set_footer_bytes(footer_bytes);
    return absl::OkStatus();
  };
  def.to_args = [](const proto::Stage& stage) {
    const proto::FixedLengthRecordOp& op = stage.fixed_length_record();
    std::vector<FormattedArg> args;
    AppendFilesAndCompression(op.files(), op.compression(), &args);
    args.push_back({"record_bytes", ArgValue::Integer(op.record_bytes()), false});
    if (op.header_bytes() != 0) {
      args.push_back({"header_bytes", ArgValue::Integer(op.header_bytes()), false});
    }
    if (op.footer_bytes() != 0) {
      args.push_back({"footer_bytes", ArgValue::Integer(op.footer_bytes()), false});
    }
    return args;
  };
  def.validate = [](const proto::Stage& stage, const FunctionRegistry*) -> absl::Status {
    const proto::FixedLengthRecordOp& op = stage.fixed_length_record();
    SLUICE_RETURN_IF_ERROR(ValidateFilesAndCompression(op.files(), op.compression()));
    if (op.record_bytes() <= 0 || op.record_bytes() > kMaxRecordBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record_bytes must be in [1, ", kMaxRecordBytes, "], got ", op.record_bytes()));
    }
    if (op.header_bytes() < 0 || op.header_bytes() > kMaxRecordBytes || op.footer_bytes() < 0 ||
        op.footer_bytes() > kMaxRecordBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("header_bytes and footer_bytes must be in [0, ", kMaxRecordBytes, "], got ",
                       op.header_bytes(), " and ", op.footer_bytes()));
    }
    return absl::OkStatus();
  };
  def.cardinality = [](const proto::Stage&, int64_t) -> absl::StatusOr<int64_t> {
    return kUnknown;
  };
  def.make_iterator =
      [](const OpBuildArgs& args) -> absl::StatusOr<std::unique_ptr<ElementIterator>> {
    const proto::FixedLengthRecordOp& op = args.stage.fixed_length_record();
    FileRecordsOptions options;
    options.op = "fixed_length_record";
    options.files.assign(op.files().begin(), op.files().end());
    options.compression = op.compression();
    options.sniff = Sniff::kGzipMagic;
    options.make_reader =
        [op](OpenedDataFile file) -> absl::StatusOr<std::unique_ptr<RecordReader>> {
      return std::make_unique<FixedLengthRecords>(std::move(file), op);
    };
    return MakeFileRecordsIterator(args, std::move(options));
  };
  return def;
}

}  // namespace sluice::engine
