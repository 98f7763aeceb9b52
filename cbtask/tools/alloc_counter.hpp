// A counting replacement of the global operator new/delete, for measuring how
// much heap a workload holds. Link alloc_counter.cpp into a program to use it.
// Counting is off until start() (so timing runs pay one predictable branch),
// then counts every block by its malloc_usable_size: bytes the allocator
// really hands out, rounding included, excluding its per-block header.
#pragma once

#include <cstdint>

namespace alloc_counter {

struct Snapshot {
  std::int64_t live_blocks = 0;  // operator-new blocks allocated and not yet deleted
  std::int64_t live_bytes = 0;   // their usable size in bytes
  std::uint64_t allocations = 0;  // blocks allocated since start()
};

// Start counting; blocks allocated before this are not counted when deleted.
void start() noexcept;
bool started() noexcept;
Snapshot now() noexcept;

}  // namespace alloc_counter
