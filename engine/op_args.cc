#include "engine/op_args.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {

ArgValue ArgValue::Integer(int64_t v) { return {Kind::kInteger, absl::StrCat(v), false}; }
ArgValue ArgValue::Unsigned(uint64_t v) { return {Kind::kInteger, absl::StrCat(v), false}; }
ArgValue ArgValue::Bool(bool v) { return {Kind::kBool, v ? "true" : "false", v}; }
ArgValue ArgValue::String(std::string v) { return {Kind::kString, std::move(v), false}; }
ArgValue ArgValue::Name(std::string v) { return {Kind::kName, std::move(v), false}; }

ArgValue ArgValue::Float(double v) {
  std::string text;
  for (int precision = 1; precision <= 17; ++precision) {
    text = absl::StrFormat("%.*g", precision, v);
    if (std::strtod(text.c_str(), nullptr) == v) break;
  }
  if (std::isfinite(v) && text.find_first_of(".e") == std::string::npos) text += ".0";
  return {Kind::kFloat, std::move(text), false};
}

ArgValue ArgValue::Identifier(std::string v) {
  if (IsNameToken(v) && v != "true" && v != "false") return Name(std::move(v));
  return String(std::move(v));
}

ArgValue ArgValue::List(std::vector<ArgValue> items) {
  ArgValue v{Kind::kList, "", false};
  v.items = std::move(items);
  return v;
}

ArgValue ArgValue::Pipeline(proto::PipelineDef def, std::string text) {
  ArgValue v{Kind::kPipeline, std::move(text), false};
  v.pipeline = std::make_shared<const proto::PipelineDef>(std::move(def));
  return v;
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
    case Kind::kPipeline:
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
    case Kind::kList:
      return absl::StrCat(
          "[",
          absl::StrJoin(items, ", ",
                        [](std::string* out, const ArgValue& item) { out->append(item.ToText()); }),
          "]");
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
    case Kind::kList:
      return absl::StrCat("list ", ToText());
    case Kind::kPipeline:
      return absl::StrCat("pipeline ", text);
  }
  return text;
}

absl::StatusOr<int64_t> ArgValue::AsInt(std::string_view what) const {
  if (kind != Kind::kInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " expects an integer, got ", Describe()));
  }
  int64_t out;
  if (!absl::SimpleAtoi(text, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " expects an integer in the int64 range, got ", text));
  }
  return out;
}

absl::StatusOr<double> ArgValue::AsDouble(std::string_view what) const {
  double out;
  if ((kind != Kind::kInteger && kind != Kind::kFloat) || !absl::SimpleAtod(text, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " expects a number, got ", Describe()));
  }
  return out;
}

absl::StatusOr<std::string> ArgValue::AsString(std::string_view what) const {
  if (kind != Kind::kName && kind != Kind::kString) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(what), " expects a name or a quoted string, got ", Describe()));
  }
  return text;
}

OpArgs::OpArgs(std::map<std::string, ArgValue, std::less<>> values) : values_(std::move(values)) {}

bool OpArgs::Has(std::string_view name) const { return values_.find(name) != values_.end(); }

const ArgValue* OpArgs::Get(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

absl::StatusOr<int64_t> OpArgs::GetInt(std::string_view name, int64_t default_value) const {
  const ArgValue* v = Get(name);
  return v == nullptr ? default_value : v->AsInt(name);
}

absl::StatusOr<uint64_t> OpArgs::GetUint(std::string_view name, uint64_t default_value) const {
  const ArgValue* v = Get(name);
  if (v == nullptr) return default_value;
  if (v->kind != ArgValue::Kind::kInteger) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a non-negative integer, got ", v->Describe()));
  }
  uint64_t out;
  // SimpleAtoi would accept "-1" for unsigned on some versions by wrapping; refuse signs.
  if (v->text.empty() || v->text[0] == '-' || !absl::SimpleAtoi(v->text, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects an integer in the uint64 range, got ", v->text));
  }
  return out;
}

absl::StatusOr<double> OpArgs::GetDouble(std::string_view name, double default_value) const {
  const ArgValue* v = Get(name);
  return v == nullptr ? default_value : v->AsDouble(name);
}

absl::StatusOr<bool> OpArgs::GetBool(std::string_view name, bool default_value) const {
  const ArgValue* v = Get(name);
  if (v == nullptr) return default_value;
  if (v->kind != ArgValue::Kind::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a boolean (true or false), got ", v->Describe()));
  }
  return v->boolean;
}

absl::StatusOr<std::string> OpArgs::GetIdentifier(std::string_view name,
                                                  std::string default_value) const {
  const ArgValue* v = Get(name);
  return v == nullptr ? std::move(default_value) : v->AsString(name);
}

absl::StatusOr<std::vector<ArgValue>> OpArgs::GetList(std::string_view name) const {
  const ArgValue* v = Get(name);
  if (v == nullptr) return std::vector<ArgValue>{};
  if (v->kind == ArgValue::Kind::kPipeline) {
    return absl::InvalidArgumentError(
        absl::StrCat(AbslView(name), " expects a list, got ", v->Describe()));
  }
  if (v->kind != ArgValue::Kind::kList) return std::vector<ArgValue>{*v};
  return v->items;
}

absl::StatusOr<std::vector<int64_t>> OpArgs::GetIntList(std::string_view name) const {
  SLUICE_ASSIGN_OR_RETURN(std::vector<ArgValue> items, GetList(name));
  std::vector<int64_t> out;
  for (size_t i = 0; i < items.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(int64_t v, items[i].AsInt(absl::StrCat(AbslView(name), "[", i, "]")));
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> OpArgs::GetStringList(std::string_view name) const {
  SLUICE_ASSIGN_OR_RETURN(std::vector<ArgValue> items, GetList(name));
  std::vector<std::string> out;
  for (size_t i = 0; i < items.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(std::string v,
                            items[i].AsString(absl::StrCat(AbslView(name), "[", i, "]")));
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<proto::PipelineDef> OpArgs::GetPipeline(std::string_view name) const {
  const ArgValue* v = Get(name);
  if (v == nullptr || v->kind != ArgValue::Kind::kPipeline) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(name), " expects a nested pipeline such as tfrecord(compression='gzip'), got ",
        v == nullptr ? "nothing" : v->Describe()));
  }
  return *v->pipeline;
}

}  // namespace sluice::engine
