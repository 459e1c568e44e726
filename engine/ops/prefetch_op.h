// The `prefetch` op: produces its input on a background thread, up to buffer_size
// elements ahead of the consumer, so reading and parsing overlap with whatever
// consumes the pipeline (engine/prefetch_iterator.h).
//
//   tfrecord(files=['a']) | parse_example(spec='x:int64:scalar') | batch(32) | prefetch(2)
//
// Order, errors and the end arrive exactly as without prefetch.
#ifndef SLUICE_ENGINE_OPS_PREFETCH_OP_H_
#define SLUICE_ENGINE_OPS_PREFETCH_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef PrefetchOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_PREFETCH_OP_H_
