#include "engine/pipeline_text.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"
#include "engine/op_args.h"
#include "engine/op_registry.h"

namespace sluice::engine {
namespace {

enum class TokenKind {
  kName,
  kInteger,
  kFloat,
  kString,
  kLParen,
  kRParen,
  kComma,
  kPipe,
  kEquals,
  kLBracket,
  kRBracket,
  kEnd,
  // A character no token starts with; the parser reports it with its own expectation.
  kInvalid,
  kUnterminatedString,
};

struct Token {
  TokenKind kind;
  size_t pos;        // Byte offset in the text.
  std::string raw;   // As written, for messages.
  std::string text;  // Unescaped contents for strings; raw otherwise.
};

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.'; }

// Length of a number starting at s[0], and whether it is a float; 0 when none starts here.
size_t ScanNumber(std::string_view s, bool* is_float) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  size_t digits = 0;
  while (i < s.size() && absl::ascii_isdigit(s[i])) ++i, ++digits;
  *is_float = false;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    size_t frac = 0;
    while (j < s.size() && absl::ascii_isdigit(s[j])) ++j, ++frac;
    if (digits + frac > 0) {
      i = j;
      digits += frac;
      *is_float = true;
    }
  }
  if (digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '-' || s[j] == '+')) ++j;
    size_t exp_digits = 0;
    while (j < s.size() && absl::ascii_isdigit(s[j])) ++j, ++exp_digits;
    if (exp_digits > 0) {
      i = j;
      *is_float = true;
    }
  }
  return i;
}

std::vector<Token> Lex(std::string_view text) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (true) {
    while (i < text.size() && absl::ascii_isspace(text[i])) ++i;
    if (i == text.size()) break;
    const char c = text[i];
    const size_t start = i;
    bool is_float = false;
    if (IsNameStart(c)) {
      while (i < text.size() && IsNameChar(text[i])) ++i;
      std::string raw(text.substr(start, i - start));
      tokens.push_back({TokenKind::kName, start, raw, raw});
    } else if (size_t n = ScanNumber(text.substr(i), &is_float); n > 0) {
      i += n;
      std::string raw(text.substr(start, n));
      tokens.push_back({is_float ? TokenKind::kFloat : TokenKind::kInteger, start, raw, raw});
    } else if (c == '\'' || c == '"') {
      std::string contents;
      ++i;
      while (i < text.size() && text[i] != c) {
        if (text[i] == '\\' && i + 1 < text.size()) ++i;
        contents += text[i++];
      }
      if (i == text.size()) {
        tokens.push_back({TokenKind::kUnterminatedString, start, std::string(1, c), ""});
        return tokens;  // Everything after is inside the string.
      }
      ++i;
      tokens.push_back(
          {TokenKind::kString, start, std::string(text.substr(start, i - start)), contents});
    } else {
      TokenKind kind = TokenKind::kInvalid;
      switch (c) {
        case '(':
          kind = TokenKind::kLParen;
          break;
        case ')':
          kind = TokenKind::kRParen;
          break;
        case ',':
          kind = TokenKind::kComma;
          break;
        case '|':
          kind = TokenKind::kPipe;
          break;
        case '=':
          kind = TokenKind::kEquals;
          break;
        case '[':
          kind = TokenKind::kLBracket;
          break;
        case ']':
          kind = TokenKind::kRBracket;
          break;
        default:
          break;
      }
      ++i;
      tokens.push_back({kind, start, std::string(1, c), std::string(1, c)});
    }
  }
  tokens.push_back({TokenKind::kEnd, text.size(), "", ""});
  return tokens;
}

struct ParsedArg {
  std::optional<std::string> keyword;
  ArgValue value;
  size_t pos;
};

