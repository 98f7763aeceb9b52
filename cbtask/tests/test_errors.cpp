// Exceptions from callbacks end their task and propagate out of run(); the
// scheduler stays usable. Misuse is reported with exceptions.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;
using cbtask_test::Tracker;

TEST(Errors, ExceptionEndsOnlyItsTaskAndPropagates) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  auto tasks = s.fork([&] { out += 'a'; }, [&] { throw std::runtime_error("boom"); }, [&] { out += 'c'; });
  s.sleep(5, [&] { out += 's'; });
  try {
    s.run();
    FAIL() << "run() should have thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  EXPECT_EQ(out, "a");
  EXPECT_FALSE(tasks[1].alive());
  EXPECT_TRUE(tasks[2].alive());
  EXPECT_EQ(s.stats().tasks, 2u);
  EXPECT_EQ(cbtask::Scheduler::running(), nullptr);
  s.run();  // the scheduler goes on where it stopped
  EXPECT_EQ(out, "acs");
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(Errors, ContinuationChosenBeforeTheThrowIsDiscarded) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  bool ran = false;
  Task t = s.fork([&] {
    s.sleep(1, [&ran, tr = Tracker(live)] { ran = true; });
    throw std::logic_error("after choosing");
  });
  EXPECT_THROW(s.run(), std::logic_error);
  EXPECT_EQ(*live, 0);
  EXPECT_FALSE(t.alive());
  EXPECT_EQ(s.run(), 0u);
  EXPECT_FALSE(ran);
  EXPECT_EQ(s.stats().sleeping, 0u);
}

TEST(Errors, ThrowInALoopFreesItsFramesAndMailbox) {
  FakeClock clock;
  Scheduler s(clock);
  int n = 0;
  Task t = s.loop([&] {
    s.for_([] {}, [&] {
      if (++n == 3) throw std::runtime_error("cond");
      return true;
    }, [] {}, [] {});
  });
  t.send(std::string(50, 'm'));
  EXPECT_THROW(s.run(), std::runtime_error);
  EXPECT_FALSE(t.alive());
  EXPECT_EQ(s.stats().aux_bytes, 0u);
  EXPECT_EQ(s.stats().messages, 0u);
}

TEST(Errors, ExceptionFromAReceiveCallbackDestroysTheMessage) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  Task r = s.receive([](Tracker) { throw std::runtime_error("no"); });
  r.send(Tracker(live));
  EXPECT_THROW(s.run(), std::runtime_error);
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Errors, TwoContinuationsInOneCallbackAreRefused) {
  FakeClock clock;
  Scheduler s(clock);
  bool second_ran = false;
  s.fork([&] {
    s.sleep(1, [] {});
    s.yield([&] { second_ran = true; });
  });
  EXPECT_THROW(s.run(), std::logic_error);
  s.fork([&] {
    s.loop([] {});
    s.receive([](int) {});
  });
  EXPECT_THROW(s.run(), std::logic_error);
  EXPECT_EQ(s.run(), 0u);
  EXPECT_FALSE(second_ran);
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Errors, ForkIsAllowedAnyNumberOfTimes) {
  FakeClock clock;
  Scheduler s(clock);
  int n = 0;
  s.fork([&] {
    s.fork([&] { ++n; });
    s.fork([&] { ++n; }, [&] { ++n; });
    s.sleep(1, [&] { ++n; });
  });
  s.run();
  EXPECT_EQ(n, 4);
}

TEST(Errors, ReentrantRunAndMisuseThrow) {
  FakeClock clock;
  Scheduler s(clock);
  s.fork([&] { s.run(); });
  EXPECT_THROW(s.run(), std::logic_error);
  s.fork([&] { s.dispatch(); });
  EXPECT_THROW(s.run(), std::logic_error);
  EXPECT_THROW(s.self(), std::logic_error);
  EXPECT_THROW(s.set_poll_interval(0), std::invalid_argument);
  EXPECT_THROW(clock.advance_ns(-1), std::invalid_argument);
  EXPECT_FALSE(s.in_task());
}

TEST(Errors, AnotherSchedulerMayRunInsideACallback) {
  FakeClock clock;
  Scheduler outer(clock), inner(clock);
  std::string out;
  inner.fork([&] {
    out += 'i';
    EXPECT_EQ(cbtask::Scheduler::running(), &inner);
  });
  outer.fork([&] {
    out += 'o';
    inner.run();
    EXPECT_EQ(cbtask::Scheduler::running(), &outer);
  });
  outer.run();
  EXPECT_EQ(out, "oi");
}
