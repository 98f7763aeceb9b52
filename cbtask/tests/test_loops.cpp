// loop, for_, while_ and do_while: iteration counts, one iteration per turn,
// nesting, and the `done` continuation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask_test::kMs;

TEST(Loops, ForWhileDoWhileCount) {
  FakeClock clock;
  Scheduler s(clock);
  int i = -1, fors = 0, w = 0, whiles = 0, dw = 0, dos = 0, never = 0, once = 0;
  s.for_([&] { i = 0; }, [&] { return i < 7; }, [&] { ++i; }, [&] { ++fors; });
  s.while_([&] { return w < 4; }, [&] { ++w, ++whiles; });
  s.do_while([&] { ++dw, ++dos; }, [&] { return dw < 3; });
  s.while_([] { return false; }, [&] { ++never; });
  s.do_while([&] { ++once; }, [] { return false; });
  s.run();
  EXPECT_EQ(fors, 7);
  EXPECT_EQ(i, 7);
  EXPECT_EQ(whiles, 4);
  EXPECT_EQ(dos, 3);
  EXPECT_EQ(never, 0);
  EXPECT_EQ(once, 1);
  EXPECT_EQ(s.stats().tasks, 0u);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Loops, TwoLoopsInterleaveOneIterationPerTurn) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  int a = 0, b = 0;
  s.for_([&] { a = 0; }, [&] { return a < 3; }, [&] { ++a; }, [&] { out += 'A' + std::to_string(a) + ' '; });
  s.while_([&] { return b < 3; }, [&] { out += 'B' + std::to_string(b++) + ' '; });
  s.run();
  EXPECT_EQ(out, "A0 B0 A1 B1 A2 B2 ");
}

TEST(Loops, ALoopYieldsToForkedTasks) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  int n = 0;
  s.while_([&] { return n < 3; },
           [&] {
             out += 'L';
             if (n++ == 0) s.fork([&] { out += 'f'; });
           });
  s.run();
  EXPECT_EQ(out, "LfLL");
}

TEST(Loops, InfiniteLoopRunsUntilCancelled) {
  FakeClock clock;
  Scheduler s(clock);
  int n = 0;
  cbtask::Task t = s.loop([&] { ++n; });
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(s.dispatch());
  EXPECT_EQ(n, 100);
  EXPECT_TRUE(t.cancel());
  EXPECT_FALSE(s.dispatch());
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Loops, IterationWaitsForItsSleepChain) {
  // The study's blinking LED: an iteration ends when its sleeps are done.
  FakeClock clock;
  Scheduler s(clock);
  std::vector<std::pair<std::int64_t, bool>> led;
  int rounds = 0;
  s.while_([&] { return rounds < 3; },
           [&] {
             ++rounds;
             led.emplace_back(clock.now_ns(), true);
             s.sleep(500, [&] {
               led.emplace_back(clock.now_ns(), false);
               s.sleep(500, [] {});
             });
           });
  s.run();
  const std::vector<std::pair<std::int64_t, bool>> want{{0, true},           {500 * kMs, false},
                                                        {1000 * kMs, true},  {1500 * kMs, false},
                                                        {2000 * kMs, true},  {2500 * kMs, false}};
  EXPECT_EQ(led, want);
  EXPECT_EQ(clock.now_ns(), 3000 * kMs);
}

TEST(Loops, NestedLoopsFinishTheInnerLoopFirst) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  int i = 0, j = 0;
  s.for_([&] { i = 0; }, [&] { return i < 2; }, [&] { ++i; },
         [&] {
           out += "o" + std::to_string(i) + ' ';
           s.for_([&] { j = 0; }, [&] { return j < 3; }, [&] { ++j; },
                  [&] { out += "i" + std::to_string(i) + std::to_string(j) + ' '; });
         });
  s.run();
  EXPECT_EQ(out, "o0 i00 i01 i02 o1 i10 i11 i12 ");
}

TEST(Loops, DoneRunsAfterTheLoopAndMayChooseAContinuation) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  int n = 0;
  s.while_([&] { return n < 2; }, [&] { out += std::to_string(n++); },
           [&] {
             out += " done";
             s.sleep(5, [&] { out += " later"; });
           });
  s.do_while([&] { out += " dw"; }, [] { return false; }, [&] { out += " dw-done"; });
  s.run();
  EXPECT_EQ(out, "0 dw1 dw-done done later");
  EXPECT_EQ(clock.now_ns(), 5 * kMs);
}

TEST(Loops, LoopInsideAnOuterLoopThenDoneThenOuterContinues) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  int outer = 0;
  s.while_([&] { return outer < 2; },
           [&] {
             ++outer;
             auto k = std::make_shared<int>(0);
             s.while_([k] { return *k < 2; }, [&, k] { out += "x" + std::to_string((*k)++); },
                      [&] { out += "| "; });
           },
           [&] { out += "end"; });
  s.run();
  EXPECT_EQ(out, "x0x1| x0x1| end");
}
