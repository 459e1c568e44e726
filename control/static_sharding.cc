#include "control/static_sharding.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "control/processing_mode.h"
#include "engine/sharding.h"

namespace sluice::control {
namespace {

std::string StripScheme(const std::string& address) {
  const size_t at = address.find("://");
  return at == std::string::npos ? address : address.substr(at + 3);
}

// "host:port" -> "host"; "[v6]:port" -> "[v6]".
std::string HostOf(const std::string& host_port) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || host_port.back() == ']') return host_port;
  return host_port.substr(0, colon);
}

bool HasPort(const std::string& entry) {
  const size_t colon = entry.rfind(':');
  return colon != std::string::npos && entry.back() != ']';
}

bool ReadsFiles(const proto::PipelineDef& def) {
  if (def.stages_size() == 0) return false;
  const proto::Stage& source = def.stages(0);
  return source.has_list_files() || (source.has_tfrecord() && !source.tfrecord().files().empty()) ||
         (source.has_text_line() && !source.text_line().files().empty()) ||
         (source.has_fixed_length_record() && !source.fixed_length_record().files().empty());
}

}  // namespace

absl::Status WorkerList::Check(const std::vector<std::string>& entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string entry = StripScheme(entries[i]);
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("worker address ", i + 1, " ('", entries[i],
                                                     "'): ", why,
                                                     "; expected HOST, HOST:PORT or "
                                                     "SCHEME://HOST:PORT"));
    };
    if (HostOf(entry).empty()) return bad("no host");
    for (size_t j = 0; j < i; ++j) {
      // Two shares for one worker, or one share for two workers on a host: either way a
      // share read twice and another by no one.
      if (StripScheme(entries[j]) == entry) {
        return bad(absl::StrCat("repeats worker address ", j + 1,
                                " (one entry per worker: give workers on one host their ports)"));
      }
    }
    if (!HasPort(entry)) continue;
    int port = 0;
    if (!absl::SimpleAtoi(entry.substr(entry.rfind(':') + 1), &port) || port < 1 || port > 65535) {
      return bad("the port is not a number in 1-65535");
    }
  }
  return absl::OkStatus();
}

WorkerList::WorkerList(std::vector<std::string> entries) {
  entries_.reserve(entries.size());
  for (const std::string& entry : entries) entries_.push_back(StripScheme(entry));
}

std::optional<int64_t> WorkerList::IndexOf(const std::string& worker_address) const {
  const std::string host_port = StripScheme(worker_address);
  // Its own host:port entry first: with "h, h:1", h:1 is the second worker, not the first.
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i] == host_port) return static_cast<int64_t>(i);
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (!HasPort(entries_[i]) && entries_[i] == HostOf(host_port)) return static_cast<int64_t>(i);
  }
  return std::nullopt;
}

std::string WorkerList::ToString() const { return absl::StrJoin(entries_, ", "); }

absl::StatusOr<proto::PipelineDef> ShardPipelineForWorker(const proto::PipelineDef& def,
                                                          proto::ProcessingMode mode,
                                                          int64_t num_workers,
                                                          int64_t worker_index) {
  switch (mode) {
    case proto::FILE:
      return engine::ApplyFileSharding(def, num_workers, worker_index);
    case proto::DATA:
      return engine::ApplyDataSharding(def, num_workers, worker_index);
    case proto::FILE_OR_DATA:
      return ReadsFiles(def) ? engine::ApplyFileSharding(def, num_workers, worker_index)
                             : engine::ApplyDataSharding(def, num_workers, worker_index);
    case proto::HINT:
      return engine::RewriteShardHints(def, num_workers, worker_index);
    case proto::OFF:
    case proto::DYNAMIC:
    case proto::PROCESSING_MODE_UNSPECIFIED:
    case proto::ProcessingMode_INT_MIN_SENTINEL_DO_NOT_USE_:
    case proto::ProcessingMode_INT_MAX_SENTINEL_DO_NOT_USE_:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("mode ", ProcessingModeName(mode), " is not a static sharding policy"));
}

}  // namespace sluice::control
