// Sleepers wake in deadline order (call order for equal deadlines), on an
// injected fake clock.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask_test::kMs;

TEST(Sleep, WakesInDeadlineOrderAtTheDeadline) {
  FakeClock clock(1000);
  Scheduler s(clock);
  std::vector<std::pair<int, std::int64_t>> woke;
  auto note = [&](int id) { woke.emplace_back(id, clock.now_ns()); };
  s.sleep(30, [&] { note(30); });
  s.sleep(10, [&] { note(10); });
  s.sleep(std::chrono::microseconds(20500), [&] { note(20); });
  s.sleep(0, [&] { note(0); });
  EXPECT_EQ(s.stats().sleeping, 4u);
  s.run();
  const std::vector<std::pair<int, std::int64_t>> want{
      {0, 1000}, {10, 1000 + 10 * kMs}, {20, 1000 + 20500000}, {30, 1000 + 30 * kMs}};
  EXPECT_EQ(woke, want);
  EXPECT_EQ(clock.waits(), 3u);  // one wait per distinct future deadline
}

TEST(Sleep, EqualDeadlinesWakeInCallOrder) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) s.sleep(7, [&order, i] { order.push_back(i); });
  // Sleepers added from callbacks with the same deadline come after them.
  s.sleep(3, [&] {
    s.sleep_until(7 * kMs, [&] { order.push_back(100); });
  });
  s.run();
  ASSERT_EQ(order.size(), 51u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(order.back(), 100);
}

TEST(Sleep, ManySleepersComeOutSorted) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<std::int64_t> seen;
  std::uint32_t x = 12345;
  for (int i = 0; i < 2000; ++i) {
    x = x * 1103515245u + 12345u;
    const std::int64_t ms = (x >> 8) % 500;
    s.sleep(ms, [&seen, &clock] { seen.push_back(clock.now_ns()); });
  }
  s.run();
  ASSERT_EQ(seen.size(), 2000u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
}

TEST(Sleep, SleepInsideACallbackContinuesTheSameTask) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<std::int64_t> times;
  cbtask::Task t = s.fork([&] {
    times.push_back(clock.now_ns());
    s.sleep(5, [&] {
      times.push_back(clock.now_ns());
      s.sleep(5, [&] { times.push_back(clock.now_ns()); });
    });
  });
  s.run_until_idle();
  EXPECT_TRUE(t.alive());
  EXPECT_EQ(s.stats().tasks, 1u);
  s.run();
  EXPECT_EQ(times, (std::vector<std::int64_t>{0, 5 * kMs, 10 * kMs}));
  EXPECT_FALSE(t.alive());
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(Sleep, RunUntilIdleDoesNotWait) {
  FakeClock clock;
  Scheduler s(clock);
  int woke = 0;
  s.sleep(10, [&] { ++woke; });
  EXPECT_EQ(s.run_until_idle(), 0u);
  EXPECT_EQ(woke, 0);
  EXPECT_EQ(clock.waits(), 0u);
  clock.advance_ms(10);
  EXPECT_EQ(s.run_until_idle(), 1u);
  EXPECT_EQ(woke, 1);
}

TEST(Sleep, RunUntilStopsAtTheLimit) {
  FakeClock clock;
  Scheduler s(clock);
  int woke = 0;
  s.sleep(10, [&] { ++woke; });
  s.sleep(30, [&] { ++woke; });
  s.run_until(20 * kMs);
  EXPECT_EQ(woke, 1);
  EXPECT_EQ(clock.now_ns(), 20 * kMs);
  s.run_for(std::chrono::milliseconds(5));
  EXPECT_EQ(woke, 1);
  s.run();
  EXPECT_EQ(woke, 2);
}

TEST(Sleep, RunUntilStopsABusyLoop) {
  FakeClock clock;
  Scheduler s(clock);
  s.set_poll_interval(1);
  long n = 0;
  s.loop([&] {
    ++n;
    clock.advance_ms(1);
  });
  s.run_until(10 * kMs);
  EXPECT_GE(n, 10);
  EXPECT_LE(n, 11);
}

TEST(Sleep, ABusyLoopCannotStarveASleeper) {
  FakeClock clock;
  Scheduler s(clock);
  s.set_poll_interval(4);
  long iterations = 0;
  long woke_at = -1;
  cbtask::Task busy = s.loop([&] {
    ++iterations;
    clock.advance_ms(1);
  });
  s.sleep(10, [&] {
    woke_at = iterations;
    busy.cancel();
  });
  s.run();
  // Due after 10 iterations; noticed at the next poll, at most 4 dispatches later.
  EXPECT_GE(woke_at, 10);
  EXPECT_LE(woke_at, 14);
}

TEST(Sleep, HugeAndNegativeDurationsClamp) {
  FakeClock clock(5);
  Scheduler s(clock);
  int woke = 0;
  cbtask::Task far = s.sleep(std::numeric_limits<std::int64_t>::max(), [&] { ++woke; });
  cbtask::Task farther = s.sleep(std::chrono::hours(24 * 365 * 1000), [&] { ++woke; });
  s.sleep(-5, [&] { ++woke; });
  s.run_until_idle();
  EXPECT_EQ(woke, 1);
  EXPECT_TRUE(far.alive());
  EXPECT_TRUE(farther.alive());
  EXPECT_TRUE(far.cancel());
  EXPECT_TRUE(farther.cancel());
  EXPECT_EQ(s.stats().sleeping, 0u);
}

TEST(Sleep, SteadyClockReallyWaits) {
  Scheduler s;  // the real clock
  const std::int64_t start = s.now_ns();
  std::int64_t woke = 0;
  s.sleep(20, [&] { woke = s.now_ns(); });
  s.run();
  EXPECT_GE(woke - start, 20 * kMs);
  EXPECT_LT(woke - start, 2000 * kMs);
}
