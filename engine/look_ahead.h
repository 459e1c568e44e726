// Reads one element ahead of what it hands out, so that a source learns it has ended while
// it still holds its last element.
//
// A DYNAMIC source credits what it will never produce to the next element it produces
// (engine/provenance.h, DroppedCredit). At the end of a worker's pass there is no next
// element, so the rest of the last file's ordinal range stayed a hole in the dispatcher's
// delivery log. Reading one record ahead within the file tells the reader that the record
// it hands out is the file's last: the rest goes with that record.
//
//   ElementLookAhead ahead;
//   bool end = false, last = false;
//   SLUICE_RETURN_IF_ERROR(ahead.Next(read_record, out, &end, &last));
//   if (!end && last) credit.DropRange(rest_of_file);  // goes with *out
//
// `read` is the source's own read, `(Element* out, bool* end) -> absl::Status`. An error
// while reading ahead is returned by the next call, after the element before it. Once
// `read` failed or ended, every later call says so again without reading (until Reset),
// as an iterator does.
#ifndef SLUICE_ENGINE_LOOK_AHEAD_H_
#define SLUICE_ENGINE_LOOK_AHEAD_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "engine/tensor.h"

namespace sluice::engine {

class ElementLookAhead {
 public:
  using Read = absl::FunctionRef<absl::Status(Element* out, bool* end)>;

  // Hands out the next element into *out, or sets *end. Otherwise *last tells that `read`
  // has ended after it.
  [[nodiscard]] absl::Status Next(Read read, Element* out, bool* end, bool* last);

  // Forgets the element read ahead and the end seen: for a new source.
  void Reset();

 private:
  Element ahead_;
  bool has_ahead_ = false;
  bool ended_ = false;
  absl::Status failed_;
};

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_LOOK_AHEAD_H_
