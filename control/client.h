// The trainer-side API: connect to a dispatcher, register datasets, read them.
//
//   ClientOptions options;
//   options.dispatcher = *transport::ParseAddress("ucx://10.0.0.1:5050");
//   absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(options);
//   absl::StatusOr<std::string> id = (*client)->RegisterDataset(
//       *engine::ParsePipeline("range(10000) | map(square) | batch(32)"));
//   ReadOptions read;
//   read.job_name = "train";  // share the job with other clients that name it
//   absl::StatusOr<std::unique_ptr<BatchReader>> reader = (*client)->Read(*id, read);
//
// The Client must outlive its readers.
#ifndef SLUICE_CONTROL_CLIENT_H_
#define SLUICE_CONTROL_CLIENT_H_

#include <memory>
#include <string>

#include "control/batch_reader.h"
#include "engine/pipeline.pb.h"
#include "transport/rpc.h"

namespace sluice::control {

struct ClientOptions {
  transport::Address dispatcher;
  // Bound on reaching the dispatcher and on each control call.
  absl::Duration timeout = absl::Seconds(10);
  transport::TransportOptions transport;
};

class Client {
 public:
  // Fails within options.timeout when the dispatcher cannot be reached.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<Client>> Connect(
      const ClientOptions& options);

  // Validated by the dispatcher; the same definition gets the same id.
  // `dataset_id`: a name of one's choosing (empty: the dispatcher picks one); a name that
  // holds another definition is AlreadyExists.
  [[nodiscard]] absl::StatusOr<std::string> RegisterDataset(const proto::PipelineDef& pipeline,
                                                            const std::string& dataset_id = "");
  [[nodiscard]] absl::StatusOr<std::unique_ptr<BatchReader>> Read(const std::string& dataset_id,
                                                                  const ReadOptions& options);
  [[nodiscard]] const std::string& dispatcher_id() const { return dispatcher_id_; }
  // Counters of the client's transport: payload bytes received and copied on receive.
  [[nodiscard]] const transport::TransportStats& transport_stats() const {
    return rpc_->transport().stats();
  }
  // Workers, datasets and jobs as the dispatcher sees them.
  [[nodiscard]] absl::StatusOr<proto::GetStatusResponse> GetStatus();

 private:
  explicit Client(const ClientOptions& options) : options_(options) {}

  const ClientOptions options_;
  std::string dispatcher_id_;
  std::unique_ptr<transport::RpcEndpoint> rpc_;
};

}  // namespace sluice::control

#endif  // SLUICE_CONTROL_CLIENT_H_
