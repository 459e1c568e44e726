#include "engine/io/input_stream.h"

#include <sys/stat.h>

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
using ::testing::HasSubstr;

TEST(FileInputStreamTest, ReadsSequentiallyAndPeeksThePrefixWithoutMoving) {
  TempDir dir;
  const std::string root = std::filesystem::canonical(dir.path()).string();
  WriteFile(root + "/f.bin", "hello world");
  absl::StatusOr<std::unique_ptr<FileInputStream>> f =
      FileInputStream::Open("f.bin", std::vector<std::string>{root});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->path(), root + "/f.bin");
  absl::StatusOr<std::string> prefix = (*f)->ReadPrefix(5);
  ASSERT_TRUE(prefix.ok());
  EXPECT_EQ(*prefix, "hello");
  char buf[64];
  absl::StatusOr<size_t> n = (*f)->Read(buf, 6);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(std::string(buf, *n), "hello ");
  n = (*f)->Read(buf, sizeof(buf));
  EXPECT_EQ(std::string(buf, *n), "world");
  n = (*f)->Read(buf, sizeof(buf));
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(*(*f)->ReadPrefix(100), "hello world");
}

TEST(FileInputStreamTest, RefusesDirectoriesFifosAndPathsOutsideTheRoots) {
  TempDir dir;
  const std::string root = std::filesystem::canonical(dir.path()).string();
  std::filesystem::create_directories(root + "/sub");
  ASSERT_EQ(::mkfifo((root + "/fifo").c_str(), 0600), 0);
  const std::vector<std::string> roots = {root};
  absl::StatusOr<std::unique_ptr<FileInputStream>> d = FileInputStream::Open("sub", roots);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("expected a regular file, but 'sub' is not one"));
  EXPECT_EQ(FileInputStream::Open("fifo", roots).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FileInputStream::Open("/etc/hostname", roots).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(FileInputStream::Open("missing", roots).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace sluice::engine
