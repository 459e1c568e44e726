// Google Benchmark microbenchmarks of the data path's hot pieces, each beside the memcpy of
// the same bytes so that results read as ratios on any machine:
//   slab acquire/release, batch assembly (EncodeBatch), batching scalar elements in the
//   engine (RangeBatch, RangeMapBatch, RangeMapBatchDynamic), reading text lines
//   (TextLineBatch, TextLineBatchDynamic), batch header parse (BatchView),
//   the GetElement response header encode/decode, and parse_example on one record beside
//   protobuf's decode of it (ParseExample, ExampleProtobufDecode).
//
//   build/perf/sluice_micro_benchmark --benchmark_filter=Encode
#include <benchmark/benchmark.h>

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control/service.pb.h"
#include "engine/batch_layout.h"
#include "engine/example.pb.h"
#include "engine/example_parser.h"
#include "engine/example_spec.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "transport/slab_pool.h"

namespace sluice {
namespace {

class NullHandler : public transport::MessageHandler {
  transport::PayloadDestination ChoosePayloadDestination(transport::ConnectionId, absl::string_view,
                                                         size_t) override {
    return {};
  }
  void OnMessage(transport::ConnectionId, absl::string_view, transport::InboundPayload) override {}
  void OnDisconnect(transport::ConnectionId, absl::Status) override {}
};

engine::Element MakeBatch(size_t bytes) {
  std::vector<int64_t> values(bytes / sizeof(int64_t));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<int64_t>(i);
  return {engine::Tensor::FromVector<int64_t>({static_cast<int64_t>(values.size())}, values)};
}

void BM_SlabAcquireRelease(benchmark::State& state) {
  NullHandler handler;
  auto transport = transport::CreateTransport("ucx", {}, &handler);
  auto pool = transport::SlabPool::Create(**transport, 1 << 20, 16);
  for (auto _ : state) {
    std::optional<transport::Slab> slab = (*pool)->TryAcquire();
    benchmark::DoNotOptimize(slab->data());
  }
}
BENCHMARK(BM_SlabAcquireRelease);

void BM_EncodeBatch(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  engine::Element batch = MakeBatch(bytes);
  std::vector<std::byte> slab(engine::EncodedBatchSize(batch) + 64);
  for (auto _ : state) {
    auto written = engine::EncodeBatch(batch, slab);
    benchmark::DoNotOptimize(*written);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_EncodeBatch)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);

// DYNAMIC mode's split feed at its cheapest: tracked splits of 256 elements over a range
// that never ends, handed out in memory (the worker's feed leases them from the dispatcher).
class EndlessSplitFeed final : public engine::SplitFeed {
 public:
  absl::Status GetNext(int64_t, proto::Split* split, bool* end_of_splits) override {
    split->Clear();
    split->set_begin(next_);
    split->set_end(next_ + 256);
    split->set_key(++key_);
    next_ = (next_ + 256) % (int64_t{1} << 40);
    *end_of_splits = false;
    return absl::OkStatus();
  }

