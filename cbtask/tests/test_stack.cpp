// The dispatcher is a trampoline: a million chained callbacks run at one
// stack depth.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;

namespace {

constexpr long kChain = 1000000;

// Records the lowest and highest stack address seen; recursion through the
// scheduler would make the span grow with the chain (and overflow the stack).
struct DepthProbe {
  std::uintptr_t low = UINTPTR_MAX, high = 0;
  __attribute__((noinline)) void check() {
    const auto frame = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    low = std::min(low, frame);
    high = std::max(high, frame);
  }
  std::uintptr_t span() const { return high - low; }
};

}  // namespace

TEST(Stack, YieldChainOfAMillionCallbacks) {
  FakeClock clock;
  Scheduler s(clock);
  DepthProbe probe;
  long n = 0;
  std::function<void()> step = [&] {
    probe.check();
    if (++n < kChain) s.yield(step);
  };
  s.fork(step);
  EXPECT_EQ(s.run(), static_cast<std::size_t>(kChain));
  EXPECT_EQ(n, kChain);
  EXPECT_LT(probe.span(), 8192u);
}

TEST(Stack, SleepChainOfAMillionCallbacks) {
  FakeClock clock;
  Scheduler s(clock);
  DepthProbe probe;
  struct Step {
    Scheduler* s;
    long* n;
    DepthProbe* probe;
    void operator()() const {
      probe->check();
      if (++*n < kChain) s->sleep(0, *this);
    }
  };
  long n = 0;
  s.fork(Step{&s, &n, &probe});
  s.run();
  EXPECT_EQ(n, kChain);
  EXPECT_LT(probe.span(), 8192u);
}

TEST(Stack, MessageChainOfAMillionCallbacks) {
  FakeClock clock;
  Scheduler s(clock);
  DepthProbe probe;
  long n = 0;
  cbtask::Task echo = s.loop([&] { s.receive([&](cbtask::Task from) { from.send(0L); }); });
  s.while_([&] { return n < kChain / 2; },
           [&] {
             probe.check();
             echo.send(s.self());
             s.receive([&](long) {
               probe.check();
               ++n;
             });
           });
  s.run();
  EXPECT_EQ(n, kChain / 2);
  EXPECT_LT(probe.span(), 8192u);
  echo.cancel();
}

TEST(Stack, LoopOfAMillionIterations) {
  FakeClock clock;
  Scheduler s(clock);
  DepthProbe probe;
  long i = 0;
  s.for_([&] { i = 0; }, [&] { return i < kChain; }, [&] { ++i; }, [&] { probe.check(); });
  s.run();
  EXPECT_EQ(i, kChain);
  EXPECT_LT(probe.span(), 8192u);
}
