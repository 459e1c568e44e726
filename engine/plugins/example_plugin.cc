// An example function plugin (engine/plugin_api.h), built as a shared library and
// loaded by plugin_test. It adds:
//   example.double        numeric components times two (same dtype)
//   example.reverse       string components with their bytes reversed
//   example.longer_than_3 predicate for filter: string scalar component 0 has > 3 bytes
//
//   sluice worker --plugin=build/engine/libsluice_example_plugin.so ...
//   text_line(files=['words.txt']) | filter(example.longer_than_3) | map(example.reverse)
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/plugin_api.h"

namespace {

using ::sluice::engine::DType;
using ::sluice::engine::Element;
using ::sluice::engine::Tensor;

absl::Status Double(Element in, Element* out) {
  for (Tensor& t : in) {
    if (!sluice::engine::IsNumericDType(t.dtype())) {
      return absl::InvalidArgumentError(
          absl::StrCat("example.double expects numeric components, got ",
                       std::string(sluice::engine::DTypeName(t.dtype()))));
    }
    sluice::engine::VisitDType(t.dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (T& v : t.mutable_values<T>()) v = static_cast<T>(v + v);
    });
    out->push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status Reverse(Element in, Element* out) {
  for (Tensor& t : in) {
    if (t.dtype() != DType::kString) {
      out->push_back(std::move(t));
      continue;
    }
    std::vector<std::string> reversed;
    for (std::string_view s : t.string_values()) reversed.emplace_back(s.rbegin(), s.rend());
    out->push_back(Tensor::FromStrings(t.shape(), reversed));
  }
  return absl::OkStatus();
}

absl::Status LongerThan3(Element in, Element* out) {
  if (in.empty() || in[0].dtype() != DType::kString || !in[0].shape().empty()) {
    return absl::InvalidArgumentError("example.longer_than_3 expects a string scalar");
  }
  out->push_back(Tensor::Scalar<uint8_t>(in[0].string_value(0).size() > 3 ? 1 : 0));
  return absl::OkStatus();
}

}  // namespace

SLUICE_PLUGIN(registrar) {
  SLUICE_RETURN_IF_ERROR(registrar.RegisterFunction("example.double", Double));
  SLUICE_RETURN_IF_ERROR(registrar.RegisterFunction("example.reverse", Reverse));
  SLUICE_RETURN_IF_ERROR(registrar.RegisterFunction("example.longer_than_3", LongerThan3));
  return absl::OkStatus();
}
