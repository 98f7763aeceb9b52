// taskmem: the measurement program of the rtscope `tasks` workload.
//
//   taskmem memory --model M [--counts 1,10,...] [--repeat R] --output F.rts
//   taskmem switch --model M [--iterations N] [--batch B] [--warmup W] [--pin same|split|none] --output F.rts
//
// memory: memory held by N idle tasks, one sample per count (and repeat),
//   each measured in a fresh process (taskmem re-executes itself) so nothing
//   of an earlier count is resident. Models:
//     cbtask          N cbtask tasks sleeping (an hour; 16-byte callback)
//     cbtask_receive  N cbtask tasks waiting for a message
//     pthread         N POSIX threads (default attributes) blocked on a condition variable
//     std_thread      N std::threads blocked on a std::condition_variable
//   Columns: rss_bytes (primary: resident-set growth, exact, from
//   /proc/self/smaps_rollup; see procmem.hpp),
//   tasks, vsz_bytes (virtual-size growth: thread stacks show here),
//   alloc_bytes (operator-new bytes still allocated, by malloc_usable_size,
//   plus for cbtask the bytes of its mmap'd task slabs and sleep-heap array).
//   Each model first creates and destroys one task (or thread), so faulting
//   in code pages is not counted as task memory.
//
// switch: ping-pong between two tasks; a sample is the mean time of one
//   switch over a batch of B round trips (2*B switches). Models:
//     cbtask          two cbtask tasks exchanging int messages (one thread)
//     pthread_pipe    two threads, one byte through a pair of pipes
//     pthread_futex   two threads handing a turn over with futex wait/wake
//     std_thread      two std::threads, std::mutex + std::condition_variable
//   --pin same (default) runs both threads on one CPU, so every handoff is a
//   context switch; split puts them on two CPUs (a cross-CPU wake-up); none
//   leaves placement to the kernel.
//
// Exit status: 0 written, 1 measurement or output failure, 2 usage error.
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.hpp"
#include "procmem.hpp"
#include "cbtask/cbtask.hpp"

extern "C" {
#include "json.h"
#include "samplefile.h"
}

namespace {

constexpr const char* kTool = "taskmem";
constexpr const char* kVersion = "0.1.0";
constexpr const char* kDefaultCounts = "1,10,100,1000,2000,5000,10000,20000,50000";
const std::vector<std::string> kMemoryModels{"cbtask", "cbtask_receive", "pthread", "std_thread"};
const std::vector<std::string> kSwitchModels{"cbtask", "pthread_pipe", "pthread_futex", "std_thread"};
const std::vector<std::string> kPins{"same", "split", "none"};

// ---- command line ------------------------------------------------------------------

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const char* kUsage =
    "usage: taskmem memory --model M [--counts LIST] [--repeat R] --output FILE.rts\n"
    "       taskmem switch --model M [--iterations N] [--batch B] [--warmup W] [--pin P] --output FILE.rts\n"
    "memory models: cbtask, cbtask_receive, pthread, std_thread\n"
    "  --counts LIST    comma-separated task counts (default 1,10,100,1000,2000,5000,10000,20000,50000)\n"
    "  --repeat R       samples per count, each in a fresh process (default 1)\n"
    "switch models: cbtask, pthread_pipe, pthread_futex, std_thread\n"
    "  --iterations N   samples to record (default 1000)\n"
    "  --batch B        round trips per sample (default 1000; a round trip is 2 switches)\n"
    "  --warmup W       batches run first and not recorded (default 10)\n"
    "  --pin P          same (default): both threads on one CPU; split: two CPUs; none\n";

// --name value pairs after the subcommand.
class Args {
 public:
  Args(int argc, char** argv, int first, const std::vector<std::string>& known) {
    for (int i = first; i < argc; ++i) {
      const std::string a = argv[i];
      if (std::find(known.begin(), known.end(), a) == known.end())
        throw UsageError("unknown option '" + a + "'; valid: " + join(known));
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      for (auto& kv : values_)
        if (kv.first == a) throw UsageError(a + " given twice");
      values_.emplace_back(a, argv[++i]);
    }
  }
  const char* get(const std::string& name) const {
    for (const auto& kv : values_)
      if (kv.first == name) return kv.second.c_str();
    return nullptr;
  }
  std::string required(const std::string& name) const {
    const char* v = get(name);
    if (!v || !*v) throw UsageError(name + " is required");
    return v;
  }
  long number(const std::string& name, long def, long min, long max) const {
    const char* v = get(name);
    return v ? parse_long(name, v, min, max) : def;
  }
  std::string choice(const std::string& name, const std::vector<std::string>& valid, const char* def) const {
    const char* v = get(name);
    const std::string s = v ? v : (def ? def : "");
    if (!v && !def) throw UsageError(name + " is required; valid: " + join(valid));
    if (std::find(valid.begin(), valid.end(), s) == valid.end())
      throw UsageError(name + " '" + s + "' is not valid; valid: " + join(valid));
    return s;
  }
  static long parse_long(const std::string& name, const std::string& text, long min, long max) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (errno || end == text.c_str() || *end || v < min || v > max)
      throw UsageError(name + " wants an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                       ", got '" + text + "'");
    return v;
  }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
};

std::vector<long> parse_counts(const std::string& text) {
  std::vector<long> counts;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    counts.push_back(Args::parse_long("--counts", text.substr(start, comma - start), 1, 10000000));
    start = comma + 1;
  }
  return counts;
}

