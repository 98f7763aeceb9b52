// Timings of the cbtask dispatcher and memory per idle task, printed as a
// table. Each timing runs `batches` batches of `batch` operations; the clock
// is read once per batch, inside the tasks, so reading it costs ~nothing per
// operation. Percentiles are nearest-rank over the per-batch means.
//
//   dispatch_bench [--batches N] [--batch B] [--idle-tasks N]
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "../tools/procmem.hpp"
#include "cbtask/cbtask.hpp"

namespace {

std::int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Collects one timestamp every `per` ticks and stops the scheduler once it
// has `batches` intervals after `warmup` discarded ones.
struct Recorder {
  cbtask::Scheduler* s;
  long per;
  std::size_t batches;
  std::size_t warmup;
  long left;
  std::vector<std::int64_t> stamps;

  Recorder(cbtask::Scheduler& sched, long per_batch, std::size_t n, std::size_t warm)
      : s(&sched), per(per_batch), batches(n), warmup(warm), left(per_batch) {
    stamps.reserve(n + warm + 1);
    stamps.push_back(now_ns());
  }
  bool done() const { return stamps.size() > batches + warmup; }
  void tick() {
    if (--left) return;
    left = per;
    stamps.push_back(now_ns());
    if (done()) s->stop();
  }
  // Mean ns per operation of each batch after the warm-up.
  std::vector<double> per_op(double ops_per_tick = 1.0) const {
    std::vector<double> v;
    for (std::size_t i = warmup + 1; i < stamps.size(); ++i)
      v.push_back(static_cast<double>(stamps[i] - stamps[i - 1]) / (static_cast<double>(per) * ops_per_tick));
    return v;
  }
};

double rank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t r = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  if (r < 1) r = 1;
  return v[r - 1];
}

void report(const char* name, const char* unit, const std::vector<double>& v) {
  std::printf("%-34s %9.2f %9.2f %9.2f  %s\n", name, rank(v, 50), rank(v, 99), *std::min_element(v.begin(), v.end()),
              unit);
}

struct Config {
  std::size_t batches = 2000;
  long batch = 1000;
  long idle_tasks = 100000;
};

// One task looping: the cost of one loop iteration (dispatch + frame + requeue).
std::vector<double> bench_loop(const Config& c, int tasks) {
  cbtask::Scheduler s;
  Recorder rec(s, c.batch, c.batches, c.batches / 20);
  for (int i = 0; i < tasks; ++i) s.loop([&rec] { rec.tick(); });
  s.run();
  return rec.per_op();
}

// A chain of yields: the pending-callback path (inline callable moved out and called).
struct YieldStep {
  Recorder* rec;
  void operator()() const {
    rec->tick();
    if (!rec->done()) rec->s->yield(*this);
  }
};
std::vector<double> bench_yield(const Config& c) {
  cbtask::Scheduler s;
  Recorder rec(s, c.batch, c.batches, c.batches / 20);
  s.fork(YieldStep{&rec});
  s.run();
  return rec.per_op();
}

// dispatch() called from outside, one callback per call.
std::vector<double> bench_dispatch_call(const Config& c) {
  cbtask::Scheduler s;
  long n = 0;
  cbtask::Task t = s.loop([&n] { ++n; });
  std::vector<double> v;
  for (std::size_t b = 0; b < c.batches + c.batches / 20; ++b) {
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < c.batch; ++i) s.dispatch();
    const std::int64_t t1 = now_ns();
    if (b >= c.batches / 20) v.push_back(static_cast<double>(t1 - t0) / static_cast<double>(c.batch));
  }
  t.cancel();
  return v;
}

// sleep(0) chain: the sleep heap and one clock read per callback.
struct SleepStep {
  Recorder* rec;
  void operator()() const {
    rec->tick();
    if (!rec->done()) rec->s->sleep(0, *this);
  }
};
std::vector<double> bench_sleep0(const Config& c) {
  cbtask::Scheduler s;
  Recorder rec(s, c.batch, c.batches / 4, c.batches / 80);
  s.fork(SleepStep{&rec});
  s.run();
  return rec.per_op();
}

// Message ping-pong between two tasks; each callback re-arms its receive.
struct PingPong {
  cbtask::Scheduler* s;
  cbtask::Task ping, pong;
  Recorder* rec;
};
struct Pong {
  PingPong* pp;
  void operator()(int v) const {
    pp->ping.send(v);
    pp->s->receive<int>(*this);
  }
};
struct Ping {
  PingPong* pp;
  void operator()(int v) const {
    pp->rec->tick();
    if (pp->rec->done()) {
      pp->pong.cancel();
      return;
    }
    pp->pong.send(v + 1);
    pp->s->receive<int>(*this);
  }
};
std::vector<double> bench_pingpong(const Config& c) {
  cbtask::Scheduler s;
  Recorder rec(s, c.batch, c.batches, c.batches / 20);
  PingPong pp{&s, {}, {}, &rec};
  pp.pong = s.receive<int>(Pong{&pp});
  pp.ping = s.receive<int>(Ping{&pp});
  pp.pong.send(0);
  s.run();
  return rec.per_op(2.0);  // two switches per round trip
}

