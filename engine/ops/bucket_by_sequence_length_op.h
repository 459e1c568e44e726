// The `bucket_by_sequence_length` op: groups elements of similar length into padded
// batches, so little padding is wasted (tf.data's bucket_by_sequence_length).
//
//   text_line(files=['a.txt']) | map(split_whitespace)
//     | bucket_by_sequence_length(bucket_boundaries=[5, 10], bucket_batch_sizes=[8, 4, 2],
//                                 padding_values=['<pad>'])
//
// An element's length is dim 0 of component length_component (default 0). Bucket b
// holds lengths in [bucket_boundaries[b-1], bucket_boundaries[b]) (the first bucket
// from 0, the last without an upper bound), so there is one more bucket_batch_sizes
// entry than boundaries. A bucket is emitted as a padded batch (as padded_batch, with
// padding_values) as soon as it holds its batch size; at the end of the input the
// partly filled buckets follow in bucket order, unless drop_remainder.
// pad_to_bucket_boundary pads the length dim to the bucket's upper boundary - 1
// instead of the batch's longest (elements of the last bucket are then an error, and so is
// the option without boundaries). Only that dim: other components, and the length
// component's other dims, pad to the batch's longest. tf.data pads every dim its static
// shapes leave unknown to the boundary; Sluice's tensors carry no static shapes to tell
// which: a component that lines up with the length (a mask per token) comes out padded to
// the batch's longest, not to the boundary.
#ifndef SLUICE_ENGINE_OPS_BUCKET_BY_SEQUENCE_LENGTH_OP_H_
#define SLUICE_ENGINE_OPS_BUCKET_BY_SEQUENCE_LENGTH_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef BucketBySequenceLengthOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_BUCKET_BY_SEQUENCE_LENGTH_OP_H_
