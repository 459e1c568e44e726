// A small deterministic PRNG and seed mixing for the engine.
//
// Shuffles with a fixed seed must give the same order on every worker, build
// and library version, so the engine owns its generator (xoshiro256**, seeded
// through SplitMix64) instead of relying on std:: or absl:: distributions,
// whose outputs are not specified across implementations.
//
//   Rng rng(CombineSeeds(seed, epoch));
//   size_t i = rng.Uniform(buffer.size());
#ifndef SLUICE_ENGINE_RANDOM_H_
#define SLUICE_ENGINE_RANDOM_H_

#include <cstdint>

namespace sluice::engine {

// SplitMix64's finaliser: a bijection that spreads every input bit over the output.
uint64_t MixBits(uint64_t x);

// Order-sensitive combination: CombineSeeds(a, b) != CombineSeeds(b, a) in general.
uint64_t CombineSeeds(uint64_t a, uint64_t b);

// 64 bits from the operating system's entropy source.
uint64_t RandomSeed();

// xoshiro256**. Not thread-safe.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t Next();
  // Uniform in [0, n); n must be > 0. Unbiased (rejection sampling).
  uint64_t Uniform(uint64_t n);

 private:
  uint64_t s_[4];
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_RANDOM_H_
