#include "engine/example_parser.h"

#include <string>
#include <utility>

#include <google/protobuf/io/coded_stream.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "engine/example.pb.h"
#include "engine/example_wire.h"

namespace sluice::engine {
namespace {

absl::string_view KindName(example::Feature::KindCase kind) {
  switch (kind) {
    case example::Feature::kBytesList:
      return "bytes_list";
    case example::Feature::kFloatList:
      return "float_list";
    case example::Feature::kInt64List:
      return "int64_list";
    case example::Feature::KIND_NOT_SET:
      break;
  }
  return "empty";
}

example::Feature::KindCase ExpectedKind(proto::FeatureSpec::Type type) {
  switch (type) {
    case proto::FeatureSpec::INT64:
      return example::Feature::kInt64List;
    case proto::FeatureSpec::FLOAT:
      return example::Feature::kFloatList;
    case proto::FeatureSpec::BYTES:
      return example::Feature::kBytesList;
    case proto::FeatureSpec::TYPE_UNSPECIFIED:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return example::Feature::KIND_NOT_SET;
}

int ValueCount(const example::Feature& f) {
  switch (f.kind_case()) {
    case example::Feature::kBytesList:
      return f.bytes_list().value_size();
    case example::Feature::kFloatList:
      return f.float_list().value_size();
    case example::Feature::kInt64List:
      return f.int64_list().value_size();
    case example::Feature::KIND_NOT_SET:
      break;
  }
  return 0;
}

// A tensor of `shape` from `n` values at `index(i)` of the list (or of the defaults).
template <typename T, typename Get>
absl::StatusOr<Tensor> Fill(std::vector<int64_t> shape, int64_t n, Get get) {
  SLUICE_ASSIGN_OR_RETURN(Tensor t, Tensor::Create(DTypeOf<T>::value, std::move(shape)));
  auto out = t.mutable_values<T>();
  for (int64_t i = 0; i < n; ++i) out[i] = get(i);
  return t;
}

absl::StatusOr<Tensor> FromFeature(const proto::FeatureSpec& spec, const example::Feature& f,
                                   std::vector<int64_t> shape, int64_t n) {
  switch (spec.type()) {
    case proto::FeatureSpec::INT64:
      return Fill<int64_t>(std::move(shape), n,
                           [&](int64_t i) { return f.int64_list().value(static_cast<int>(i)); });
    case proto::FeatureSpec::FLOAT:
      return Fill<float>(std::move(shape), n,
                         [&](int64_t i) { return f.float_list().value(static_cast<int>(i)); });
    case proto::FeatureSpec::BYTES:
    case proto::FeatureSpec::TYPE_UNSPECIFIED:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  std::vector<std::string_view> values;
  for (const std::string& s : f.bytes_list().value()) values.push_back(s);
  return Tensor::FromStrings(std::move(shape), values);
}

// The default filled to `n` values (one value repeats).
absl::StatusOr<Tensor> FromDefault(const proto::FeatureSpec& spec, std::vector<int64_t> shape,
                                   int64_t n) {
  switch (spec.type()) {
    case proto::FeatureSpec::INT64:
      return Fill<int64_t>(std::move(shape), n, [&](int64_t i) {
        return spec.int64_default(spec.int64_default_size() == 1 ? 0 : static_cast<int>(i));
      });
    case proto::FeatureSpec::FLOAT:
      return Fill<float>(std::move(shape), n, [&](int64_t i) {
        return spec.float_default(spec.float_default_size() == 1 ? 0 : static_cast<int>(i));
      });
    case proto::FeatureSpec::BYTES:
    case proto::FeatureSpec::TYPE_UNSPECIFIED:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::FeatureSpec_Type_FeatureSpec_Type_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  std::vector<std::string_view> values;
  for (int64_t i = 0; i < n; ++i) {
    values.push_back(spec.bytes_default(spec.bytes_default_size() == 1 ? 0 : static_cast<int>(i)));
  }
  return Tensor::FromStrings(std::move(shape), values);
}

absl::Status InFeature(absl::string_view where, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
}

std::vector<std::string> NamesOf(const std::vector<proto::FeatureSpec>& features) {
  std::vector<std::string> names;
  names.reserve(features.size());
  for (const proto::FeatureSpec& spec : features) names.push_back(spec.name());
  return names;
}

}  // namespace

ExampleParser::ExampleParser(std::vector<proto::FeatureSpec> features)
    : features_(std::move(features)), finder_(NamesOf(features_)) {}

absl::Status ExampleParser::Parse(std::string_view record, int64_t record_index,
                                  Element* out) const {
  // Only the features the spec names are decoded (example_wire.h).
  std::vector<FoundFeature> found;
  if (absl::Status framed = finder_.Find(record, &found); !framed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("record ", record_index, ": expected a serialized tf.train.Example, got ",
                     record.size(), " bytes that do not parse (", framed.message(), ")"));
  }
  out->clear();
  out->reserve(features_.size());
  example::Feature feature;
  for (size_t i = 0; i < features_.size(); ++i) {
    const proto::FeatureSpec& spec = features_[i];
    const std::string where =
        absl::StrCat("record ", record_index, ": feature '", spec.name(), "'");
    const bool present = found[i].present;
    feature.Clear();
    for (std::string_view part : found[i].parts) {
      // Merged as protobuf merges a field given twice; the whole part, or it is no Feature
      // (a merge stops at a 0 or end-group tag and calls that success).
      google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(part.data()),
                                                static_cast<int>(part.size()));
      if (!feature.MergeFromCodedStream(&in) || !in.ConsumedEntireMessage() ||
          static_cast<size_t>(in.CurrentPosition()) != part.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": its ", part.size(), " bytes are not a tf.train.Feature"));
      }
    }
    const int count = present ? ValueCount(feature) : 0;
    if (count > 0 && feature.kind_case() != ExpectedKind(spec.type())) {
      return absl::InvalidArgumentError(absl::StrCat(where, " is ", KindName(feature.kind_case()),
                                                     ", but the spec expects ",
                                                     KindName(ExpectedKind(spec.type()))));
    }
    const bool var = spec.kind() == proto::FeatureSpec::VAR;
    const int64_t want = spec.kind() == proto::FeatureSpec::FIXED ? spec.length() : 1;
    std::vector<int64_t> shape;
    if (var) {
      shape = {count};
    } else if (spec.kind() == proto::FeatureSpec::FIXED) {
      shape = {spec.length()};
    }
    // A feature of fixed length 0 that is there holds its zero values (tf.data's
    // FixedLenFeature([0])); only a missing one needs the default.
    const bool empty_as_wanted = want == 0 && present;
    if (count == 0 && !var && !empty_as_wanted) {
      if (spec.int64_default_size() + spec.float_default_size() + spec.bytes_default_size() == 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, " is ", present ? "empty" : "missing",
                                                       " and the spec gives no default"));
      }
      absl::StatusOr<Tensor> filled = FromDefault(spec, std::move(shape), want);
      if (!filled.ok()) return InFeature(where, filled.status());
      out->push_back(*std::move(filled));
      continue;
    }
    if (!var && count != want) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has ", count, " values, but the spec expects ", want));
    }
    const DType dtype = spec.type() == proto::FeatureSpec::BYTES   ? DType::kString
                        : spec.type() == proto::FeatureSpec::FLOAT ? DType::kFloat32
                                                                   : DType::kInt64;
    // A list too long for one tensor (a packed varint list of a 2 GiB record) fails the
    // record instead of the worker.
    absl::StatusOr<Tensor> parsed = count == 0
                                        ? Tensor::Create(dtype, {0})
                                        : FromFeature(spec, feature, std::move(shape), count);
    if (!parsed.ok()) return InFeature(where, parsed.status());
    out->push_back(*std::move(parsed));
  }
  return absl::OkStatus();
}

}  // namespace sluice::engine