// Start and finish a task: fork, run, free.
std::vector<double> bench_fork(const Config& c) {
  cbtask::Scheduler s;
  long n = 0;
  std::vector<double> v;
  for (std::size_t b = 0; b < c.batches / 4 + c.batches / 80; ++b) {
    const std::int64_t t0 = now_ns();
    for (long i = 0; i < c.batch; ++i) s.fork([&n] { ++n; });
    s.run();
    const std::int64_t t1 = now_ns();
    if (b >= c.batches / 80) v.push_back(static_cast<double>(t1 - t0) / static_cast<double>(c.batch));
  }
  return v;
}

long rss_bytes() { return static_cast<long>(procmem::usage().rss); }

void on_timer(int* sink) { ++*sink; }
void on_timer_c(void* sink) { ++*static_cast<int*>(sink); }

// Bytes per task of c.idle_tasks tasks started by start(s, i, sink) in a fresh
// scheduler: accounted and RSS over all of them (one-off pages included), and
// RSS over the second half only (what one more task costs).
template <class Start>
void memory_row(const Config& c, const char* name, Start start) {
  cbtask::Scheduler s;
  int sink = 0;
  const long half = c.idle_tasks / 2;
  const long rss0 = rss_bytes();
  const cbtask::Stats s0 = s.stats();
  for (long i = 0; i < half; ++i) start(s, i, sink);
  const long rss_half = rss_bytes();
  for (long i = half; i < c.idle_tasks; ++i) start(s, i, sink);
  const long rss1 = rss_bytes();
  const cbtask::Stats s1 = s.stats();
  const double n = static_cast<double>(c.idle_tasks);
  std::printf("%-44s %12.1f %12.1f %14.1f\n", name, static_cast<double>(s1.memory_bytes() - s0.memory_bytes()) / n,
              static_cast<double>(rss1 - rss0) / n,
              static_cast<double>(rss1 - rss_half) / static_cast<double>(c.idle_tasks - half));
}

void bench_memory(const Config& c) {
  constexpr std::int64_t kHour = 3600 * 1000;
  std::printf("\nmemory per idle task (%ld tasks, in this process)\n", c.idle_tasks);
  std::printf("%-44s %12s %12s %14s\n", "", "accounted B", "RSS B", "RSS B 2nd half");
  memory_row(c, "sleeping, 16-byte capture [i, &sink]", [](cbtask::Scheduler& s, long i, int& sink) {
    s.sleep(kHour, [i, &sink] { sink += static_cast<int>(i); });
  });
  memory_row(c, "sleeping, 8-byte capture [&sink]",
             [](cbtask::Scheduler& s, long, int& sink) { s.sleep(kHour, [&sink] { ++sink; }); });
  memory_row(c, "sleeping, fn + context call<fn>(ctx)",
             [](cbtask::Scheduler& s, long, int& sink) { s.sleep(kHour, cbtask::call<on_timer>(&sink)); });
  memory_row(c, "sleeping, C style sleep(ms, fn, ctx)",
             [](cbtask::Scheduler& s, long, int& sink) { s.sleep(kHour, on_timer_c, &sink); });
  memory_row(c, "waiting for a message", [](cbtask::Scheduler& s, long, int& sink) {
    s.receive([&sink](int v) { sink += v; });
  });
  std::printf("(accounted = Scheduler::stats().memory_bytes(): mapped slab chunks, sleep heap capacity, heap blocks;\n"
              " RSS B = resident growth / tasks; 2nd half = growth while the second half of the tasks start / their count;\n"
              " full task slot = %zu bytes, compact sleeper = %zu + callback (8 or 16), sleep-heap entry = %zu;\n"
              " run `taskmem memory` for the per-count RSS slope)\n",
              cbtask::Stats::task_bytes, cbtask::Stats::compact_head_bytes, cbtask::Stats::sleep_entry_bytes);
}

[[noreturn]] void usage(const std::string& problem) {
  if (!problem.empty()) std::fprintf(stderr, "dispatch_bench: %s\n", problem.c_str());
  std::fprintf(stderr, "usage: dispatch_bench [--batches N] [--batch B] [--idle-tasks N]\n");
  std::exit(2);
}

long parse_positive(const std::string& opt, const char* text) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno || end == text || *end || v < 1) usage(opt + " wants an integer >= 1, got '" + text + "'");
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc && (a == "--batches" || a == "--batch" || a == "--idle-tasks")) usage(a + " needs a value");
    if (a == "--batches")
      c.batches = static_cast<std::size_t>(parse_positive(a, argv[++i]));
    else if (a == "--batch")
      c.batch = parse_positive(a, argv[++i]);
    else if (a == "--idle-tasks")
      c.idle_tasks = parse_positive(a, argv[++i]);
    else
      usage("unknown option '" + a + "'; valid: --batches --batch --idle-tasks");
  }
  if (c.batches < 80) usage("--batches wants at least 80");

  std::printf("cbtask dispatch timings: %zu batches of %ld operations (nearest-rank percentiles of batch means)\n",
              c.batches, c.batch);
  std::printf("%-34s %9s %9s %9s\n", "operation", "median", "p99", "min");
  report("loop iteration, 1 task", "ns/dispatch", bench_loop(c, 1));
  report("loop iteration, 1000 tasks", "ns/dispatch", bench_loop(c, 1000));
  report("yield chain (pending callback)", "ns/dispatch", bench_yield(c));
  report("dispatch() called from outside", "ns/call", bench_dispatch_call(c));
  report("sleep(0) chain", "ns/dispatch", bench_sleep0(c));
  report("message ping-pong", "ns/switch", bench_pingpong(c));
  report("fork + run + free", "ns/task", bench_fork(c));
  bench_memory(c);
  return 0;
}
