// The text form of a pipeline, for command lines, configs and logs:
//
//   range(0, 1000) | map(square) | shuffle(64, seed=7) | batch(32, drop_remainder=true)
//
//   SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef def, ParsePipeline(text));
//   std::string canonical = FormatPipeline(def);  // ParsePipeline(canonical) == def
//
// Grammar (whitespace allowed between any tokens):
//   pipeline := stage ('|' stage)*
//   stage    := NAME '(' [arg (',' arg)*] ')'
//   arg      := [NAME '='] value
//   value    := integer | float | 'single' or "double" quoted string | NAME
//             | '[' [value (',' value)*] ']'          a list
//             | pipeline                              a nested pipeline
// NAME is [A-Za-z_][A-Za-z0-9_.]*; the names true and false are booleans; inside
// quotes a backslash makes the next character literal. A NAME followed by '('
// starts a nested pipeline, which extends over following '|' stages up to the
// ',' or ')' that ends the argument:
//   list_files('/data/*.gz') | interleave(tfrecord(compression='gzip') | map(f), 4)
//   from_tensor_slices([[1, 2], [3, 4]])
// Positional args bind to an op's parameters in order (range takes stop |
// start, stop | start, stop, step like Python) and precede keyword args.
#ifndef SLUICE_ENGINE_PIPELINE_TEXT_H_
#define SLUICE_ENGINE_PIPELINE_TEXT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

// InvalidArgument on any error. Syntax errors read
//   pipeline syntax error at column 17: expected ')' or ',' after argument, found '|'
// followed by the text and a caret line under the 1-based column; op/argument errors
// (unknown op or keyword, missing, duplicate or mistyped argument) have the same shape.
// Values are not range-checked here: call ValidatePipeline.
[[nodiscard]] absl::StatusOr<proto::PipelineDef> ParsePipeline(std::string_view text);

// Canonical text that parses back to a message equal to `def` (for any `def` that passes
// ValidatePipelineStructure). Stages with no op print as "<unset>()".
std::string FormatPipeline(const proto::PipelineDef& def);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_PIPELINE_TEXT_H_
