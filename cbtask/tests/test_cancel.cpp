// Cancellation: a cancelled task never runs again and its memory is released
// at once, whether it was ready, sleeping, receiving, looping or running.
#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <string>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;
using cbtask_test::live_blocks;
using cbtask_test::Tracker;

namespace {

// A callback too big to be stored inline: it gets its own heap block.
struct Big {
  Tracker tracker;
  std::array<char, 64> pad{};
  int* ran;
  void operator()() const { ++*ran; }
};

}  // namespace

TEST(Cancel, ReadyTaskNeverRunsAndIsFreed) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  int ran = 0;
  s.fork([] {});  // the scheduler's own structures (first chunk) are not per task
  s.run();
  const std::int64_t before = live_blocks();
  Task t = s.fork(Big{Tracker(live), {}, &ran});
  s.fork([&] { ++ran; });
  EXPECT_EQ(*live, 1);
  EXPECT_GT(live_blocks(), before);
  EXPECT_TRUE(t.cancel());
  s.trim();  // freed blocks are first kept for reuse
  EXPECT_EQ(live_blocks(), before);  // the boxed callback's block is gone
  EXPECT_EQ(*live, 0);
  EXPECT_FALSE(t.alive());
  EXPECT_FALSE(t.cancel());
  EXPECT_EQ(s.stats().ready, 1u);
  s.run();
  EXPECT_EQ(ran, 1);  // only the other task
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Cancel, SleepingTaskLeavesTheHeap) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  std::string out;
  s.sleep(10, [&] { out += 'a'; });
  Task b = s.sleep(20, [&, t = Tracker(live)] { out += 'b'; });
  s.sleep(30, [&] { out += 'c'; });
  EXPECT_EQ(*live, 1);
  EXPECT_TRUE(b.cancel());
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().sleeping, 2u);
  s.run();
  EXPECT_EQ(out, "ac");
  EXPECT_EQ(clock.now_ns(), 30 * cbtask_test::kMs);
}

TEST(Cancel, ManySleepersCancelledInAnyOrderKeepTheHeapValid) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<Task> tasks;
  std::vector<std::int64_t> woke;
  for (int i = 0; i < 1000; ++i)
    tasks.push_back(s.sleep((i * 37) % 101, [&woke, &clock] { woke.push_back(clock.now_ns()); }));
  for (std::size_t i = 0; i < tasks.size(); i += 3) EXPECT_TRUE(tasks[i].cancel());
  s.run();
  EXPECT_EQ(woke.size(), 666u);
  EXPECT_TRUE(std::is_sorted(woke.begin(), woke.end()));
}

TEST(Cancel, ReceivingTaskAndItsQueuedMessagesAreFreed) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  s.fork([] {});
  s.run();
  const std::int64_t before = live_blocks();
  Task r = s.receive([&, t = Tracker(live)](int) {});
  r.send(std::string(100, 'x'));  // a message it does not wait for
  r.send(Tracker(live));
  EXPECT_EQ(s.stats().receiving, 1u);
  EXPECT_EQ(*live, 2);
  EXPECT_TRUE(r.cancel());
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().receiving, 0u);
  EXPECT_EQ(s.stats().messages, 0u);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
  s.trim();
  EXPECT_EQ(live_blocks(), before);
  EXPECT_FALSE(r.send(1));
}

TEST(Cancel, LoopingTaskFramesAreFreed) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  int n = 0;
  Task t = s.loop([&, tr = Tracker(live)] {
    ++n;
    s.while_([] { return true; }, [&] { ++n; });  // nested, never ends
  });
  for (int i = 0; i < 10; ++i) s.dispatch();
  EXPECT_GT(s.stats().aux_bytes, 0u);
  EXPECT_TRUE(t.cancel());
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
  EXPECT_EQ(s.run(), 0u);
  EXPECT_EQ(n, 10);
}

TEST(Cancel, TaskCancelsItselfOrAnotherFromACallback) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  Task victim = s.sleep(5, [&] { out += 'v'; });
  Task self_canceller;
  self_canceller = s.fork([&] {
    out += '1';
    EXPECT_TRUE(victim.cancel());
    EXPECT_TRUE(s.self().cancel());
    EXPECT_FALSE(self_canceller.alive());
    s.sleep(1, [&] { out += 'X'; });  // discarded: the task is already cancelled
    out += '2';
  });
  s.run();
  EXPECT_EQ(out, "12");
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(clock.now_ns(), 0);
}

TEST(Cancel, StaleHandlesStayDeadAfterTheirSlotIsReusedOrUnmapped) {
  FakeClock clock;
  Scheduler s(clock);
  Task old = s.fork([] {});
  s.run();
  Task reused = s.fork([] {});  // most likely the same slot
  EXPECT_FALSE(old.alive());
  EXPECT_FALSE(old.cancel());
  EXPECT_TRUE(reused.alive());
  s.run();

  // Fill three chunks; when they empty, all but one spare are unmapped.
  std::vector<Task> many;
  for (int i = 0; i < 3000; ++i) many.push_back(s.fork([] {}));
  EXPECT_GE(s.stats().chunks, 3u);
  s.run();
  EXPECT_EQ(s.stats().chunks, 1u);
  for (const Task& t : many) EXPECT_FALSE(t.alive());
  EXPECT_FALSE(many.back().send(1));
}
