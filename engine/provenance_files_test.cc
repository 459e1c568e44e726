// Element provenance through DYNAMIC file pipelines (engine/provenance.h): list_files,
// readers and interleave tag what they produce and drop delivered elements. The TFRecord
// tests read the shared test data and skip without it.
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/io/data_roots.h"
#include "engine/iterator.h"
#include "engine/provenance.h"
#include "engine/provenance_test_util.h"
#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::BuildFed;
using ::sluice::engine::testing::Drain;
using ::sluice::engine::testing::DrainText;
using ::sluice::engine::testing::FakeFeed;
using ::sluice::engine::testing::Id;
using ::sluice::engine::testing::Ids;
using ::sluice::engine::testing::MakeSplit;
using ::sluice::engine::testing::OrdinalRangeIs;
using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::TestDataDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;

constexpr char kTaxiPattern[] =
    "tfrecord/tfx/tfx/components/testdata/csv_example_gen/Split-eval/*.gz";

int64_t Nested(int64_t outer, int64_t inner) { return *NestedOrdinal(outer, inner); }

// The taxi shards (relative to the data root) and each one's records, read without splits.
struct TaxiFiles {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> records;
};

TaxiFiles ReadTaxiFiles(const std::string& root) {
  TaxiFiles taxi;
  absl::StatusOr<std::vector<std::string>> names =
      GlobDataFiles(kTaxiPattern, std::vector<std::string>{root});
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return taxi;
  taxi.names = *names;
  PipelineContext context;
  context.data_roots = {root};
  for (const std::string& name : taxi.names) {
    absl::StatusOr<std::vector<Element>> records =
        DrainText(absl::StrCat("tfrecord(files=['", name, "'], compression='gzip')"), context);
    EXPECT_TRUE(records.ok()) << records.status();
    taxi.records.push_back(records.ok() ? testing::ScalarStrings(*records)
                                        : std::vector<std::string>{});
  }
  return taxi;
}

// Checks each element has one id, naming the record it holds (record `inner` of the file
// at `outer` within split `key`, which starts at file split_begin[key]); returns the ids.
std::set<Id> CheckRecordIds(const std::vector<Element>& elements, const TaxiFiles& taxi,
                            const std::map<int64_t, int64_t>& split_begin) {
  std::set<Id> ids;
  for (const Element& e : elements) {
    std::vector<Id> one = Ids(e);
    EXPECT_EQ(one.size(), 1u);
    if (one.size() != 1) continue;
    EXPECT_TRUE(ids.insert(one[0]).second) << "duplicate " << one[0].first << ":" << one[0].second;
    const size_t file = static_cast<size_t>(split_begin.at(one[0].first) + (one[0].second >> 32));
    const size_t record = static_cast<size_t>(one[0].second & 0xffffffff);
    EXPECT_EQ(e[0].string_value(0), taxi.records.at(file).at(record));
  }
  return ids;
}

TEST(ProvenancePipelineTest, ListFilesInterleaveDropsDeliveredRecords) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  TaxiFiles taxi = ReadTaxiFiles(*data);
  ASSERT_EQ(taxi.names.size(), 12u);
  // Four splits of three files, keys 11..14. Split 12 was re-issued: records [0, 3) of its
  // first file (file 3; ordinals 0..2, which list_files also gives its file names: it must
  // not drop them), [0, 100) and [200, 250) of its second (file 4), and all of its third
  // (file 5) were delivered.
  std::vector<proto::Split> splits;
  std::map<int64_t, int64_t> split_begin;
  for (int64_t k = 0; k < 4; ++k) {
    proto::Split split = MakeSplit(11 + k, 3 * k, 3 * k + 3);
    for (int64_t f = 3 * k; f < 3 * k + 3; ++f) split.add_files(taxi.names[f]);
    split_begin[11 + k] = 3 * k;
    splits.push_back(std::move(split));
  }
  for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{Nested(0, 0), Nested(0, 3)},
                                                              {Nested(1, 0), Nested(1, 100)},
                                                              {Nested(1, 200), Nested(1, 250)},
                                                              {Nested(2, 0), Nested(3, 0)}}) {
    proto::OrdinalRange* r = splits[1].add_delivered();
    r->set_begin(b);
    r->set_end(e);
  }
  FakeFeed feed(splits);
  std::unique_ptr<ElementIterator> it = BuildFed(
      absl::StrCat("list_files('", kTaxiPattern,
                   "') | interleave(tfrecord(compression='gzip'), cycle_length=4, parallel=true) | "
                   "map(identity, parallel=2) | prefetch(8)"),
      &feed, {*data});
  absl::StatusOr<std::vector<Element>> records = Drain(*it);
  ASSERT_TRUE(records.ok()) << records.status();
  const int64_t dropped = 3 + 150 + static_cast<int64_t>(taxi.records[5].size());
  EXPECT_EQ(static_cast<int64_t>(records->size()), 5091 - dropped);
  std::set<Id> ids = CheckRecordIds(*records, taxi, split_begin);
  EXPECT_EQ(ids.size(), records->size());
  const DeliveredSet delivered = DeliveredSet::FromSplit(splits[1]);
  int64_t file4 = 0;
  for (const Id& id : ids) {
    if (id.first == 12) {
      EXPECT_FALSE(delivered.Contains(id.second)) << id.second;
    }
    if (id.first == 12 && (id.second >> 32) == 1) ++file4;
  }
  EXPECT_EQ(file4, static_cast<int64_t>(taxi.records[4].size()) - 150);
}

