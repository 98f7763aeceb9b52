// Compact sleepers: tasks started sleeping outside a callback with an inline
// callback live in compact slots (one chunk per callback type) until they
// wake or get a message; cancellation, handles and the sleep order work as
// for full slots.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;
using cbtask_test::kMs;
using cbtask_test::live_blocks;
using cbtask_test::Tracker;

namespace {

void bump(int* n) { ++*n; }
int ran = 0;
void bump_c(void* n) { ++*static_cast<int*>(n); }

// A callback too big for inline storage: its sleepers always take full slots.
struct Big {
  std::string* out;
  char tag;
  std::array<char, 32> pad{};
  void operator()() const { *out += tag; }
};

}  // namespace

// A scheduler on a fake clock whose sleepers take compact slots from the first.
class Compact : public ::testing::Test {
 protected:
  Compact() { s.set_compact_after(0); }
  FakeClock clock;
  Scheduler s{clock};
};

TEST(CompactSlots, SleepersStartedOutsideCallbacksTakeCompactSlotsAfterTheThreshold) {
  FakeClock clock;
  Scheduler s(clock);
  EXPECT_EQ(s.compact_after(), Scheduler::kDefaultCompactAfter);
  int n = 0;
  for (unsigned i = 0; i < Scheduler::kDefaultCompactAfter; ++i) s.sleep(5, cbtask::call<bump>(&n));
  EXPECT_EQ(s.stats().compact, 0u);  // the first ones of a type take full slots
  s.sleep(5, cbtask::call<bump>(&n));
  EXPECT_EQ(s.stats().compact, 1u);
  s.set_compact_after(0);
  s.sleep(5, [&n] { n += 10; });  // another type: compact from the first
  s.sleep(5, bump_c, &n);
  s.sleep(5, Big{nullptr, 'x'});  // boxed: never compact
  s.fork([&] { s.sleep(1, [&n] { n += 100; }); });  // continues a full slot
  EXPECT_EQ(s.stats().compact, 3u);
  EXPECT_EQ(s.stats().sleeping, Scheduler::kDefaultCompactAfter + 4);
}

TEST_F(Compact, EightByteSleepersTakeTwentyFourByteSlotsAndNoHeapBlocks) {
  int n = 0;
  s.sleep(1, cbtask::call<bump>(&n));  // maps the chunk of this type
  const std::int64_t before = live_blocks();
  for (int i = 0; i < 2000; ++i) s.sleep(1, cbtask::call<bump>(&n));
  EXPECT_EQ(s.stats().compact, 2001u);
  EXPECT_EQ(s.stats().chunks, 1u);  // (65536 - 64) / 24 = 2728 slots per chunk
  EXPECT_EQ(s.stats().aux_bytes, 0u);
  EXPECT_LE(live_blocks() - before, 0);
  EXPECT_EQ(s.run(), 2001u);
  EXPECT_EQ(n, 2001);
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(s.stats().compact, 0u);
}