// ---- measuring helpers -----------------------------------------------------------------

std::int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string rfc3339_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &t);
  std::snprintf(buf + n, sizeof buf - n, ".%03ldZ", ts.tv_nsec / 1000000);
  return buf;
}

struct Mem {
  std::int64_t rss = 0, vsz = 0, alloc = 0;
};

Mem read_mem() {
  const procmem::Usage u = procmem::usage();
  if (u.rss < 0 || u.vsz < 0) throw Failure("cannot read the memory use of this process from /proc/self");
  Mem m;
  m.rss = u.rss;
  m.vsz = u.vsz;
  m.alloc = alloc_counter::now().live_bytes;
  return m;
}

Mem delta(const Mem& after, const Mem& before) {
  return {after.rss - before.rss, after.vsz - before.vsz, after.alloc - before.alloc};
}

// ---- memory models (run in a fresh child process) ----------------------------------------

void make_idle_cbtasks(cbtask::Scheduler& s, long n, bool receive, long& sink) {
  if (receive) {
    for (long i = 0; i < n; ++i) s.receive([&sink](long v) { sink += v; });
  } else {
    for (long i = 0; i < n; ++i) s.sleep(3600 * 1000, [i, &sink] { sink += i; });
  }
}

Mem measure_cbtask(long n, bool receive) {
  long sink = 0;
  {
    cbtask::Scheduler warm;  // fault in the code and allocator paths first
    make_idle_cbtasks(warm, 1, receive, sink);
  }
  cbtask::Scheduler s;
  const Mem before = read_mem();
  make_idle_cbtasks(s, n, receive, sink);
  Mem d = delta(read_mem(), before);
  // The task slabs and the sleep heap's array are not operator-new memory.
  const cbtask::Stats st = s.stats();
  d.alloc += static_cast<std::int64_t>(st.chunk_bytes + st.heap_bytes);
  if (st.tasks != static_cast<std::size_t>(n) || (receive ? st.receiving : st.sleeping) != static_cast<std::size_t>(n))
    throw Failure("cbtask did not hold the expected number of idle tasks");
  return d;
}

// Threads that block on one condition variable until released.
struct Gate {
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  pthread_cond_t all_started = PTHREAD_COND_INITIALIZER;
  long started = 0;
  long target = 0;
  bool release = false;

  void wait_idle() {
    pthread_mutex_lock(&mu);
    if (++started == target) pthread_cond_signal(&all_started);
    while (!release) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
  }
  void wait_all_started() {
    pthread_mutex_lock(&mu);
    while (started < target) pthread_cond_wait(&all_started, &mu);
    pthread_mutex_unlock(&mu);
  }
  void open_all() {
    pthread_mutex_lock(&mu);
    release = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
  }
};

void* idle_thread(void* gate) {
  static_cast<Gate*>(gate)->wait_idle();
  return nullptr;
}

