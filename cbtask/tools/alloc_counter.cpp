// Replaces every C++17 form of the global operator new and delete.
#include "alloc_counter.hpp"

#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<bool> g_on{false};
std::atomic<std::int64_t> g_blocks{0};
std::atomic<std::int64_t> g_bytes{0};
std::atomic<std::uint64_t> g_allocs{0};

// A block allocated before start() and deleted after it is subtracted without
// ever having been added: start counting first thing in main and compare
// snapshots (deltas), as the tools and tests do.
void count_new(void* p) noexcept {
  if (!g_on.load(std::memory_order_relaxed)) return;
  g_blocks.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  g_allocs.fetch_add(1, std::memory_order_relaxed);
}

void count_delete(void* p) noexcept {
  if (!g_on.load(std::memory_order_relaxed)) return;
  g_blocks.fetch_sub(1, std::memory_order_relaxed);
  g_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

void* allocate(std::size_t size, std::size_t align) {
  if (size == 0) size = 1;
  for (;;) {
    void* p;
    if (align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__) {
      p = std::malloc(size);
    } else {
      // aligned_alloc wants a size that is a multiple of the alignment.
      p = std::aligned_alloc(align, (size + align - 1) / align * align);
    }
    if (p) {
      count_new(p);
      return p;
    }
    std::new_handler h = std::get_new_handler();
    if (!h) throw std::bad_alloc();
    h();
  }
}

void* allocate_nothrow(std::size_t size, std::size_t align) noexcept {
  try {
    return allocate(size, align);
  } catch (...) {
    return nullptr;
  }
}

void release(void* p) noexcept {
  if (!p) return;
  count_delete(p);
  std::free(p);
}

constexpr std::size_t kPlain = __STDCPP_DEFAULT_NEW_ALIGNMENT__;

}  // namespace

namespace alloc_counter {

void start() noexcept { g_on.store(true, std::memory_order_relaxed); }
bool started() noexcept { return g_on.load(std::memory_order_relaxed); }

Snapshot now() noexcept {
  Snapshot s;
  s.live_blocks = g_blocks.load(std::memory_order_relaxed);
  s.live_bytes = g_bytes.load(std::memory_order_relaxed);
  s.allocations = g_allocs.load(std::memory_order_relaxed);
  return s;
}

}  // namespace alloc_counter

void* operator new(std::size_t n) { return allocate(n, kPlain); }
void* operator new[](std::size_t n) { return allocate(n, kPlain); }
void* operator new(std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return allocate(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return allocate_nothrow(n, kPlain); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return allocate_nothrow(n, kPlain); }
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate_nothrow(n, static_cast<std::size_t>(a));
}

void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { release(p); }