struct ParsedStage {
  std::string op;
  size_t pos;
  std::vector<ParsedArg> args;
};

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text), tokens_(Lex(text)) {}

  absl::StatusOr<proto::PipelineDef> Parse() {
    if (Peek().kind == TokenKind::kEnd) {
      return absl::InvalidArgumentError(
          "pipeline text is empty; expected at least one stage, e.g. range(10)");
    }
    SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef def, ParseStages(/*label_prefix=*/""));
    if (Peek().kind != TokenKind::kEnd) return Expected("'|' or end of input after stage");
    return def;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    return tokens_[std::min(next_ + ahead, tokens_.size() - 1)];
  }

  // Error at `pos` with the text echoed and a caret under the column.
  absl::Status ErrorAt(size_t pos, absl::string_view kind, absl::string_view message) const {
    std::string shown(text_);
    for (char& ch : shown) {
      // Keep one byte per column so the caret lines up.
      if (absl::ascii_iscntrl(ch)) ch = ' ';
    }
    return absl::InvalidArgumentError(absl::StrCat("pipeline ", kind, " at column ", pos + 1, ": ",
                                                   message, "\n  ", shown, "\n  ",
                                                   std::string(pos, ' '), "^"));
  }

  absl::Status Expected(absl::string_view what) const {
    const Token& t = Peek();
    if (t.kind == TokenKind::kUnterminatedString) {
      return ErrorAt(t.pos, "syntax error",
                     absl::StrCat("expected a closing ", t.raw,
                                  " for the string starting here, found end of input"));
    }
    std::string found = t.kind == TokenKind::kEnd ? "end of input" : absl::StrCat("'", t.raw, "'");
    return ErrorAt(t.pos, "syntax error", absl::StrCat("expected ", what, ", found ", found));
  }

  // stage ('|' stage)*, each resolved into `def` as soon as it is parsed.
  absl::StatusOr<proto::PipelineDef> ParseStages(const std::string& label_prefix) {
    proto::PipelineDef def;
    while (true) {
      SLUICE_ASSIGN_OR_RETURN(ParsedStage stage, ParseStage());
      const int index = def.stages_size();
      SLUICE_RETURN_IF_ERROR(Resolve(label_prefix, index, stage, def.add_stages()));
      if (Peek().kind != TokenKind::kPipe) return def;
      ++next_;
    }
  }

  absl::StatusOr<ParsedStage> ParseStage() {
    if (Peek().kind != TokenKind::kName) return Expected("an op name");
    ParsedStage stage{Peek().text, Peek().pos, {}};
    ++next_;
    if (Peek().kind != TokenKind::kLParen) {
      return Expected(absl::StrCat("'(' after op name '", stage.op, "'"));
    }
    ++next_;
    if (Peek().kind == TokenKind::kRParen) {
      ++next_;
      return stage;
    }
    while (true) {
      SLUICE_ASSIGN_OR_RETURN(ParsedArg arg,
                              ParseArg(stage.args.empty() ? "an argument or ')'" : "an argument"));
      stage.args.push_back(std::move(arg));
      if (Peek().kind == TokenKind::kRParen) {
        ++next_;
        return stage;
      }
      if (Peek().kind != TokenKind::kComma) return Expected("')' or ',' after argument");
      ++next_;
    }
  }

  absl::StatusOr<ParsedArg> ParseArg(absl::string_view expected) {
    ParsedArg arg;
    arg.pos = Peek().pos;
    if (Peek().kind == TokenKind::kName && Peek(1).kind == TokenKind::kEquals) {
      arg.keyword = Peek().text;
      next_ += 2;
      expected = "a value after '='";
    }
    SLUICE_ASSIGN_OR_RETURN(arg.value, ParseValue(expected));
    return arg;
  }

  absl::StatusOr<ArgValue> ParseValue(absl::string_view expected) {
    // Bounds recursion on hostile input such as 10000 '['s.
    constexpr int kMaxDepth = 32;
    if (depth_ >= kMaxDepth) {
      return ErrorAt(Peek().pos, "syntax error",
                     absl::StrCat("lists and nested pipelines nest deeper than ", kMaxDepth));
    }
    ++depth_;
    absl::Cleanup leave = [this] { --depth_; };
    const Token& t = Peek();
    ArgValue value;
    switch (t.kind) {
      case TokenKind::kInteger:
        value = {ArgValue::Kind::kInteger, t.text, false};
        break;
      case TokenKind::kFloat:
        value = {ArgValue::Kind::kFloat, t.text, false};
        break;
      case TokenKind::kString:
        value = ArgValue::String(t.text);
        break;
      case TokenKind::kName:
        if (Peek(1).kind == TokenKind::kLParen) {
          const size_t start = t.pos;
          SLUICE_ASSIGN_OR_RETURN(
              proto::PipelineDef nested,
              ParseStages(absl::StrCat("nested pipeline at column ", start + 1, ": ")));
          std::string text = FormatPipeline(nested);
          return ArgValue::Pipeline(std::move(nested), std::move(text));
        }
        value = (t.text == "true" || t.text == "false") ? ArgValue::Bool(t.text == "true")
                                                        : ArgValue::Name(t.text);
        break;
      case TokenKind::kLBracket: {
        ++next_;
        std::vector<ArgValue> items;
        if (Peek().kind != TokenKind::kRBracket) {
          while (true) {
            SLUICE_ASSIGN_OR_RETURN(ArgValue item, ParseValue("a list item"));
            items.push_back(std::move(item));
            if (Peek().kind == TokenKind::kRBracket) break;
            if (Peek().kind != TokenKind::kComma) return Expected("']' or ',' after list item");
            ++next_;
          }
        }
        ++next_;  // ']'
        return ArgValue::List(std::move(items));
      }
      default:
        return Expected(expected);
    }
    ++next_;
    return value;
  }

  // Binds the parsed args to the op's parameters and fills `*stage`.
  absl::Status Resolve(const std::string& label_prefix, int index, const ParsedStage& parsed,
                       proto::Stage* stage) const {
    const OpRegistry& registry = OpRegistry::Global();
    const OpDef* op = registry.Find(parsed.op);
    if (op == nullptr) {
      return ErrorAt(parsed.pos, "error",
                     absl::StrCat("unknown op '", parsed.op,
                                  "'; known ops: ", absl::StrJoin(registry.Names(), ", ")));
    }
    const std::string label = absl::StrCat(label_prefix, "stage ", index, " (", op->name, "): ");
    auto error = [&](size_t pos, absl::string_view message) {
      return ErrorAt(pos, "error", absl::StrCat(label, message));
    };

    size_t positional = 0;
    for (size_t i = 0; i < parsed.args.size(); ++i) {
      if (parsed.args[i].keyword.has_value()) continue;
      if (positional < i) {
        return error(parsed.args[i].pos, "positional argument follows a keyword argument");
      }
      ++positional;
    }
    std::vector<std::string> names;
    if (op->positional_names) {
      absl::StatusOr<std::vector<std::string>> bound = op->positional_names(positional);
      if (!bound.ok()) return error(parsed.pos, bound.status().message());
      names = *std::move(bound);
    } else {
      if (positional > op->params.size()) {
        return error(
            parsed.args[op->params.size()].pos,
            absl::StrCat(op->name, " takes at most ", op->params.size(), " positional argument",
                         op->params.size() == 1 ? "" : "s", ", got ", positional));
      }
      for (size_t i = 0; i < positional; ++i) names.push_back(op->params[i].name);
    }

    std::vector<std::string> valid;
    for (const ParamDef& p : op->params) valid.push_back(p.name);
    std::map<std::string, ArgValue, std::less<>> values;
    for (size_t i = 0; i < parsed.args.size(); ++i) {
      const ParsedArg& arg = parsed.args[i];
      const std::string& name = i < positional ? names[i] : *arg.keyword;
      if (std::find(valid.begin(), valid.end(), name) == valid.end()) {
        return error(arg.pos, absl::StrCat("unknown argument '", name,
                                           "'; valid arguments: ", absl::StrJoin(valid, ", ")));
      }
      if (!values.emplace(name, arg.value).second) {
        return error(arg.pos, absl::StrCat("argument '", name, "' given more than once"));
      }
    }
    for (const ParamDef& p : op->params) {
      if (p.required && !values.contains(p.name)) {
        return error(parsed.pos, absl::StrCat("missing required argument '", p.name, "'"));
      }
    }
    absl::Status s = op->from_args(OpArgs(std::move(values)), stage);
    if (!s.ok()) return error(parsed.pos, s.message());
    return absl::OkStatus();
  }

  std::string_view text_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  int depth_ = 0;
};

}  // namespace

absl::StatusOr<proto::PipelineDef> ParsePipeline(std::string_view text) {
  return Parser(text).Parse();
}

std::string FormatPipeline(const proto::PipelineDef& def) {
  std::vector<std::string> stages;
  for (const proto::Stage& stage : def.stages()) {
    const OpDef* op = OpRegistry::Global().Find(stage.op_case());
    if (op == nullptr) {
      stages.push_back("<unset>()");
      continue;
    }
    std::vector<std::string> args;
    for (const FormattedArg& arg : op->to_args(stage)) {
      args.push_back(arg.positional ? arg.value.ToText()
                                    : absl::StrCat(arg.name, "=", arg.value.ToText()));
    }
    stages.push_back(absl::StrCat(op->name, "(", absl::StrJoin(args, ", "), ")"));
  }
  return absl::StrJoin(stages, " | ");
}

}  // namespace sluice::engine
