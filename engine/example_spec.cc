#include "engine/example_spec.h"

#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

std::string_view TypeName(proto::FeatureSpec::Type type) {
  switch (type) {
    case proto::FeatureSpec::INT64:
      return "int64";
    case proto::FeatureSpec::FLOAT:
      return "float";
    case proto::FeatureSpec::BYTES:
      return "bytes";
    case proto::FeatureSpec::TYPE_UNSPECIFIED:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return "unspecified";
}

// Shortest decimal text that reads back as exactly `v` (as a float).
std::string FloatText(float v) {
  std::string text;
  for (int precision = 1; precision <= 9; ++precision) {
    text = absl::StrFormat("%.*g", precision, v);
    if (std::strtof(text.c_str(), nullptr) == v) break;
  }
  return text;
}

int DefaultCount(const proto::FeatureSpec& spec) {
  return spec.int64_default_size() + spec.float_default_size() + spec.bytes_default_size();
}

absl::Status ParseDefaults(absl::string_view text, proto::FeatureSpec* spec,
                           const std::string& where) {
  for (absl::string_view raw : absl::StrSplit(text, ';')) {
    const absl::string_view v = absl::StripAsciiWhitespace(raw);
    switch (spec->type()) {
      case proto::FeatureSpec::INT64: {
        int64_t i;
        if (!absl::SimpleAtoi(v, &i)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, "expected an int64 default, got '", v, "'"));
        }
        spec->add_int64_default(i);
        break;
      }
      case proto::FeatureSpec::FLOAT: {
        float f;
        if (!absl::SimpleAtof(v, &f)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, "expected a float default, got '", v, "'"));
        }
        spec->add_float_default(f);
        break;
      }
      case proto::FeatureSpec::BYTES:
        spec->add_bytes_default(std::string(v));
        break;
      case proto::FeatureSpec::TYPE_UNSPECIFIED:
      case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MIN_SENTINEL_DO_NOT_USE_:
      case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MAX_SENTINEL_DO_NOT_USE_:
        return absl::InvalidArgumentError(absl::StrCat(where, "expected a type before defaults"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateFeatureSpec(const proto::FeatureSpec& spec) {
  const std::string& name = spec.name();
  if (name.empty() || name.find_first_of(",:;") != std::string::npos ||
      absl::ascii_isspace(name.front()) || absl::ascii_isspace(name.back())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a feature name without ',', ':', ';' or surrounding whitespace, got '", name,
        "'"));
  }
  const std::string where = absl::StrCat("feature '", name, "': ");
  if (!proto::FeatureSpec::Type_IsValid(spec.type()) ||
      spec.type() == proto::FeatureSpec::TYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(where, "expected a type (int64, float, bytes)"));
  }
  if (!proto::FeatureSpec::Kind_IsValid(spec.kind()) ||
      spec.kind() == proto::FeatureSpec::KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(where, "expected a shape (N, scalar or var)"));
  }
  if (spec.kind() == proto::FeatureSpec::FIXED ? spec.length() < 0 : spec.length() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "expected length >= 0 for a fixed shape and 0 otherwise, got ", spec.length()));
  }
  // A record without the feature gets `length` defaults: a length past any real feature
  // only made a worker allocate until it died.
  if (spec.length() > kMaxFixedFeatureLength) {
    return absl::InvalidArgumentError(absl::StrCat(where, "a fixed length of ", spec.length(),
                                                   " is above the limit of ",
                                                   kMaxFixedFeatureLength, " values"));
  }
  const int defaults = DefaultCount(spec);
  const int matching = spec.type() == proto::FeatureSpec::INT64   ? spec.int64_default_size()
                       : spec.type() == proto::FeatureSpec::FLOAT ? spec.float_default_size()
                                                                  : spec.bytes_default_size();
  if (defaults != matching) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, "defaults must be in the list of its type (", AbslView(TypeName(spec.type())), ")"));
  }
  if (spec.kind() == proto::FeatureSpec::VAR && defaults != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "var features take no default"));
  }
  const int64_t full = spec.kind() == proto::FeatureSpec::FIXED ? spec.length() : 1;
  if (defaults > 1 && defaults != full) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "expected 1 or ", full, " default values, got ", defaults));
  }
  for (const std::string& b : spec.bytes_default()) {
    if (b.find_first_of(",;") != std::string::npos ||
        (!b.empty() && (absl::ascii_isspace(b.front()) || absl::ascii_isspace(b.back())))) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "bytes default '", b,
                       "' cannot be written in the spec text (',', ';' or "
                       "surrounding whitespace)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::FeatureSpec>> ParseFeatureSpecs(std::string_view text) {
  std::vector<proto::FeatureSpec> out;
  int index = 0;
  for (absl::string_view item : absl::StrSplit(AbslView(text), ',')) {
    const std::string where = absl::StrCat("feature ", index++, " '", item, "': ");
    std::vector<absl::string_view> fields = absl::StrSplit(item, absl::MaxSplits(':', 3));
    if (fields.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "expected name:type:shape[:default], e.g. age:int64:scalar or name:bytes:var"));
    }
    proto::FeatureSpec spec;
    spec.set_name(std::string(absl::StripAsciiWhitespace(fields[0])));
    const absl::string_view type = absl::StripAsciiWhitespace(fields[1]);
    const absl::string_view shape = absl::StripAsciiWhitespace(fields[2]);
    if (type == "int64") {
      spec.set_type(proto::FeatureSpec::INT64);
    } else if (type == "float") {
      spec.set_type(proto::FeatureSpec::FLOAT);
    } else if (type == "bytes") {
      spec.set_type(proto::FeatureSpec::BYTES);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected type int64, float or bytes, got '", type, "'"));
    }
    int64_t length = 0;
    if (shape == "scalar") {
      spec.set_kind(proto::FeatureSpec::SCALAR);
    } else if (shape == "var") {
      spec.set_kind(proto::FeatureSpec::VAR);
    } else if (absl::SimpleAtoi(shape, &length) && length >= 0) {
      spec.set_kind(proto::FeatureSpec::FIXED);
      spec.set_length(length);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "expected shape N (a length >= 0), scalar or var, got '", shape, "'"));
    }
    if (fields.size() == 4) SLUICE_RETURN_IF_ERROR(ParseDefaults(fields[3], &spec, where));
    absl::Status valid = ValidateFeatureSpec(spec);
    if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(where, valid.message()));
    // Two tensors of one name: the second would be read as the first's twin, unseen.
    for (const proto::FeatureSpec& earlier : out) {
      if (earlier.name() == spec.name()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "feature '", spec.name(), "' is named twice in the spec"));
      }
    }
    out.push_back(std::move(spec));
  }
  return out;
}

