#include "engine/example_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <utility>

#include "common/status_macros.h"

namespace sluice::engine {
namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Every message here numbers its one length-delimited field 1 (Example.features,
// Features.feature's entries, an entry's key); an entry's value is field 2.
constexpr int kFirstField = 1;
constexpr int kEntryValue = 2;

absl::Status NotAnExample(const char* why) { return absl::InvalidArgumentError(why); }

// Reads the fields of `message` in order: `on_field(number, bytes)` for each
// length-delimited one, the rest skipped. Fails on framing cut short or overrunning.
template <typename OnField>
absl::Status ForEachField(std::string_view message, OnField on_field) {
  CodedInputStream in(reinterpret_cast<const uint8_t*>(message.data()),
                      static_cast<int>(message.size()));
  // Records are at most 1 GiB (the TFRecord reader's bound), under protobuf's 2 GiB limit.
  in.SetTotalBytesLimit(static_cast<int>(message.size()));
  while (static_cast<size_t>(in.CurrentPosition()) < message.size()) {
    const uint32_t tag = in.ReadTag();
    // Field 0 is no field (protobuf refuses it too).
    if (tag == 0 || WireFormatLite::GetTagFieldNumber(tag) == 0) {
      return NotAnExample("a field tag is cut short or zero");
    }
    if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return NotAnExample("a field is cut short");
      continue;
    }
    // As protobuf reads a length: at most 5 bytes and below 2^31 (ReadVarint32 would drop the
    // bits above 32 of a longer one).
    int length = 0;
    if (!in.ReadVarintSizeAsInt(&length)) return NotAnExample("a field's length is not valid");
    const auto at = static_cast<size_t>(in.CurrentPosition());
    if (static_cast<size_t>(length) > message.size() - at) {
      return NotAnExample("a field runs past its message");
    }
    SLUICE_RETURN_IF_ERROR(on_field(WireFormatLite::GetTagFieldNumber(tag),
                                    message.substr(at, static_cast<size_t>(length))));
    if (!in.Skip(length)) return NotAnExample("a field is cut short");
  }
  return absl::OkStatus();
}

}  // namespace

ExampleFeatureFinder::ExampleFeatureFinder(std::vector<std::string> names)
    : names_(std::move(names)) {
  for (int i = 0; i < static_cast<int>(names_.size()); ++i) {
    auto [it, added] = first_index_.try_emplace(names_[i], i);
    if (!added) same_as_.push_back({i, it->second});
  }
}

absl::Status ExampleFeatureFinder::Find(std::string_view record,
                                        std::vector<FoundFeature>* found) const {
  found->assign(names_.size(), FoundFeature{});
  SLUICE_RETURN_IF_ERROR(ForEachField(record, [&](int field, std::string_view features) {
    return field == kFirstField ? ScanFeatures(features, found) : absl::OkStatus();
  }));
  for (const auto& [again, first] : same_as_) (*found)[again] = (*found)[first];
  return absl::OkStatus();
}

absl::Status ExampleFeatureFinder::ScanFeatures(std::string_view features,
                                                std::vector<FoundFeature>* found) const {
  return ForEachField(features, [&](int field, std::string_view entry) {
    return field == kFirstField ? ScanEntry(entry, found) : absl::OkStatus();
  });
}

absl::Status ExampleFeatureFinder::ScanEntry(std::string_view entry,
                                             std::vector<FoundFeature>* found) const {
  std::string_view key;  // absent: the empty name
  FoundFeature feature{.present = true, .parts = {}};
  SLUICE_RETURN_IF_ERROR(ForEachField(entry, [&](int field, std::string_view bytes) {
    if (field == kFirstField) key = bytes;
    if (field == kEntryValue) feature.parts.push_back(bytes);
    return absl::OkStatus();
  }));
  if (auto it = first_index_.find(key); it != first_index_.end()) {
    (*found)[it->second] = std::move(feature);
  }
  return absl::OkStatus();
}

}  // namespace sluice::engine
