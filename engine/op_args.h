// Arguments of one stage in the pipeline text form, and typed access to them.
//
// The parser keeps each value as written; the op that owns the parameter decides
// how to read it, so type errors can say what that parameter expected:
//
//   OpArgs args({{"batch_size", ArgValue::Integer(32)}});
//   SLUICE_ASSIGN_OR_RETURN(int64_t n, args.GetInt("batch_size", 0));
//   SLUICE_ASSIGN_OR_RETURN(bool drop, args.GetBool("drop_remainder", false));
//
// Ops also produce FormattedArgs for FormatPipeline, using the same ArgValue.
#ifndef SLUICE_ENGINE_OP_ARGS_H_
#define SLUICE_ENGINE_OP_ARGS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace sluice::engine {

struct ArgValue {
  enum class Kind { kInteger, kFloat, kString, kName, kBool };

  Kind kind = Kind::kInteger;
  // Literal text for integers and floats (range checks happen on read), the unquoted
  // contents for strings, the identifier for names.
  std::string text;
  bool boolean = false;

  static ArgValue Integer(int64_t v);
  static ArgValue Unsigned(uint64_t v);
  static ArgValue Bool(bool v);
  static ArgValue String(std::string v);
  static ArgValue Name(std::string v);
  // A bare name when `v` is a valid NAME token other than true/false; a string otherwise.
  static ArgValue Identifier(std::string v);

  // Text-form spelling: 42, 1.5, 'it\'s', square, true.
  std::string ToText() const;
  // For error messages: "integer 5", "float 1.5", "string 'x'", "name foo", "boolean true".
  std::string Describe() const;
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

  // Each returns `default_value` when the argument is absent and InvalidArgument like
  // "batch_size expects an integer, got string 'x'" when it has the wrong type.
  [[nodiscard]] absl::StatusOr<int64_t> GetInt(std::string_view name, int64_t default_value) const;
  [[nodiscard]] absl::StatusOr<uint64_t> GetUint(std::string_view name,
                                                 uint64_t default_value) const;
  [[nodiscard]] absl::StatusOr<bool> GetBool(std::string_view name, bool default_value) const;
  // Accepts a bare name or a quoted string.
  [[nodiscard]] absl::StatusOr<std::string> GetIdentifier(std::string_view name,
                                                          std::string default_value) const;

 private:
  std::map<std::string, ArgValue, std::less<>> values_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OP_ARGS_H_
