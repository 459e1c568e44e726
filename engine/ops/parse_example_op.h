// The `parse_example` op: parses serialized tf.train.Example records (component 0,
// a string scalar, e.g. from tfrecord) into one dense tensor per feature of a spec.
//
//   tfrecord(files=['train.tfrecord'])
//     | parse_example(spec='label:int64:scalar, pixels:float:784, tags:bytes:var:', parallel=4)
//     | padded_batch(32)
//
// The spec's text form (types, shapes, defaults) is documented in
// engine/example_spec.h. Elements become (feature 0, feature 1, ...). A record that
// does not parse, a feature of the wrong type or length, or a missing feature without a
// default is an error naming the record (its index in this stage's input) and the
// feature. parallel > 1 parses on that many threads, keeping the order.
#ifndef SLUICE_ENGINE_OPS_PARSE_EXAMPLE_OP_H_
#define SLUICE_ENGINE_OPS_PARSE_EXAMPLE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef ParseExampleOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_PARSE_EXAMPLE_OP_H_
