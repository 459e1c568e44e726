#include "engine/io/data_roots.h"

#include <fnmatch.h>
#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "engine/absl_compat.h"

namespace sluice::engine {
namespace {

bool IsAbsolute(std::string_view path) { return !path.empty() && path[0] == '/'; }

// The path relative paths are joined to: the first root.
std::string Absolute(std::string_view path, std::span<const std::string> roots) {
  if (IsAbsolute(path)) return std::string(path);
  return absl::StrCat(roots[0], "/", AbslView(path));
}

absl::Status NoRoots(std::string_view path) {
  return absl::PermissionDeniedError(absl::StrCat(
      "cannot access '", AbslView(path),
      "': this process has no data roots, so file access is disabled; start the worker (and, "
      "for DYNAMIC sharding over list_files, the dispatcher) with --data-root=DIR; `sluice "
      "local --data-root=DIR` gives it to both"));
}

// The first directory glob could not read, for GlobDataFiles: glob's error callback takes no
// argument of ours, and each thread globs on its own.
struct UnreadableDirectory {
  std::string path;
  int error = 0;
};
thread_local UnreadableDirectory unreadable_directory;

int NoteUnreadableDirectory(const char* path, int error) {
  // A directory removed while it was listed (a writer's temporary) held no file to read,
  // and a file system's lost+found (root's alone, at a mount point that is a data root)
  // holds none of the data.
  if (error == ENOENT) return 0;
  if (error == EACCES && std::string_view(path).ends_with("/lost+found")) return 0;
  unreadable_directory = UnreadableDirectory{path, error};
  return 1;  // stop: the listing is incomplete either way
}

std::string RootList(std::span<const std::string> roots) {
  return absl::StrCat("[", absl::StrJoin(roots, ", "), "]");
}

bool IsWithin(std::string_view path, std::string_view root) {
  if (root == "/") return IsAbsolute(path);
  return path == root || (path.size() > root.size() && path.substr(0, root.size()) == root &&
                          path[root.size()] == '/');
}

// realpath(3); errno is left for the caller on failure.
bool RealPath(const std::string& path, std::string* out) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return false;
  *out = buf;
  return true;
}

std::string Lexical(std::string_view path) {
  std::string out = std::filesystem::path(std::string(path)).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::vector<std::string> LexicalRoots(std::span<const std::string> roots) {
  std::vector<std::string> out;
  for (const std::string& root : roots) out.push_back(Lexical(root));
  return out;
}

// Each root canonicalised; roots that do not exist are kept lexically normalised (they
// then contain nothing that exists, which is the right answer).
std::vector<std::string> CanonicalRoots(std::span<const std::string> roots) {
  std::vector<std::string> out;
  for (const std::string& root : roots) {
    std::string canonical;
    if (!RealPath(root, &canonical)) canonical = Lexical(root);
    out.push_back(std::move(canonical));
  }
  return out;
}

// The directory part of `path`: "/a/b" for "/a/b/c*", "/" for "/c*", "." for "c*".
std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool InsideAny(std::string_view path, std::span<const std::string> roots) {
  return std::any_of(roots.begin(), roots.end(),
                     [&](const std::string& root) { return IsWithin(path, root); });
}

}  // namespace

absl::Status CheckInsideDataRoots(std::string_view canonical_path,
                                  std::span<const std::string> roots) {
  if (roots.empty()) return NoRoots(canonical_path);
  if (InsideAny(canonical_path, CanonicalRoots(roots))) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("'", AbslView(canonical_path), "' is outside the data roots ", RootList(roots)));
}

