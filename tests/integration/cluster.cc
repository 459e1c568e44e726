#include "tests/integration/cluster.h"

#include <algorithm>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace sluice::testing {

std::string Scheme() {
  const char* scheme = std::getenv("SLUICE_TEST_TRANSPORT");
  return scheme ? scheme : "ucx";
}

std::string Binary() {
  const char* path = std::getenv("SLUICE_BINARY");
  return path ? path : "sluice";
}

std::string TestDataRoot() {
  const char* root = std::getenv("SLUICE_TESTDATA");
  if (root == nullptr || access(root, R_OK) != 0) return "";
  return root;
}

int FreePort() {
  // Below Linux's ephemeral range (32768 and up by default): a port found free there can be
  // taken by any connection's local end before the worker binds it, which happened in CI.
  // Here only another listener could take it.
  static std::atomic<int> next{20000 + static_cast<int>(getpid() % 500) * 20};
  for (int attempt = 0; attempt < 2000; ++attempt) {
    const int port = 20000 + (next.fetch_add(1) - 20000) % 12000;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(fd);
    if (bound) return port;
  }
  ADD_FAILURE() << "no free port below 32000";
  return 0;
}

std::vector<std::string> Cluster::RootArgs() const {
  if (options_.data_root.empty()) return {};
  return {"--data-root", options_.data_root};
}

Cluster::Cluster(const ClusterOptions& options) : options_(options) {
  // A port below the ephemeral range, not 0: RestartDispatcher binds the same port again,
  // and an ephemeral one could meanwhile be the local end of some process's connection.
  StartDispatcher(FreePort());
  for (int i = 0; i < options_.workers; ++i) {
    AddWorker(i < static_cast<int>(options_.worker_ports.size()) ? options_.worker_ports[i] : 0);
  }
}

void Cluster::StartDispatcher(int port) {
  std::vector<std::string> argv = {Binary(),     "--transport", Scheme(),
                                   "dispatcher", "--port",      std::to_string(port),
                                   "--host",     "127.0.0.1",   "--elements-per-split",
                                   "100"};
  for (const std::string& arg : RootArgs()) argv.push_back(arg);
  for (const std::string& arg : options_.dispatcher_args) argv.push_back(arg);
  dispatcher_ = std::make_unique<Subprocess>(argv);
  std::string line = dispatcher_->WaitForOutput("listening on", absl::Seconds(20));
  ASSERT_FALSE(line.empty()) << dispatcher_->stderr_text();
  size_t start = line.find(Scheme() + "://");
  address_ = line.substr(start, line.find(' ', start) - start);
  port_ = std::atoi(address_.substr(address_.rfind(':') + 1).c_str());
}

void Cluster::AddWorker(int port) {
  if (port == 0) port = FreePort();  // tests restart workers on their port (see above)
  std::vector<std::string> argv = {
      Binary(),    "worker", "--dispatcher",       address_,           "--host",
      "127.0.0.1", "--port", std::to_string(port), "--advertise-host", "127.0.0.1"};
  // Small pools by default, unless the test sizes them (a flag may be given only once).
  for (const char* flag : {"--slab-bytes", "--slabs"}) {
    if (std::find(options_.worker_args.begin(), options_.worker_args.end(), flag) !=
        options_.worker_args.end()) {
      continue;
    }
    argv.push_back(flag);
    argv.push_back(std::string(flag) == "--slabs" ? "8" : "1048576");
  }
  for (const std::string& arg : RootArgs()) argv.push_back(arg);
  for (const std::string& arg : options_.worker_args) argv.push_back(arg);
  auto worker = std::make_unique<Subprocess>(argv);
  const std::string line = worker->WaitForOutput("serving at", absl::Seconds(20));
  EXPECT_FALSE(line.empty()) << worker->stderr_text();
  const size_t at = line.find("serving at ");
  std::string address = at == std::string::npos ? "" : line.substr(at + 11);
  while (!address.empty() && (address.back() == '\n' || address.back() == ' ')) address.pop_back();
  worker_addresses_.push_back(address);
  workers_.push_back(std::move(worker));
}

void Cluster::KillWorker(int i) {
  workers_[i]->Kill(SIGKILL);
  workers_[i]->Wait(absl::Seconds(10));
}

void Cluster::RestartDispatcher() {
  dispatcher_->Kill(SIGKILL);
  dispatcher_->Wait(absl::Seconds(10));
  StartDispatcher(port_);
}

std::unique_ptr<Subprocess> StartRead(const std::string& address, const std::string& pipeline,
                                      const std::string& mode, const std::string& job,
                                      const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {Binary(), "read",   "--dispatcher", address,    "--pipeline",
                                   pipeline, "--mode", mode,           "--format", "jsonl"};
  if (!job.empty()) {
    argv.push_back("--job-name");
    argv.push_back(job);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return std::make_unique<Subprocess>(argv);
}

std::map<int64_t, int> Values(Subprocess& read) {
  EXPECT_EQ(read.Wait(absl::Seconds(120)), 0) << read.stderr_text();
  std::map<int64_t, int> counts;
  std::istringstream lines(read.stdout_text());
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    nlohmann::json batch = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (batch.is_discarded()) {
      ADD_FAILURE() << "output line " << number << " is not JSON: " << line.substr(0, 400);
      continue;
    }
    EXPECT_EQ(batch["tensors"].size(), 1u);
    EXPECT_EQ(batch["tensors"][0]["dtype"], "int64");
    for (int64_t v : batch["tensors"][0]["values"]) ++counts[v];
  }
  return counts;
}

void ExpectEachValueTimes(const std::map<int64_t, int>& counts, int64_t n, int times) {
  std::vector<int64_t> missing;
  for (int64_t v = 0; v < n && missing.size() < 40; ++v) {
    if (!counts.contains(v)) missing.push_back(v);
  }
  ASSERT_EQ(counts.size(), static_cast<size_t>(n))
      << "distinct values read; the first missing: " << absl::StrJoin(missing, ",");
  ASSERT_EQ(counts.begin()->first, 0);
  ASSERT_EQ(counts.rbegin()->first, n - 1);
  for (const auto& [value, count] : counts) ASSERT_EQ(count, times) << "value " << value;
}

std::map<std::string, int> Records(Subprocess& read) {
  EXPECT_EQ(read.Wait(absl::Seconds(120)), 0) << read.stderr_text();
  std::map<std::string, int> counts;
  std::istringstream lines(read.stdout_text());
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json batch = nlohmann::json::parse(line);
    EXPECT_EQ(batch["tensors"][0]["dtype"], "string");
    for (const auto& v : batch["tensors"][0]["values"]) {
      // A record that is not UTF-8 (a serialized Example) comes as {"base64": ...}.
      std::string record;
      if (v.is_object()) {
        EXPECT_TRUE(absl::Base64Unescape(v["base64"].get<std::string>(), &record)) << v;
      } else {
        record = v.get<std::string>();
      }
      ++counts[record];
    }
  }
  return counts;
}

int64_t Total(const std::map<std::string, int>& counts) {
  int64_t n = 0;
  for (const auto& [v, c] : counts) n += c;
  return n;
}

}  // namespace sluice::testing
