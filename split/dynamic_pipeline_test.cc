// End-to-end DYNAMIC sharding: engine pipelines fed by a real split provider through a
// SplitFeed adapter that stands in for the dispatcher.
#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/io/tfrecord_reader.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "split/split_provider.h"

namespace sluice::split {
namespace {

using ::sluice::engine::Element;
using ::sluice::engine::ElementIterator;
using ::sluice::engine::PipelineContext;
using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::FlatInt64s;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Like the dispatcher: one provider per job, restarted when a new repetition is first
// asked for; requests for a finished repetition get the end.
class ProviderFeed : public engine::SplitFeed {
 public:
  explicit ProviderFeed(SplitProvider* provider) : provider_(provider) {}

  std::vector<int64_t> requests;

  absl::Status GetNext(int64_t repetition, proto::Split* split, bool* end) override {
    requests.push_back(repetition);
    if (repetition < current_) {
      *end = true;
      return absl::OkStatus();
    }
    if (repetition > current_) {
      provider_->Reset();
      current_ = repetition;
    }
    return provider_->GetNext(split, end);
  }

 private:
  SplitProvider* provider_;
  int64_t current_ = 0;
};

std::unique_ptr<SplitProvider> MakeProvider(std::string_view text, int64_t k) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(*def, SplitOptions{.elements_per_split = k});
  EXPECT_TRUE(provider.ok()) << provider.status();
  return provider.ok() ? *std::move(provider) : nullptr;
}

std::unique_ptr<ElementIterator> Build(std::string_view text, engine::SplitFeed* feed,
                                       std::vector<std::string> data_roots = {}) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << def.status();
  PipelineContext context;
  context.split_feed = feed;
  context.data_roots = std::move(data_roots);
  absl::StatusOr<std::unique_ptr<ElementIterator>> it = engine::BuildPipeline(*def, context);
  EXPECT_TRUE(it.ok()) << it.status();
  return it.ok() ? *std::move(it) : nullptr;
}

std::vector<int64_t> Squares(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i * i);
  return v;
}

TEST(DynamicPipelineTest, FedPipelineYieldsExactlyTheSquares) {
  constexpr std::string_view kText = "range(0, 1000) | map(square) | batch(7)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/64);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> it = Build(kText, &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  EXPECT_EQ(batches->size(), 143u);  // ceil(1000 / 7)
  EXPECT_THAT(batches->front()[0].shape(), ElementsAre(7));
  EXPECT_THAT(batches->back()[0].shape(), ElementsAre(1000 % 7));
  EXPECT_THAT(FlatInt64s(*batches), ElementsAreArray(Squares(1000)));
  // 16 splits of 64 (the last 40), then the end: 17 requests, all for repetition 0.
  EXPECT_EQ(feed.requests.size(), 17u);
  EXPECT_THAT(std::set<int64_t>(feed.requests.begin(), feed.requests.end()), ElementsAre(0));
}

TEST(DynamicPipelineTest, RepeatAsksForEachRepetitionSeparately) {
  constexpr std::string_view kText = "range(0, 1000) | repeat(2) | map(square) | batch(7)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/256);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> it = Build(kText, &feed);
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();

  std::vector<int64_t> expected = Squares(1000);
  std::vector<int64_t> twice = expected;
  twice.insert(twice.end(), expected.begin(), expected.end());
  EXPECT_THAT(FlatInt64s(*batches), ElementsAreArray(twice));
  // Four splits and the end per repetition.
  EXPECT_THAT(feed.requests, ElementsAre(0, 0, 0, 0, 0, 1, 1, 1, 1, 1));
}

