// Ready tasks run first in, first out; fork keeps argument order.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;

TEST(Order, ForkRunsTasksInArgumentOrder) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  auto tasks = s.fork([&] { out += 'a'; }, [&] { out += 'b'; }, [&] { out += 'c'; });
  static_assert(std::is_same_v<decltype(tasks), std::array<Task, 3>>);
  s.fork([&] { out += 'd'; });
  EXPECT_EQ(s.run(), 4u);
  EXPECT_EQ(out, "abcd");
  for (const Task& t : tasks) EXPECT_FALSE(t.alive());
}

TEST(Order, ReadyTasksAreFifoAndYieldGoesToTheBack) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  s.fork(
      [&] {
        out += "a1 ";
        s.yield([&] { out += "a2 "; });
      },
      [&] {
        out += "b1 ";
        s.fork([&] { out += "c1 "; });  // queued behind everything ready now
        s.yield([&] { out += "b2 "; });
      });
  s.run();
  EXPECT_EQ(out, "a1 b1 a2 c1 b2 ");
}

TEST(Order, HandlesTellTasksApartAndDieWithThem) {
  FakeClock clock;
  Scheduler s(clock);
  Task a = s.fork([] {});
  Task b = s.fork([] {});
  EXPECT_NE(a, b);
  EXPECT_NE(a.id(), b.id());
  EXPECT_TRUE(a.alive());
  EXPECT_EQ(a.scheduler(), &s);
  Task seen;
  s.fork([&] { seen = s.self(); });
  s.run();
  EXPECT_FALSE(a.alive());
  EXPECT_FALSE(seen.alive());
  EXPECT_FALSE(Task().alive());
  EXPECT_FALSE(Task().cancel());
}

TEST(Order, DispatchRunsExactlyOneCallback) {
  FakeClock clock;
  Scheduler s(clock);
  int n = 0;
  s.fork([&] { ++n; }, [&] { ++n; });
  EXPECT_TRUE(s.dispatch());
  EXPECT_EQ(n, 1);
  EXPECT_TRUE(s.dispatch());
  EXPECT_EQ(n, 2);
  EXPECT_FALSE(s.dispatch());
  EXPECT_EQ(s.stats().dispatched, 2u);
}

TEST(Order, StopReturnsFromRunAfterTheCurrentCallback) {
  FakeClock clock;
  Scheduler s(clock);
  int n = 0;
  s.loop([&] {
    if (++n == 5) s.stop();
  });
  EXPECT_EQ(s.run(), 5u);
  EXPECT_EQ(n, 5);
  EXPECT_EQ(s.stats().ready, 1u);  // the loop goes on at the next run
  s.fork([&] { s.stop(); });
  s.run();
  EXPECT_EQ(n, 6);
}

TEST(Order, FreeFunctionsUseTheRunningScheduler) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  s.fork([&] {
    EXPECT_EQ(cbtask::Scheduler::running(), &s);
    EXPECT_EQ(&cbtask::current_scheduler(), &s);
    cbtask::fork([&] { out += 'f'; });
    cbtask::sleep(5, [&] {
      out += 's';
      EXPECT_EQ(clock.now_ns(), 5 * cbtask_test::kMs);
    });
  });
  s.run();
  EXPECT_EQ(out, "fs");
  EXPECT_EQ(cbtask::Scheduler::running(), nullptr);
}

TEST(Order, DefaultSchedulerRunsFreeFunctionTasks) {
  std::string out;
  cbtask::fork([&] { out += 'a'; });
  cbtask::yield([&] { out += 'b'; });
  cbtask::sleep(1, [&] { out += 'c'; });
  cbtask::run();
  EXPECT_EQ(out, "abc");
  EXPECT_EQ(cbtask::default_scheduler().stats().tasks, 0u);
}
