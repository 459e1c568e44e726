#include "engine/provenance.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::engine {

absl::StatusOr<int64_t> NestedOrdinal(int64_t outer, int64_t inner) {
  constexpr int64_t kInnerLimit = int64_t{1} << kInnerOrdinalBits;
  constexpr int64_t kOuterLimit = int64_t{1} << (62 - kInnerOrdinalBits);
  if (outer < 0 || outer >= kOuterLimit || inner < 0 || inner >= kInnerLimit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "provenance: a nested ordinal needs an outer ordinal below 2^", 62 - kInnerOrdinalBits,
        " and an inner index below 2^", kInnerOrdinalBits, ", got ", outer, " and ", inner));
  }
  return (outer << kInnerOrdinalBits) | inner;
}

// Provenance.

std::shared_ptr<const Provenance> Provenance::Of(int64_t split_key, int64_t ordinal) {
  auto p = std::make_shared<Provenance>();
  p->Append(split_key, ordinal);
  return p;
}

void Provenance::Append(int64_t split_key, int64_t ordinal) {
  AppendRun(Run{split_key, ordinal, 1});
}

void Provenance::AppendMerged(const Run& run, absl::InlinedVector<Run, 1>* runs) {
  if (!runs->empty()) {
    Run& last = runs->back();
    if (last.split_key == run.split_key && last.first_ordinal + last.count == run.first_ordinal) {
      last.count += run.count;
      return;
    }
  }
  runs->push_back(run);
}

void Provenance::AppendRun(const Run& run) {
  if (run.count <= 0) return;
  total_ += run.count;
  AppendMerged(run, &runs_);
}

void Provenance::AppendSkipped(const Run& run) {
  if (run.count <= 0) return;
  AppendMerged(run, &skipped_);
}

void Provenance::AppendAll(const Provenance& other) {
  for (const Run& run : other.runs_) AppendRun(run);
  for (const Run& run : other.skipped_) AppendSkipped(run);
}

Provenance Provenance::Slice(int64_t offset, int64_t count) const {
  Provenance out;
  offset = std::max<int64_t>(offset, 0);
  for (const Run& run : runs_) {
    if (count <= 0) break;
    if (offset >= run.count) {
      offset -= run.count;
      continue;
    }
    const int64_t take = std::min(run.count - offset, count);
    out.AppendRun(Run{run.split_key, run.first_ordinal + offset, take});
    count -= take;
    offset = 0;
  }
  return out;
}

void Provenance::ToProto(google::protobuf::RepeatedPtrField<proto::ProvenanceRun>* out) const {
  out->Reserve(out->size() + static_cast<int>(runs_.size() + skipped_.size()));
  for (const auto* runs : {&runs_, &skipped_}) {
    for (const Run& run : *runs) {
      proto::ProvenanceRun* p = out->Add();
      p->set_split_key(run.split_key);
      p->set_first_ordinal(run.first_ordinal);
      p->set_count(run.count);
    }
  }
}

absl::StatusOr<Provenance> Provenance::FromProto(
    const google::protobuf::RepeatedPtrField<proto::ProvenanceRun>& runs) {
  Provenance out;
  for (int i = 0; i < runs.size(); ++i) {
    const proto::ProvenanceRun& r = runs[i];
    if (r.split_key() == 0 || r.count() <= 0 || r.first_ordinal() < 0 ||
        r.first_ordinal() > std::numeric_limits<int64_t>::max() - r.count()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "provenance run ", i,
          ": expected split_key != 0, count > 0 and 0 <= first_ordinal "
          "with first_ordinal + count within int64, got split_key ",
          r.split_key(), ", first_ordinal ", r.first_ordinal(), ", count ", r.count()));
    }
    out.AppendRun(Run{r.split_key(), r.first_ordinal(), r.count()});
  }
  return out;
}

