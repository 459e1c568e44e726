// `sluice-perf sweep`: sizes x workers, Sluice's transport and service bandwidth beside
// `ucx_perftest -t ucp_am_bw` run in the same sweep, as CSV and a gnuplot PNG.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "perf/transport_perf.h"
#include "tools/byte_size.h"
#include "tools/cli_checks.h"
#include "tools/perf_commands.h"
#include "transport/slab_pool.h"

namespace sluice::tools {
namespace {

std::string Self() {
  char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "sluice-perf";
}

// The full path of `program` on $PATH, or "" (Subprocess runs a path, with no shell).
std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path != nullptr ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// `text` in a gnuplot single-quoted string, where a quote is written twice.
std::string GnuplotQuoted(const std::string& text) {
  return absl::StrCat("'", absl::StrReplaceAll(text, {{"'", "''"}}), "'");
}

// Decimal MB/s from `ucx_perftest -t ucp_am_bw`, or an error. ucx_perftest prints MB/s in
// units of 2^20 bytes; the "Final:" line's 7th column is the overall bandwidth.
absl::StatusOr<double> UcxPerftestBandwidth(const std::string& perftest, size_t size,
                                            int64_t iterations) {
  absl::BitGen gen;
  std::string port = std::to_string(absl::Uniform(gen, 20000, 30000));
  Subprocess server({perftest, "-p", port});
  absl::SleepFor(absl::Milliseconds(500));
  Subprocess client({perftest, "127.0.0.1", "-p", port, "-t", "ucp_am_bw", "-s",
                     std::to_string(size), "-n", std::to_string(iterations), "-w", "20"});
  int code = client.Wait(absl::Seconds(300));
  server.Wait(absl::Seconds(10));
  std::istringstream lines(client.stdout_text());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("Final:", 0) != 0) continue;
    std::vector<std::string> cols = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    double mib_s = 0;
    if (cols.size() >= 7 && absl::SimpleAtod(cols[6], &mib_s)) return mib_s * 1.048576;
  }
  return absl::InternalError(
      absl::StrCat("ucx_perftest failed (exit ", code, "): ", client.stderr_text()));
}

absl::StatusOr<nlohmann::json> RunJson(std::vector<std::string> argv, absl::Duration timeout) {
  Subprocess child(std::move(argv));
  int code = child.Wait(timeout);
  if (code != 0) return absl::InternalError(child.stderr_text());
  nlohmann::json result = nlohmann::json::parse(child.stdout_text(), nullptr, false);
  // One bad point is a failed point, not the end of the sweep.
  if (result.is_discarded() || !result.is_object() || !result.contains("bandwidth_mb_s") ||
      !result["bandwidth_mb_s"].is_number()) {
    return absl::InternalError(
        absl::StrCat("no bandwidth_mb_s in its output: ", child.stdout_text()));
  }
  return result;
}

}  // namespace

void AddSweepFlags(CLI::App* app, SweepFlags& flags) {
  app->add_option("--sizes", flags.sizes, "Comma-separated batch sizes")->capture_default_str();
  app->add_option("--workers", flags.workers, "Comma-separated worker counts")
      ->capture_default_str();
  app->add_option("--transport", flags.transport, "ucx or ofi")->capture_default_str();
  app->add_option("--seconds", flags.seconds, "Service run length per point")
      ->capture_default_str();
  app->add_option("--bytes-per-point", flags.bytes_per_point,
                  "Bytes moved per transport point (sets iterations)")
      ->check(AtLeast(1))
      ->capture_default_str();
  app->add_option("--out", flags.out, "Output prefix: PREFIX.csv and PREFIX.png")
      ->capture_default_str();
  app->add_flag("--skip-perftest", flags.skip_perftest, "Do not run ucx_perftest");
}

