// How map(parallel=N) scales with worker threads on a CPU-bound function. Not a test: run
// it with
//
//   meson test -C build --benchmark --suite engine -v     (or run the binary directly)
//   build/engine/engine_parallel_map_benchmark --benchmark_filter=Speedup
//
// The pipeline is `range(N) | map(spin, parallel=P) | batch(256)` with N = 4096 (override
// with SLUICE_BENCH_ELEMENTS). `spin` is registered in the benchmark's own registry (not
// GlobalFunctions()): a chain of dependent float64 multiply-adds, about 20 µs per element
// on the CI VM, written to the output so it cannot be dropped; `spin_x10` does ten times
// the arithmetic (N / 10 elements per pass), to show how per-element cost changes scaling.
// Every pass is checked: the same number of elements and the same checksum as the direct
// loop, or the benchmark reports an error.
//
//   BM_DirectCalls/work:W      the registered function called in a plain loop on scalars
//                              made the way range makes them: no pipeline, no threads.
//   BM_ParallelMap/threads:P   the whole pipeline with `spin`, built and drained once per
//                              iteration (thread start-up included); items_per_second is
//                              elements/s.
//   BM_ParallelMapSpeedup/threads:P/work:W
//                              direct loop, the same calls on P plain threads, parallel=1 and
//                              parallel=P back to back in each iteration (the two pipelines in
//                              alternating order), reporting elements/s of each,
//                              speedup_vs_parallel_1 (parallel=1 time / parallel=P time),
//                              threads_only_speedup (direct time / P-thread time: what the
//                              machine allows without the engine, the ceiling) and
//                              parallel_1_vs_direct (direct time / parallel=1 time: 1.0 means
//                              the engine adds nothing over calling the function).
//
// parallel=1 runs the sequential map (no threads); parallel >= 2 runs the pool. All times
// are wall-clock (UseRealTime): the consumer thread mostly waits on the workers.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/functions.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/tensor.h"
#include "engine/test_util.h"

namespace sluice::engine {
namespace {

// Dependent multiply-adds: each step needs the previous result, so neither the compiler nor
// the CPU can overlap them (no -ffast-math, so the order is fixed). 6000 steps take ~20 µs
// on the CI VM.
constexpr int kSpinSteps = 6000;

double Spin(int64_t seed, int steps) {
  double x = static_cast<double>(seed % 1000) * 1e-3 + 1.0;
  for (int i = 0; i < steps; ++i) x = x * 0.9999999 + 1e-7;
  return x;
}

// int64 scalar -> float64 scalar Spin(value, steps).
FunctionRegistry::Function SpinFunction(int steps) {
  return [steps](Element in, Element* out) -> absl::Status {
    if (in.size() != 1 || in[0].dtype() != DType::kInt64 || in[0].num_elements() != 1) {
      return absl::InvalidArgumentError("spin expects one int64 scalar");
    }
    out->push_back(Tensor::Scalar<double>(Spin(in[0].values<int64_t>()[0], steps)));
    return absl::OkStatus();
  };
}

// `work` (a benchmark argument) picks the function: 1 = spin, 10 = spin_x10.
std::string SpinName(int64_t work) { return work == 1 ? "spin" : "spin_x10"; }

const FunctionRegistry& BenchFunctions() {
  static const FunctionRegistry* registry = [] {
    auto* r = new FunctionRegistry();
    if (!r->Register("spin", SpinFunction(kSpinSteps)).ok() ||
        !r->Register("spin_x10", SpinFunction(10 * kSpinSteps)).ok()) {
      std::abort();
    }
    return r;
  }();
  return *registry;
}

// Elements per pass: N / work, so every pass does about the same amount of arithmetic.
int64_t Elements(int64_t work) {
  const char* n = std::getenv("SLUICE_BENCH_ELEMENTS");
  return (n != nullptr ? std::atoll(n) : 4096) / work;
}

struct PassResult {
  int64_t elements = 0;
  double checksum = 0;
};

// The function called directly, on inputs built the way range builds them.
PassResult DirectPass(int64_t work) {
  const FunctionRegistry::Function& fn = *BenchFunctions().Find(SpinName(work));
  const int64_t n = Elements(work);
  PassResult r;
  for (int64_t i = 0; i < n; ++i) {
    Element out;
    if (!fn(Element{Tensor::Scalar<int64_t>(i)}, &out).ok()) std::abort();
    r.checksum += out[0].values<double>()[0];
    ++r.elements;
  }
  benchmark::DoNotOptimize(r.checksum);
  return r;
}

// The same calls split over `threads` plain std::threads (element i on thread i % threads),
// no engine: the most this machine gives, the ceiling for map(parallel=threads).
int64_t ThreadsOnlyPass(int64_t work, int threads) {
  const FunctionRegistry::Function& fn = *BenchFunctions().Find(SpinName(work));
  const int64_t n = Elements(work);
  std::vector<int64_t> done(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      double checksum = 0;
      int64_t count = 0;
      for (int64_t i = t; i < n; i += threads) {
        Element out;
        if (!fn(Element{Tensor::Scalar<int64_t>(i)}, &out).ok()) std::abort();
        checksum += out[0].values<double>()[0];
        ++count;
      }
      benchmark::DoNotOptimize(checksum);
      done[t] = count;
    });
  }
  for (std::thread& t : pool) t.join();
  int64_t total = 0;
  for (int64_t d : done) total += d;
  return total;
}

