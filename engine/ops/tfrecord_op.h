// The `tfrecord` source: the records of TFRecord files (TensorFlow's TFRecordWriter,
// Apache Beam's WriteToTFRecord) as string scalars, both CRCs checked.
//
//   tfrecord(files=['a.tfrecord', 'b.tfrecord'])
//   tfrecord(files=['/data/x.gz'], compression='gzip', skip_bad_records=true)
//   list_files('/data/*.gz') | interleave(tfrecord(compression='gzip'), cycle_length=4)
//
// compression: auto (default; detected per file, see engine/io/data_file.h), none,
// gzip or zlib. A corrupt or truncated record fails the pipeline with DataLoss naming
// the file and byte offset; with skip_bad_records=true it is counted in
// PipelineContext::stats (with its message) and skipped instead. Where files come from
// (list, DYNAMIC splits by file, or the outer element): engine/ops/file_records.h.
#ifndef SLUICE_ENGINE_OPS_TFRECORD_OP_H_
#define SLUICE_ENGINE_OPS_TFRECORD_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef TfRecordOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_TFRECORD_OP_H_
