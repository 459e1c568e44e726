#include "engine/random.h"

#include <random>

namespace sluice::engine {
namespace {

uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t MixBits(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t CombineSeeds(uint64_t a, uint64_t b) { return MixBits(MixBits(a) ^ b); }

uint64_t RandomSeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device();
}

Rng::Rng(uint64_t seed) {
  // Consecutive SplitMix64 outputs: never all zero, which xoshiro cannot leave.
  for (uint64_t& s : s_) {
    seed += 0x9e3779b97f4a7c15ULL;
    s = MixBits(seed);
  }
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

uint64_t Rng::Uniform(uint64_t n) {
  // Reject the top partial copy of [0, n) so every residue is equally likely.
  const uint64_t limit = -n % n;  // == 2^64 mod n
  while (true) {
    uint64_t x = Next();
    if (x >= limit) return x % n;
  }
}

}  // namespace sluice::engine
