// The libfabric implementation of Transport (ofi://HOST:PORT): one reliable-datagram
// endpoint driven by one progress thread.
//
// Peers meet through the TCP bootstrap (transport/bootstrap.h): they swap fi_getname
// addresses and tokens, insert each other into the address vector, and keep the socket open
// because RDM endpoints report no per-peer failure; its hang-up fails the connection's
// pending operations at once and calls OnDisconnect.
//
// Messages (ofi_wire.h) are untagged sends into receive buffers posted in advance. A payload
// below the rendezvous threshold rides inline and is copied once, out of the receive buffer
// into the chosen destination (counted in payload_bytes_copied). A larger payload is pulled:
// the sender announces its address and remote key (its registered region, or a registration
// for this message), the receiver calls ChoosePayloadDestination and fi_reads the bytes
// straight into that buffer, then tells the sender it may reuse its buffer. No Sluice copy:
// tcp;ofi_rxm serves the read from the sender's buffer into the receiver's over the socket,
// shm with one cross-memory copy (CMA) from process to process.
// Why a read and not a tagged rendezvous (announce; receiver posts fi_trecv into the chosen
// buffer and answers "clear to send"; sender fi_tsends): with libfabric 1.17 that pays two
// handshakes, ours and then the provider's own for the same bytes (ofi_rxm over tcp logs
// "Protocol limits: Eager: 16384, SAR: 16384", so a larger send is its rendezvous: a
// request, an RMA read of its own, an ack), and how the bytes move is the provider's choice
// by size. The read is one handshake, one data movement into the chosen buffer at every
// size on both providers, and needs no tag space. Its costs: the sender's bytes must be
// registered for remote reads (a RegisterMemory region, else a per-message fi_mr_reg, cheap
// on tcp and shm) and the reader must send kReadDone.
//
//   auto t = OfiTransport::Create(options, &handler);  // options.ofi_provider = "shm"
//   (*t)->Listen(*ParseAddress("ofi://0.0.0.0:0"));
#ifndef SLUICE_TRANSPORT_OFI_OFI_TRANSPORT_H_
#define SLUICE_TRANSPORT_OFI_OFI_TRANSPORT_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "transport/bootstrap.h"
#include "transport/hello_acceptor.h"
#include "transport/ofi/ofi_domain.h"
#include "transport/ofi/ofi_endpoint.h"
#include "transport/ofi/ofi_wire.h"
#include "transport/ofi/progress_thread.h"
#include "transport/transport.h"

namespace sluice::transport::ofi {

class OfiTransport final : public Transport {
 public:
  // Largest header Send accepts; receive buffers hold one header plus an eager payload.
  static constexpr size_t kMaxHeaderSize = 8 * 1024;
  // Eager payloads are capped whatever the rendezvous threshold, to bound receive buffers.
  static constexpr size_t kMaxEagerPayload = 64 * 1024;
  // Receive buffers posted at all times; more arrivals wait in the provider.
  static constexpr size_t kReceiveBuffers = 64;

  [[nodiscard]] static absl::StatusOr<std::unique_ptr<OfiTransport>> Create(
      const TransportOptions& options, MessageHandler* handler);
  ~OfiTransport() override;

  absl::string_view scheme() const override { return "ofi"; }
  std::string Describe() const override;
  absl::StatusOr<Address> Listen(const Address& bind) override;
  absl::StatusOr<ConnectionId> ConnectBefore(const Address& peer, absl::Time before) override;
  void StopConnecting() override { connect_stop_.Raise(); }
  void Send(ConnectionId to, absl::string_view header, Payload payload, SendCallback done) override;
  void Close(ConnectionId connection) override;
  void Abort(ConnectionId connection, absl::Status why) override;
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* base, size_t size) override;
  size_t max_header_size() const override { return kMaxHeaderSize; }
  const TransportStats& stats() const override { return stats_; }
  bool DrivenByThisThread() const override { return progress_->OnThread(); }

  // The provider in use, as libfabric names it.
  [[nodiscard]] const std::string& provider() const { return domain_->provider(); }

 private:
  struct Connection {
    fi_addr_t address = FI_ADDR_UNSPEC;
    std::string peer;
    uint64_t remote_token = 0;  // stamped on messages we send, so the peer knows the source
    size_t eager_limit = 0;     // payloads below this go inline (the smaller of both ends')
    ScopedFd socket;            // bootstrap socket, watched for the peer's death
    bool closing = false;       // Close was called: no new sends, gone once nothing pends
    std::chrono::steady_clock::time_point closing_since;  // when Close was called
    bool failed = false;  // the peer is gone: send nothing more, not even replies
    int pending = 0;      // its entries in sends_ and reads_
  };
  // A Send whose callback has not run: eager until its completion, rendezvous until the
  // receiver's kReadDone.
  struct PendingSend {
    ConnectionId connection;
    SendCallback done;
    MrPtr registration;  // the payload's own registration when it was not in a region
  };
  class ReceiveOp;
  class SendOp;
  class ReadOp;