int RunSweepCommand(const SweepFlags& flags) {
  absl::StatusOr<std::vector<size_t>> sizes = ParseByteSizeList(flags.sizes);
  if (!sizes.ok()) return std::cerr << "sluice-perf sweep: " << sizes.status().message() << "\n", 2;
  std::vector<int> workers;
  for (absl::string_view w : absl::StrSplit(flags.workers, ',', absl::SkipWhitespace())) {
    int n = 0;
    if (!absl::SimpleAtoi(w, &n) || n < 1) {
      std::cerr << "sluice-perf sweep: --workers expects numbers >= 1, got '" << w << "'\n";
      return 2;
    }
    workers.push_back(n);
  }
  if (flags.transport != "ucx" && flags.transport != "ofi") {
    std::cerr << "sluice-perf sweep: --transport expects ucx or ofi, got '" << flags.transport
              << "'\n";
    return 2;
  }
  // Not `seconds <= 0`: NaN passes it, and every service point then fails.
  if (!(flags.seconds > 0) || !std::isfinite(flags.seconds)) {
    std::cerr << "sluice-perf sweep: --seconds must be finite and > 0, got " << flags.seconds
              << "\n";
    return 2;
  }
  // Said before the first point, not after hours of them.
  const std::string perftest_path = FindOnPath("ucx_perftest");
  const bool perftest = !flags.skip_perftest && flags.transport == "ucx" && !perftest_path.empty();
  if (!flags.skip_perftest && !perftest) {
    std::cerr << "sluice-perf sweep: no ucx_perftest series: "
              << (flags.transport != "ucx"
                      ? "it measures UCX, and --transport is " + flags.transport
                      : std::string("ucx_perftest is not on PATH (apt-get "
                                    "install ucx-utils)"))
              << "\n";
  }
  const std::string gnuplot = FindOnPath("gnuplot");
  if (gnuplot.empty()) {
    std::cerr << "sluice-perf sweep: gnuplot is not on PATH (apt-get install gnuplot-nox): the "
                 "sweep writes its CSV and plot script, not the PNG, and exits 1\n";
  }
  // Before the first run, not after all of them: a typo in the prefix costs nothing.
  std::ofstream csv(flags.out + ".csv");
  if (!csv) {
    std::cerr << "sluice-perf sweep: cannot write " << flags.out << ".csv: " << strerror(errno)
              << "\n";
    return 1;
  }
  csv << "series,size,workers,bandwidth_mb_s\n";
  int failed_points = 0;
  // Each series' points, for the plot.
  std::map<std::string, std::vector<std::pair<size_t, double>>> series;
  auto add_point = [&](const std::string& name, size_t size, int w, double mb_s) {
    csv << name << "," << size << "," << w << "," << mb_s << "\n";
    series[name].emplace_back(size, mb_s);
  };
  // The service runs over UCX whatever --transport says; the transport series says which.
  const std::string transport_series =
      flags.transport == "ucx" ? "sluice-transport" : "sluice-transport-" + flags.transport;
  const std::string tls = perf::EffectiveUcxTls({});
  // ucx_perftest's buffers are on base pages; Sluice's pools on huge pages unless told not.
  const std::string pages = transport::DefaultPoolsUseHugePages() ? "huge pages" : "base pages";
  int point = 0;
  const int points = static_cast<int>(sizes->size() * (workers.size() + (perftest ? 2 : 1)));
  auto progress = [&](const std::string& what) {
    std::cerr << "[" << ++point << "/" << points << "] " << what << std::endl;
  };
  for (size_t size : *sizes) {
    int64_t iterations = std::max<int64_t>(50, flags.bytes_per_point / static_cast<int64_t>(size));
    progress("transport " + FormatByteSize(size));
    auto t = RunJson(
        {Self(), "transport", "--transport", flags.transport, "--size", std::to_string(size),
         "--iterations", std::to_string(iterations), "--latency-iterations", "0", "--json"},
        absl::Minutes(5));
    if (t.ok()) {
      add_point(transport_series, size, 0, (*t)["bandwidth_mb_s"].get<double>());
    } else {
      std::cerr << "  failed: " << t.status().message() << "\n";
      ++failed_points;
    }
    if (perftest) {
      progress("ucx_perftest " + FormatByteSize(size));
      auto p = UcxPerftestBandwidth(perftest_path, size, iterations);
      if (p.ok()) {
        add_point("ucx_perftest-am_bw", size, 0, *p);
      } else {
        std::cerr << "  failed: " << p.status().message() << "\n";
        ++failed_points;
      }
    }
    for (int w : workers) {
      progress("service " + FormatByteSize(size) + ", " + std::to_string(w) + " worker(s)");
      auto s = RunJson({Self(), "service", "--workers", std::to_string(w), "--clients", "1",
                        "--batch-bytes", std::to_string(size), "--seconds",
                        absl::StrCat(flags.seconds), "--mode", "off", "--json"},
                       absl::Minutes(5));
      if (s.ok()) {
        add_point(absl::StrCat("sluice-service-", w, "w"), size, w,
                  (*s)["bandwidth_mb_s"].get<double>());
      } else {
        std::cerr << "  failed: " << s.status().message() << "\n";
        ++failed_points;
      }
    }
    csv.flush();
  }
  csv.close();
  if (!csv) {
    std::cerr << "sluice-perf sweep: writing " << flags.out << ".csv failed\n";
    return 1;
  }
  std::cout << "wrote " << flags.out << ".csv (UCX_TLS=" << tls << ", Sluice slabs on " << pages
            << ")\n";
  // The plot shows what was measured; the status says that some points are missing.
  const int status = failed_points == 0 ? 0 : 1;
  if (failed_points > 0) {
    std::cerr << "sluice-perf sweep: " << failed_points << " of " << points
              << " points failed (see above); the CSV has the others\n";
  }

  // The plot: one line per series, bandwidth against size on a log axis. The points go in
  // the script (gnuplot datablocks), so that no shell or path but the PNG's is in it.
  std::ofstream gp(flags.out + ".gp");
  gp << "set datafile separator ','\nset terminal pngcairo noenhanced size 900,560\n"
     << "set output " << GnuplotQuoted(flags.out + ".png") << "\n"
     << "set title 'Sluice bandwidth vs batch size (UCX_TLS=" << tls << ", Sluice slabs on "
     << pages << ")'\n"
     << "set logscale x 2\nset format x \"%.0b %BB\"\nset xlabel 'bytes per batch'\nset ylabel "
        "'MB/s (decimal)'\n"
     << "set key left top\nset grid\n";
  int block = 0;
  for (const auto& [name, points] : series) {
    gp << "$s" << block++ << " << EOD\n";
    for (const auto& [size, mb_s] : points) gp << size << "," << mb_s << "\n";
    gp << "EOD\n";
  }
  gp << "plot";
  block = 0;
  for (const auto& [name, points] : series) {
    gp << (block > 0 ? ", \\\n     " : " ") << "$s" << block << " using 1:2 with linespoints title "
       << GnuplotQuoted(name);
    ++block;
  }
  gp << (series.empty() ? " 0 notitle" : "") << "\n";
  gp.close();
  if (gnuplot.empty()) {
    // The PNG asked for is missing: not a clean run (tools/install_deps.sh installs it).
    std::cerr << "gnuplot not found (apt-get install gnuplot-nox); plot script left in "
              << flags.out << ".gp\n";
    return 1;
  }
  Subprocess plot({gnuplot, flags.out + ".gp"});
  if (plot.Wait(absl::Minutes(1)) != 0) {
    std::cerr << "gnuplot failed (" << plot.stderr_text() << "); the script is " << flags.out
              << ".gp\n";
    return 1;
  }
  std::cout << "wrote " << flags.out << ".png\n";
  return status;
}

}  // namespace sluice::tools