 private:
  int64_t next_ = 0;
  int64_t key_ = 0;
};

// One element of `pipeline` per iteration; skips the benchmark if it ends or fails.
void PullEach(benchmark::State& state, engine::ElementIterator& pipeline) {
  engine::Element element;
  bool end = false;
  for (auto _ : state) {
    if (!pipeline.GetNext(&element, &end).ok() || end) {
      state.SkipWithError("the pipeline ended or failed");
      return;
    }
    benchmark::DoNotOptimize(element);
  }
}

// Batches of state.range(0) bytes stacked from int64 scalars by the engine: this measures
// the engine's per-element cost (one source element, one stacked row), against BM_Memcpy and
// BM_EncodeBatch of the same bytes. `stages` goes between the source and the batch; with
// `dynamic`, the source is fed DYNAMIC splits, so every element also carries its provenance
// (engine/provenance.h), as on a worker.
void RunScalarPipeline(benchmark::State& state, const char* stages, bool dynamic) {
  const int64_t elements = state.range(0) / 8;
  EndlessSplitFeed feed;
  engine::PipelineContext context;
  if (dynamic) context.split_feed = &feed;
  auto def = engine::ParsePipeline(
      dynamic
          ? absl::StrCat("range(", int64_t{1} << 40, ")", stages, " | batch(", elements, ")")
          : absl::StrCat("range(", elements, ")", stages, " | batch(", elements, ") | repeat()"));
  auto pipeline = engine::BuildPipeline(*def, context);
  if (!pipeline.ok()) {
    state.SkipWithError(pipeline.status().ToString().c_str());
    return;
  }
  PullEach(state, **pipeline);
  state.SetBytesProcessed(state.iterations() * elements * 8);
  state.SetItemsProcessed(state.iterations() * elements);
}

// `range(n) | batch(n)`.
void BM_RangeBatch(benchmark::State& state) { RunScalarPipeline(state, "", false); }
BENCHMARK(BM_RangeBatch)->Arg(64 << 10)->Arg(1 << 20);

// `range(n) | map(square) | batch(n)`: the main job's pipeline (tools/run_local.sh).
void BM_RangeMapBatch(benchmark::State& state) {
  RunScalarPipeline(state, " | map(square)", false);
}
BENCHMARK(BM_RangeMapBatch)->Arg(64 << 10)->Arg(1 << 20);

// The main job as a worker runs it, in DYNAMIC mode.
void BM_RangeMapBatchDynamic(benchmark::State& state) {
  RunScalarPipeline(state, " | map(square)", true);
}
BENCHMARK(BM_RangeMapBatchDynamic)->Arg(8 << 10)->Arg(64 << 10);

// `range(n) | filter(is_even) | batch(n)`, plain and as a worker runs it: in DYNAMIC mode
// each element kept also answers for the one dropped before it (Provenance::skipped), so
// the ratio of the two is what provenance and that credit cost a filter.
void BM_RangeFilterBatch(benchmark::State& state) {
  RunScalarPipeline(state, " | filter(is_even)", false);
}
BENCHMARK(BM_RangeFilterBatch)->Arg(64 << 10);
void BM_RangeFilterBatchDynamic(benchmark::State& state) {
  RunScalarPipeline(state, " | filter(is_even)", true);
}
BENCHMARK(BM_RangeFilterBatchDynamic)->Arg(64 << 10);

// One-file DYNAMIC splits of a text file, endlessly (a worker's feed over `files=[...]`).
class EndlessFileSplitFeed final : public engine::SplitFeed {
 public:
  absl::Status GetNext(int64_t, proto::Split* split, bool* end_of_splits) override {
    split->Clear();
    split->set_begin(0);
    split->set_end(1);
    split->set_key(++key_);
    *end_of_splits = false;
    return absl::OkStatus();
  }

 private:
  int64_t key_ = 0;
};

// `text_line(files=[f]) | batch(256)` over a file of 4096 lines of 32 bytes: a reader's
// per-record cost. In DYNAMIC mode each record also carries its provenance, and the reader
// reads one record ahead so that a file's last record carries the rest of its range
// (engine/look_ahead.h); the ratio of the two is what that costs.
void RunTextLines(benchmark::State& state, bool dynamic) {
  char dir_template[] = "/tmp/sluice-bench-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string path = absl::StrCat(dir, "/lines.txt");
  {
    std::ofstream out(path);
    for (int i = 0; i < 4096; ++i) out << absl::StrFormat("line %026d\n", i);
  }
  EndlessFileSplitFeed feed;
  engine::PipelineContext context;
  context.data_roots = {dir};
  if (dynamic) context.split_feed = &feed;
  auto def = engine::ParsePipeline(absl::StrCat("text_line(files=['", path, "'])",
                                                dynamic ? "" : " | repeat()", " | batch(256)"));
  auto pipeline = engine::BuildPipeline(*def, context);
  if (pipeline.ok()) {
    PullEach(state, **pipeline);
    state.SetItemsProcessed(state.iterations() * 256);
    pipeline->reset();
  } else {
    state.SkipWithError(pipeline.status().ToString().c_str());
  }
  std::remove(path.c_str());
  rmdir(dir);
}
void BM_TextLineBatch(benchmark::State& state) { RunTextLines(state, false); }
BENCHMARK(BM_TextLineBatch);
void BM_TextLineBatchDynamic(benchmark::State& state) { RunTextLines(state, true); }
BENCHMARK(BM_TextLineBatchDynamic);

// The baseline for BM_EncodeBatch: the same bytes copied once.
void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<std::byte> from(bytes, std::byte{1});
  std::vector<std::byte> to(bytes);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Memcpy)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);

