// Walks the element (or file) indices a source must produce: all of [0, length) when
// there is no split feed, else exactly the indices of the splits the feed hands out.
// Shared by the splittable sources so each checks untrusted splits the same way.
//
//   SplitCursor cursor(context.split_feed, args.instance, length, "from_tensor_slices");
//   int64_t index;
//   bool end = false;
//   SLUICE_RETURN_IF_ERROR(cursor.Next(&index, &end));
#ifndef SLUICE_ENGINE_SPLIT_CURSOR_H_
#define SLUICE_ENGINE_SPLIT_CURSOR_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/iterator.h"
#include "engine/pipeline.pb.h"

namespace sluice::engine {

class SplitCursor {
 public:
  // `feed` may be null; `repetition` is the source's instance; `op` names it in errors.
  SplitCursor(SplitFeed* feed, int64_t repetition, int64_t length, std::string_view op);

  // The next index, or *end once all are done. A split outside [0, length) or with
  // begin > end is InvalidArgument (splits come over the network).
  [[nodiscard]] absl::Status Next(int64_t* index, bool* end);

  // The split `index` came from (a whole-range split without a feed).
  const proto::Split& split() const { return split_; }

 private:
  SplitFeed* const feed_;
  const int64_t repetition_;
  const int64_t length_;
  const std::string op_;
  proto::Split split_;
  int64_t next_ = 0;
  int64_t split_end_;
  bool done_ = false;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_SPLIT_CURSOR_H_