absl::StatusOr<PassResult> PipelinePass(int64_t work, int parallel) {
  const std::string text = "range(" + std::to_string(Elements(work)) + ") | map(" + SpinName(work) +
                           ", parallel=" + std::to_string(parallel) + ") | batch(256)";
  absl::StatusOr<proto::PipelineDef> def = ParsePipeline(text);
  if (!def.ok()) return def.status();
  PipelineContext context;
  context.functions = &BenchFunctions();
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = BuildPipeline(*def, context);
  if (!it.ok()) return it.status();
  absl::StatusOr<std::vector<Element>> batches = testing::Drain(**it);
  if (!batches.ok()) return batches.status();
  PassResult r;
  for (const Element& batch : *batches) {
    for (double v : batch.at(0).values<double>()) {
      r.checksum += v;
      ++r.elements;
    }
  }
  benchmark::DoNotOptimize(r.checksum);
  return r;
}

// The direct loop's result, computed once per work, that every pass must reproduce (the
// same values summed in the same order, so the checksum matches exactly).
const PassResult& Expected(int64_t work) {
  static std::map<int64_t, PassResult> expected;  // Benchmarks run on one thread.
  auto it = expected.find(work);
  if (it == expected.end()) it = expected.emplace(work, DirectPass(work)).first;
  return it->second;
}

// False (and the benchmark marked as failed) when the pass failed or its result differs.
bool Check(benchmark::State& state, int64_t work, const absl::StatusOr<PassResult>& r) {
  if (!r.ok()) {
    state.SkipWithError(std::string(r.status().message()).c_str());
    return false;
  }
  if (r->elements != Expected(work).elements || r->checksum != Expected(work).checksum) {
    state.SkipWithError("the pass gave a different result from the direct loop");
    return false;
  }
  return true;
}

void BM_DirectCalls(benchmark::State& state) {
  const int64_t work = state.range(0);
  Expected(work);
  for (auto _ : state) {
    if (!Check(state, work, DirectPass(work))) break;
  }
  state.SetItemsProcessed(state.iterations() * Elements(work));
  // Wall time per call.
  state.counters["us_per_call"] = benchmark::Counter(
      static_cast<double>(Elements(work)) * 1e-6,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_ParallelMap(benchmark::State& state) {
  const int parallel = static_cast<int>(state.range(0));
  Expected(1);
  for (auto _ : state) {
    if (!Check(state, 1, PipelinePass(1, parallel))) break;
  }
  state.SetItemsProcessed(state.iterations() * Elements(1));
}

// Direct loop, P plain threads, parallel=1 and parallel=P in one iteration, so drift on the
// shared machine hits all four alike.
void BM_ParallelMapSpeedup(benchmark::State& state) {
  const int parallel = static_cast<int>(state.range(0));
  const int64_t work = state.range(1);
  Expected(work);
  using Clock = std::chrono::steady_clock;
  double direct_s = 0, threads_s = 0, serial_s = 0, parallel_s = 0;
  auto timed = [&](int p, double* seconds) {
    const auto t0 = Clock::now();
    absl::StatusOr<PassResult> r = PipelinePass(work, p);
    *seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    return Check(state, work, r);
  };
  bool flip = false;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    DirectPass(work);
    const auto t1 = Clock::now();
    if (ThreadsOnlyPass(work, parallel) != Elements(work)) {
      state.SkipWithError("the threads-only pass lost elements");
      break;
    }
    direct_s += std::chrono::duration<double>(t1 - t0).count();
    threads_s += std::chrono::duration<double>(Clock::now() - t1).count();
    const bool ok = flip ? timed(parallel, &parallel_s) && timed(1, &serial_s)
                         : timed(1, &serial_s) && timed(parallel, &parallel_s);
    if (!ok) break;
    flip = !flip;
  }
  const double elements =
      static_cast<double>(Elements(work)) * static_cast<double>(state.iterations());
  state.counters["direct_eps"] = elements / direct_s;
  state.counters["parallel_1_eps"] = elements / serial_s;
  state.counters["parallel_P_eps"] = elements / parallel_s;
  state.counters["speedup_vs_parallel_1"] = serial_s / parallel_s;
  state.counters["parallel_1_vs_direct"] = direct_s / serial_s;
  state.counters["threads_only_speedup"] = direct_s / threads_s;
}

BENCHMARK(BM_DirectCalls)
    ->ArgName("work")
    ->Arg(1)
    ->Arg(10)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ParallelMap)
    ->ArgName("threads")
    ->Arg(1)
    ->Arg(2)
    ->Arg(4)
    ->Arg(8)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_ParallelMapSpeedup)
    ->ArgNames({"threads", "work"})
    ->ArgsProduct({{2, 4, 8}, {1, 10}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace sluice::engine

BENCHMARK_MAIN();
