// Which files a worker may read: only those inside its data roots (--data-root
// directories). Pipelines come from clients, so every path they name is resolved
// here first; a dataset must not be able to read arbitrary files on a worker.
//
//   std::vector<std::string> roots = {"/data"};
//   SLUICE_ASSIGN_OR_RETURN(std::string path, ResolveDataPath("train/a.tfrecord", roots));
//   // "/data/train/a.tfrecord" (canonical), or PermissionDenied / NotFound
//   SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> files,
//                           GlobDataFiles("/data/train/*.gz", roots));
//
// Rules:
//   * No roots means no file access at all (PermissionDenied that says to start the
//     worker with --data-root).
//   * Relative paths and patterns are relative to the first root.
//   * A path is allowed when its canonical form (realpath: symlinks and ".." resolved)
//     is a root or lies below one, so neither "/data/../etc/passwd" nor a symlink in a
//     root pointing elsewhere escapes. Roots are canonicalised the same way.
//   * A path that does not exist is NotFound only when it lies (lexically) inside a
//     root; otherwise PermissionDenied, so probing outside the roots reveals nothing.
// Opening re-checks the opened descriptor (engine/io/input_stream.h), so swapping a
// symlink in between is caught too.
#ifndef SLUICE_ENGINE_IO_DATA_ROOTS_H_
#define SLUICE_ENGINE_IO_DATA_ROOTS_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::engine {

// The canonical absolute path of `path`. PermissionDenied when there are no roots or it
// resolves outside them; NotFound when it does not exist (inside a root).
[[nodiscard]] absl::StatusOr<std::string> ResolveDataPath(std::string_view path,
                                                          std::span<const std::string> roots);

// Checks an already canonical path (e.g. of an opened descriptor) against the roots.
[[nodiscard]] absl::Status CheckInsideDataRoots(std::string_view canonical_path,
                                                std::span<const std::string> roots);

// Regular files (after following symlinks) matching the glob `pattern` (glob(3): *, ?,
// [...]; '*' does not cross '/'), sorted bytewise, spelled as the pattern is: an absolute
// pattern gives absolute names, a relative one names relative to the first root. The
// pattern's fixed leading directory must lie inside the roots (PermissionDenied) and so
// must every match (PermissionDenied naming it, e.g. a symlink escaping a root). No
// matches is an empty list. A directory it cannot list fails it (its files would be
// missing), and so does a pattern CheckGlobPattern refuses.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> GlobDataFiles(
    std::string_view pattern, std::span<const std::string> roots);

// InvalidArgument for an empty pattern, or one with '**': glob(3) reads it as '*', one
// directory level, and a user who meant "any depth" would silently miss deeper files.
[[nodiscard]] absl::Status CheckGlobPattern(std::string_view pattern);

// True when `name` matches the glob `pattern` with the semantics GlobDataFiles uses.
bool MatchesGlob(std::string_view pattern, std::string_view name);

}  // namespace sluice::engine

#endif  // SLUICE_ENGINE_IO_DATA_ROOTS_H_