Mem measure_pthread(long n) {
  {
    Gate warm;  // fault in the code paths of thread creation first
    warm.target = 1;
    pthread_t t;
    const int rc = pthread_create(&t, nullptr, idle_thread, &warm);
    if (rc != 0) throw Failure(std::string("pthread_create failed: ") + std::strerror(rc));
    warm.wait_all_started();
    warm.open_all();
    pthread_join(t, nullptr);
  }
  Gate gate;
  gate.target = n;
  std::vector<pthread_t> threads;
  threads.reserve(static_cast<std::size_t>(n));
  const Mem before = read_mem();
  for (long i = 0; i < n; ++i) {
    pthread_t t;
    const int rc = pthread_create(&t, nullptr, idle_thread, &gate);
    if (rc != 0) {
      gate.open_all();
      for (pthread_t& x : threads) pthread_join(x, nullptr);
      throw Failure("pthread_create failed after " + std::to_string(i) + " threads: " + std::strerror(rc));
    }
    threads.push_back(t);
  }
  gate.wait_all_started();
  const Mem d = delta(read_mem(), before);
  gate.open_all();
  for (pthread_t& t : threads) pthread_join(t, nullptr);
  return d;
}

Mem measure_std_thread(long n) {
  std::thread([] {}).join();  // fault in the code paths of thread creation first
  std::mutex mu;
  std::condition_variable cv, all_started;
  long started = 0;
  bool release = false;
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(n));
  auto open_all = [&] {
    {
      std::lock_guard<std::mutex> lk(mu);
      release = true;
    }
    cv.notify_all();
    for (std::thread& t : threads) t.join();
  };
  const Mem before = read_mem();
  for (long i = 0; i < n; ++i) {
    try {
      threads.emplace_back([&] {
        std::unique_lock<std::mutex> lk(mu);
        if (++started == n) all_started.notify_one();
        cv.wait(lk, [&] { return release; });
      });
    } catch (const std::system_error& e) {
      open_all();
      throw Failure("std::thread failed after " + std::to_string(i) + " threads: " + e.what());
    }
  }
  {
    std::unique_lock<std::mutex> lk(mu);
    all_started.wait(lk, [&] { return started == n; });
  }
  const Mem d = delta(read_mem(), before);
  open_all();
  return d;
}

// `taskmem measure-one`: the child side. Prints "rss vsz alloc" or "error: ...".
int measure_one(const Args& args) {
  const std::string model = args.choice("--model", kMemoryModels, nullptr);
  const long n = args.number("--count", 0, 1, 10000000);
  Mem m;
  try {
    if (model == "cbtask")
      m = measure_cbtask(n, false);
    else if (model == "cbtask_receive")
      m = measure_cbtask(n, true);
    else if (model == "pthread")
      m = measure_pthread(n);
    else
      m = measure_std_thread(n);
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::printf("%lld %lld %lld\n", static_cast<long long>(m.rss), static_cast<long long>(m.vsz),
              static_cast<long long>(m.alloc));
  return 0;
}

// Runs `taskmem measure-one` in a fresh process; the error text on failure.
bool run_child(const std::string& model, long count, Mem& out, std::string& error) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) throw Failure(std::string("pipe: ") + std::strerror(errno));
  const std::string count_text = std::to_string(count);
  const pid_t pid = fork();
  if (pid < 0) throw Failure(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    const char* argv[] = {kTool, "measure-one", "--model", model.c_str(), "--count", count_text.c_str(), nullptr};
    execv("/proc/self/exe", const_cast<char* const*>(argv));
    std::fprintf(stderr, "taskmem: cannot re-execute itself: %s\n", std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  std::string text;
  char buf[512];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) > 0 || (r < 0 && errno == EINTR))
    if (r > 0) text.append(buf, static_cast<std::size_t>(r));
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  long long rss, vsz, alloc;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && std::sscanf(text.c_str(), "%lld %lld %lld", &rss, &vsz, &alloc) == 3) {
    out = {rss, vsz, alloc};
    return true;
  }
  if (text.rfind("error: ", 0) == 0)
    error = text.substr(7);
  else if (WIFSIGNALED(status))
    error = std::string("measuring process killed by signal ") + std::to_string(WTERMSIG(status));
  else
    error = "measuring process failed (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
  return false;
}

