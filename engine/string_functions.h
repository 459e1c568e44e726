// The built-in functions over string tensors (parsing, decoding, tokenising) and the
// non_empty predicate; FunctionRegistry::Builtins() includes them, and its comment
// documents each one.
//
//   text_line(files=['a.txt']) | map(split_whitespace)     -> string[k] per line
//   tfrecord(files=['img.tfrecord']) | map(decode_raw_uint8) -> uint8[n] per record
#ifndef SLUICE_ENGINE_STRING_FUNCTIONS_H_
#define SLUICE_ENGINE_STRING_FUNCTIONS_H_

#include "engine/functions.h"

namespace sluice::engine {

// Registers string_length, string_to_int64, string_to_float32, decode_raw_uint8,
// decode_raw_float32, split_whitespace and non_empty into `registry`.
void AddStringBuiltins(FunctionRegistry* registry);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_STRING_FUNCTIONS_H_
