#include "control/dispatcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/thread_name.h"
#include "control/dispatcher_id.h"
#include "control/static_sharding.h"

namespace sluice::control {
namespace {

std::string RandomId() {
  absl::BitGen gen;
  return absl::StrFormat("%016x", absl::Uniform<uint64_t>(gen));
}

template <typename Response>
void ReplyWith(transport::ServerCall& call, const absl::StatusOr<Response>& response) {
  if (response.ok()) {
    call.Reply(*response);
  } else {
    call.Reply(response.status());
  }
}

// Binds a state method to an RPC. A call that changed journaled state is answered only
// once the journal holds the change durably (group commit: many calls share one fdatasync).
template <typename Request, typename Response>
void HandleDurable(transport::RpcEndpoint& rpc, uint32_t method, DispatcherState& state,
                   JournalWriter* journal,
                   std::function<absl::StatusOr<Response>(const Request&)> handler) {
  rpc.Handle(method, [&state, journal,
                      handler = std::move(handler)](std::shared_ptr<transport::ServerCall> call) {
    Request request;
    if (!request.ParseFromArray(call->request().data(), static_cast<int>(call->request().size()))) {
      call->Reply(absl::InvalidArgumentError(
          absl::StrCat("malformed ", Request::descriptor()->name(), " message")));
      return;
    }
    const int64_t awaiting_before = journal ? state.answers_awaiting_the_journal() : 0;
    absl::StatusOr<Response> response = handler(request);
    if (journal == nullptr || (state.answers_awaiting_the_journal() == awaiting_before &&
                               !state.coordination_unsynced())) {
      ReplyWith(*call, response);
      return;
    }
    journal->Sync([call, response = std::move(response)](absl::Status written) {
      if (!written.ok()) {
        call->Reply(absl::UnavailableError(
            absl::StrCat("the dispatcher could not journal this change: ", written.message())));
        return;
      }
      ReplyWith(*call, response);
    });
  });
}

}  // namespace

Dispatcher::Dispatcher(const DispatcherOptions& options) : state_(options.config) {}

Dispatcher::~Dispatcher() {
  stop_.Notify();
  if (liveness_thread_.joinable()) liveness_thread_.join();
  // Changes already made are answered before the endpoint closes: a caller hears that its
  // change is durable instead of waiting out its deadline for a reply that was dropped (over
  // shared memory nothing else tells it the dispatcher went). New requests are refused from
  // here, the handlers under way finish, and the journal writes what they queued; its
  // callbacks reply through the endpoint, which still sends.
  if (rpc_ != nullptr) rpc_->StopServing();
  if (journal_ != nullptr) {
    state_.DetachJournal();  // the handlers and the liveness thread are done changing it
    journal_.reset();
  }
}

absl::Status Dispatcher::OpenWorkDir(const DispatcherOptions& options) {
  if (options.work_dir.empty()) {
    return absl::InvalidArgumentError("a fault-tolerant dispatcher needs a --work-dir");
  }
  if (mkdir(options.work_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::InternalError(
        absl::StrCat("cannot create work dir ", options.work_dir, ": ", strerror(errno)));
  }
  absl::StatusOr<Recovered> recovered = Recover(options.work_dir);
  // An empty or new work dir recovers fine, from nothing.
  const bool has_state =
      recovered.ok() && (recovered->snapshot.has_value() || !recovered->journal_files.empty());
  SLUICE_ASSIGN_OR_RETURN(id_, LoadOrCreateDispatcherId(options.work_dir, has_state));
  if (recovered.ok()) {
    SLUICE_RETURN_IF_ERROR(state_.Restore(*recovered));
    recovery_summary_ =
        absl::StrCat("recovered ", recovered->snapshot.has_value() ? "a snapshot and " : "",
                     recovered->updates.size(), " journaled update(s) from ", options.work_dir);
    if (recovered->dropped.has_value()) {
      // Said with its size: a crash tears at most the last write, and more than that
      // dropped is a journal damaged otherwise (it is cut off all the same).
      const TornTail& torn = *recovered->dropped;
      absl::StrAppend(&recovery_summary_, "; dropped a torn last record: ", torn.bytes_dropped,
                      " byte(s) at offset ", torn.offset, " of ", torn.path);
    }
  } else if (!absl::IsNotFound(recovered.status())) {
    return absl::Status(recovered.status().code(),
                        absl::StrCat("cannot recover the dispatcher's state from ",
                                     options.work_dir, ": ", recovered.status().message()));
  }
  SLUICE_ASSIGN_OR_RETURN(journal_, JournalWriter::Open(options.work_dir, options.journal));
  state_.AttachJournal(journal_.get(), options.compact_every_updates);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Dispatcher>> Dispatcher::Start(const DispatcherOptions& options) {
  SLUICE_RETURN_IF_ERROR(WorkerList::Check(options.config.worker_addresses));
  std::unique_ptr<Dispatcher> d(new Dispatcher(options));
  if (options.fault_tolerant) {
    SLUICE_RETURN_IF_ERROR(d->OpenWorkDir(options));
  } else {
    d->id_ = RandomId();
  }
  transport::RpcOptions rpc_options;
  rpc_options.scheme = options.bind.scheme;
  rpc_options.transport = options.transport;
  SLUICE_ASSIGN_OR_RETURN(d->rpc_, transport::RpcEndpoint::Create(rpc_options));
  d->RegisterHandlers();
  SLUICE_ASSIGN_OR_RETURN(d->address_, d->rpc_->Listen(options.bind));
  const absl::Duration period =
      std::clamp(options.config.worker_timeout / 4, absl::Milliseconds(10), absl::Seconds(1));
  d->liveness_thread_ = std::thread([dispatcher = d.get(), period] {
    SetCurrentThreadName("sluice-liveness");
    while (!dispatcher->stop_.WaitForNotificationWithTimeout(period)) {
      dispatcher->state_.CheckLiveness(absl::Now());
    }
  });
  return d;
}

void Dispatcher::RegisterHandlers() {
  DispatcherState& state = state_;
  transport::RpcEndpoint& rpc = *rpc_;
  JournalWriter* const journal = journal_.get();
  const std::string id = id_;
  HandleDurable<proto::GetDispatcherInfoRequest, proto::GetDispatcherInfoResponse>(
      rpc, proto::GET_DISPATCHER_INFO, state, nullptr, [id](const auto&) {
        proto::GetDispatcherInfoResponse response;
        response.set_dispatcher_id(id);
        response.set_version("0.1.0");
        return absl::StatusOr<proto::GetDispatcherInfoResponse>(response);
      });
  HandleDurable<proto::RegisterDatasetRequest, proto::RegisterDatasetResponse>(
      rpc, proto::REGISTER_DATASET, state, journal,
      [&state](const auto& request) -> absl::StatusOr<proto::RegisterDatasetResponse> {
        SLUICE_ASSIGN_OR_RETURN(std::string id,
                                state.RegisterDataset(request.pipeline(), request.dataset_id()));
        proto::RegisterDatasetResponse response;
        response.set_dataset_id(id);
        return response;
      });
  HandleDurable<proto::GetOrCreateJobRequest, proto::GetOrCreateJobResponse>(
      rpc, proto::GET_OR_CREATE_JOB, state, journal,
      [&state](const auto& r) { return state.GetOrCreateJob(r); });
  HandleDurable<proto::ClientHeartbeatRequest, proto::ClientHeartbeatResponse>(
      rpc, proto::CLIENT_HEARTBEAT, state, journal,
      [&state, id](const auto& r) -> absl::StatusOr<proto::ClientHeartbeatResponse> {
        SLUICE_ASSIGN_OR_RETURN(proto::ClientHeartbeatResponse response, state.ClientHeartbeat(r));
        response.set_dispatcher_id(id);
        return response;
      });
  HandleDurable<proto::WorkerHeartbeatRequest, proto::WorkerHeartbeatResponse>(
      rpc, proto::WORKER_HEARTBEAT, state, journal,
      [&state, id](const auto& r) -> absl::StatusOr<proto::WorkerHeartbeatResponse> {
        SLUICE_ASSIGN_OR_RETURN(proto::WorkerHeartbeatResponse response, state.WorkerHeartbeat(r));
        response.set_dispatcher_id(id);
        return response;
      });
  HandleDurable<proto::GetStatusRequest, proto::GetStatusResponse>(
      rpc, proto::GET_STATUS, state, nullptr,
      [&state, id](const auto&) -> absl::StatusOr<proto::GetStatusResponse> {
        proto::GetStatusResponse status = state.Status();
        status.set_dispatcher_id(id);
        return status;
      });
  HandleDurable<proto::ReleaseClientRequest, proto::ReleaseClientResponse>(
      rpc, proto::RELEASE_CLIENT, state, journal,
      [&state](const auto& r) -> absl::StatusOr<proto::ReleaseClientResponse> {
        SLUICE_RETURN_IF_ERROR(state.ReleaseClient(r));
        return proto::ReleaseClientResponse();
      });
  HandleDurable<proto::GetSplitRequest, proto::GetSplitResponse>(
      rpc, proto::GET_SPLIT, state, journal, [&state](const auto& r) { return state.GetSplit(r); });
}

}  // namespace sluice::control
