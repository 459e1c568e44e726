// The `filter` op: keeps the elements for which a named predicate function returns a
// nonzero scalar (component 0 of its result, any numeric dtype), like
// tf.data.Dataset.filter.
//
//   range(10) | filter(is_even)                         -> 0, 2, 4, 6, 8
//   text_line(files=['a.txt']) | filter(non_empty, parallel=4)
//
// The element itself passes through unchanged. A predicate whose result is not a
// numeric scalar is an error naming it. parallel as for map (order kept).
#ifndef SLUICE_ENGINE_OPS_FILTER_OP_H_
#define SLUICE_ENGINE_OPS_FILTER_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef FilterOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_FILTER_OP_H_
