// Real `sluice` processes for the multi-process tests: a dispatcher, workers and readers
// talking over real UCX or libfabric endpoints on loopback, and checks of what they read.
//
//   Cluster cluster({.workers = 2});
//   auto read = StartRead(cluster.address(), "range(100) | batch(10)", "dynamic");
//   ExpectEachValueTimes(Values(*read), 100, 1);
#ifndef SLUICE_TESTS_INTEGRATION_CLUSTER_H_
#define SLUICE_TESTS_INTEGRATION_CLUSTER_H_

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace sluice::testing {

// The transport under test: SLUICE_TEST_TRANSPORT=ofi runs everything over libfabric.
std::string Scheme();
// The `sluice` binary (SLUICE_BINARY).
std::string Binary();
// A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range.
int FreePort();

struct ClusterOptions {
  int workers = 1;
  // Given to the dispatcher and every worker as --data-root.
  std::string data_root;
  // Fixed worker ports (static sharding needs known addresses); empty: any free port.
  std::vector<int> worker_ports;
  std::vector<std::string> dispatcher_args;
  std::vector<std::string> worker_args;
};

// A directory under /tmp, removed with everything in it when this goes.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    char tmpl[] = "/tmp/sluice_ft_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~ScopedTempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A dispatcher and N workers, each its own process, killed when the Cluster goes.
class Cluster {
 public:
  explicit Cluster(const ClusterOptions& options);
  Cluster(int workers, const std::string& data_root = "")
      : Cluster(ClusterOptions{.workers = workers, .data_root = data_root}) {}

  const std::string& address() const { return address_; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  Subprocess& worker(int i) { return *workers_[i]; }
  // The address worker i serves at (what `read --format jsonl` names as "worker").
  const std::string& worker_address(int i) const { return worker_addresses_[i]; }
  Subprocess& dispatcher() { return *dispatcher_; }
  // Starts one more worker (on `port`, 0: a FreePort()) and waits until it serves.
  void AddWorker(int port = 0);
  // SIGKILLs worker i (it stays in the list, dead).
  void KillWorker(int i);
  // SIGKILLs the dispatcher and starts it again with the same flags and port.
  void RestartDispatcher();

 private:
  void StartDispatcher(int port);
  std::vector<std::string> RootArgs() const;

  ClusterOptions options_;
  std::unique_ptr<Subprocess> dispatcher_;
  std::vector<std::unique_ptr<Subprocess>> workers_;
  std::vector<std::string> worker_addresses_;
  std::string address_;
  int port_ = 0;
};

// `sluice read --format jsonl` of `pipeline` in `mode`, plus `extra` flags.
std::unique_ptr<Subprocess> StartRead(const std::string& address, const std::string& pipeline,
                                      const std::string& mode, const std::string& job = "",
                                      const std::vector<std::string>& extra = {});

// value -> how many times it was read, from a finished `sluice read --format jsonl` of int64
// batches with one tensor.
std::map<int64_t, int> Values(Subprocess& read);
void ExpectEachValueTimes(const std::map<int64_t, int>& counts, int64_t n, int times);

// String values (TFRecord records) read by a finished `sluice read --format jsonl`, those
// that are not UTF-8 decoded from their {"base64": ...}.
std::map<std::string, int> Records(Subprocess& read);
int64_t Total(const std::map<std::string, int>& counts);

// The shared test data (../shared/testdata, SLUICE_TESTDATA); empty when unavailable.
std::string TestDataRoot();

}  // namespace sluice::testing

#endif  // SLUICE_TESTS_INTEGRATION_CLUSTER_H_
