// Mailboxes: send queues, receive suspends until a message of its type is there.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "helpers.hpp"

using cbtask::FakeClock;
using cbtask::Scheduler;
using cbtask::Task;

TEST(Messages, ReceiveSuspendsUntilAMessageArrives) {
  FakeClock clock;
  Scheduler s(clock);
  int got = 0;
  Task r = s.receive([&](int v) { got = v; });
  EXPECT_EQ(s.run(), 0u);  // nothing to run: the task waits
  EXPECT_EQ(got, 0);
  EXPECT_TRUE(r.alive());
  EXPECT_EQ(s.stats().receiving, 1u);
  EXPECT_TRUE(s.send(r, 42));
  EXPECT_EQ(s.stats().receiving, 0u);
  EXPECT_EQ(s.stats().ready, 1u);
  EXPECT_EQ(s.run(), 1u);
  EXPECT_EQ(got, 42);
  EXPECT_FALSE(r.alive());
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Messages, DeliveredInSendOrder) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<int> got;
  Task r = s.loop([&] { s.receive<int>([&](int v) { got.push_back(v); }); });
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(r.send(i));
  s.fork([&] {
    for (int i = 5; i < 10; ++i) cbtask::send(r, i);
  });
  s.run();
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(s.stats().receiving, 1u);
  EXPECT_EQ(s.stats().messages, 0u);
  r.cancel();
}

TEST(Messages, ReceiveTakesTheOldestMessageOfItsType) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  Task r = s.receive<int>([&](int v) {
    out += "int" + std::to_string(v) + ' ';
    s.receive<std::string>([&](std::string v2) {
      out += v2 + ' ';
      s.receive<int>([&](int v3) { out += "int" + std::to_string(v3); });
    });
  });
  r.send(std::string("hello"));
  EXPECT_EQ(s.stats().ready, 0u);  // a string does not wake a receive<int>
  r.send(std::string("world"));
  r.send(1);
  r.send(2);
  s.run();
  EXPECT_EQ(out, "int1 hello int2");
  EXPECT_EQ(s.stats().messages, 0u);
  EXPECT_FALSE(r.alive());
}

TEST(Messages, MessageAlreadyQueuedDoesNotSuspend) {
  FakeClock clock;
  Scheduler s(clock);
  std::string out;
  Task t = s.fork([&] {
    s.send(s.self(), 7);  // to itself
    s.receive([&](int v) { out += std::to_string(v); });
  });
  s.fork([&] { out += 'b'; });
  s.run();
  EXPECT_EQ(out, "b7");
  EXPECT_FALSE(t.alive());
}

TEST(Messages, PingPong) {
  FakeClock clock;
  Scheduler s(clock);
  std::vector<std::string> log;
  Task pong = s.loop([&] {
    s.receive([&](std::pair<Task, int> m) {
      log.push_back("pong" + std::to_string(m.second));
      m.first.send(m.second + 1);
    });
  });
  int n = 0;
  s.while_([&] { return n < 6; },
           [&] {
             pong.send(std::make_pair(s.self(), n));
             s.receive([&](int v) {
               log.push_back("ping" + std::to_string(v));
               n = v + 1;
             });
           });
  s.run();
  EXPECT_EQ(log, (std::vector<std::string>{"pong0", "ping1", "pong2", "ping3", "pong4", "ping5"}));
  EXPECT_TRUE(pong.alive());
  pong.cancel();
  EXPECT_EQ(s.stats().tasks, 0u);
}

TEST(Messages, MoveOnlyAndLargeMessages) {
  FakeClock clock;
  Scheduler s(clock);
  int got = 0;
  std::array<char, 200> big{};
  big[199] = 'z';
  char last = 0;
  Task r = s.receive([&](std::unique_ptr<int> p) {
    got = *p;
    s.receive([&](const std::array<char, 200>& a) { last = a[199]; });
  });
  EXPECT_TRUE(r.send(std::make_unique<int>(9)));
  EXPECT_TRUE(r.send(big));
  s.run();
  EXPECT_EQ(got, 9);
  EXPECT_EQ(last, 'z');
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Messages, SendToAnEndedTaskReturnsFalseAndDropsTheMessage) {
  FakeClock clock;
  Scheduler s(clock);
  Task t = s.fork([] {});
  s.run();
  auto live = std::make_shared<int>(0);
  EXPECT_FALSE(t.send(cbtask_test::Tracker(live)));
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Messages, UnreceivedMessagesAreDestroyedWithTheTask) {
  FakeClock clock;
  Scheduler s(clock);
  auto live = std::make_shared<int>(0);
  Task t = s.sleep(10, [] {});
  t.send(cbtask_test::Tracker(live));
  t.send(cbtask_test::Tracker(live));
  EXPECT_EQ(*live, 2);
  EXPECT_EQ(s.stats().messages, 2u);
  s.run();
  EXPECT_EQ(*live, 0);
  EXPECT_EQ(s.stats().messages, 0u);
  EXPECT_EQ(s.stats().aux_bytes, 0u);
}

TEST(Messages, HandlesOfOtherSchedulersAreRejected) {
  FakeClock clock;
  Scheduler a(clock), b(clock);
  Task t = b.receive([](int) {});
  EXPECT_THROW(a.send(t, 1), std::invalid_argument);
  EXPECT_THROW(a.cancel(t), std::invalid_argument);
  EXPECT_THROW(a.send(Task(), 1), std::invalid_argument);
  EXPECT_THROW(Task().send(1), std::invalid_argument);
  EXPECT_TRUE(t.send(1));
  b.run();
  EXPECT_FALSE(t.alive());
}
