// TaskRunner's acknowledged deliveries (uncoordinated reads by clients that acknowledge):
// batches numbered per client and kept until acknowledged, served again after a broken
// connection, let go under slab pressure, and handed on when the dispatcher no longer
// lists their client. Producing and replying are in task_runner.cc, rounds in
// task_runner_rounds.cc.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "control/task_runner.h"

namespace sluice::control {

void TaskRunner::Fetch(std::shared_ptr<transport::ServerCall> call, uint64_t max_batch_bytes,
                       Delivery delivery) {
  if (task_.num_consumers() > 0 || delivery.client_id < 0 || delivery.epoch <= 0) {
    Fetch(std::move(call), max_batch_bytes);
    return;
  }
  Waiter waiter{std::move(call), max_batch_bytes, -1, -1, delivery.client_id, delivery.epoch};
  std::optional<Waiter> evicted;
  bool stale = false;
  {
    absl::MutexLock lock(&mu_);
    // Created on the client's first request, so that its epoch is known from then on.
    {
      auto [entry, created] = deliveries_.try_emplace(delivery.client_id);
      ClientDeliveries& client = entry->second;
      if (created) {
        absl::BitGen bits;
        client.stream = absl::Uniform<uint64_t>(absl::IntervalClosed, bits, 1,
                                                std::numeric_limits<uint64_t>::max());
      }
      client.last_request = absl::Now();
      stats_.acknowledgements_received += static_cast<int64_t>(delivery.acked.size());
      for (int64_t index : delivery.acked) {
        if (auto node = client.unacked.extract(index); !node.empty()) {
          node.mapped().first = ReadyBatch{};  // its slab goes now
          if (client.spare_nodes.size() < kMaxSpareNodesPerClient) {
            client.spare_nodes.push_back(std::move(node));
          }
        }
        client.released.erase(index);
        std::erase_if(client.lost, [index](const ReadyBatch& b) { return b.index == index; });
      }
      const bool newer_epoch = delivery.epoch > client.epoch;
      if (newer_epoch) {
        // The client's connection broke since: what it has not acknowledged by now was lost.
        if (client.epoch > 0) ++stats_.breaks_reported;  // not its first request
        client.epoch = delivery.epoch;
        for (auto it = client.unacked.begin(); it != client.unacked.end();) {
          if (it->second.second < delivery.epoch) {
            client.lost.push_back(std::move(it->second.first));
            it = client.unacked.erase(it);
          } else {
            ++it;
          }
        }
        std::sort(client.lost.begin(), client.lost.end(),
                  [](const ReadyBatch& a, const ReadyBatch& b) { return a.index < b.index; });
        // What was let go under an older epoch and not acknowledged now was lost for good.
        std::erase_if(client.released, [&delivery](const auto& entry) {
          return entry.second.second < delivery.epoch;
        });
      }
      // The entry stays even when empty: it remembers the client's epoch (see MatchRequests).
      if (!client.lost.empty() || newer_epoch) scan_parked_ = true;
      // Sent before its client saw a connection break and overtaken by a request of the
      // newer epoch: stale on arrival (see MatchRequests), told to retry now, not parked.
      stale = delivery.epoch < client.epoch;
    }
    VerifyKeptSlabs();
    if (!stale) evicted = Park(std::move(waiter));
  }
  if (evicted.has_value()) TellToRetry(*evicted);
  if (stale) TellToRetry(waiter);
  // Also after a stale request: the acknowledgements it carried may have taken a client's
  // last lost batch, which requests held back from the end waited on.
  Serve();
}

void TaskRunner::MatchRequests(Matches& matched, std::vector<Waiter>& stale) {
  const bool scan_all = std::exchange(scan_parked_, false);
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    // Nothing ready: only a batch to serve again, or a request made stale by a newer epoch,
    // can be matched, and only Fetch makes those (scan_parked_; a request stale on arrival
    // is not parked). A long queue of parked requests (many readers of a slow pipeline) is
    // not walked on every call.
    if (ready_.empty() && !scan_all) break;
    std::optional<ReadyBatch> batch;
    bool again = false;
    auto client = it->epoch > 0 ? deliveries_.find(it->client_id) : deliveries_.end();
    if (client != deliveries_.end() && it->epoch < client->second.epoch) {
      // Sent before its client saw a connection break (a newer epoch arrived first, over
      // the new connection): its reply most likely goes nowhere, and a batch kept under the
      // old epoch would never be counted lost again. It gets no batch.
      stale.push_back(std::move(*it));
      it = waiters_.erase(it);
      continue;
    }
    if (client != deliveries_.end() && !client->second.lost.empty()) {
      batch.emplace(std::move(client->second.lost.front()));
      client->second.lost.pop_front();
      batch->kept_mark = {};  // served again: kept anew (KeepUntilAcknowledged)
      again = true;
    } else if (!ready_.empty()) {
      batch.emplace(std::move(ready_.front()));
      ready_.pop_front();
      if (std::exchange(batch->assembled, false)) {
        stats_.bytes_assembled_unserved -= static_cast<int64_t>(batch->size);
      }
    } else {
      ++it;
      continue;
    }
    if (client != deliveries_.end()) {
      // A batch served again keeps the number it went out with the first time.
      if (!again) {
        ClientDeliveries& to = client->second;
        batch->sequence = ++to.last_sequence;
        if (batch->index < to.highest_index) to.out_of_order_sequence = batch->sequence;
        to.highest_index = std::max(to.highest_index, batch->index);
      }
      KeepUntilAcknowledged(*it, *batch);
      SetReplyOrder(client->second, *batch);
    }
    stats_.batches_served += 1;
    stats_.batches_redelivered += again ? 1 : 0;
    stats_.bytes_served += static_cast<int64_t>(batch->size);
    // Counted before the batch leaves ready_, so finished() never sees it nowhere.
    sends_in_flight_->fetch_add(1);
    matched.emplace_back(std::move(*it), std::move(*batch));
    it = waiters_.erase(it);
  }
}

