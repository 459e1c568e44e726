#include "split/split_provider.h"

#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/ops/range_op.h"
#include "engine/pipeline_text.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::split {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

proto::PipelineDef MustParse(std::string_view text) {
  absl::StatusOr<proto::PipelineDef> def = engine::ParsePipeline(text);
  EXPECT_TRUE(def.ok()) << text << ": " << def.status();
  return def.ok() ? *def : proto::PipelineDef();
}

std::vector<proto::Split> AllSplits(SplitProvider& provider) {
  std::vector<proto::Split> out;
  while (true) {
    proto::Split s;
    bool end = false;
    absl::Status status = provider.GetNext(&s, &end);
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || end) break;
    out.push_back(s);
  }
  return out;
}

// A restarted dispatcher seeks to a journaled cursor: the rest of the pass is what an
// uninterrupted provider would have handed out, for index and file sources alike.
TEST(SplitProviderTest, SeekContinuesThePassWhereTheCursorSays) {
  for (const char* text : {"range(1003) | batch(2)", "tfrecord(files=['a', 'b', 'c', 'd', 'e'])"}) {
    proto::PipelineDef def = MustParse(text);
    SplitOptions options{.elements_per_split = 100, .files_per_split = 2};
    std::unique_ptr<SplitProvider> whole = *CreateSplitProvider(def, options);
    std::vector<proto::Split> all = AllSplits(*whole);
    EXPECT_EQ(whole->next_split_index(), static_cast<int64_t>(all.size())) << text;
    for (size_t cut = 0; cut <= all.size() + 1; ++cut) {
      std::unique_ptr<SplitProvider> resumed = *CreateSplitProvider(def, options);
      ASSERT_TRUE(resumed->Seek(static_cast<int64_t>(cut)).ok());
      EXPECT_EQ(resumed->next_split_index(), static_cast<int64_t>(std::min(cut, all.size())));
      std::vector<proto::Split> rest = AllSplits(*resumed);
      ASSERT_EQ(rest.size(), all.size() - std::min(cut, all.size())) << text << " cut " << cut;
      for (size_t i = 0; i < rest.size(); ++i) {
        EXPECT_EQ(rest[i].SerializeAsString(), all[cut + i].SerializeAsString());
      }
    }
    EXPECT_EQ(whole->Seek(-1).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SplitProviderTest, SplitsCoverEveryIndexExactlyOnce) {
  struct Case {
    int64_t start, stop, step, k;
  };
  for (const Case& c :
       {Case{0, 10, 1, 3}, Case{0, 10, 1, 10}, Case{0, 10, 1, 11}, Case{0, 10, 1, 1},
        Case{5, -5, -1, 4}, Case{100, 0, -7, 2}, Case{-3, 20, 4, 256}, Case{0, 0, 1, 3},
        Case{5, 10, -1, 3}, Case{7, 1000, 3, 17}}) {
    proto::PipelineDef def =
        MustParse(absl::StrCat("range(", c.start, ", ", c.stop, ", ", c.step, ") | batch(2)"));
    absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
        CreateSplitProvider(def, SplitOptions{.elements_per_split = c.k});
    ASSERT_TRUE(provider.ok()) << provider.status();
    const int64_t n = *engine::RangeLength(def.stages(0).range());

    std::vector<int> seen(n, 0);
    std::vector<proto::Split> splits = AllSplits(**provider);
    for (size_t i = 0; i < splits.size(); ++i) {
      const proto::Split& s = splits[i];
      ASSERT_LT(s.begin(), s.end());
      ASSERT_GE(s.begin(), 0);
      ASSERT_LE(s.end(), n);
      // Full chunks except possibly the last.
      if (i + 1 < splits.size()) {
        EXPECT_EQ(s.end() - s.begin(), c.k);
      }
      EXPECT_LE(s.end() - s.begin(), c.k);
      for (int64_t j = s.begin(); j < s.end(); ++j) ++seen[j];
    }
    EXPECT_EQ(splits.size(), static_cast<size_t>((n + c.k - 1) / c.k));
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(seen[j], 1) << "index " << j;
  }
}

TEST(SplitProviderTest, EndIsStickyAndResetStartsOver) {
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(MustParse("range(5)"), SplitOptions{.elements_per_split = 2});
  ASSERT_TRUE(provider.ok());
  std::vector<proto::Split> first = AllSplits(**provider);
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[2].begin(), 4);
  EXPECT_EQ(first[2].end(), 5);

  proto::Split untouched;
  untouched.set_begin(-7);
  bool end = false;
  ASSERT_TRUE((*provider)->GetNext(&untouched, &end).ok());
  EXPECT_TRUE(end);
  EXPECT_EQ(untouched.begin(), -7);

  (*provider)->Reset();
  std::vector<proto::Split> second = AllSplits(**provider);
  ASSERT_EQ(second.size(), 3u);
  EXPECT_EQ(second[0].begin(), 0);
  EXPECT_EQ(second[0].end(), 2);
}

TEST(SplitProviderTest, DefaultChunkIs256Elements) {
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(MustParse("range(1000)"), SplitOptions{});
  ASSERT_TRUE(provider.ok());
  std::vector<int64_t> ends;
  for (const proto::Split& s : AllSplits(**provider)) ends.push_back(s.end());
  EXPECT_THAT(ends, ElementsAre(256, 512, 768, 1000));
}

TEST(SplitProviderTest, HugeRangesDoNotOverflow) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider = CreateSplitProvider(
      MustParse(absl::StrCat("range(0, ", max, ")")), SplitOptions{.elements_per_split = max - 1});
  ASSERT_TRUE(provider.ok());
  std::vector<proto::Split> splits = AllSplits(**provider);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[1].begin(), max - 1);
  EXPECT_EQ(splits[1].end(), max);
}

