// Whole-file reads for small files (JSON configs, graph calls, templates,
// texts). Large files are memory-mapped instead (model/weights.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string>

namespace bonfire {

// PATH's bytes, at most max_bytes of them. A regular file is sized before it
// is read; anything else (a pipe, /dev/stdin, a process substitution) has no
// size, so it is read as a stream and refused as soon as it passes the limit
// (a reader pointed at /dev/zero stops). Throws Error(BadGraph) "PATH is a
// directory" or "PATH: cannot be read (REASON)", Error(TooLarge) over the limit.
std::string read_file(const std::string& path, size_t max_bytes = SIZE_MAX);

// The rest of `in` (a command's stdin), under the same limit; `what` names it.
std::string read_stream(std::istream& in, const std::string& what, size_t max_bytes = SIZE_MAX);

}  // namespace bonfire