std::string Provenance::DebugString() const {
  auto format = [](const absl::InlinedVector<Run, 1>& runs) {
    std::string out = "{";
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      absl::StrAppend(&out, i > 0 ? ", " : "", r.split_key, ":[", r.first_ordinal, ", ",
                      r.first_ordinal + r.count, ")");
    }
    return out + "}";
  };
  std::string out = format(runs_);
  if (!skipped_.empty()) absl::StrAppend(&out, " skipped ", format(skipped_));
  return out;
}

Provenance::Run NestedRest(int64_t split_key, int64_t outer, int64_t inner) {
  absl::StatusOr<int64_t> first = NestedOrdinal(outer, inner);
  if (!first.ok()) return Provenance::Run{split_key, 0, 0};
  return Provenance::Run{split_key, *first, ((outer + 1) << kInnerOrdinalBits) - *first};
}

std::shared_ptr<const Provenance> WithSkipped(std::shared_ptr<const Provenance> own,
                                              std::span<const Provenance::Run> skipped) {
  if (skipped.empty()) return own;
  auto out = own != nullptr ? std::make_shared<Provenance>(*own) : std::make_shared<Provenance>();
  for (const Provenance::Run& run : skipped) out->AppendSkipped(run);
  return out;
}

// DroppedCredit.

void DroppedCredit::Drop(const Provenance* dropped) {
  if (dropped == nullptr) return;
  if (pending_.skipped().size() + dropped->runs().size() + dropped->skipped().size() > kMaxRuns) {
    pending_.Clear();
  }
  for (const Provenance::Run& run : dropped->runs()) pending_.AppendSkipped(run);
  for (const Provenance::Run& run : dropped->skipped()) pending_.AppendSkipped(run);
}

void DroppedCredit::DropRange(const Provenance::Run& range) {
  if (range.split_key == 0 || range.count <= 0) return;
  if (pending_.skipped().size() + 1 > kMaxRuns) pending_.Clear();
  pending_.AppendSkipped(range);
}

void DroppedCredit::CreditTo(Element& kept) {
  if (pending_.empty() || kept.empty()) return;
  SetElementProvenance(kept, WithSkipped(SharedElementProvenance(kept), pending_.skipped()));
  pending_.Clear();
}

std::shared_ptr<const Provenance> ConcatProvenance(std::span<const Element> rows) {
  std::shared_ptr<Provenance> out;
  for (const Element& row : rows) {
    const Provenance* p = ElementProvenance(row);
    if (p == nullptr || p->empty()) continue;
    if (out == nullptr) out = std::make_shared<Provenance>();
    out->AppendAll(*p);
  }
  return out;
}

// DeliveredSet.

DeliveredSet DeliveredSet::FromRanges(
    const google::protobuf::RepeatedPtrField<proto::OrdinalRange>& ranges) {
  std::vector<Interval> sorted;
  sorted.reserve(static_cast<size_t>(ranges.size()));
  for (const proto::OrdinalRange& r : ranges) {
    if (r.begin() < r.end()) sorted.push_back(Interval{r.begin(), r.end()});
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  DeliveredSet out;
  for (const Interval& i : sorted) {
    if (!out.intervals_.empty() && i.begin <= out.intervals_.back().end) {
      out.intervals_.back().end = std::max(out.intervals_.back().end, i.end);
    } else {
      out.intervals_.push_back(i);
    }
  }
  return out;
}

size_t DeliveredSet::UpperIndex(int64_t ordinal) const {
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), ordinal,
                             [](int64_t o, const Interval& i) { return o < i.end; });
  return static_cast<size_t>(it - intervals_.begin());
}

void DeliveredSet::Add(int64_t begin, int64_t end) {
  if (begin >= end) return;
  // Intervals [first, last) touch or overlap [begin, end): first is the first with
  // end >= begin, last the first with begin > end.
  auto first = std::lower_bound(intervals_.begin(), intervals_.end(), begin,
                                [](const Interval& i, int64_t b) { return i.end < b; });
  auto last = std::upper_bound(first, intervals_.end(), end,
                               [](int64_t e, const Interval& i) { return e < i.begin; });
  if (first == last) {
    intervals_.insert(first, Interval{begin, end});
    return;
  }
  first->begin = std::min(first->begin, begin);
  first->end = std::max((last - 1)->end, end);
  intervals_.erase(first + 1, last);
}