TEST(SplitProviderTest, RejectsBadOptionsAndPipelines) {
  absl::StatusOr<std::unique_ptr<SplitProvider>> zero =
      CreateSplitProvider(MustParse("range(5)"), SplitOptions{.elements_per_split = 0});
  EXPECT_EQ(zero.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.status().message(),
            "elements_per_split and files_per_split must be > 0, got 0 and 1");

  absl::StatusOr<std::unique_ptr<SplitProvider>> no_source =
      CreateSplitProvider(MustParse("map(square)"), SplitOptions{});
  EXPECT_EQ(no_source.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_source.status().message(), HasSubstr("the first stage must be a source"));

  absl::StatusOr<std::unique_ptr<SplitProvider>> bad_step =
      CreateSplitProvider(MustParse("range(0, 5, 0)"), SplitOptions{});
  EXPECT_EQ(bad_step.status().message(), "stage 0 (range): step must be != 0, got 0");
}

TEST(SplitProviderTest, FromTensorSlicesSplitsByElementAndReadersByFile) {
  absl::StatusOr<std::unique_ptr<SplitProvider>> slices = CreateSplitProvider(
      MustParse("from_tensor_slices([1, 2, 3, 4, 5])"), SplitOptions{.elements_per_split = 2});
  ASSERT_TRUE(slices.ok()) << slices.status();
  std::vector<int64_t> ends;
  for (const proto::Split& s : AllSplits(**slices)) ends.push_back(s.end());
  EXPECT_THAT(ends, ElementsAre(2, 4, 5));

  absl::StatusOr<std::unique_ptr<SplitProvider>> files =
      CreateSplitProvider(MustParse("tfrecord(files=['a', 'b', 'c']) | batch(2)"),
                          SplitOptions{.elements_per_split = 100, .files_per_split = 2});
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<proto::Split> splits = AllSplits(**files);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].end(), 2);
  EXPECT_EQ(splits[1].begin(), 2);
  EXPECT_EQ(splits[1].end(), 3);
  EXPECT_EQ(splits[0].files_size(), 0);
}

