// The key a DYNAMIC job's split goes by in provenance and delivery reports: unique per
// (repetition, split index) within a job, never 0 (0 means untracked). The dispatcher
// makes them; an interleave that numbers a split's nested elements takes them apart again,
// to seed its nested pipelines alike on every worker and in every pass.
//
//   const int64_t key = MakeSplitKey(/*repetition=*/2, /*index=*/5);
//   SplitKeyRepetition(key);  // 2
//   SplitKeyIndex(key);       // 5
#ifndef SLUICE_ENGINE_SPLIT_KEY_H_
#define SLUICE_ENGINE_SPLIT_KEY_H_

#include <cstdint>

namespace sluice::engine {

// The split index takes the low 40 bits, the repetition the 23 above them.
inline constexpr int kSplitKeyIndexBits = 40;
inline constexpr int64_t kMaxSplitKeyRepetitions = int64_t{1} << (63 - kSplitKeyIndexBits);
inline constexpr int64_t kMaxSplitKeyIndices = int64_t{1} << kSplitKeyIndexBits;

[[nodiscard]] constexpr int64_t MakeSplitKey(int64_t repetition, int64_t index) {
  return (repetition << kSplitKeyIndexBits) + index + 1;
}
[[nodiscard]] constexpr int64_t SplitKeyRepetition(int64_t key) {
  return (key - 1) >> kSplitKeyIndexBits;
}
[[nodiscard]] constexpr int64_t SplitKeyIndex(int64_t key) {
  return (key - 1) & ((int64_t{1} << kSplitKeyIndexBits) - 1);
}

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_SPLIT_KEY_H_