void TaskRunner::SetReplyOrder(ClientDeliveries& client, ReadyBatch& batch) {
  // The lowest number that may still reach the client: a batch on its way (kept until
  // acknowledged, or let go since), one to serve again, or the next one. A client's
  // numbers rise with the batch index (new batches leave ready_ in index order, and a
  // batch served again keeps its number), so each map's lowest index has its lowest
  // number; unless a batch handed on from a forgotten client went to it after later ones,
  // and then all are looked at until every entry numbered before that batch is gone (not
  // always: that walks every kept batch, up to 64, and every one let go, per reply).
  int64_t floor = client.last_sequence + 1;
  if (client.out_of_order_sequence == 0) {
    if (!client.unacked.empty()) {
      floor = std::min(floor, client.unacked.begin()->second.first.sequence);
    }
    if (!client.released.empty()) {
      floor = std::min(floor, client.released.begin()->second.first);
    }
    if (!client.lost.empty()) floor = std::min(floor, client.lost.front().sequence);
  } else {
    for (const auto& [index, kept] : client.unacked) floor = std::min(floor, kept.first.sequence);
    for (const auto& [index, let_go] : client.released) floor = std::min(floor, let_go.first);
    for (const ReadyBatch& lost : client.lost) floor = std::min(floor, lost.sequence);
    // Nothing numbered before the out-of-order batch is left: numbers rise with the index
    // again in every entry.
    if (floor >= client.out_of_order_sequence) client.out_of_order_sequence = 0;
  }
  batch.sequence_floor = floor;
  batch.sequence_stream = client.stream;
  batch.lost_left = static_cast<int64_t>(client.lost.size());
}

void TaskRunner::KeepUntilAcknowledged(const Waiter& waiter, const ReadyBatch& batch) {
  ClientDeliveries& client = deliveries_[waiter.client_id];
  client.epoch = std::max(client.epoch, waiter.epoch);
  if (client.unacked.size() >= kMaxUnackedPerClient) {
    LetGo(client, std::min_element(client.unacked.begin(), client.unacked.end(),
                                   [](const auto& a, const auto& b) {
                                     return a.second.first.kept_since < b.second.first.kept_since;
                                   }));
    ++stats_.kept_batches_released;
  }
  auto at = client.unacked.lower_bound(batch.index);
  if (at != client.unacked.end() && at->first == batch.index) {
    at->second = std::pair{KeptCopyOf(batch), waiter.epoch};  // served again
  } else if (!client.spare_nodes.empty()) {
    auto node = std::move(client.spare_nodes.back());
    client.spare_nodes.pop_back();
    node.key() = batch.index;
    node.mapped() = std::pair{KeptCopyOf(batch), waiter.epoch};
    client.unacked.insert(at, std::move(node));
  } else {
    client.unacked.emplace_hint(at, batch.index, std::pair{KeptCopyOf(batch), waiter.epoch});
  }
  while (KeptSlabs() > kept_budget_ && ReleaseOldestKept({})) {
  }
}

