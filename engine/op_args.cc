#include "engine/op_args.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "engine/absl_compat.h"

namespace sluice::engine {

ArgValue ArgValue::Integer(int64_t v) { return {Kind::kInteger, absl::StrCat(v), false}; }
ArgValue ArgValue::Unsigned(uint64_t v) { return {Kind::kInteger, absl::StrCat(v), false}; }
ArgValue ArgValue::Bool(bool v) { return {Kind::kBool, v ? "true" : "false", v}; }
ArgValue ArgValue::String(std::string v) { return {Kind::kString, std::move(v), false}; }
ArgValue ArgValue::Name(std::string v) { return {Kind::kName, std::move(v), false}; }

ArgValue ArgValue::Identifier(std::string v) {
  if (IsNameToken(v) && v != "true" && v != "false") return Name(std::move(v));
  return String(std::move(v));
}

bool IsNameToken(std::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(c) || c == '_' || c == '.')) return false;
  }
  return true;
}

std::string ArgValue::ToText() const {
  switch (kind) {
    case Kind::kInteger:
    case Kind::kFloat:
    case Kind::kName:
    case Kind::kBool:
      return text;
    case Kind::kString: {
      // Backslash escapes only the quote and itself; the parser un-escapes any "\x" to x.
      std::string out = "'";
      for (char c : text) {
        if (c == '\'' || c == '\\') out += '\\';
        out += c;
      }
      out += "'";
      return out;
    }
  }
  return text;
}

std::string ArgValue::Describe() const {
  switch (kind) {
    case Kind::kInteger:
      return absl::StrCat("integer ", text);
    case Kind::kFloat:
      return absl::StrCat("float ", text);
    case Kind::kString:
      return absl::StrCat("string ", ToText());
    case Kind::kName:
      return absl::StrCat("name ", text);
    case Kind::kBool:
      return absl::StrCat("boolean ", text);
  }
  return text;
}

OpArgs::OpArgs(std::map<std::string, ArgValue, std::less<>> values) : values_(std::move(values)) {}

bool OpArgs::Has(std::string_view name) const { return values_.find(name) != values_.end(); }

absl::StatusOr<int64_t> OpArgs::GetInt(std::string_view name, int64_t default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const ArgValue& v = it->second;
  if (v.kind != ArgValue::Kind::kInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects an integer, got ", v.Describe()));
  }
  int64_t out;
  if (!absl::SimpleAtoi(v.text, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects an integer in the int64 range, got ", v.text));
  }
  return out;
}

absl::StatusOr<uint64_t> OpArgs::GetUint(std::string_view name, uint64_t default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const ArgValue& v = it->second;
  if (v.kind != ArgValue::Kind::kInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a non-negative integer, got ", v.Describe()));
  }
  uint64_t out;
  // SimpleAtoi would accept "-1" for unsigned on some versions by wrapping; refuse signs.
  if (v.text.empty() || v.text[0] == '-' || !absl::SimpleAtoi(v.text, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects an integer in the uint64 range, got ", v.text));
  }
  return out;
}

absl::StatusOr<bool> OpArgs::GetBool(std::string_view name, bool default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const ArgValue& v = it->second;
  if (v.kind != ArgValue::Kind::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a boolean (true or false), got ", v.Describe()));
  }
  return v.boolean;
}

absl::StatusOr<std::string> OpArgs::GetIdentifier(std::string_view name,
                                                  std::string default_value) const {
  auto it = values_.find(name);
  if (it == values_.end()) return default_value;
  const ArgValue& v = it->second;
  if (v.kind != ArgValue::Kind::kName && v.kind != ArgValue::Kind::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a name or a quoted string, got ", v.Describe()));
  }
  return v.text;
}

}  // namespace sluice::engine
