// Turns serialized tf.train.Example records into dense tensors by a feature spec
// (engine/example_spec.h); the engine of the parse_example op.
//
//   SLUICE_ASSIGN_OR_RETURN(std::vector<proto::FeatureSpec> spec,
//                           ParseFeatureSpecs("x_int:int64:10, x_byte:bytes:var"));
//   ExampleParser parser(spec);
//   Element out;
//   SLUICE_RETURN_IF_ERROR(parser.Parse(record_bytes, /*record_index=*/0, &out));
//   // out[0]: int64[10], out[1]: string[k]
//
// Thread-safe (Parse is const).
#ifndef SLUICE_ENGINE_EXAMPLE_PARSER_H_
#define SLUICE_ENGINE_EXAMPLE_PARSER_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "engine/example_wire.h"
#include "engine/pipeline.pb.h"
#include "engine/tensor.h"

namespace sluice::engine {

class ExampleParser {
 public:
  // Precondition: every spec passes ValidateFeatureSpec.
  explicit ExampleParser(std::vector<proto::FeatureSpec> features);

  // One component per feature, in spec order. InvalidArgument, naming the record (by
  // `record_index`) and the feature, for bytes that are not an Example, a feature of the
  // wrong type, a wrong number of values, or a missing (or empty) feature without a
  // default.
  [[nodiscard]] absl::Status Parse(std::string_view record, int64_t record_index,
                                   Element* out) const;

 private:
  std::vector<proto::FeatureSpec> features_;
  ExampleFeatureFinder finder_;  // of features_' names
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_EXAMPLE_PARSER_H_