size_t TaskRunner::KeptSlabs() const {
  VerifyKeptSlabs();
  return kept_count_.slabs();
}

void TaskRunner::VerifyKeptSlabs() const {
  if (!options_.verify_kept_slabs) return;
  std::vector<const transport::Slab*> slabs;
  auto walk = [&slabs](const ReadyBatch& kept) {
    if (kept.slab->pooled()) slabs.push_back(kept.slab.get());  // not one spilled to the heap
  };
  for (const auto& [id, client] : deliveries_) {
    for (const auto& [index, kept] : client.unacked) walk(kept.first);
    for (const ReadyBatch& lost : client.lost) walk(lost);
  }
  for (const auto& [consumer, rounds] : kept_rounds_) {
    for (const auto& [round, kept] : rounds) walk(kept);
  }
  std::sort(slabs.begin(), slabs.end());
  const auto walked = static_cast<size_t>(std::unique(slabs.begin(), slabs.end()) - slabs.begin());
  if (walked != kept_count_.slabs()) {
    std::fprintf(stderr, "sluice: task %lld keeps batches in %zu slabs but counted %zu\n",
                 static_cast<long long>(task_.task_id()), walked, kept_count_.slabs());
    std::abort();
  }
}

std::map<int64_t, std::pair<TaskRunner::ReadyBatch, int64_t>>::iterator TaskRunner::LetGo(
    ClientDeliveries& client, std::map<int64_t, std::pair<ReadyBatch, int64_t>>::iterator kept) {
  const auto& [batch, epoch] = kept->second;
  client.released.insert_or_assign(batch.index, std::pair{batch.sequence, epoch});
  if (client.released.size() > kMaxReleasedPerClient)
    client.released.erase(client.released.begin());
  return client.unacked.erase(kept);
}

bool TaskRunner::ReleaseKeptBatch(LostBatches lost) {
  absl::MutexLock lock(&mu_);
  return ReleaseOldestKept({.lost = lost, .only_freeing_a_slab = true});
}