// ---- switch models --------------------------------------------------------------------------

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) throw Failure(std::string("sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

void pin_thread(pthread_t t, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(t, sizeof set, &set);
  if (rc != 0) throw Failure("cannot pin a thread to CPU " + std::to_string(cpu) + ": " + std::strerror(rc));
}

struct SwitchPlan {
  long iterations, batch, warmup;
  int main_cpu = -1, partner_cpu = -1;  // -1: not pinned
};

// Records the end time of every batch; the first warmup batches are dropped later.
struct Stamps {
  std::vector<std::int64_t> t;
  explicit Stamps(std::size_t n) { t.reserve(n + 1); }
};

std::vector<std::int64_t> batch_times(const Stamps& s, long warmup) {
  std::vector<std::int64_t> v;
  for (std::size_t i = static_cast<std::size_t>(warmup) + 1; i < s.t.size(); ++i) v.push_back(s.t[i] - s.t[i - 1]);
  return v;
}

std::vector<std::int64_t> switch_cbtask(const SwitchPlan& p) {
  struct Ctx {
    cbtask::Scheduler* s;
    cbtask::Task ping, pong;
    Stamps* stamps;
    long batch, left, batches_left;
  };
  struct Pong {
    Ctx* c;
    void operator()(int v) const {
      c->ping.send(v);
      c->s->receive<int>(*this);
    }
  };
  struct Ping {
    Ctx* c;
    void operator()(int v) const {
      if (--c->left == 0) {
        c->left = c->batch;
        c->stamps->t.push_back(mono_ns());
        if (--c->batches_left == 0) {
          c->pong.cancel();
          return;
        }
      }
      c->pong.send(v + 1);
      c->s->receive<int>(*this);
    }
  };
  const long batches = p.iterations + p.warmup;
  Stamps stamps(static_cast<std::size_t>(batches));
  cbtask::Scheduler s;
  Ctx c{&s, {}, {}, &stamps, p.batch, p.batch, batches};
  c.pong = s.receive<int>(Pong{&c});
  c.ping = s.receive<int>(Ping{&c});
  stamps.t.push_back(mono_ns());
  c.pong.send(0);
  s.run();
  return batch_times(stamps, p.warmup);
}

void check_io(ssize_t r, const char* what) {
  if (r != 1) throw Failure(std::string(what) + " failed: " + (r < 0 ? std::strerror(errno) : "end of file"));
}

// Runs partner(stop) on a second thread (pinned as planned) while the calling
// thread, pinned too, runs the measured side.
template <class Partner, class Main>
void two_threads(const SwitchPlan& p, Partner partner, Main main_side) {
  if (p.main_cpu >= 0) pin_thread(pthread_self(), p.main_cpu);
  std::thread t(partner);
  if (p.partner_cpu >= 0) {
    try {
      pin_thread(t.native_handle(), p.partner_cpu);
    } catch (...) {
      t.detach();
      throw;
    }
  }
  main_side();
  t.join();
}

std::vector<std::int64_t> switch_pipe(const SwitchPlan& p) {
  int to_partner[2], to_main[2];
  if (pipe2(to_partner, O_CLOEXEC) != 0 || pipe2(to_main, O_CLOEXEC) != 0)
    throw Failure(std::string("pipe: ") + std::strerror(errno));
  const long batches = p.iterations + p.warmup;
  Stamps stamps(static_cast<std::size_t>(batches));
  std::string partner_error;
  two_threads(
      p,
      [&] {
        char c;
        for (;;) {
          if (read(to_partner[0], &c, 1) != 1) {
            partner_error = "partner read failed";
            return;
          }
          if (c == 'q') return;
          if (write(to_main[1], &c, 1) != 1) {
            partner_error = "partner write failed";
            return;
          }
        }
      },
      [&] {
        char c = 'x';
        stamps.t.push_back(mono_ns());
        for (long b = 0; b < batches; ++b) {
          for (long i = 0; i < p.batch; ++i) {
            check_io(write(to_partner[1], &c, 1), "pipe write");
            check_io(read(to_main[0], &c, 1), "pipe read");
          }
          stamps.t.push_back(mono_ns());
        }
        c = 'q';
        check_io(write(to_partner[1], &c, 1), "pipe write");
      });
  for (int fd : {to_partner[0], to_partner[1], to_main[0], to_main[1]}) close(fd);
  if (!partner_error.empty()) throw Failure(partner_error);
  return batch_times(stamps, p.warmup);
}

long futex(std::atomic<int>* word, int op, int val) {
  static_assert(sizeof(std::atomic<int>) == sizeof(int), "futex word must be a plain int");
  return syscall(SYS_futex, reinterpret_cast<int*>(word), op, val, nullptr, nullptr, 0);
}

std::vector<std::int64_t> switch_futex(const SwitchPlan& p) {
  // turn: 0 the main thread's, 1 the partner's, 2 quit.
  std::atomic<int> turn{0};
  const long batches = p.iterations + p.warmup;
  Stamps stamps(static_cast<std::size_t>(batches));
  two_threads(
      p,
      [&] {
        for (;;) {
          int t;
          while ((t = turn.load(std::memory_order_acquire)) == 0) futex(&turn, FUTEX_WAIT_PRIVATE, 0);
          if (t == 2) return;
          turn.store(0, std::memory_order_release);
          futex(&turn, FUTEX_WAKE_PRIVATE, 1);
        }
      },
      [&] {
        stamps.t.push_back(mono_ns());
        for (long b = 0; b < batches; ++b) {
          for (long i = 0; i < p.batch; ++i) {
            turn.store(1, std::memory_order_release);
            futex(&turn, FUTEX_WAKE_PRIVATE, 1);
            while (turn.load(std::memory_order_acquire) == 1) futex(&turn, FUTEX_WAIT_PRIVATE, 1);
          }
          stamps.t.push_back(mono_ns());
        }
        turn.store(2, std::memory_order_release);
        futex(&turn, FUTEX_WAKE_PRIVATE, 1);
      });
  return batch_times(stamps, p.warmup);
}

std::vector<std::int64_t> switch_std_thread(const SwitchPlan& p) {
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;  // as for the futex model
  const long batches = p.iterations + p.warmup;
  Stamps stamps(static_cast<std::size_t>(batches));
  two_threads(
      p,
      [&] {
        std::unique_lock<std::mutex> lk(mu);
        for (;;) {
          cv.wait(lk, [&] { return turn != 0; });
          if (turn == 2) return;
          turn = 0;
          cv.notify_one();
        }
      },
      [&] {
        stamps.t.push_back(mono_ns());
        for (long b = 0; b < batches; ++b) {
          for (long i = 0; i < p.batch; ++i) {
            std::unique_lock<std::mutex> lk(mu);
            turn = 1;
            cv.notify_one();
            cv.wait(lk, [&] { return turn == 0; });
          }
          stamps.t.push_back(mono_ns());
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          turn = 2;
        }
        cv.notify_one();
      });
  return batch_times(stamps, p.warmup);
}

// ---- sample files ------------------------------------------------------------------------------

class Json {
 public:
  Json() {
    rtp_json_init(&j_);
    rtp_json_begin_object(&j_, nullptr);
  }
  ~Json() { rtp_json_free(&j_); }
  Json(const Json&) = delete;
  Json& operator=(const Json&) = delete;
  Json& str(const char* k, const std::string& v) {
    rtp_json_string(&j_, k, v.c_str());
    return *this;
  }
  Json& num(const char* k, std::int64_t v) {
    rtp_json_i64(&j_, k, v);
    return *this;
  }
  Json& strings(const char* k, const std::vector<std::string>& v) {
    rtp_json_begin_array(&j_, k);
    for (const std::string& s : v) rtp_json_string(&j_, nullptr, s.c_str());
    rtp_json_end_array(&j_);
    return *this;
  }
  Json& raw(const char* k, const std::string& json) {
    rtp_json_raw(&j_, k, json.c_str());
    return *this;
  }
  std::string done() {
    rtp_json_end_object(&j_);
    const char* r = rtp_json_result(&j_);
    if (!r) throw Failure("cannot build JSON metadata");
    return r;
  }

 private:
  rtp_json j_;
};

void write_file(const std::string& path, const char* variant, const std::string& started_at, const std::string& settings,
                const std::string& params, const std::vector<rtp_sf_column>& columns,
                const std::vector<std::vector<rtp_sf_value>>& rows, const std::string& trailer) {
  rtp_sf_header h{};
  h.workload = "tasks";
  h.variant = variant;
  h.runtime = "native";
  h.tool = kTool;
  h.tool_version = kVersion;
  h.started_at = started_at.c_str();
  h.settings_json = settings.c_str();
  h.params_json = params.c_str();
  h.columns = columns.data();
  h.ncolumns = columns.size();
  char err[512];
  rtp_sf_writer* w = rtp_sf_open(path.c_str(), &h, RTP_SF_BUFFER, err, sizeof err);
  if (!w) throw Failure(std::string("cannot write ") + path + ": " + err);
  for (const auto& row : rows) rtp_sf_append(w, row.data());
  if (rtp_sf_finish(w, trailer.c_str(), err, sizeof err) != 0)
    throw Failure(std::string("cannot write ") + path + ": " + err);
}

rtp_sf_value I(std::int64_t v) {
  rtp_sf_value x;
  x.i = v;
  return x;
}
rtp_sf_value F(double v) {
  rtp_sf_value x;
  x.f = v;
  return x;
}

// Least-squares slope and r^2 of y against x.
void fit(const std::vector<double>& x, const std::vector<double>& y, double& slope, double& r2) {
  const double n = static_cast<double>(x.size());
  double sx = 0, sy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) sx += x[i], sy += y[i];
  const double mx = sx / n, my = sy / n;
  double sxx = 0, sxy = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  slope = sxx > 0 ? sxy / sxx : NAN;
  r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : NAN;
}

int cmd_memory(const Args& args) {
  const std::string model = args.choice("--model", kMemoryModels, nullptr);
  const std::string counts_text = args.get("--counts") ? args.get("--counts") : kDefaultCounts;
  const std::vector<long> counts = parse_counts(counts_text);
  const long repeat = args.number("--repeat", 1, 1, 1000);
  const std::string output = args.required("--output");

  const std::string started_at = rfc3339_now();
  std::vector<std::vector<rtp_sf_value>> rows;
  std::vector<std::string> notes;
  long failed = 0;
  long limit = -1;  // the smallest count that failed: larger ones are skipped
  std::vector<double> xs, rss, alloc, vsz;
  for (long count : counts) {
    for (long r = 0; r < repeat; ++r) {
      if (limit > 0 && count >= limit) {
        ++failed;
        continue;
      }
      Mem m;
      std::string error;
      if (!run_child(model, count, m, error)) {
        ++failed;
        limit = count;
        notes.push_back(std::to_string(count) + " tasks: " + error + " (this and larger counts skipped)");
        std::fprintf(stderr, "taskmem: %s with %ld tasks: %s\n", model.c_str(), count, error.c_str());
        continue;
      }
      rows.push_back({I(m.rss), I(count), I(m.vsz), I(m.alloc)});
      xs.push_back(static_cast<double>(count));
      rss.push_back(static_cast<double>(m.rss));
      alloc.push_back(static_cast<double>(m.alloc));
      vsz.push_back(static_cast<double>(m.vsz));
    }
  }
  if (rows.empty()) throw Failure("no count could be measured for model " + model);

  const std::vector<rtp_sf_column> columns{{"rss_bytes", "bytes", RTP_SF_I64},
                                           {"tasks", "count", RTP_SF_I64},
                                           {"vsz_bytes", "bytes", RTP_SF_I64},
                                           {"alloc_bytes", "bytes", RTP_SF_I64}};
  const std::string settings = Json().str("model", model).done();
  const std::string params =
      Json().str("counts", counts_text).num("repeat", repeat).str("rss_source", procmem::usage().rss_source).done();
  Json trailer;
  trailer.str("finished_at", rfc3339_now()).raw("counters", Json().num("failed_counts", failed).done());
  if (!notes.empty()) trailer.strings("notes", notes);
  write_file(output, "memory", started_at, settings, params, columns, rows, trailer.done());

  if (xs.size() >= 2) {
    double s_rss, r_rss, s_alloc, r_alloc, s_vsz, r_vsz;
    fit(xs, rss, s_rss, r_rss);
    fit(xs, alloc, s_alloc, r_alloc);
    fit(xs, vsz, s_vsz, r_vsz);
    std::fprintf(stderr,
                 "taskmem memory %s: bytes per task (least-squares slope, r^2): rss %.1f (%.4f), alloc %.1f (%.4f), "
                 "vsz %.1f (%.4f); %zu samples -> %s\n",
                 model.c_str(), s_rss, r_rss, s_alloc, r_alloc, s_vsz, r_vsz, xs.size(), output.c_str());
  }
  return 0;
}

double nearest_rank(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t r = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::max<std::size_t>(r, 1) - 1];
}

