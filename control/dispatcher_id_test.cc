#include "control/dispatcher_id.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "control/dispatcher.h"
#include "control/journal_test_util.h"

namespace sluice::control {
namespace {

using journal_test::TempDir;
using ::testing::HasSubstr;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(DispatcherIdTest, TheFirstStartMakesAnIdThatLaterStartsRead) {
  TempDir dir;
  absl::StatusOr<std::string> made = LoadOrCreateDispatcherId(dir.path(), /*has_state=*/false);
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(made->size(), 16u);
  for (char c : *made) EXPECT_TRUE(absl::ascii_isxdigit(static_cast<unsigned char>(c))) << *made;
  EXPECT_EQ(ReadFile(dir.path() + "/dispatcher_id"), *made + "\n");
  absl::StatusOr<std::string> again = LoadOrCreateDispatcherId(dir.path(), /*has_state=*/false);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *made);
  // One written by hand, without its newline, is read as well.
  WriteFile(dir.path() + "/dispatcher_id", "00112233aabbccdd");
  EXPECT_EQ(*LoadOrCreateDispatcherId(dir.path(), /*has_state=*/false), "00112233aabbccdd");
}

// Before, an empty file was replaced by a new id (peers then took the restart for one that
// lost its state, while the journal restored it) and any other text was used as the id.
TEST(DispatcherIdTest, ADamagedIdFileIsRefusedAndLeftAsItWas) {
  TempDir dir;
  const std::string path = dir.path() + "/dispatcher_id";
  for (const std::string& damaged :
       {std::string(), std::string("\n"), std::string(" \n\t "), std::string("not an id at all\n"),
        std::string("00112233aabbccdd00"), std::string(1 << 12, 'a'), std::string("0011\0x", 6),
        std::string("00112233aabbccdd") + std::string(40, ' ') + "junk"}) {
    SCOPED_TRACE(damaged.size());
    WriteFile(path, damaged);
    absl::StatusOr<std::string> id = LoadOrCreateDispatcherId(dir.path(), /*has_state=*/false);
    ASSERT_FALSE(id.ok()) << "accepted '" << *id << "'";
    EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(id.status().message(), HasSubstr(path));
    EXPECT_THAT(id.status().message(), HasSubstr("does not hold a dispatcher id"));
    EXPECT_EQ(ReadFile(path), damaged) << "the file was changed";
  }
}

// A journal without its id: the id is not made up, which would tell peers the state was lost.
TEST(DispatcherIdTest, AMissingIdBesideAJournalIsRefused) {
  TempDir dir;
  absl::StatusOr<std::string> id = LoadOrCreateDispatcherId(dir.path(), /*has_state=*/true);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("is missing while"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/dispatcher_id"));
  // A directory in its place is no id either.
  std::filesystem::create_directory(dir.path() + "/dispatcher_id");
  id = LoadOrCreateDispatcherId(dir.path(), /*has_state=*/false);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("it is not a file"));
}

// The dispatcher's own use: a fresh work dir (new, or made empty) gets an id, and a restart
// on it keeps the id. (A first check of the journal took an empty dir for one with state.)
TEST(DispatcherIdTest, AFaultTolerantDispatcherStartsOnAFreshWorkDirAndKeepsItsId) {
  TempDir dir;
  for (const std::string& work_dir : {dir.path() + "/new", dir.path()}) {
    SCOPED_TRACE(work_dir);
    DispatcherOptions options;
    options.bind = transport::Address{"ucx", "127.0.0.1", 0};
    options.fault_tolerant = true;
    options.work_dir = work_dir;
    std::string id;
    {
      absl::StatusOr<std::unique_ptr<Dispatcher>> first = Dispatcher::Start(options);
      ASSERT_TRUE(first.ok()) << first.status();
      id = (*first)->id();
    }
    absl::StatusOr<std::unique_ptr<Dispatcher>> restarted = Dispatcher::Start(options);
    ASSERT_TRUE(restarted.ok()) << restarted.status();
    EXPECT_EQ((*restarted)->id(), id);
  }
}

// A torn last record is dropped and said with its size and place: a crash tears at most
// the last write, and a journal damaged otherwise shows as far more bytes dropped. Before,
// the summary said only that one was dropped.
TEST(DispatcherIdTest, ATornLastRecordIsSaidWithItsSizeAndPlace) {
  TempDir dir;
  DispatcherOptions options;
  options.bind = transport::Address{"ucx", "127.0.0.1", 0};
  options.fault_tolerant = true;
  options.work_dir = dir.path();
  ASSERT_TRUE(Dispatcher::Start(options).ok());
  std::string last;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("journal_") && name > std::filesystem::path(last).filename().string()) {
      last = entry.path().string();
    }
  }
  ASSERT_FALSE(last.empty()) << "no journal file in " << dir.path();
  const uint64_t intact = std::filesystem::file_size(last);
  std::ofstream(last, std::ios::binary | std::ios::app) << std::string(300, '\xab');
  absl::StatusOr<std::unique_ptr<Dispatcher>> restarted = Dispatcher::Start(options);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_THAT((*restarted)->recovery_summary(),
              HasSubstr(absl::StrCat("dropped a torn last record: 300 byte(s) at offset ", intact,
                                     " of ", last)));
}

TEST(DispatcherIdTest, AWorkDirThatCannotBeWrittenIsAnError) {
  absl::StatusOr<std::string> id =
      LoadOrCreateDispatcherId("/nonexistent/sluice/work", /*has_state=*/false);
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("cannot create /nonexistent/sluice/work/"));
}

}  // namespace
}  // namespace sluice::control
