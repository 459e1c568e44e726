// The `cache` op: keeps the elements of the first complete pass in memory and
// replays them on later passes (under repeat) without re-creating its input, so
// files are read and elements parsed once.
//
//   tfrecord(files=['a']) | parse_example(spec='x:int64:scalar') | cache() | repeat(10)
//
// A pass that stops early (e.g. take() downstream) does not complete the cache; the
// next pass reads the input again. Not allowed under DYNAMIC sharding, where each
// repetition must read its own splits (ValidateSplittable names it).
#ifndef SLUICE_ENGINE_OPS_CACHE_OP_H_
#define SLUICE_ENGINE_OPS_CACHE_OP_H_

#include "engine/op_registry.h"

namespace sluice::engine {

OpDef CacheOpDef();

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_OPS_CACHE_OP_H_