bool DeliveredSet::Contains(int64_t ordinal) const {
  const size_t i = UpperIndex(ordinal);
  return i < intervals_.size() && intervals_[i].begin <= ordinal;
}

bool DeliveredSet::ContainsAll(int64_t begin, int64_t end) const {
  if (begin >= end) return true;
  const size_t i = UpperIndex(begin);
  return i < intervals_.size() && intervals_[i].begin <= begin && intervals_[i].end >= end;
}

int64_t DeliveredSet::NextUndelivered(int64_t ordinal) const {
  const size_t i = UpperIndex(ordinal);
  // Intervals are non-adjacent, so the end of the one holding `ordinal` is not delivered.
  return i < intervals_.size() && intervals_[i].begin <= ordinal ? intervals_[i].end : ordinal;
}

int64_t DeliveredSet::count() const {
  int64_t n = 0;
  for (const Interval& i : intervals_) n += i.end - i.begin;
  return n;
}

std::vector<proto::OrdinalRange> DeliveredSet::ToRanges() const {
  std::vector<proto::OrdinalRange> out(intervals_.size());
  for (size_t i = 0; i < intervals_.size(); ++i) {
    out[i].set_begin(intervals_[i].begin);
    out[i].set_end(intervals_[i].end);
  }
  return out;
}

// DeliveryLog.

void DeliveryLog::Add(const Provenance& provenance) {
  for (const Provenance::Run& run : provenance.runs()) Add(run);
  for (const Provenance::Run& run : provenance.skipped()) Add(run);
}

void DeliveryLog::Add(const Provenance::Run& run) {
  if (run.split_key == 0 || run.count <= 0 ||
      run.first_ordinal > std::numeric_limits<int64_t>::max() - run.count) {
    return;
  }
  splits_[run.split_key].Add(run.first_ordinal, run.first_ordinal + run.count);
}

std::vector<proto::OrdinalRange> DeliveryLog::Delivered(int64_t split_key) const {
  const DeliveredSet* set = Find(split_key);
  return set == nullptr ? std::vector<proto::OrdinalRange>{} : set->ToRanges();
}

void DeliveryLog::FillDelivered(proto::Split* split) const {
  split->clear_delivered();
  for (proto::OrdinalRange& r : Delivered(split->key())) *split->add_delivered() = std::move(r);
}

const DeliveredSet* DeliveryLog::Find(int64_t split_key) const {
  auto it = splits_.find(split_key);
  return it == splits_.end() || it->second.empty() ? nullptr : &it->second;
}

// DeliveredRegistry.

std::shared_ptr<const DeliveredSet> DeliveredRegistry::Register(const proto::Split& split) {
  if (split.key() == 0) return nullptr;
  std::shared_ptr<const DeliveredSet> set;
  if (!split.delivered().empty()) {
    set = std::make_shared<const DeliveredSet>(DeliveredSet::FromSplit(split));
    if (set->empty()) set = nullptr;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (set != nullptr) {
    sets_[split.key()] = set;
  } else if (!sets_.empty()) {
    sets_.erase(split.key());  // A split re-issued with nothing delivered any more.
  }
  return set;
}

std::shared_ptr<const DeliveredSet> DeliveredRegistry::Find(int64_t split_key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sets_.find(split_key);
  return it == sets_.end() ? nullptr : it->second;
}

bool DeliveredRegistry::IsDelivered(int64_t split_key, int64_t ordinal) const {
  std::shared_ptr<const DeliveredSet> set = Find(split_key);
  return set != nullptr && set->Contains(ordinal);
}

std::shared_ptr<const DeliveredSet> TrackSplit(const proto::Split& split,
                                               DeliveredRegistry* registry) {
  if (registry != nullptr) return registry->Register(split);
  if (split.key() == 0 || split.delivered().empty()) return nullptr;
  auto set = std::make_shared<const DeliveredSet>(DeliveredSet::FromSplit(split));
  return set->empty() ? nullptr : set;
}

}  // namespace sluice::engine
