// The `interleave` op: for each input element, builds a nested pipeline whose source
// reads that element (e.g. a file name), and interleaves the nested outputs, like
// tf.data.Dataset.interleave.
//
//   list_files('/data/*.gz') | interleave(tfrecord(compression='gzip'), cycle_length=4)
//   from_tensor_slices(['a.txt', 'b.txt']) | interleave(text_line() | map(split_whitespace),
//                                                       cycle_length=2, block_length=3)
//
// Up to cycle_length nested pipelines are open at once; block_length consecutive
// elements are taken from each in turn. When one ends, the next turn of its slot opens
// the next input element's pipeline in its place. The order is tf.data's, e.g. with
// cycle_length=2, block_length=4 over inputs 1..5 each repeated 6 times:
//   1 1 1 1 2 2 2 2 1 1 2 2 3 3 3 3 4 4 4 4 3 3 4 4 5 5 5 5 5 5
// parallel=true reads every open nested pipeline ahead on its own thread, by a block (at
// most 64 elements); the order is unchanged. The nested pipeline's source gets the
// element, never the split feed: under DYNAMIC sharding the outer source's splits decide
// which elements (files) a worker interleaves.
//
// Provenance (engine/provenance.h): when this interleave assigns the final ordinals
// (OpBuildArgs::final_ordinals), element i of the nested pipeline of an outer element with
// ordinal o gets (o << 32) | i in o's split, and elements the split lists as delivered are
// dropped (an outer element whose whole range is delivered is not even opened). Any other
// interleave gives an outer element's provenance to its first nested element only.
#ifndef SLUICE_ENGINE_OPS_INTERLEAVE_OP_H_
#define SLUICE_ENGINE_OPS_INTERLEAVE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef InterleaveOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_INTERLEAVE_OP_H_
