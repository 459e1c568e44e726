// Finds features in a serialized tf.train.Example by name without decoding the others, as
// TensorFlow's fast parser does. Decoded whole, a record whose unrequested features hold
// millions of tiny values took about 28 times its size in protobuf objects; and proto3's
// map<string, Feature> refused any record with a key that is not UTF-8, which TensorFlow
// reads.
//
//   ExampleFeatureFinder finder({"ids", "label"});
//   std::vector<FoundFeature> found;
//   SLUICE_RETURN_IF_ERROR(finder.Find(record, &found));
//   if (found[0].present) { example::Feature ids; ... found[0].parts ... }
#ifndef SLUICE_ENGINE_EXAMPLE_WIRE_H_
#define SLUICE_ENGINE_EXAMPLE_WIRE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"

namespace sluice::engine {

// One asked-for feature in one record: the serialized Feature messages its map entry holds
// (more than one is merged, as protobuf merges a field given twice). The last entry of a
// name wins, as in a protobuf map. Views into the record.
struct FoundFeature {
  bool present = false;
  absl::InlinedVector<std::string_view, 1> parts;
};

class ExampleFeatureFinder {
 public:
  explicit ExampleFeatureFinder(std::vector<std::string> names);
  // Not copyable: first_index_ views names_' strings (a move keeps them where they are).
  ExampleFeatureFinder(const ExampleFeatureFinder&) = delete;
  ExampleFeatureFinder& operator=(const ExampleFeatureFinder&) = delete;
  ExampleFeatureFinder(ExampleFeatureFinder&&) = default;
  ExampleFeatureFinder& operator=(ExampleFeatureFinder&&) = default;

  // found->at(i) for names[i] (a name asked twice is found twice). InvalidArgument when the
  // record's framing is not an Example's: a tag, length or varint cut short or past its end.
  [[nodiscard]] absl::Status Find(std::string_view record, std::vector<FoundFeature>* found) const;

 private:
  absl::Status ScanFeatures(std::string_view features, std::vector<FoundFeature>* found) const;
  absl::Status ScanEntry(std::string_view entry, std::vector<FoundFeature>* found) const;

  std::vector<std::string> names_;
  absl::flat_hash_map<std::string_view, int> first_index_;  // into names_
  std::vector<std::pair<int, int>> same_as_;  // (index, first index) of a name asked again
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_EXAMPLE_WIRE_H_