int cmd_switch(const Args& args) {
  const std::string model = args.choice("--model", kSwitchModels, nullptr);
  SwitchPlan plan;
  plan.iterations = args.number("--iterations", 1000, 1, 100000000);
  plan.batch = args.number("--batch", 1000, 1, 100000000);
  plan.warmup = args.number("--warmup", 10, 0, 100000000);
  const std::string pin = args.choice("--pin", kPins, "same");
  const std::string output = args.required("--output");

  std::vector<std::string> notes;
  const std::vector<int> cpus = allowed_cpus();
  if (pin == "same") {
    plan.main_cpu = plan.partner_cpu = cpus.front();
    notes.push_back("pinned to CPU " + std::to_string(cpus.front()) + (model == "cbtask" ? "" : " (both threads)"));
  } else if (pin == "split") {
    if (cpus.size() < 2)
      throw Failure("--pin split needs two CPUs; this process may run on " + std::to_string(cpus.size()));
    plan.main_cpu = cpus[0];
    plan.partner_cpu = cpus[1];
    notes.push_back("threads pinned to CPUs " + std::to_string(cpus[0]) + " and " + std::to_string(cpus[1]) +
                    ": a switch is a cross-CPU wake-up");
  } else {
    notes.push_back("not pinned: the kernel may place the two threads on different CPUs");
  }

  const std::string started_at = rfc3339_now();
  std::vector<std::int64_t> times;
  if (model == "cbtask") {
    if (plan.main_cpu >= 0) pin_thread(pthread_self(), plan.main_cpu);
    times = switch_cbtask(plan);
  } else if (model == "pthread_pipe") {
    times = switch_pipe(plan);
  } else if (model == "pthread_futex") {
    times = switch_futex(plan);
  } else {
    times = switch_std_thread(plan);
  }

  const std::int64_t switches = 2 * plan.batch;
  std::vector<std::vector<rtp_sf_value>> rows;
  std::vector<double> per;
  for (std::int64_t t : times) {
    const double ns = static_cast<double>(t) / static_cast<double>(switches);
    rows.push_back({F(ns), I(t), I(switches)});
    per.push_back(ns);
  }
  const std::vector<rtp_sf_column> columns{
      {"ns_per_switch", "ns", RTP_SF_F64}, {"batch_ns", "ns", RTP_SF_I64}, {"switches", "count", RTP_SF_I64}};
  const std::string settings = Json().str("model", model).str("pin", pin).done();
  const std::string params =
      Json().num("iterations", plan.iterations).num("batch", plan.batch).num("warmup", plan.warmup).done();
  const std::string trailer = Json().str("finished_at", rfc3339_now()).strings("notes", notes).done();
  write_file(output, "switch", started_at, settings, params, columns, rows, trailer);
  std::fprintf(stderr, "taskmem switch %s (pin %s): ns per switch median %.1f, p99 %.1f (nearest rank, %zu samples) -> %s\n",
               model.c_str(), pin.c_str(), nearest_rank(per, 50), nearest_rank(per, 99), per.size(), output.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "measure-one") {
      alloc_counter::start();  // before anything measured is allocated
      return measure_one(Args(argc, argv, 2, {"--model", "--count"}));
    }
    if (cmd == "memory") return cmd_memory(Args(argc, argv, 2, {"--model", "--counts", "--repeat", "--output"}));
    if (cmd == "switch")
      return cmd_switch(Args(argc, argv, 2, {"--model", "--iterations", "--batch", "--warmup", "--pin", "--output"}));
    if (cmd == "-h" || cmd == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    throw UsageError(cmd.empty() ? "a subcommand is required; valid: memory, switch"
                                 : "unknown subcommand '" + cmd + "'; valid: memory, switch");
  } catch (const UsageError& e) {
    std::fprintf(stderr, "taskmem: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "taskmem: %s\n", e.what());
    return 1;
  }
}