bool TaskRunner::ReleaseOldestKept(ReleaseRule rule) {
  // Few kept batches (about one per request in flight) in fewer slabs: a scan is cheaper
  // than keeping an index of them. A batch awaiting its acknowledgement goes before a lost
  // one: it has most likely arrived, while a lost one let go is lost for good. Among them
  // the one kept longest goes first, not the lowest index: a batch handed on from a
  // forgotten client has a low index but was sent just now.
  struct KeptSlab {
    const std::shared_ptr<transport::Slab>* slab;
    long kept = 0;  // references of kept and lost batches
    bool holds_lost = false;
    uint64_t oldest_awaiting = std::numeric_limits<uint64_t>::max();  // acknowledgement
    uint64_t oldest_lost = std::numeric_limits<uint64_t>::max();
  };
  absl::InlinedVector<KeptSlab, 8> slabs;
  auto of = [&slabs](const ReadyBatch& kept) -> KeptSlab& {
    for (KeptSlab& s : slabs) {
      if (s.slab->get() == kept.slab.get()) return s;
    }
    return slabs.emplace_back(KeptSlab{&kept.slab});
  };
  // A batch spilled to the heap (SpillIfQuiet) holds no slab: letting it go gives none back.
  auto awaiting = [&of](const ReadyBatch& kept) {
    if (!kept.slab->pooled()) return;
    KeptSlab& s = of(kept);
    ++s.kept;
    s.oldest_awaiting = std::min(s.oldest_awaiting, kept.kept_since);
  };
  for (const auto& [id, client] : deliveries_) {
    for (const auto& [index, kept] : client.unacked) awaiting(kept.first);
    for (const ReadyBatch& lost : client.lost) {
      if (!lost.slab->pooled()) continue;
      KeptSlab& s = of(lost);
      ++s.kept;
      s.holds_lost = true;
      s.oldest_lost = std::min(s.oldest_lost, lost.kept_since);
    }
  }
  for (const auto& [consumer, rounds] : kept_rounds_) {
    for (const auto& [round, kept] : rounds) awaiting(kept);
  }
  // While any batch awaits its acknowledgement, no slab goes for a lost batch alone: not
  // even when the awaiting ones cannot go yet (their send has not completed).
  const bool any_awaiting = std::any_of(slabs.begin(), slabs.end(), [](const KeptSlab& s) {
    return s.oldest_awaiting != std::numeric_limits<uint64_t>::max();
  });
  const transport::Slab* slab = nullptr;
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (const KeptSlab& s : slabs) {
    if (s.holds_lost && rule.lost == LostBatches::kKeep) continue;
    const bool for_lost = s.oldest_awaiting == std::numeric_limits<uint64_t>::max();
    if (for_lost && any_awaiting) continue;
    // Read without the holders' locks (a send completing drops its copy): at worst a slab
    // that has just become free to go waits for the next try.
    if (rule.only_freeing_a_slab && s.slab->use_count() > s.kept) continue;
    const uint64_t since = for_lost ? s.oldest_lost : s.oldest_awaiting;
    if (since < oldest) {
      slab = s.slab->get();
      oldest = since;
    }
  }
  if (slab == nullptr) return false;
  // Its slab-mates go with it: letting one packed batch go alone would free no memory.
  int64_t released = 0;
  for (auto& [id, client] : deliveries_) {
    for (auto it = client.unacked.begin(); it != client.unacked.end();) {
      if (it->second.first.slab.get() != slab) {
        ++it;
        continue;
      }
      it = LetGo(client, it);
      ++released;
    }
    // A lost batch let go is lost for good: the sequence floor passes it, and the client
    // stops waiting for it.
    released += static_cast<int64_t>(std::erase_if(
        client.lost, [slab](const ReadyBatch& lost) { return lost.slab.get() == slab; }));
  }
  for (auto& [consumer, rounds] : kept_rounds_) {
    for (auto it = rounds.begin(); it != rounds.end();) {
      if (it->second.slab.get() != slab) {
        ++it;
        continue;
      }
      NoteRoundLetGo(consumer, it->first);
      it = rounds.erase(it);
      ++released;
    }
  }
  stats_.kept_batches_released += released;
  VerifyKeptSlabs();
  return true;
}

void TaskRunner::ForgetClients(const absl::flat_hash_set<int64_t>& readers,
                               absl::Time quiet_since) {
  std::vector<Waiter> to_retry;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = deliveries_.begin(); it != deliveries_.end();) {
      auto& [id, client] = *it;
      if (readers.contains(id) || client.last_request >= quiet_since) {
        ++it;
        continue;
      }
      // Its lost batches never reached it, so others may have them: back to the front of
      // ready_ (the readers still there, or the job's next, ask for them: Serve tells none
      // the end while a client has lost batches), unless a reader was told the end before
      // they were known lost (no one may ask again; the task would never finish).
      if (!told_a_reader_the_end_) {
        for (auto lost = client.lost.rbegin(); lost != client.lost.rend(); ++lost) {
          lost->sequence = 0;
          lost->kept_mark = {};  // no longer kept: it waits in ready_ for another reader
          ready_.push_front(std::move(*lost));
        }
        stats_.batches_handed_on += static_cast<int64_t>(client.lost.size());
      } else {
        stats_.lost_batches_dropped += static_cast<int64_t>(client.lost.size());
      }
      for (auto waiter = waiters_.begin(); waiter != waiters_.end();) {
        if (waiter->epoch > 0 && waiter->client_id == id) {
          to_retry.push_back(std::move(*waiter));
          waiter = waiters_.erase(waiter);
        } else {
          ++waiter;
        }
      }
      ++stats_.clients_forgotten;
      stats_.unacked_batches_forgotten += static_cast<int64_t>(client.unacked.size());
      it = deliveries_.erase(it);
    }
    VerifyKeptSlabs();
  }
  for (const Waiter& waiter : to_retry) TellToRetry(waiter);
  Serve();  // the batches handed on may be what parked requests wait for
}

}  // namespace sluice::control