TEST(DynamicPipelineTest, WorkersSharingAProviderSplitThePassBetweenThem) {
  constexpr std::string_view kText = "range(0, 1000) | map(square)";
  std::unique_ptr<SplitProvider> provider = MakeProvider(kText, /*k=*/10);
  ProviderFeed feed(provider.get());
  std::unique_ptr<ElementIterator> a = Build(kText, &feed);
  std::unique_ptr<ElementIterator> b = Build(kText, &feed);
  std::vector<int64_t> got_a, got_b;
  bool a_done = false, b_done = false;
  // Worker a is twice as fast as worker b.
  while (!a_done || !b_done) {
    for (int step = 0; step < 3; ++step) {
      ElementIterator* it = step < 2 ? a.get() : b.get();
      bool& done = step < 2 ? a_done : b_done;
      if (done) continue;
      Element e;
      ASSERT_TRUE(it->GetNext(&e, &done).ok());
      if (!done) (step < 2 ? got_a : got_b).push_back(e[0].values<int64_t>()[0]);
    }
  }
  EXPECT_GT(got_a.size(), got_b.size());
  EXPECT_GT(got_b.size(), 0u);
  std::vector<int64_t> all = got_a;
  all.insert(all.end(), got_b.begin(), got_b.end());
  std::sort(all.begin(), all.end());
  EXPECT_THAT(all, ElementsAreArray(Squares(1000)));
}

// Runs `workers` pipelines over one feed, round robin, until all end; returns every
// element's string component 0 (batched or not) per worker.
std::vector<std::vector<std::string>> RunWorkers(
    std::vector<std::unique_ptr<ElementIterator>>& its) {
  std::vector<std::vector<std::string>> got(its.size());
  std::vector<bool> done(its.size(), false);
  for (size_t live = its.size(); live > 0;) {
    for (size_t w = 0; w < its.size(); ++w) {
      if (done[w]) continue;
      Element e;
      bool end = false;
      absl::Status s = its[w]->GetNext(&e, &end);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok() || end) {
        done[w] = true;
        --live;
        continue;
      }
      for (int64_t i = 0; i < e[0].num_elements(); ++i) {
        got[w].emplace_back(e[0].string_value(i));
      }
    }
  }
  return got;
}

TEST(DynamicPipelineTest, ThreeWorkersOverListFilesReadEveryRecordExactlyOnce) {
  TempDir dir;
  std::vector<std::string> expected;
  for (int f = 0; f < 7; ++f) {
    std::string bytes;
    for (int r = 0; r < 10 + 13 * f; ++r) {
      const std::string record = absl::StrCat("file", f, "-record", r);
      engine::AppendTfRecord(record, &bytes);
      expected.push_back(record);
    }
    // Mixed compression: auto-detection handles each file.
    const bool gzip = f % 2 == 1;
    WriteFile(absl::StrCat(dir.path(), "/part-", f, gzip ? ".tfrecord.gz" : ".tfrecord"),
              gzip ? engine::testing::Compress(bytes, true) : bytes);
  }
  WriteFile(dir.path() + "/README", "not matched");
  constexpr std::string_view kText =
      "list_files('part-*') | interleave(tfrecord(), cycle_length=2, block_length=3) | batch(4)";
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(kText);
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(*def, SplitOptions{.files_per_split = 1, .data_roots = {dir.path()}});
  ASSERT_TRUE(provider.ok()) << provider.status();
  ProviderFeed feed(provider->get());
  std::vector<std::unique_ptr<ElementIterator>> workers;
  for (int w = 0; w < 3; ++w) workers.push_back(Build(kText, &feed, {dir.path()}));
  std::vector<std::vector<std::string>> got = RunWorkers(workers);
  std::vector<std::string> all;
  for (const auto& g : got) {
    EXPECT_FALSE(g.empty());  // Every worker took at least one file.
    all.insert(all.end(), g.begin(), g.end());
  }
  std::sort(all.begin(), all.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(all, expected);
  // 7 files, one per split, then the end for each of the 3 workers.
  EXPECT_EQ(feed.requests.size(), 7u + 3u);
}

TEST(DynamicPipelineTest, ReadersWithFileListsAndSlicesSplitToo) {
  TempDir dir;
  std::vector<std::string> files_arg;
  for (int f = 0; f < 4; ++f) {
    std::string bytes;
    for (int r = 0; r < 5; ++r) engine::AppendTfRecord(absl::StrCat(f, ":", r), &bytes);
    WriteFile(absl::StrCat(dir.path(), "/", f, ".tfrecord"), bytes);
    files_arg.push_back(absl::StrCat("'", f, ".tfrecord'"));
  }
  const std::string text = absl::StrCat("tfrecord(files=[", absl::StrJoin(files_arg, ", "), "])");
  std::unique_ptr<SplitProvider> provider = MakeProvider(text, /*k=*/1);
  ProviderFeed feed(provider.get());
  std::vector<std::unique_ptr<ElementIterator>> workers;
  for (int w = 0; w < 3; ++w) workers.push_back(Build(text, &feed, {dir.path()}));
  std::vector<std::string> all;
  for (const auto& g : RunWorkers(workers)) all.insert(all.end(), g.begin(), g.end());
  EXPECT_EQ(all.size(), 20u);
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), 20u);

  constexpr std::string_view kSlices = "from_tensor_slices(['a', 'b', 'c', 'd', 'e'])";
  std::unique_ptr<SplitProvider> slices = MakeProvider(kSlices, /*k=*/2);
  ProviderFeed slice_feed(slices.get());
  std::vector<std::unique_ptr<ElementIterator>> slice_workers;
  for (int w = 0; w < 2; ++w) slice_workers.push_back(Build(kSlices, &slice_feed));
  std::vector<std::string> letters;
  for (const auto& g : RunWorkers(slice_workers)) letters.insert(letters.end(), g.begin(), g.end());
  std::sort(letters.begin(), letters.end());
  EXPECT_THAT(letters, ElementsAre("a", "b", "c", "d", "e"));
}

