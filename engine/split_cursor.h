// Walks the element (or file) indices a source must produce: all of [0, length) when
// there is no split feed, else exactly the indices of the splits the feed hands out.
// Shared by the splittable sources so each checks untrusted splits the same way.
//
// Tracked splits (key != 0, engine/provenance.h): the cursor registers each split's
// delivered set with the pipeline's DeliveredRegistry, and with skip_delivered it skips
// the indices whose ordinal (index - split.begin) is delivered; LastProvenance() tags the
// element of the index returned last.
//
//   SplitCursor cursor(context.split_feed, args.instance, length, "from_tensor_slices");
//   int64_t index;
//   bool end = false;
//   SLUICE_RETURN_IF_ERROR(cursor.Next(&index, &end));
#ifndef SLUICE_ENGINE_SPLIT_CURSOR_H_
#define SLUICE_ENGINE_SPLIT_CURSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "engine/iterator.h"
#include "engine/pipeline.pb.h"
#include "engine/provenance.h"

namespace sluice::engine {

class SplitCursor {
 public:
  // `feed` may be null; `repetition` is the source's instance; `op` names it in errors.
  // `registry` (may be null) records tracked splits' delivered sets for later stages;
  // `skip_delivered`: Next skips delivered ordinals (for sources whose element ordinals
  // are final; file readers pass false and drop records themselves).
  SplitCursor(SplitFeed* feed, int64_t repetition, int64_t length, std::string_view op,
              std::shared_ptr<DeliveredRegistry> registry = nullptr, bool skip_delivered = false);

  // The next index, or *end once all are done. A split outside [0, length) or with
  // begin > end is InvalidArgument (splits come over the network).
  [[nodiscard]] absl::Status Next(int64_t* index, bool* end);

  // The split `index` came from (a whole-range split without a feed).
  const proto::Split& split() const { return split_; }
  // The split's key; 0 when untracked (always without a feed).
  int64_t split_key() const { return split_.key(); }
  // The delivered ordinals of the current split; null when none.
  const DeliveredSet* delivered() const { return delivered_.get(); }
  // A one-element provenance for the index Next returned last; null when untracked.
  std::shared_ptr<const Provenance> LastProvenance() const {
    return split_.key() == 0 ? nullptr : Provenance::Of(split_.key(), last_ - split_.begin());
  }

 private:
  SplitFeed* const feed_;
  const int64_t repetition_;
  const int64_t length_;
  const std::string op_;
  const std::shared_ptr<DeliveredRegistry> registry_;
  const bool skip_delivered_;
  proto::Split split_;
  std::shared_ptr<const DeliveredSet> delivered_;
  int64_t next_ = 0;
  int64_t last_ = 0;
  int64_t split_end_;
  bool done_ = false;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_SPLIT_CURSOR_H_
