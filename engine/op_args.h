// Arguments of one stage in the pipeline text form, and typed access to them.
//
// The parser keeps each value as written; the op that owns the parameter decides
// how to read it, so type errors can say what that parameter expected:
//
//   OpArgs args({{"batch_size", ArgValue::Integer(32)}});
//   SLUICE_ASSIGN_OR_RETURN(int64_t n, args.GetInt("batch_size", 0));
//   SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
//   SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> files, args.GetStringList("files"));
//
// Values are scalars (integer, float, string, name, boolean), lists of values
// ([1, 2, 3], [[1, 2], [3, 4]], ['a.tfrecord', 'b.tfrecord']) or nested pipelines
// (interleave's tfrecord(compression='gzip') | map(f)).
//
// Ops also produce FormattedArgs for FormatPipeline, using the same ArgValue.
#ifndef SLUICE_ENGINE_OP_ARGS_H_
#define SLUICE_ENGINE_OP_ARGS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

struct ArgValue {
  enum class Kind { kInteger, kFloat, kString, kName, kBool, kList, kPipeline };

  Kind kind = Kind::kInteger;
  // Literal text for integers and floats (range checks happen on read), the unquoted
  // contents for strings, the identifier for names, the canonical text of a pipeline.
  std::string text;
  bool boolean = false;
  // kList: the items.
  std::vector<ArgValue> items;
  // kPipeline: the parsed nested pipeline.
  std::shared_ptr<const proto::PipelineDef> pipeline;

  static ArgValue Integer(int64_t v);
  static ArgValue Unsigned(uint64_t v);
  // Shortest text that reads back as exactly `v`, always with a '.' or exponent (1.0,
  // 0.1, 1e+30). Non-finite values cannot be written in the text form; callers reject
  // them first.
  static ArgValue Float(double v);
  static ArgValue Bool(bool v);
  static ArgValue String(std::string v);
  static ArgValue Name(std::string v);
  // A bare name when `v` is a valid NAME token other than true/false; a string otherwise.
  static ArgValue Identifier(std::string v);
  static ArgValue List(std::vector<ArgValue> items);
  // `text` is FormatPipeline(def), used when printing.
  static ArgValue Pipeline(proto::PipelineDef def, std::string text);

  // Text-form spelling: 42, 1.5, 'it\'s', square, true, [1, 2], tfrecord() | map(f).
  std::string ToText() const;
  // For error messages: "integer 5", "float 1.5", "string 'x'", "name foo", "boolean
  // true", "list [1, 2]", "pipeline tfrecord()".
  std::string Describe() const;

  // Typed reads of one value; `what` names it in errors ("padding_values[1]").
  [[nodiscard]] absl::StatusOr<int64_t> AsInt(std::string_view what) const;
  // Integers or floats.
  [[nodiscard]] absl::StatusOr<double> AsDouble(std::string_view what) const;
  // Quoted strings or bare names.
  [[nodiscard]] absl::StatusOr<std::string> AsString(std::string_view what) const;
};

// True for [A-Za-z_][A-Za-z0-9_.]*.
bool IsNameToken(std::string_view s);

// One argument as FormatPipeline should print it.
struct FormattedArg {
  std::string name;
  ArgValue value;
  // Printed without `name=`; positional args must come first.
  bool positional = false;
};

class OpArgs {
 public:
  explicit OpArgs(std::map<std::string, ArgValue, std::less<>> values);

  bool Has(std::string_view name) const;
  // Null when absent.
  const ArgValue* Get(std::string_view name) const;

  // Each returns `default_value` when the argument is absent and InvalidArgument like
  // "batch_size expects an integer, got string 'x'" when it has the wrong type.
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(std::string_view name, int64_t default_value) const;
  [[nodiscard]] absl::StatusOr<uint64_t> GetUint(std::string_view name,
                                                 uint64_t default_value) const;
  [[nodiscard]] absl::StatusOr<double> GetDouble(std::string_view name, double default_value) const;
  [[nodiscard]] absl::StatusOr<bool> GetBool(std::string_view name, bool default_value) const;
  // Accepts a bare name or a quoted string.
  [[nodiscard]] absl::StatusOr<std::string> GetIdentifier(std::string_view name,
                                                          std::string default_value) const;
  // Lists; absent is an empty list. A single scalar is taken as a one-item list.
  [[nodiscard]] absl::StatusOr<std::vector<ArgValue>> GetList(std::string_view name) const;
  [[nodiscard]] absl::StatusOr<std::vector<int64_t>> GetIntList(std::string_view name) const;
  [[nodiscard]] absl::StatusOr<std::vector<std::string>> GetStringList(std::string_view name) const;
  // A nested pipeline; InvalidArgument when absent or not a pipeline.
  [[nodiscard]] absl::StatusOr<proto::PipelineDef> GetPipeline(std::string_view name) const;

 private:
  std::map<std::string, ArgValue, std::less<>> values_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OP_ARGS_H_