TEST(SplitProviderTest, ListFilesSplitsCarryTheFileNames) {
  engine::testing::TempDir dir;
  for (const char* f : {"b.gz", "a.gz", "c.gz", "skip.txt"}) {
    engine::testing::WriteFile(dir.path() + "/" + f, "x");
  }
  SplitOptions options{.files_per_split = 2, .data_roots = {dir.path()}};
  absl::StatusOr<std::unique_ptr<SplitProvider>> provider =
      CreateSplitProvider(MustParse("list_files('*.gz')"), options);
  ASSERT_TRUE(provider.ok()) << provider.status();
  std::vector<proto::Split> splits = AllSplits(**provider);
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_THAT(splits[0].files(), ElementsAre("a.gz", "b.gz"));
  EXPECT_EQ(splits[0].begin(), 0);
  EXPECT_EQ(splits[0].end(), 2);
  EXPECT_THAT(splits[1].files(), ElementsAre("c.gz"));

  // Seeded shuffles depend on the repetition, like a worker's list_files.
  auto order = [&](int64_t repetition) {
    SplitOptions o{.files_per_split = 3, .data_roots = {dir.path()}, .repetition = repetition};
    absl::StatusOr<std::unique_ptr<SplitProvider>> p =
        CreateSplitProvider(MustParse("list_files('*.gz', shuffle=true, seed=11)"), o);
    EXPECT_TRUE(p.ok()) << p.status();
    std::vector<proto::Split> s = AllSplits(**p);
    return std::vector<std::string>(s[0].files().begin(), s[0].files().end());
  };
  EXPECT_EQ(order(0), order(0));
  EXPECT_THAT(order(1), ::testing::UnorderedElementsAre("a.gz", "b.gz", "c.gz"));

  absl::StatusOr<std::unique_ptr<SplitProvider>> no_roots =
      CreateSplitProvider(MustParse("list_files('*.gz')"), SplitOptions{});
  EXPECT_EQ(no_roots.status().code(), absl::StatusCode::kPermissionDenied);
}

// A provider given a pass's list (SplitProvider::pass_files) hands out that pass's splits
// whatever the file system holds now; without it, a file added in the middle shifts every
// index after it (a replayed lease then named other files than the worker had read).
TEST(SplitProviderTest, APassesListMakesItsSplitsAfterTheFilesChanged) {
  engine::testing::TempDir dir;
  for (const char* f : {"a.gz", "c.gz", "e.gz"})
    engine::testing::WriteFile(dir.path() + "/" + f, "x");
  SplitOptions options{.data_roots = {dir.path()}};
  const proto::PipelineDef def = MustParse("list_files('*.gz', shuffle=true)");
  absl::StatusOr<std::unique_ptr<SplitProvider>> first = CreateSplitProvider(def, options);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::vector<proto::Split> handed_out = AllSplits(**first);
  ASSERT_EQ(handed_out.size(), 3u);
  std::shared_ptr<const std::vector<std::string>> listed = (*first)->pass_files();
  ASSERT_NE(listed, nullptr);
  EXPECT_THAT(*listed, ::testing::UnorderedElementsAre("a.gz", "c.gz", "e.gz"));

  engine::testing::WriteFile(dir.path() + "/b.gz", "x");
  std::filesystem::remove(dir.path() + "/e.gz");
  options.pass_files = listed;
  absl::StatusOr<std::unique_ptr<SplitProvider>> again = CreateSplitProvider(def, options);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Seek(1).ok());
  std::vector<proto::Split> rest = AllSplits(**again);
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].SerializeAsString(), handed_out[1].SerializeAsString());
  EXPECT_EQ(rest[1].SerializeAsString(), handed_out[2].SerializeAsString());

  // Other sources have no list.
  absl::StatusOr<std::unique_ptr<SplitProvider>> range =
      CreateSplitProvider(MustParse("range(10)"), SplitOptions{});
  ASSERT_TRUE(range.ok());
  EXPECT_EQ((*range)->pass_files(), nullptr);
}

}  // namespace
}  // namespace sluice::split
