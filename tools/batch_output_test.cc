#include "tools/batch_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/batch_layout.h"
#include "engine/pipeline_text.h"
#include "engine/tensor.h"

namespace sluice::tools {
namespace {

// The JSON line of a batch holding `batch`, read back as a consumer of `sluice read` would.
nlohmann::json RoundTrip(const engine::Element& batch) {
  alignas(64) static std::byte buffer[1 << 16];
  absl::StatusOr<size_t> size = engine::EncodeBatch(batch, buffer);
  EXPECT_TRUE(size.ok()) << size.status();
  absl::StatusOr<engine::BatchView> view =
      engine::BatchView::Parse(std::span<const std::byte>(buffer, *size));
  EXPECT_TRUE(view.ok()) << view.status();
  return nlohmann::json::parse(BatchViewToJson(*view, "ucx://w:1", 3, -1).dump());
}

TEST(BatchOutputTest, NanAndInfinitiesAreNamedNotNull) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  nlohmann::json line =
      RoundTrip({engine::Tensor::FromVector<double>({4}, {1.5, std::nan(""), kInf, -kInf})});
  EXPECT_EQ(line["tensors"][0]["values"],
            nlohmann::json::parse(R"([1.5, "NaN", "Infinity", "-Infinity"])"));
  nlohmann::json single = RoundTrip({engine::Tensor::FromVector<float>({1}, {std::nanf("")})});
  EXPECT_EQ(single["tensors"][0]["values"][0], "NaN");
}

TEST(BatchOutputTest, BytesThatAreNotUtf8ComeAsBase64) {
  const std::string binary("\xff\xd8\xff\x00", 4);  // a JPEG's start: not UTF-8
  nlohmann::json line =
      RoundTrip({engine::Tensor::FromStrings({3}, std::vector<std::string>{"plain", "", binary})});
  const nlohmann::json& values = line["tensors"][0]["values"];
  EXPECT_EQ(values[0], "plain");
  EXPECT_EQ(values[1], "");
  EXPECT_EQ(values[2], nlohmann::json({{"base64", "/9j/AA=="}}));
  EXPECT_EQ(line["index"], 3);
  EXPECT_EQ(line["worker"], "ucx://w:1");
}

int Nesting(const char* pipeline) {
  absl::StatusOr<proto::PipelineDef> parsed = engine::ParsePipeline(pipeline);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? BatchNesting(*parsed) : -1;
}

TEST(BatchOutputTest, BatchNestingCountsBatchingLevels) {
  EXPECT_EQ(Nesting("range(10)"), 0);
  EXPECT_EQ(Nesting("from_tensor_slices([[1, 2, 3], [3, 4, 5]])"), 0);
  EXPECT_EQ(Nesting("range(10) | batch(2) | map(square)"), 1);
  EXPECT_EQ(Nesting("range(10) | batch(2) | unbatch()"), 0);
  EXPECT_EQ(Nesting("range(12) | batch(2) | batch(3)"), 2);
  EXPECT_EQ(Nesting("range(10) | unbatch()"), 0);
}

// Elements of an unbatched pipeline are what the service sends, whatever their shape: a
// record of 10 floats is one element, not ten.
TEST(BatchOutputTest, SummaryCountsRowsOnlyOfBatches) {
  alignas(64) static std::byte buffer[1 << 12];
  absl::StatusOr<size_t> size = engine::EncodeBatch(
      {engine::Tensor::FromVector<float>({10}, std::vector<float>(10))}, buffer);
  ASSERT_TRUE(size.ok()) << size.status();
  absl::StatusOr<engine::BatchView> view =
      engine::BatchView::Parse(std::span<const std::byte>(buffer, *size));
  ASSERT_TRUE(view.ok()) << view.status();
  for (const bool batched : {false, true}) {
    std::ostringstream out;
    BatchSink sink(OutputFormat::kSummary, out, {}, batched);
    for (int i = 0; i < 4; ++i) sink.Add(*view, "ucx://w:1", i, -1);
    EXPECT_EQ(sink.Finish()["elements"], batched ? 40 : 4);
    EXPECT_NE(out.str().find(batched ? "(40 elements" : "(4 elements"), std::string::npos)
        << out.str();
  }
}

// Without a terminal (a scheduler's log) a long read says how far it got now and then, a
// whole line at a time; it said nothing until its end.
TEST(BatchOutputTest, ALogGetsAProgressLineNowAndThen) {
  alignas(64) static std::byte buffer[1 << 12];
  absl::StatusOr<size_t> size = engine::EncodeBatch(
      {engine::Tensor::FromVector<float>({10}, std::vector<float>(10))}, buffer);
  ASSERT_TRUE(size.ok()) << size.status();
  absl::StatusOr<engine::BatchView> view =
      engine::BatchView::Parse(std::span<const std::byte>(buffer, *size));
  ASSERT_TRUE(view.ok()) << view.status();
  std::ostringstream out;
  std::ostringstream log;
  BatchSink sink(
      OutputFormat::kSummary, out,
      {.kind = ProgressDisplay::Kind::kLogLines, .every = absl::Milliseconds(100), .out = &log});
  sink.Add(*view, "ucx://w:1", 0, -1);
  EXPECT_EQ(log.str(), "") << "a line before the first interval";
  absl::SleepFor(absl::Milliseconds(150));
  sink.Add(*view, "ucx://w:1", 1, -1);
  EXPECT_THAT(log.str(),
              ::testing::MatchesRegex("read 2 batches \\(20 elements\\) in 0 s: .* MB/s\n"));
  EXPECT_EQ(log.str().find('\r'), std::string::npos);
  sink.Finish();
  const std::string lines = log.str();
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1);
}

}  // namespace
}  // namespace sluice::tools
