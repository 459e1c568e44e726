#include "engine/string_functions.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

std::string Quoted(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string shown = absl::CHexEscape(AbslView(s.substr(0, kMaxShown)));
  return absl::StrCat("\"", shown, s.size() > kMaxShown ? "\"..." : "\"");
}

// A function mapping every string component through `op`; others pass through.
template <typename Op>
FunctionRegistry::Function OnStrings(Op op) {
  return [op](Element in, Element* out) -> absl::Status {
    out->reserve(in.size());
    for (Tensor& t : in) {
      if (t.dtype() != DType::kString) {
        out->push_back(std::move(t));
        continue;
      }
      SLUICE_ASSIGN_OR_RETURN(Tensor mapped, op(t));
      out->push_back(std::move(mapped));
    }
    return absl::OkStatus();
  };
}

// Parses every string of `t` with `parse` into a tensor of T of the same shape.
template <typename T, typename Parse>
absl::StatusOr<Tensor> ParseEach(const Tensor& t, std::string_view fn, std::string_view what,
                                 Parse parse) {
  SLUICE_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DTypeOf<T>::value, t.shape()));
  auto values = out.mutable_values<T>();
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const std::string_view s = t.string_value(i);
    if (!parse(AbslView(s), &values[i])) {
      return absl::InvalidArgumentError(absl::StrCat(AbslView(fn), ": expected ", AbslView(what),
                                                     ", got ", Quoted(s), " at index ", i));
    }
  }
  return out;
}

absl::StatusOr<std::string_view> StringScalar(const Tensor& t, std::string_view fn) {
  if (!t.shape().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(AbslView(fn), " expects string scalars, got ",
                                                   "string", ShapeString(t.shape())));
  }
  return t.string_value(0);
}

}  // namespace

void AddStringBuiltins(FunctionRegistry* registry) {
  auto add = [registry](std::string name, FunctionRegistry::Function fn) {
    absl::Status s = registry->Register(std::move(name), std::move(fn));
    (void)s;  // Names are distinct literals; failure is impossible.
  };
  add("string_length", OnStrings([](const Tensor& t) -> absl::StatusOr<Tensor> {
        SLUICE_ASSIGN_OR_RETURN(Tensor out, Tensor::Create(DType::kInt64, t.shape()));
        auto values = out.mutable_values<int64_t>();
        for (int64_t i = 0; i < t.num_elements(); ++i) {
          values[i] = static_cast<int64_t>(t.string_value(i).size());
        }
        return out;
      }));
  add("string_to_int64", OnStrings([](const Tensor& t) {
        return ParseEach<int64_t>(
            t, "string_to_int64", "a decimal int64",
            [](absl::string_view s, int64_t* v) { return absl::SimpleAtoi(s, v); });
      }));
  add("string_to_float32", OnStrings([](const Tensor& t) {
        return ParseEach<float>(
            t, "string_to_float32", "a decimal number",
            [](absl::string_view s, float* v) { return absl::SimpleAtof(s, v); });
      }));
  add("decode_raw_uint8", OnStrings([](const Tensor& t) -> absl::StatusOr<Tensor> {
        SLUICE_ASSIGN_OR_RETURN(std::string_view s, StringScalar(t, "decode_raw_uint8"));
        SLUICE_ASSIGN_OR_RETURN(Tensor out,
                                Tensor::Create(DType::kUInt8, {static_cast<int64_t>(s.size())}));
        if (!s.empty()) std::memcpy(out.mutable_data(), s.data(), s.size());
        return out;
      }));
  add("decode_raw_float32", OnStrings([](const Tensor& t) -> absl::StatusOr<Tensor> {
        SLUICE_ASSIGN_OR_RETURN(std::string_view s, StringScalar(t, "decode_raw_float32"));
        if (s.size() % sizeof(float) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("decode_raw_float32: expected a multiple of 4 bytes, got ", s.size()));
        }
        SLUICE_ASSIGN_OR_RETURN(
            Tensor out,
            Tensor::Create(DType::kFloat32, {static_cast<int64_t>(s.size() / sizeof(float))}));
        if (!s.empty()) std::memcpy(out.mutable_data(), s.data(), s.size());
        return out;
      }));
  add("split_whitespace", OnStrings([](const Tensor& t) -> absl::StatusOr<Tensor> {
        SLUICE_ASSIGN_OR_RETURN(std::string_view s, StringScalar(t, "split_whitespace"));
        std::vector<std::string_view> tokens;
        for (absl::string_view token :
             absl::StrSplit(AbslView(s), absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty())) {
          tokens.push_back(StdView(token));
        }
        return Tensor::FromStrings({static_cast<int64_t>(tokens.size())}, tokens);
      }));
  add("non_empty", [](Element in, Element* out) -> absl::Status {
    if (in.empty()) {
      return absl::InvalidArgumentError("non_empty expects at least one component, got none");
    }
    const Tensor& t = in[0];
    const bool keep = t.dtype() == DType::kString && t.shape().empty() ? !t.string_value(0).empty()
                                                                       : t.num_elements() > 0;
    out->push_back(Tensor::Scalar<uint8_t>(keep ? 1 : 0));
    return absl::OkStatus();
  });
}

}  // namespace sluice::engine
