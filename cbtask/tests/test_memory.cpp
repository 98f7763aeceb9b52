// Memory: task slots come from a growing slab, small callbacks live inline,
// everything is released when tasks end or the scheduler is destroyed.
#include <gtest/gtest.h>

#include <array>
#include <memory>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;
using cbtask_test::live_blocks;
using cbtask_test::Tracker;

TEST(Memory, TaskSlotIs56BytesAndSmallCallbacksNeedNoHeap) {
  EXPECT_EQ(cbtask::Stats::task_bytes, 56u);
  FakeClock clock;
  Scheduler s(clock);
  s.fork([] {});  // maps the first chunk
  s.run();
  int sink = 0;
  const std::int64_t before = live_blocks();
  for (int i = 0; i < 1000; ++i) s.sleep(1000, [i, &sink] { sink += i; });  // 16-byte closure
  for (int i = 0; i < 1000; ++i) s.receive([&sink](int v) { sink += v; });
  // Only the sleep heap's array grows; no block per task.
  EXPECT_LE(live_blocks() - before, 1);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
  EXPECT_EQ(s.stats().chunks, 2u);  // 2000 slots: 1169 per 64 KiB chunk
}

TEST(Memory, LargeCallbacksAreBoxedAndFreed) {
  FakeClock clock;
  Scheduler s(clock);
  std::array<long, 8> big{};
  big[7] = 5;
  long got = 0;
  s.fork([big, &got] { got = big[7]; });
  EXPECT_GE(s.stats().aux_bytes, sizeof(big));
  s.run();
  EXPECT_EQ(got, 5);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Memory, SlabGrowsWithoutLimitAndShrinks) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<Task> tasks;
  for (int i = 0; i < 20000; ++i) tasks.push_back(s.receive([](int) {}));
  const cbtask::Stats full = s.stats();
  EXPECT_EQ(full.tasks, 20000u);
  EXPECT_EQ(full.chunks, 18u);  // ceil(20000 / 1169)
  for (Task& t : tasks) t.cancel();
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(s.stats().chunks, 1u);  // one spare kept
}

TEST(Memory, SlotsAreReusedInsteadOfGrowing) {
  FakeClock clock;
  Scheduler s(clock);
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 1000; ++i) s.fork([] {});
    s.run();
  }
  EXPECT_EQ(s.stats().chunks, 1u);
}

TEST(Memory, DestroyingTheSchedulerReleasesEveryTask) {
  auto live = std::make_shared<int>(0);
  const std::int64_t before = live_blocks();
  {
    FakeClock clock;
    Scheduler s(clock);
    s.fork([t = Tracker(live)] {});                                   // ready
    s.sleep(100, [t = Tracker(live)] {});                             // sleeping
    Task r = s.receive([t = Tracker(live)](int) {});                  // receiving
    r.send(Tracker(live));                                             // a queued message
    r.send(std::string(100, 'x'));
    s.loop([t = Tracker(live), pad = std::array<char, 64>{}] {});      // a loop frame
    s.fork([&s, live] {                                                 // sleeping with a nested loop
      s.while_([] { return true; }, [&s, t = Tracker(live)] { s.sleep(1000, [] {}); });
    });
    for (int i = 0; i < 5; ++i) s.dispatch();  // the first task ends; the last sleeps in its loop
    EXPECT_EQ(*live, 5);
    EXPECT_EQ(s.stats().sleeping, 2u);
  }
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(live_blocks(), before);
}

namespace {
// Starts a new task when destroyed, like a callback that posts a "closed" event.
struct ForkOnDestroy {
  Scheduler* s;
  std::shared_ptr<int> destroyed;
  ForkOnDestroy(Scheduler* sched, std::shared_ptr<int> d) : s(sched), destroyed(std::move(d)) {}
  ForkOnDestroy(ForkOnDestroy&& o) noexcept : s(o.s), destroyed(std::move(o.destroyed)) { o.s = nullptr; }
  ForkOnDestroy(const ForkOnDestroy&) = delete;
  ~ForkOnDestroy() {
    if (s) {
      ++*destroyed;
      s->fork([d = destroyed] { ++*d; });
    }
  }
  void operator()() const {}
};
}  // namespace

TEST(Memory, TeardownCopesWithDestructorsThatStartTasks) {
  auto destroyed = std::make_shared<int>(0);
  {
    FakeClock clock;
    Scheduler s(clock);
    s.sleep(10, ForkOnDestroy(&s, destroyed));
  }
  EXPECT_EQ(*destroyed, 1);  // the forked task was destroyed without running
  EXPECT_EQ(destroyed.use_count(), 1);
}

TEST(Memory, FreedBlocksAreRecycledUpToABoundAndTrimmed) {
  FakeClock clock;
  Scheduler s(clock);
  s.fork([] {});
  s.run();
  long sum = 0;
  Task r = s.loop([&] { s.receive([&](long v) { sum += v; }); });
  const std::int64_t before = live_blocks();
  for (int round = 0; round < 3; ++round) {
    for (long i = 0; i < 1000; ++i) r.send(i);
    s.run();
  }
  EXPECT_EQ(sum, 3 * 999 * 1000 / 2);
  const cbtask::Stats st = s.stats();
  EXPECT_GT(st.cache_bytes, 0u);
  EXPECT_LE(st.cache_bytes, 64u * 32u);  // at most 64 blocks of the message's 32-byte class
  s.trim();
  EXPECT_EQ(s.stats().cache_bytes, 0u);
  EXPECT_EQ(s.stats().chunks, 1u);  // the spare chunk is gone; the loop task's chunk stays
  // The loop task holds its frame, mailbox and pending receive: nothing else.
  EXPECT_LE(live_blocks() - before, 0);
  r.cancel();
}

TEST(Memory, TrimShrinksTheSleepHeap) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<Task> tasks;
  for (int i = 0; i < 10000; ++i) tasks.push_back(s.sleep(i, [] {}));
  EXPECT_GE(s.stats().heap_bytes, 10000u * sizeof(void*));
  for (std::size_t i = 100; i < tasks.size(); ++i) tasks[i].cancel();
  s.trim();
  EXPECT_EQ(s.stats().heap_bytes, 512u * sizeof(void*));  // one page holds the 100 left
  s.run();  // the heap still works after moving
  EXPECT_EQ(s.stats().tasks, 0u);
  s.trim();
  EXPECT_EQ(s.stats().heap_bytes, 0u);
  EXPECT_EQ(s.stats().chunks, 0u);
}

TEST(Memory, StatsCountStates) {
  FakeClock clock;
  Scheduler s(clock);
  s.fork([] {});
  s.sleep(5, [] {});
  Task r = s.receive([](int) {});
  r.send(std::string("queued"));
  const cbtask::Stats st = s.stats();
  EXPECT_EQ(st.tasks, 3u);
  EXPECT_EQ(st.ready, 1u);
  EXPECT_EQ(st.sleeping, 1u);
  EXPECT_EQ(st.receiving, 1u);
  EXPECT_EQ(st.messages, 1u);
  EXPECT_EQ(st.chunk_bytes, 65536u);
  EXPECT_GE(st.memory_bytes(), st.chunk_bytes + st.aux_bytes);
}