TEST(DynamicPipelineTest, TaxiShardsSplitByFileTotalTheDocumentedCount) {
  std::optional<std::string> data = engine::testing::TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  constexpr std::string_view kText =
      "list_files('tfrecord/tfx/tfx/components/testdata/csv_example_gen/Split-eval/*.gz') | "
      "interleave(tfrecord(compression='gzip'), cycle_length=3, parallel=true) | "
      "parse_example(spec='fare:float:scalar') | batch(64)";
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(kText);
  ASSERT_TRUE(def.ok()) << def.status();
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(*def, SplitOptions{.data_roots = {*data}});
  ASSERT_TRUE(provider.ok()) << provider.status();
  ProviderFeed feed(provider->get());
  std::vector<std::unique_ptr<ElementIterator>> workers;
  for (int w = 0; w < 3; ++w) workers.push_back(Build(kText, &feed, {*data}));
  int64_t records = 0;
  std::vector<bool> done(3, false);
  for (int live = 3; live > 0;) {
    for (int w = 0; w < 3; ++w) {
      if (done[w]) continue;
      Element e;
      bool end = false;
      ASSERT_TRUE(workers[w]->GetNext(&e, &end).ok());
      if (end) {
        done[w] = true;
        --live;
      } else {
        records += e[0].shape()[0];
      }
    }
  }
  EXPECT_EQ(records, 5091);  // PROVENANCE.md
}

TEST(DynamicPipelineTest, UnsplittablePipelinesNameTheOp) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline("range(10) | cache()");
  ASSERT_TRUE(def.ok());
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider = CreateSplitProvider(*def, {});
  EXPECT_THAT(provider.status().message(), ::testing::HasSubstr("stage 1 (cache)"));
  ProviderFeed feed(nullptr);
  PipelineContext context;
  context.split_feed = &feed;
  EXPECT_THAT(engine::BuildPipeline(*def, context).status().message(),
              ::testing::HasSubstr("cache cannot run under DYNAMIC sharding"));
}

}  // namespace
}  // namespace sluice::split
