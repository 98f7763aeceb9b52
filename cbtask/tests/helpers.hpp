// Shared helpers for the cbtask tests.
#pragma once

#include <cstdint>
#include <memory>

#include "../tools/alloc_counter.hpp"
#include "cbtask/cbtask.hpp"

namespace cbtask_test {

constexpr std::int64_t kMs = 1000000;

// Counts live copies of itself through a shared counter, so a test can see
// that the callbacks holding it were destroyed.
class Tracker {
 public:
  explicit Tracker(std::shared_ptr<int> live) : live_(std::move(live)) { ++*live_; }
  Tracker(const Tracker& o) : live_(o.live_) { ++*live_; }
  Tracker(Tracker&& o) noexcept : live_(o.live_) { ++*live_; }
  Tracker& operator=(const Tracker&) = delete;
  ~Tracker() { --*live_; }

 private:
  std::shared_ptr<int> live_;
};

// Heap blocks held right now (operator new, counted from the first use).
inline std::int64_t live_blocks() {
  alloc_counter::start();
  return alloc_counter::now().live_blocks;
}

}  // namespace cbtask_test
