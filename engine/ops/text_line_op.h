// The `text_line` source: the lines of text files as string scalars, without their
// line ending, like tf.data.TextLineDataset: lines end at "\n" and every '\r' is dropped
// (so "\r\n" ends a line, and "a\rb" reads "ab"). A last line without a newline counts
// unless nothing is left of it; an empty file yields nothing.
//
//   text_line(files=['/data/a.txt', '/data/b.txt.gz'])
//   list_files('/data/*.csv') | interleave(text_line(), cycle_length=2)
//
// compression: auto (gzip when a file starts with the gzip magic), none, gzip or zlib.
// Lines longer than 64 MiB fail with their offset. Where files come from:
// engine/ops/file_records.h.
#ifndef SLUICE_ENGINE_OPS_TEXT_LINE_OP_H_
#define SLUICE_ENGINE_OPS_TEXT_LINE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef TextLineOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_TEXT_LINE_OP_H_