std::string FormatFeatureSpecs(
    const google::protobuf::RepeatedPtrField<proto::FeatureSpec>& specs) {
  std::vector<std::string> items;
  for (const proto::FeatureSpec& spec : specs) {
    std::string item = absl::StrCat(spec.name(), ":", AbslView(TypeName(spec.type())), ":");
    switch (spec.kind()) {
      case proto::FeatureSpec::FIXED:
        absl::StrAppend(&item, spec.length());
        break;
      case proto::FeatureSpec::SCALAR:
        item += "scalar";
        break;
      case proto::FeatureSpec::VAR:
        item += "var";
        break;
      case proto::FeatureSpec::KIND_UNSPECIFIED:
      case proto::FeatureSpec_Kind_FeatureSpec_Kind_INT_MIN_SENTINEL_DO_NOT_USE_:
      case proto::FeatureSpec_Kind_FeatureSpec_Kind_INT_MAX_SENTINEL_DO_NOT_USE_:
        break;
    }
    std::vector<std::string> defaults;
    for (int64_t v : spec.int64_default()) defaults.push_back(absl::StrCat(v));
    for (float v : spec.float_default()) defaults.push_back(FloatText(v));
    for (const std::string& v : spec.bytes_default()) defaults.push_back(v);
    if (!defaults.empty()) absl::StrAppend(&item, ":", absl::StrJoin(defaults, ";"));
    items.push_back(std::move(item));
  }
  return absl::StrJoin(items, ", ");
}

}  // namespace sluice::engine
