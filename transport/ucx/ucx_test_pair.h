// Two UcxTransports in this process, a client connected to a server that listens on
// loopback: the set-up of the UCX transport's tests that need real endpoints but no second
// process.
//
//   absl::StatusOr<UcxPair> pair = ConnectUcxPair(options, &server_handler, &client_handler);
//   ASSERT_TRUE(pair.ok()) << pair.status();
//   pair->client->Send(pair->connection, "ping", {}, [](absl::Status) {});
#ifndef SLUICE_TRANSPORT_UCX_UCX_TEST_PAIR_H_
#define SLUICE_TRANSPORT_UCX_UCX_TEST_PAIR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "transport/ucx/ucx_transport.h"

namespace sluice::transport::ucx {

struct UcxPair {
  // Declared server first, so that the client goes first when a pair is destroyed.
  std::unique_ptr<UcxTransport> server;
  std::unique_ptr<UcxTransport> client;
  ConnectionId connection = kNoConnection;  // the client's, to the server
};

// Both transports take `options`; each handler must outlive its transport.
[[nodiscard]] inline absl::StatusOr<UcxPair> ConnectUcxPair(const TransportOptions& options,
                                                            MessageHandler* server_handler,
                                                            MessageHandler* client_handler) {
  UcxPair pair;
  SLUICE_ASSIGN_OR_RETURN(pair.server, UcxTransport::Create(options, server_handler));
  SLUICE_ASSIGN_OR_RETURN(const Address bound, pair.server->Listen(Address{"ucx", "127.0.0.1", 0}));
  SLUICE_ASSIGN_OR_RETURN(pair.client, UcxTransport::Create(options, client_handler));
  SLUICE_ASSIGN_OR_RETURN(pair.connection, pair.client->Connect(bound));
  return pair;
}

}  // namespace sluice::transport::ucx

#endif  // SLUICE_TRANSPORT_UCX_UCX_TEST_PAIR_H_
