#include "engine/io/data_roots.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::engine {
namespace {

using ::sluice::engine::testing::TempDir;
using ::sluice::engine::testing::WriteFile;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// root/ holds a.tfrecord, b.tfrecord, sub/c.tfrecord, notes.txt and a directory d.tfrecord;
// outside/ holds secret.txt. The real path is used so expectations are canonical.
class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::filesystem::canonical(tmp_.path()).string();
    root_ = base_ + "/root";
    outside_ = base_ + "/outside";
    std::filesystem::create_directories(root_ + "/sub");
    std::filesystem::create_directories(root_ + "/d.tfrecord");
    std::filesystem::create_directories(outside_);
    for (const char* f : {"/a.tfrecord", "/b.tfrecord", "/sub/c.tfrecord", "/notes.txt"}) {
      WriteFile(root_ + f, "x");
    }
    WriteFile(outside_ + "/secret.txt", "secret");
    roots_ = {root_};
  }

  TempDir tmp_;
  std::string base_, root_, outside_;
  std::vector<std::string> roots_;
};

TEST_F(DataRootsTest, ResolvesAbsoluteAndRelativePathsInsideARoot) {
  absl::StatusOr<std::string> abs = ResolveDataPath(root_ + "/a.tfrecord", roots_);
  ASSERT_TRUE(abs.ok()) << abs.status();
  EXPECT_EQ(*abs, root_ + "/a.tfrecord");
  absl::StatusOr<std::string> rel = ResolveDataPath("sub/c.tfrecord", roots_);
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_EQ(*rel, root_ + "/sub/c.tfrecord");
  // ".." that stays inside is fine.
  EXPECT_TRUE(ResolveDataPath(root_ + "/sub/../a.tfrecord", roots_).ok());
}