TEST(ProvenancePipelineTest, ReaderWithFilesDropsDeliveredRecords) {
  std::optional<std::string> data = TestDataDir();
  if (!data) GTEST_SKIP() << "shared test data not found (set SLUICE_TESTDATA)";
  TaxiFiles taxi = ReadTaxiFiles(*data);
  ASSERT_EQ(taxi.names.size(), 12u);
  std::string files;
  for (int i = 0; i < 4; ++i) absl::StrAppend(&files, i > 0 ? ", " : "", "'", taxi.names[i], "'");
  // Splits of two files, keys 21 and 22; 22 re-issued with records [5, 10) of its first file
  // (file 2) and all of its second (file 3) delivered.
  const std::vector<proto::Split> splits = {
      MakeSplit(21, 0, 2),
      MakeSplit(22, 2, 4, {{Nested(0, 5), Nested(0, 10)}, {Nested(1, 0), Nested(2, 0)}})};
  const std::string reader = absl::StrCat("tfrecord(files=[", files, "], compression='gzip')");
  FakeFeed feed(splits);
  std::unique_ptr<ElementIterator> it =
      BuildFed(absl::StrCat(reader, " | batch(64) | unbatch()"), &feed, {*data});
  absl::StatusOr<std::vector<Element>> records = Drain(*it);
  ASSERT_TRUE(records.ok()) << records.status();
  std::set<Id> ids = CheckRecordIds(*records, taxi, {{21, 0}, {22, 2}});
  EXPECT_EQ(ids.size(), records->size());
  EXPECT_EQ(records->size(),
            taxi.records[0].size() + taxi.records[1].size() + taxi.records[2].size() - 5);
  EXPECT_FALSE(ids.contains(Id{22, 5}));
  EXPECT_TRUE(ids.contains(Id{22, 10}));

  // parse_example keeps each record's provenance on its parsed element.
  FakeFeed again(splits);
  it = BuildFed(absl::StrCat(reader, " | parse_example(spec='fare:float:scalar', parallel=2)"),
                &again, {*data});
  absl::StatusOr<std::vector<Element>> parsed = Drain(*it);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::set<Id> parsed_ids;
  for (const Element& e : *parsed) {
    std::vector<Id> one = Ids(e);
    ASSERT_EQ(one.size(), 1u);
    parsed_ids.insert(one[0]);
  }
  EXPECT_EQ(parsed_ids, ids);
}

TEST(ProvenancePipelineTest, ListFilesAloneDropsDeliveredFileNames) {
  TempDir dir;
  proto::Split split = MakeSplit(4, 0, 4, {{1, 3}});
  for (const char* name : {"a", "b", "c", "d"}) {
    const std::string path = absl::StrCat(dir.path(), "/", name, ".txt");
    WriteFile(path, "x\n");
    split.add_files(path);
  }
  FakeFeed feed({split});
  std::unique_ptr<ElementIterator> it = BuildFed(
      absl::StrCat("list_files('", dir.path(), "/*.txt') | batch(10)"), &feed, {dir.path()});
  absl::StatusOr<std::vector<Element>> batches = Drain(*it);
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_EQ(batches->size(), 1u);
  EXPECT_THAT((*batches)[0][0].string_values(),
              ElementsAre(dir.path() + "/a.txt", dir.path() + "/d.txt"));
  EXPECT_THAT(Ids((*batches)[0]), ElementsAre(Id{4, 0}, Id{4, 3}));
}