absl::StatusOr<std::string> ResolveDataPath(std::string_view path,
                                            std::span<const std::string> roots) {
  if (roots.empty()) return NoRoots(path);
  if (path.empty()) return absl::InvalidArgumentError("expected a file path, got ''");
  const std::string absolute = Absolute(path, roots);
  const std::vector<std::string> canonical_roots = CanonicalRoots(roots);
  std::string canonical;
  if (!RealPath(absolute, &canonical)) {
    const int error = errno;
    const std::string lexical = Lexical(absolute);
    if (!InsideAny(lexical, canonical_roots) && !InsideAny(lexical, LexicalRoots(roots))) {
      return absl::PermissionDeniedError(
          absl::StrCat("'", AbslView(path), "' is outside the data roots ", RootList(roots)));
    }
    if (error == ENOENT || error == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat("'", AbslView(path), "' does not exist"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("cannot resolve '", AbslView(path), "': ", std::strerror(error)));
  }
  if (!InsideAny(canonical, canonical_roots)) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", AbslView(path), "' resolves to '", canonical,
                     "', which is outside the data roots ", RootList(roots)));
  }
  return canonical;
}

absl::StatusOr<std::vector<std::string>> GlobDataFiles(std::string_view pattern,
                                                       std::span<const std::string> roots) {
  if (roots.empty()) return NoRoots(pattern);
  SLUICE_RETURN_IF_ERROR(CheckGlobPattern(pattern));
  const std::string absolute = Absolute(pattern, roots);
  // The directory before the first component with a wildcard must be inside the roots, so
  // globbing never walks directories outside them.
  const size_t wildcard = absolute.find_first_of("*?[");
  const std::string fixed = wildcard == std::string::npos ? absolute : absolute.substr(0, wildcard);
  absl::StatusOr<std::string> dir = ResolveDataPath(DirName(fixed), roots);
  if (absl::IsNotFound(dir.status())) return std::vector<std::string>{};
  if (!dir.ok()) {
    return absl::Status(dir.status().code(), absl::StrCat("pattern '", AbslView(pattern),
                                                          "': ", dir.status().message()));
  }

  glob_t matches;
  unreadable_directory = UnreadableDirectory{};
  const int rc = ::glob(absolute.c_str(), 0, NoteUnreadableDirectory, &matches);
  std::vector<std::string> names;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) names.emplace_back(matches.gl_pathv[i]);
  }
  ::globfree(&matches);
  // glob would go on past a directory it cannot read: the files under it would be missing
  // from the data without a word.
  if (rc == GLOB_ABORTED && unreadable_directory.error != 0) {
    return absl::Status(
        absl::ErrnoToStatusCode(unreadable_directory.error),
        absl::StrCat("pattern '", AbslView(pattern), "': cannot list the directory '",
                     unreadable_directory.path, "': ", std::strerror(unreadable_directory.error),
                     " (its files would be missing from the data)"));
  }
  if (rc != 0 && rc != GLOB_NOMATCH) {
    return absl::InternalError(
        absl::StrCat("glob('", AbslView(pattern), "') failed with code ", rc));
  }
  std::vector<std::string> files;
  const std::string prefix = IsAbsolute(pattern) ? "" : absl::StrCat(roots[0], "/");
  for (const std::string& name : names) {
    absl::StatusOr<std::string> resolved = ResolveDataPath(name, roots);
    // glob lists names as the directory holds them: a dangling symlink, or a file renamed
    // away since (a writer's temporary), is no file to read, not a failed listing.
    if (absl::IsNotFound(resolved.status())) continue;
    SLUICE_ASSIGN_OR_RETURN(std::string canonical, std::move(resolved));
    struct stat st;
    if (::stat(canonical.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    files.push_back(prefix.empty() ? name : name.substr(prefix.size()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

absl::Status CheckGlobPattern(std::string_view pattern) {
  if (pattern.empty()) return absl::InvalidArgumentError("expected a glob pattern, got ''");
  if (pattern.find("**") != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pattern '", AbslView(pattern),
        "': '**' does not descend into subdirectories here (glob reads it as '*', one level), "
        "so deeper files would be missing; spell each depth, e.g. 'dir/*/*.tfrecord'"));
  }
  return absl::OkStatus();
}

bool MatchesGlob(std::string_view pattern, std::string_view name) {
  return ::fnmatch(std::string(pattern).c_str(), std::string(name).c_str(),
                   FNM_PATHNAME | FNM_PERIOD) == 0;
}

}  // namespace sluice::engine
