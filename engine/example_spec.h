// The feature spec of parse_example: which tf.train.Example features to turn into
// dense tensors, in a compact text form used by the pipeline text.
//
//   parse_example(spec='age:int64:scalar:0, name:bytes:var, pixels:float:784')
//
//   SLUICE_ASSIGN_OR_RETURN(std::vector<proto::FeatureSpec> features,
//                           ParseFeatureSpecs("age:int64:scalar:0,name:bytes:var"));
//   std::string text = FormatFeatureSpecs(features);  // parses back to `features`
//
// Grammar: features separated by ','; each is name:type:shape[:default] with
// whitespace around fields ignored.
//   type    int64 -> int64 tensor, float -> float32, bytes -> string
//   shape   N      exactly N values -> shape [N]            (FixedLenFeature([N]))
//           scalar exactly one value -> shape []            (FixedLenFeature([]))
//           var    any number k of values -> shape [k]; an absent feature gives [0]
//                  (VarLenFeature, densified; batch such features with padded_batch)
//   default for N and scalar only: the value used when the feature is absent or
//           empty, either one value (repeated to fill) or N values separated by ';'.
//           Without a default an absent feature is an error naming the feature and
//           the record. bytes defaults are the raw text (no ',' or ';').
// Feature names may hold anything but ',', ':', ';' and surrounding whitespace.
#ifndef SLUICE_ENGINE_EXAMPLE_SPEC_H_
#define SLUICE_ENGINE_EXAMPLE_SPEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// The longest fixed-length feature a spec may ask for (64 Mi values).
inline constexpr int64_t kMaxFixedFeatureLength = int64_t{1} << 26;

// InvalidArgument naming the feature (by position and name) and what was expected.
[[nodiscard]] absl::StatusOr<std::vector<proto::FeatureSpec>> ParseFeatureSpecs(
    std::string_view text);

// Canonical text: "name:type:shape[:default]" joined by ", ". Precondition: every spec
// passes ValidateFeatureSpec.
std::string FormatFeatureSpecs(const google::protobuf::RepeatedPtrField<proto::FeatureSpec>& specs);

// Checks one spec as ParseFeatureSpecs would produce it (name spelling, type and kind set,
// length and default counts, defaults only in the list of the spec's type).
[[nodiscard]] absl::Status ValidateFeatureSpec(const proto::FeatureSpec& spec);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_EXAMPLE_SPEC_H_
