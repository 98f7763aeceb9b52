// Resident and virtual size of this process, read from /proc without using
// the heap (so reading does not change what is measured).
//
// RSS comes from /proc/self/smaps_rollup, which walks the page tables and is
// exact. /proc/self/statm is not used: since Linux 6.2 it reads per-CPU
// counters without summing them and can be off by hundreds of KiB. Without
// smaps_rollup (Linux < 4.14) VmRSS of /proc/self/status is used instead.
// The virtual size is VmSize of /proc/self/status (an exact count).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace procmem {

struct Usage {
  std::int64_t rss = -1;  // bytes, -1 if unknown
  std::int64_t vsz = -1;
  const char* rss_source = "";
};

// Value in kB of the line starting with `key` in /proc/self/<file>, as bytes; -1 if absent.
inline std::int64_t read_kb(const char* file, const char* key) {
  char path[64] = "/proc/self/";
  std::strncat(path, file, sizeof path - std::strlen(path) - 1);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  std::size_t used = 0;
  ssize_t n;
  while (used < sizeof buf - 1 && (n = read(fd, buf + used, sizeof buf - 1 - used)) > 0) used += static_cast<std::size_t>(n);
  close(fd);
  buf[used] = 0;
  const std::size_t klen = std::strlen(key);
  for (char* line = buf; line && *line;) {
    if (std::strncmp(line, key, klen) == 0) return std::strtoll(line + klen, nullptr, 10) * 1024;
    line = std::strchr(line, '\n');
    if (line) ++line;
  }
  return -1;
}

inline Usage usage() {
  Usage u;
  u.rss = read_kb("smaps_rollup", "Rss:");
  u.rss_source = "smaps_rollup";
  if (u.rss < 0) {
    u.rss = read_kb("status", "VmRSS:");
    u.rss_source = "status";
  }
  u.vsz = read_kb("status", "VmSize:");
  return u;
}

}  // namespace procmem