TEST_F(Compact, SixteenByteCallbacksAndTheCStyleSleepRun) {
  int n = 0;
  std::vector<std::int64_t> at;
  s.sleep(3, bump_c, &n);
  FakeClock* c = &clock;
  s.sleep(std::chrono::milliseconds(2), [&at, c] { at.push_back(c->now_ns()); });
  s.sleep_until(7 * kMs, [&at, c] { at.push_back(c->now_ns()); });
  EXPECT_EQ(s.stats().compact, 3u);
  EXPECT_THROW(s.sleep(1, nullptr, &n), std::invalid_argument);
  s.run();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(at, (std::vector<std::int64_t>{2 * kMs, 7 * kMs}));
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST_F(Compact, CancelDestroysTheCallbackAndLeavesTheHeap) {
  auto live = std::make_shared<int>(0);
  std::vector<Task> tasks;
  ran = 0;
  // 16 bytes: a Tracker is a shared_ptr.
  for (int i = 0; i < 100; ++i) tasks.push_back(s.sleep(i % 7, [t = Tracker(live)] { ++ran; }));
  EXPECT_EQ(s.stats().compact, 100u);
  EXPECT_EQ(*live, 100);
  for (std::size_t i = 0; i < tasks.size(); i += 2) EXPECT_TRUE(tasks[i].cancel());
  EXPECT_EQ(*live, 50);
  EXPECT_EQ(s.stats().compact, 50u);
  EXPECT_EQ(s.stats().sleeping, 50u);
  for (std::size_t i = 0; i < tasks.size(); i += 2) {
    EXPECT_FALSE(tasks[i].alive());
    EXPECT_FALSE(tasks[i].cancel());
    EXPECT_FALSE(tasks[i].send(1));
  }
  s.run();
  EXPECT_EQ(ran, 50);
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST_F(Compact, StaleHandlesStayDeadWhenTheSlotIsReusedOrTheChunkUnmapped) {
  int n = 0;
  Task old = s.sleep(1, cbtask::call<bump>(&n));
  EXPECT_TRUE(old.cancel());
  Task reused = s.sleep(1, cbtask::call<bump>(&n));  // most likely the same slot
  EXPECT_FALSE(old.alive());
  EXPECT_FALSE(old.cancel());
  EXPECT_TRUE(reused.alive());
  EXPECT_NE(old, reused);
  EXPECT_TRUE(reused.cancel());

  // Two chunks of 24-byte slots; when both empty one is unmapped and the other
  // kept as the spare, then reused for full slots (another slot size).
  std::vector<Task> many;
  for (int i = 0; i < 3000; ++i) many.push_back(s.sleep(1, cbtask::call<bump>(&n)));
  EXPECT_EQ(s.stats().chunks, 2u);
  for (Task& t : many) EXPECT_TRUE(t.cancel());
  EXPECT_EQ(s.stats().chunks, 1u);
  std::vector<Task> full;
  for (int i = 0; i < 1500; ++i) full.push_back(s.receive([](int) {}));
  for (Task& t : many) {
    EXPECT_FALSE(t.alive());
    EXPECT_FALSE(t.cancel());
    EXPECT_FALSE(t.send(1));
  }
  for (const Task& t : full) EXPECT_TRUE(t.alive());
  for (Task& t : full) t.cancel();

  // The spare chunk of 24-byte slots taken by another callback type of that size.
  Task a = s.sleep(1, cbtask::call<bump>(&n));
  EXPECT_TRUE(a.cancel());
  Task b = s.sleep(1, [&n] { n += 2; });
  EXPECT_FALSE(a.alive());
  EXPECT_FALSE(a.cancel());
  EXPECT_TRUE(b.alive());
  s.run();
  EXPECT_EQ(n, 2);
}

TEST_F(Compact, HandlesFollowTheTaskIntoAFullSlot) {
  struct Ctx {
    std::string out;
    Task t;
  } ctx;
  std::string& out = ctx.out;
  Task& t = ctx.t;
  t = s.sleep(5, [&ctx] {  // 8 bytes
    ctx.out += "woke ";
    EXPECT_EQ(cbtask::self(), ctx.t);
    cbtask::receive([&ctx](int v) { ctx.out += std::to_string(v); });
  });
  EXPECT_EQ(s.stats().compact, 1u);
  s.run();
  EXPECT_EQ(out, "woke ");
  EXPECT_EQ(s.stats().compact, 0u);
  EXPECT_TRUE(t.alive());
  EXPECT_EQ(s.stats().receiving, 1u);
  EXPECT_TRUE(t.send(42));
  s.run();
  EXPECT_EQ(out, "woke 42");
  EXPECT_FALSE(t.alive());
  EXPECT_FALSE(t.send(1));
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST_F(Compact, AMessageMovesASleeperIntoAFullSlotInItsPlace) {
  std::string out;
  Task a = s.sleep(10, [&out] {
    out += 'a';
    cbtask::receive([&out](std::string m) { out += m; });
  });
  s.sleep(10, [&out] { out += 'b'; });
  EXPECT_TRUE(a.send(std::string("!")));
  EXPECT_EQ(s.stats().compact, 1u);  // b still compact
  EXPECT_EQ(s.stats().sleeping, 2u);
  EXPECT_EQ(s.stats().messages, 1u);
  s.run();
  EXPECT_EQ(out, "ab!");  // a kept its place before b
  EXPECT_EQ(clock.now_ns(), 10 * kMs);
  EXPECT_FALSE(a.alive());
}

TEST_F(Compact, CancelAfterTheMoveAndSelfCancel) {
  auto live = std::make_shared<int>(0);
  Task a = s.sleep(1, [t = Tracker(live)] { cbtask::receive([](int) {}); });
  Task b = s.sleep(1, [] {
    EXPECT_TRUE(cbtask::self().cancel());
    EXPECT_FALSE(cbtask::self().alive());
    cbtask::sleep(1, [] {});  // discarded
  });
  s.run();
  EXPECT_TRUE(a.alive());
  EXPECT_FALSE(b.alive());
  EXPECT_TRUE(a.cancel());
  EXPECT_FALSE(a.alive());
  EXPECT_FALSE(a.cancel());
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(CompactSlots, EqualDeadlinesWakeInCallOrderAcrossSlotKinds) {
  FakeClock clock;
  Scheduler s(clock);
  s.set_compact_after(3);  // the first three of each type take full slots
  std::string out;
  auto small = [&out](char c) { return [&out, c] { out += c; }; };
  s.sleep(7, small('a'));                   // full
  s.sleep(7, Big{&out, 'b'});               // full (boxed)
  s.sleep(7, small('c'));                   // full
  s.sleep(7, small('d'));                   // full
  s.sleep(7, small('e'));                   // compact
  s.sleep(7, Big{&out, 'f'});               // full
  s.sleep(7, small('g'));                   // compact
  s.sleep(3, [&] {                          // re-sleeps in its (full) slot, after all of them
    s.sleep_until(7 * kMs, [&out] { out += 'h'; });
  });
  EXPECT_EQ(s.stats().compact, 2u);
  s.run();
  EXPECT_EQ(out, "abcdefgh");
}

TEST_F(Compact, SequenceNumbersAreRenumberedBeforeTheyWrap) {
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) s.sleep(9, [&order, i] { order.push_back(i); });
  s.sleep(2, [&order] { order.push_back(-1); });
  cbtask::detail::Access::set_sleep_seq(s, 0xFFFFFFFFu - 3);
  for (int i = 5; i < 10; ++i) s.sleep(9, [&order, i] { order.push_back(i); });  // crosses 2^32 - 1
  s.sleep(1, [&order] { order.push_back(-2); });
  s.run();
  EXPECT_EQ(order, (std::vector<int>{-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST_F(Compact, ExceptionEndsTheTaskAndPropagates) {
  int n = 0;
  Task t = s.sleep(1, [] { throw std::runtime_error("boom"); });
  s.sleep(2, cbtask::call<bump>(&n));
  EXPECT_THROW(s.run(), std::runtime_error);
  EXPECT_FALSE(t.alive());
  s.run();
  EXPECT_EQ(n, 1);
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(CompactSlots, TeardownDestroysCompactSleepers) {
  auto live = std::make_shared<int>(0);
  const std::int64_t before = live_blocks();
  {
    FakeClock clock;
    Scheduler s(clock);
    s.set_compact_after(0);
    for (int i = 0; i < 3000; ++i) s.sleep(5 + i, [t = Tracker(live)] {});
    s.sleep(1, [t = Tracker(live)] { cbtask::receive([](int) {}); });
    clock.advance_ms(1);
    s.run_until_idle();  // one woke and moved; the task with the receive waits
    EXPECT_EQ(*live, 3000);
  }
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(live_blocks(), before);
}

namespace {
// A periodic task: sleeps again with a copy of itself (the same type), `left` times.
struct Tick {
  int* left;
  std::vector<std::int64_t>* at;
  void operator()() const {
    at->push_back(cbtask::current_scheduler().now_ns());
    if (--*left > 0) cbtask::sleep(10, *this);
  }
};
}  // namespace

TEST_F(Compact, APeriodicTaskSleepsOnInItsCompactSlot) {
  int left = 4;
  std::vector<std::int64_t> at;
  Task t = s.sleep(10, Tick{&left, &at});
  for (int i = 1; i < 4; ++i) {
    s.run_until(i * 10 * kMs);
    EXPECT_EQ(s.stats().compact, 1u);
    EXPECT_EQ(s.stats().chunks, 1u);  // no full slot was ever needed
    EXPECT_TRUE(t.alive());
  }
  s.run();
  EXPECT_EQ(at, (std::vector<std::int64_t>{10 * kMs, 20 * kMs, 30 * kMs, 40 * kMs}));
  EXPECT_FALSE(t.alive());
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST_F(Compact, WokenTasksInTheRunQueueCanBeCancelledOrSentTo) {
  std::string out;
  Task a, b, c, d;
  s.sleep(5, [&] {  // first of the five woken: queue A B C D behind it
    EXPECT_TRUE(c.send(1));   // C (compact, between two full slots) moves into a full slot in place
    EXPECT_TRUE(b.cancel());  // B (full) follows A (compact)
  });
  a = s.sleep(5, [&out] { out += 'A'; });   // compact
  b = s.sleep(5, Big{&out, 'B'});           // full
  c = s.sleep(5, [&out] { out += 'C'; });   // compact
  d = s.sleep(5, Big{&out, 'D'});           // full
  EXPECT_EQ(s.stats().compact, 3u);
  s.run();
  EXPECT_EQ(out, "ACD");
  EXPECT_EQ(s.stats().messages, 0u);  // C's message went with it
  EXPECT_EQ(s.stats().tasks, 0u);
  for (const Task* t : {&a, &b, &c, &d}) EXPECT_FALSE(t->alive());
}

TEST_F(Compact, CancellingAWokenCompactTaskInTheMiddleOfTheQueue) {
  std::string out;
  Task b;
  s.sleep(5, [&] { EXPECT_TRUE(b.cancel()); });
  s.sleep(5, [&out] { out += 'a'; });
  b = s.sleep(5, [&out] { out += 'b'; });
  s.sleep(5, Big{&out, 'c'});
  s.sleep(5, [&out] { out += 'd'; });
  s.run();
  EXPECT_EQ(out, "acd");
}

namespace {
struct TickThenThrow {
  Tracker t;
  void operator()() const {
    cbtask::sleep(1, *this);  // stored in the compact slot again...
    throw std::runtime_error("after choosing");  // ...and destroyed with the task
  }
};
}  // namespace

TEST_F(Compact, AnExceptionAfterSleepingOnDestroysTheStoredCallback) {
  auto live = std::make_shared<int>(0);
  Task t = s.sleep(1, TickThenThrow{Tracker(live)});
  EXPECT_EQ(*live, 1);
  EXPECT_THROW(s.run(), std::runtime_error);
  EXPECT_EQ(*live, 0);
  EXPECT_FALSE(t.alive());
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(CompactSlots, TeardownDestroysWokenCompactTasksStillQueued) {
  auto live = std::make_shared<int>(0);
  {
    FakeClock clock;
    Scheduler s(clock);
    s.set_compact_after(0);
    for (int i = 0; i < 1000; ++i) s.sleep(1, [t = Tracker(live)] {});
    clock.advance_ms(1);
    EXPECT_TRUE(s.dispatch());  // wakes all, runs one
    EXPECT_EQ(s.stats().ready, 999u);
    EXPECT_EQ(*live, 999);
  }
  EXPECT_EQ(*live, 0);
}