TEST_F(DataRootsTest, NoRootsMeansNoFileAccess) {
  absl::StatusOr<std::string> r = ResolveDataPath(root_ + "/a.tfrecord", {});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(), HasSubstr("'" + root_ + "/a.tfrecord'"));
  EXPECT_THAT(r.status().message(), HasSubstr("--data-root"));
  EXPECT_EQ(GlobDataFiles(root_ + "/*", {}).status().code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(DataRootsTest, DotDotAndSymlinksCannotEscape) {
  absl::StatusOr<std::string> dotdot = ResolveDataPath(root_ + "/../outside/secret.txt", roots_);
  EXPECT_EQ(dotdot.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(dotdot.status().message(), HasSubstr("resolves to '" + outside_ +
                                                   "/secret.txt', which is outside the data "
                                                   "roots [" +
                                                   root_ + "]"));

  ASSERT_EQ(::symlink((outside_ + "/secret.txt").c_str(), (root_ + "/link.txt").c_str()), 0);
  ASSERT_EQ(::symlink(outside_.c_str(), (root_ + "/linkdir").c_str()), 0);
  EXPECT_EQ(ResolveDataPath(root_ + "/link.txt", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveDataPath("linkdir/secret.txt", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A symlink that stays inside the root is followed.
  ASSERT_EQ(::symlink((root_ + "/a.tfrecord").c_str(), (root_ + "/alias").c_str()), 0);
  absl::StatusOr<std::string> alias = ResolveDataPath(root_ + "/alias", roots_);
  ASSERT_TRUE(alias.ok()) << alias.status();
  EXPECT_EQ(*alias, root_ + "/a.tfrecord");
}

TEST_F(DataRootsTest, MissingFilesAreNotFoundOnlyInsideTheRoots) {
  EXPECT_EQ(ResolveDataPath(root_ + "/missing", roots_).status().code(),
            absl::StatusCode::kNotFound);
  // Outside the roots, existing or not, the answer is the same: refused.
  EXPECT_EQ(ResolveDataPath(outside_ + "/missing", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveDataPath("/etc/passwd", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ResolveDataPath(root_ + "/../outside/missing", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(DataRootsTest, RootSpelledThroughASymlinkStillContainsItsFiles) {
  const std::string alias_root = base_ + "/root_alias";
  ASSERT_EQ(::symlink(root_.c_str(), alias_root.c_str()), 0);
  const std::vector<std::string> roots = {alias_root + "/"};
  absl::StatusOr<std::string> r = ResolveDataPath(alias_root + "/a.tfrecord", roots);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, root_ + "/a.tfrecord");
  EXPECT_EQ(ResolveDataPath(alias_root + "/nope", roots).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DataRootsTest, GlobSortsRegularFilesAndKeepsThePatternsSpelling) {
  absl::StatusOr<std::vector<std::string>> abs = GlobDataFiles(root_ + "/*.tfrecord", roots_);
  ASSERT_TRUE(abs.ok()) << abs.status();
  // d.tfrecord is a directory and is skipped; '*' does not descend into sub/.
  EXPECT_THAT(*abs, ElementsAre(root_ + "/a.tfrecord", root_ + "/b.tfrecord"));
  absl::StatusOr<std::vector<std::string>> rel = GlobDataFiles("*/*.tfrecord", roots_);
  ASSERT_TRUE(rel.ok()) << rel.status();
  EXPECT_THAT(*rel, ElementsAre("sub/c.tfrecord"));
  absl::StatusOr<std::vector<std::string>> none = GlobDataFiles(root_ + "/*.gz", roots_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// glob lists a dangling symlink (or a file renamed away since it read the directory): no
// file to read, where it used to fail the whole listing with "does not exist".
TEST_F(DataRootsTest, GlobSkipsDanglingSymlinks) {
  std::filesystem::create_symlink(root_ + "/gone.tfrecord", root_ + "/old.tfrecord");
  absl::StatusOr<std::vector<std::string>> listed = GlobDataFiles(root_ + "/*.tfrecord", roots_);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, ElementsAre(root_ + "/a.tfrecord", root_ + "/b.tfrecord"));
}

// A directory the process may not read: glob passes over it, and its files went missing from
// the listing without a word. Root reads any directory, so the listing runs in a child that
// is nobody then.
TEST_F(DataRootsTest, GlobFailsOnADirectoryItCannotList) {
  std::filesystem::create_directories(root_ + "/locked");
  WriteFile(root_ + "/locked/e.tfrecord", "x");
  for (const std::string& dir : {base_, root_, root_ + "/sub", root_ + "/d.tfrecord"}) {
    ASSERT_EQ(::chmod(dir.c_str(), 0755), 0) << dir;
  }
  ASSERT_EQ(::chmod((root_ + "/locked").c_str(), 0), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
    if (::access(root_.c_str(), X_OK) != 0) ::_exit(4);  // a TMPDIR nobody may not enter
    absl::StatusOr<std::vector<std::string>> listed = GlobDataFiles("*/*.tfrecord", roots_);
    if (listed.ok()) {
      std::fprintf(stderr, "listed %zu files\n", listed->size());
      ::_exit(1);
    }
    std::fprintf(stderr, "%s\n", listed.status().ToString().c_str());
    const bool named = listed.status().message().find("cannot list the directory '" + root_ +
                                                      "/locked'") != std::string_view::npos;
    ::_exit(listed.status().code() == absl::StatusCode::kPermissionDenied && named ? 0 : 2);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::chmod((root_ + "/locked").c_str(), 0755);  // for the clean-up
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "could not become nobody (uid 65534)";
  if (WEXITSTATUS(status) == 4) GTEST_SKIP() << "nobody may not enter " << root_;
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the listing left the directory out silently; 2: another error (stderr above)";
}

TEST_F(DataRootsTest, GlobRefusesPatternsAndMatchesOutsideTheRoots) {
  absl::StatusOr<std::vector<std::string>> outside = GlobDataFiles(outside_ + "/*", roots_);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(outside.status().message(), HasSubstr("pattern '" + outside_ + "/*'"));
  EXPECT_EQ(GlobDataFiles(root_ + "/../outside/*", roots_).status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(::symlink((outside_ + "/secret.txt").c_str(), (root_ + "/z.tfrecord").c_str()), 0);
  absl::StatusOr<std::vector<std::string>> escape = GlobDataFiles(root_ + "/*.tfrecord", roots_);
  EXPECT_EQ(escape.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(escape.status().message(), HasSubstr("'" + root_ + "/z.tfrecord' resolves to"));
}

TEST(MatchesGlobTest, StarDoesNotCrossSlashes) {
  EXPECT_TRUE(MatchesGlob("/data/*.gz", "/data/a.gz"));
  EXPECT_FALSE(MatchesGlob("/data/*.gz", "/data/sub/a.gz"));
  EXPECT_TRUE(MatchesGlob("/data/*/a-[0-9].gz", "/data/x/a-7.gz"));
  EXPECT_FALSE(MatchesGlob("/data/*.gz", "/data/.hidden.gz"));
}

}  // namespace
}  // namespace sluice::engine