  OfiTransport(const TransportOptions& options, MessageHandler* handler);
  absl::Status Start();

  // Connections (ofi_transport.cc); progress thread only.
  absl::Status AddConnection(ConnectionId id, const Hello& remote, std::string peer,
                             ScopedFd socket);
  void OnSocketReady(int fd);
  void AcceptConnections();
  // A pending peer's socket is readable: its connection once its hello is complete.
  void FinishAccept(int fd);
  // `peer_alive`: it may be (Abort): the payloads of the sends it fails may still be read
  // (PayloadMayStillBeRead). `fail_reads`: also fail reads in flight now (their peer is
  // dead and serves none); otherwise they stay
  // until libfabric completes them, since their landing buffers may still be written.
  void FailConnection(ConnectionId id, const absl::Status& why, bool fail_reads = true,
                      bool peer_alive = false);
  // FailConnection(id, why, no, yes) from the progress queue: for a reply that failed.
  void FailConnectionLater(ConnectionId id, const absl::Status& why);
  void CloseConnection(ConnectionId id);
  void RetireIfDone(ConnectionId id);
  // Retires the closed connections whose replies have waited kCloseGrace to leave.
  void RetireOverdueCloses();
  void RemoveRetiredAddresses();
  void FailEverything();

  // Data path (ofi_data_path.cc); progress thread only.
  // Posts receive buffer `slot`, with `op` when one is reused.
  void PostReceive(size_t slot, std::unique_ptr<OfiOp> op = nullptr);
  void DoSend(ConnectionId to, absl::string_view header, Payload payload, SendCallback done);
  // Sends one wire message. `send_id` names the sends_ entry the op's failure (and, when
  // `completes_send`, its success) completes; 0 for none.
  void SendMessage(ConnectionId to, fi_addr_t address, const WireHeader& wire,
                   absl::string_view header, Payload payload, uint64_t send_id,
                   bool completes_send);
  void OnReceived(size_t slot, size_t length);
  void OnEager(const DecodedMessage& message);
  void OnRendezvous(const DecodedMessage& message);
  void OnReadDone(const DecodedMessage& message);
  void OnReadComplete(ReadOp& op, const absl::Status& status);
  void ReplyReadDone(ConnectionId to, uint64_t op_id, ReadOutcome outcome);
  void CompleteSend(uint64_t send_id, const absl::Status& status);
  void FailPendingOf(ConnectionId id, const absl::Status& why, bool fail_reads, bool peer_alive);
  void AddPending(ConnectionId id, int delta);
  // The open connection a message's token names, or kNoConnection.
  [[nodiscard]] ConnectionId OpenConnection(uint64_t token) const;

  const TransportOptions options_;
  MessageHandler* const handler_;
  TransportStats stats_;
  size_t eager_limit_ = 0;  // payloads below this ride inline (what our buffers hold)
  size_t buffer_size_ = 0;  // one receive buffer

  std::shared_ptr<OfiDomain> domain_;
  // Receive buffers outlive the endpoint that writes into them, and their registration.
  std::unique_ptr<std::byte[]> receive_buffers_;
  MrPtr receive_registration_;
  std::unique_ptr<OfiEndpoint> endpoint_;
  std::shared_ptr<ProgressThread> progress_;
  ScopedFd listen_socket_;
  // Peers accepted from listen_socket_ whose hellos have not all come; progress thread only.
  HelloAcceptor acceptor_{HelloTransport::kOfi, HelloAcceptor::kTimeout,
                          [this](int fd) { progress_->Watch(fd); },
                          [this](int fd) { progress_->Unwatch(fd); }};
  std::string hello_address_;  // EncodePeerAddress of this endpoint, sent in every hello
  [[nodiscard]] Hello OwnHello(ConnectionId id) const {
    Hello hello{id, hello_address_};
    hello.transport = HelloTransport::kOfi;
    return hello;
  }

  std::atomic<ConnectionId> next_connection_id_{1};
  ConnectStop connect_stop_;  // StopConnecting
  // Progress-thread-only state.
  absl::flat_hash_map<ConnectionId, Connection> connections_;
  absl::flat_hash_map<int, ConnectionId> connection_by_socket_;
  absl::flat_hash_map<uint64_t, PendingSend> sends_;
  absl::flat_hash_map<uint64_t, ReadOp*> reads_;  // owned by the endpoint while in flight
  uint64_t next_op_id_ = 1;
  // Addresses of ended connections, removed from the AV once libfabric holds no op for them
  // and kAddressGrace has passed.
  struct Retired {
    ConnectionId id;
    fi_addr_t address;
    std::chrono::steady_clock::time_point since;
    // Of a connection given up on with our reads of the peer in flight (Abort): closed only
    // once they end. The peer takes the close for our death and hands out again the memory
    // those reads still copy from.
    ScopedFd socket;
  };
  std::vector<Retired> retired_;
};

}  // namespace sluice::transport::ofi

#endif  // SLUICE_TRANSPORT_OFI_OFI_TRANSPORT_H_
