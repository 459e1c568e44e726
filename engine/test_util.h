// Helpers shared by engine and split tests (not part of the library).
//
//   absl::StatusOr<std::vector<Element>> all = DrainText("range(5) | map(square)");
//   EXPECT_THAT(ScalarInt64s(*all), ElementsAre(0, 1, 4, 9, 16));
//   TempDir dir;                                   // removed with its contents
//   WriteFile(dir.path() + "/a.txt", "x\ny\n");
//   std::optional<std::string> data = TestDataDir();  // ../shared/testdata, if present
#ifndef SLUICE_ENGINE_TEST_UTIL_H_
#define SLUICE_ENGINE_TEST_UTIL_H_

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "engine/iterator.h"
#include "engine/pipeline_text.h"
#include "engine/tensor.h"

namespace sluice::engine::testing {

// Every element up to the end; stops at `limit` elements (for infinite pipelines).
inline absl::StatusOr<std::vector<Element>> Drain(ElementIterator& it, size_t limit = 1 << 20) {
  std::vector<Element> out;
  while (out.size() < limit) {
    Element e;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(it.GetNext(&e, &end));
    if (end) break;
    out.push_back(std::move(e));
  }
  return out;
}

inline absl::StatusOr<std::vector<Element>> DrainText(std::string_view text,
                                                      const PipelineContext& context = {},
                                                      size_t limit = 1 << 20) {
  SLUICE_ASSIGN_OR_RETURN(proto::PipelineDef def, ParsePipeline(text));
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<ElementIterator> it, BuildPipeline(def, context));
  return Drain(*it, limit);
}

// Component 0 of each element, which must be an int64 scalar.
inline std::vector<int64_t> ScalarInt64s(const std::vector<Element>& elements) {
  std::vector<int64_t> out;
  for (const Element& e : elements) out.push_back(e.at(0).values<int64_t>()[0]);
  return out;
}

// All int64 values of component `c` of each element, concatenated.
inline std::vector<int64_t> FlatInt64s(const std::vector<Element>& elements, size_t c = 0) {
  std::vector<int64_t> out;
  for (const Element& e : elements) {
    for (int64_t v : e.at(c).values<int64_t>()) out.push_back(v);
  }
  return out;
}

// String component 0 of each element (a string scalar).
inline std::vector<std::string> ScalarStrings(const std::vector<Element>& elements) {
  std::vector<std::string> out;
  for (const Element& e : elements) out.emplace_back(e.at(0).string_value(0));
  return out;
}

// A fresh directory under $TMPDIR (or /tmp), deleted recursively on destruction.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/sluice_test_XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, std::string_view contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `data` compressed as one gzip member (windowBits 16 + 15) or a zlib stream (15).
inline std::string Compress(std::string_view data, bool gzip) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, gzip ? 16 + MAX_WBITS : MAX_WBITS, 8,
               Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, data.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// Lowers this process's address-space limit to what it maps now plus `room`: a thread's
// stack (8 MiB by default) no longer fits, so starting one fails as on a machine out of
// threads. Only for a child the test forks (EXPECT_EXIT): it cannot be raised again.
inline void LeaveNoRoomForAThread(size_t room = 1 << 20) {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  const rlim_t bytes = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
                       static_cast<rlim_t>(room);
  const rlimit limit{bytes, bytes};
  setrlimit(RLIMIT_AS, &limit);
}

// The shared test data directory (meson passes SLUICE_TESTDATA, the repository's
// ../shared/testdata); nullopt when it is absent, so tests can GTEST_SKIP with a reason.
inline std::optional<std::string> TestDataDir() {
  const char* dir = std::getenv("SLUICE_TESTDATA");
  if (dir == nullptr || !std::filesystem::is_directory(std::string(dir) + "/tfrecord")) {
    return std::nullopt;
  }
  return std::string(dir);
}

}  // namespace sluice::engine::testing

#endif  // SLUICE_ENGINE_TEST_UTIL_H_