// Six text files of 3, 0, 5, 1, 2 and 4 lines ("f<file>-<line>"), in splits of two files
// (keys 1, 2 and 3).
class FilesOfDifferentSizesTest : public ::testing::Test {
 protected:
  static constexpr int kLines[] = {3, 0, 5, 1, 2, 4};

  void SetUp() override { WriteFiles(); }

  void WriteFiles() {
    paths_.clear();
    for (int f = 0; f < 6; ++f) {
      std::string text;
      for (int l = 0; l < kLines[f]; ++l) absl::StrAppend(&text, "f", f, "-", l, "\n");
      paths_.push_back(absl::StrCat(dir_.path(), "/f", f, ".txt"));
      WriteFile(paths_.back(), text);
    }
  }

  // The splits, with each split's delivered ordinals from `log` when it is given.
  std::vector<proto::Split> Splits(const DeliveryLog* log = nullptr) const {
    std::vector<proto::Split> splits;
    for (int64_t k = 0; k < 3; ++k) {
      proto::Split split = MakeSplit(k + 1, 2 * k, 2 * k + 2);
      for (int64_t f = 2 * k; f < 2 * k + 2; ++f) split.add_files(paths_[f]);
      if (log != nullptr) log->FillDelivered(&split);
      splits.push_back(std::move(split));
    }
    return splits;
  }

  std::vector<std::string> Pipelines() const {
    std::string files;
    for (const std::string& p : paths_)
      absl::StrAppend(&files, files.empty() ? "" : ", ", "'", p, "'");
    const std::string glob = absl::StrCat("list_files('", dir_.path(), "/*.txt')");
    return {
        absl::StrCat("text_line(files=[", files, "]) | batch(3)"),
        absl::StrCat(glob, " | interleave(text_line(), cycle_length=2) | batch(3)"),
        absl::StrCat(glob,
                     " | interleave(text_line(), cycle_length=3, parallel=true) | "
                     "map(identity, parallel=2) | prefetch(2) | batch(2) | unbatch() | batch(4)")};
  }

  TempDir dir_;
  std::vector<std::string> paths_;
};

TEST_F(FilesOfDifferentSizesTest, FilesReadToTheEndAreDeliveredWhole) {
  for (const std::string& pipeline : Pipelines()) {
    SCOPED_TRACE(pipeline);
    FakeFeed feed(Splits());
    std::unique_ptr<ElementIterator> it = BuildFed(pipeline, &feed, {dir_.path()});
    ASSERT_NE(it, nullptr);
    absl::StatusOr<std::vector<Element>> batches = Drain(*it);
    ASSERT_TRUE(batches.ok()) << batches.status();
    std::multiset<std::string> lines;
    DeliveryLog log;
    for (const Element& batch : *batches) {
      for (std::string_view line : batch[0].string_values()) lines.emplace(line);
      EXPECT_EQ(static_cast<int64_t>(Ids(batch).size()), batch[0].shape()[0]);
      log.Add(*ElementProvenance(batch));
    }
    EXPECT_EQ(lines.size(), 15u);
    EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(), 15u);
    // Splits 1 and 2 alike, although their files hold 3 + 0 and 5 + 1 lines: both files
    // whole, the empty one too.
    EXPECT_THAT(log.Delivered(1), ElementsAre(OrdinalRangeIs(0, Nested(2, 0))));
    EXPECT_THAT(log.Delivered(2), ElementsAre(OrdinalRangeIs(0, Nested(2, 0))));
    // The last file read (f5) ends after the last line produced: read one ahead, that line
    // carries its rest.
    EXPECT_THAT(log.Delivered(3), ElementsAre(OrdinalRangeIs(0, Nested(2, 0))));

    // Re-issued with that, no file is even opened (they are gone).
    for (int f = 0; f < 6; ++f) ASSERT_EQ(std::remove(paths_[f].c_str()), 0);
    FakeFeed again(Splits(&log));
    it = BuildFed(pipeline, &again, {dir_.path()});
    ASSERT_NE(it, nullptr);
    absl::StatusOr<std::vector<Element>> rest = Drain(*it);
    ASSERT_TRUE(rest.ok()) << rest.status();
    EXPECT_THAT(*rest, ::testing::IsEmpty());
    WriteFiles();  // Back for the next pipeline.
  }
}

}  // namespace
}  // namespace sluice::engine
