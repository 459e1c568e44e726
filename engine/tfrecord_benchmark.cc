// TFRecord read throughput from the page cache (read + both CRCs + framing), against a
// plain memcpy of the same bytes in the same run. Not a test: run it with
//
//   meson test -C build --benchmark --suite engine -v     (or run the binary directly)
//   build/engine/engine_tfrecord_benchmark --benchmark_filter=Ratio
//
// The file (SLUICE_BENCH_MIB MiB, default 256, of records of each size argument) is
// written under $TMPDIR once per size and read once before timing so it sits in the
// page cache. Two memcpy baselines copy the file's bytes from memory: "plain" copies
// them into another buffer of the file's size (memcpy(dst, src, n)); "chunked" copies
// them through one reused buffer the size of the reader's (256 KiB), the way the
// reader's read() calls land in cache-resident memory, which is the faster and harsher
// baseline. BM_ReadToMemcpyRatio runs reader and baselines alternately in one run and
// reports read_GBps, memcpy_GBps (plain), chunked_GBps and the ratios read / memcpy.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/io/crc32c.h"
#include "engine/io/input_stream.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/test_util.h"

namespace sluice::engine {
namespace {

size_t FileBytes() {
  const char* mib = std::getenv("SLUICE_BENCH_MIB");
  return static_cast<size_t>(mib != nullptr ? std::atoi(mib) : 256) << 20;
}

// One file per record size, written on first use; the directory is removed at exit.
struct BenchFile {
  std::string dir;
  std::string path;
  std::string bytes;  // The file's contents, for the memcpy baseline.
  int64_t records = 0;
};

const BenchFile& FileFor(size_t record_bytes) {
  static testing::TempDir dir;
  static std::map<size_t, BenchFile> files;
  auto it = files.find(record_bytes);
  if (it != files.end()) return it->second;
  BenchFile f;
  f.dir = dir.path();
  f.path = dir.path() + "/bench_" + std::to_string(record_bytes) + ".tfrecord";
  std::string payload(record_bytes, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 131 + 7);
  while (f.bytes.size() < FileBytes()) {
    AppendTfRecord(payload, &f.bytes);
    ++f.records;
  }
  testing::WriteFile(f.path, f.bytes);
  return files.emplace(record_bytes, std::move(f)).first->second;
}

// Reads every record of the file; returns the payload bytes seen.
int64_t ReadAll(const BenchFile& f) {
  std::vector<std::string> roots = {f.dir};
  auto stream = FileInputStream::Open(f.path, roots);
  if (!stream.ok()) std::abort();
  TfRecordReader reader(*std::move(stream), "bench");
  int64_t payload = 0;
  while (true) {
    std::string_view record;
    bool eof = false;
    if (!reader.ReadRecord(&record, &eof).ok()) std::abort();
    if (eof) return payload;
    payload += static_cast<int64_t>(record.size());
  }
}

// Copies the file's bytes into `dst` (the file's size).
void CopyPlain(const BenchFile& f, std::vector<char>& dst) {
  std::memcpy(dst.data(), f.bytes.data(), f.bytes.size());
  benchmark::ClobberMemory();
}

// Copies the file's bytes through a reader-sized buffer.
void CopyAll(const BenchFile& f, std::vector<char>& chunk) {
  for (size_t pos = 0; pos < f.bytes.size(); pos += chunk.size()) {
    const size_t n = std::min(chunk.size(), f.bytes.size() - pos);
    std::memcpy(chunk.data(), f.bytes.data() + pos, n);
    benchmark::ClobberMemory();
  }
}

void BM_TfRecordRead(benchmark::State& state) {
  const BenchFile& f = FileFor(static_cast<size_t>(state.range(0)));
  ReadAll(f);  // Warm the page cache.
  for (auto _ : state) benchmark::DoNotOptimize(ReadAll(f));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.bytes.size()));
  state.counters["records"] = static_cast<double>(f.records);
}

void BM_MemcpySameBytes(benchmark::State& state) {
  const BenchFile& f = FileFor(static_cast<size_t>(state.range(0)));
  std::vector<char> dst(f.bytes.size(), 1);  // Written once, so no page faults are timed.
  for (auto _ : state) CopyPlain(f, dst);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.bytes.size()));
}

void BM_MemcpyChunked(benchmark::State& state) {
  const BenchFile& f = FileFor(static_cast<size_t>(state.range(0)));
  std::vector<char> chunk(BufferedReader::kDefaultBufferBytes);
  for (auto _ : state) CopyAll(f, chunk);
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.bytes.size()));
}

void BM_Crc32c(benchmark::State& state) {
  const BenchFile& f = FileFor(static_cast<size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(Crc32c(f.bytes.data(), f.bytes.size()));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(f.bytes.size()));
  state.counters["accelerated"] = Crc32cIsAccelerated() ? 1 : 0;
}

// Both, interleaved in one run: GB/s of each and read / memcpy.
void BM_ReadToMemcpyRatio(benchmark::State& state) {
  const BenchFile& f = FileFor(static_cast<size_t>(state.range(0)));
  std::vector<char> chunk(BufferedReader::kDefaultBufferBytes);
  std::vector<char> dst(f.bytes.size(), 1);
  ReadAll(f);
  CopyAll(f, chunk);
  CopyPlain(f, dst);
  using Clock = std::chrono::steady_clock;
  double read_s = 0, plain_s = 0, chunked_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    benchmark::DoNotOptimize(ReadAll(f));
    const auto t1 = Clock::now();
    CopyPlain(f, dst);
    const auto t2 = Clock::now();
    CopyAll(f, chunk);
    const auto t3 = Clock::now();
    read_s += std::chrono::duration<double>(t1 - t0).count();
    plain_s += std::chrono::duration<double>(t2 - t1).count();
    chunked_s += std::chrono::duration<double>(t3 - t2).count();
  }
  const double bytes =
      static_cast<double>(f.bytes.size()) * static_cast<double>(state.iterations());
  state.counters["read_GBps"] = bytes / read_s / 1e9;
  state.counters["memcpy_GBps"] = bytes / plain_s / 1e9;
  state.counters["chunked_GBps"] = bytes / chunked_s / 1e9;
  state.counters["ratio"] = plain_s / read_s;
  state.counters["ratio_chunked"] = chunked_s / read_s;
}

BENCHMARK(BM_TfRecordRead)
    ->Arg(1 << 10)
    ->Arg(16 << 10)
    ->Arg(256 << 10)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpySameBytes)->Arg(16 << 10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MemcpyChunked)->Arg(16 << 10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Crc32c)->Arg(16 << 10)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadToMemcpyRatio)
    ->Arg(1 << 10)
    ->Arg(16 << 10)
    ->Arg(256 << 10)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace sluice::engine

BENCHMARK_MAIN();
