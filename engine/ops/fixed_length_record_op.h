// The `fixed_length_record` source: records of exactly record_bytes bytes, after a
// header_bytes header and before a footer_bytes footer, as string scalars (like
// tf.data.FixedLengthRecordDataset; e.g. CIFAR-10's binary files).
//
//   fixed_length_record(files=['/data/data_batch_1.bin'], record_bytes=3073)
//   fixed_length_record(files=['a.bin'], record_bytes=4, header_bytes=16, footer_bytes=8)
//
// A body that is not a whole number of records is DataLoss naming the file and the
// offset of the partial record. compression: auto (gzip by magic), none, gzip or zlib.
// Where files come from: engine/ops/file_records.h.
#ifndef SLUICE_ENGINE_OPS_FIXED_LENGTH_RECORD_OP_H_
#define SLUICE_ENGINE_OPS_FIXED_LENGTH_RECORD_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef FixedLengthRecordOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_FIXED_LENGTH_RECORD_OP_H_