void BM_BatchViewParse(benchmark::State& state) {
  engine::Element batch = MakeBatch(1 << 20);
  batch.push_back(engine::Tensor::Scalar<float>(1.5f));
  std::vector<std::byte> slab(engine::EncodedBatchSize(batch));
  (void)engine::EncodeBatch(batch, slab);
  for (auto _ : state) {
    auto view = engine::BatchView::Parse(slab);
    benchmark::DoNotOptimize(view->num_tensors());
  }
}
BENCHMARK(BM_BatchViewParse);

void BM_GetElementHeaderRoundTrip(benchmark::State& state) {
  proto::GetElementResponse response;
  response.set_batch_bytes(1 << 20);
  response.set_batch_index(123456);
  proto::GetElementResponse parsed;
  std::string bytes;
  for (auto _ : state) {
    bytes.clear();
    response.SerializeToString(&bytes);
    parsed.ParseFromString(bytes);
    benchmark::DoNotOptimize(parsed.batch_bytes());
  }
}
BENCHMARK(BM_GetElementHeaderRoundTrip);

// A tf.train.Example as a ranking or text model's input might hold: a label, id and weight
// lists, a string; and as many features again that the spec does not ask for.
std::string TypicalExample() {
  example::Example ex;
  auto& map = *ex.mutable_features()->mutable_feature();
  for (const char* prefix : {"", "unused_"}) {
    map[absl::StrCat(prefix, "label")].mutable_int64_list()->add_value(1);
    for (int i = 0; i < 20; ++i) {
      map[absl::StrCat(prefix, "ids")].mutable_int64_list()->add_value(1000003 * i);
      map[absl::StrCat(prefix, "weights")].mutable_float_list()->add_value(0.25f * i);
    }
    map[absl::StrCat(prefix, "text")].mutable_bytes_list()->add_value(std::string(64, 't'));
  }
  return ex.SerializeAsString();
}

// parse_example's whole work on one record: finding the spec's features, decoding them,
// building the tensors.
void BM_ParseExample(benchmark::State& state) {
  const std::string record = TypicalExample();
  engine::ExampleParser parser(
      *engine::ParseFeatureSpecs("label:int64:scalar, ids:int64:var, weights:float:var, "
                                 "text:bytes:scalar"));
  engine::Element out;
  for (auto _ : state) {
    if (!parser.Parse(record, 0, &out).ok()) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * record.size()));
}
BENCHMARK(BM_ParseExample);

// The baseline for BM_ParseExample: protobuf decoding the same record whole (what the
// parser did before it built a tensor).
void BM_ExampleProtobufDecode(benchmark::State& state) {
  const std::string record = TypicalExample();
  example::Example ex;
  for (auto _ : state) {
    if (!ex.ParseFromString(record)) state.SkipWithError("parse failed");
    benchmark::DoNotOptimize(ex.features().feature_size());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * record.size()));
}
BENCHMARK(BM_ExampleProtobufDecode);

}  // namespace
}  // namespace sluice

BENCHMARK_MAIN();
