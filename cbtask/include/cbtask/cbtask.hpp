// cbtask: a non-preemptive callback-task runtime for C++17.
//
// A task is a chain of callbacks run one at a time by a Scheduler. A callback
// never blocks: it returns after choosing (at most) one continuation for its
// task:
//
//   sleep(ms, f) / sleep_until(t, f)  run f once the clock reaches the deadline
//   receive<T>(f)                     run f(T) once a T message is in the mailbox
//   yield(f)                          run f after every other ready task had a turn
//   loop(body), while_(cond, body), do_while(body, cond),
//   for_(init, cond, step, body)      run a loop, one iteration per turn
//
// A callback that chooses no continuation ends its step: the task goes on with
// the next iteration of its innermost loop (after a yield), or ends when it is
// inside no loop. fork(f...) starts new tasks. Called outside any callback (for
// example from main before run()), sleep/receive/yield/loop/... start a new
// task with that continuation; inside a callback they continue the running
// task. Calling two of them in one callback throws std::logic_error.
//
// The dispatcher is a trampoline: callbacks are only ever called from
// Scheduler::dispatch/run, never from one another, so a chain of any length
// runs at a constant stack depth.
//
// Errors: an exception thrown by a callback (or a loop's init/cond/step) ends
// that task (its continuation, loops and mailbox are destroyed) and propagates
// out of run()/dispatch(); every other task is untouched and run() can be
// called again. API misuse throws std::logic_error / std::invalid_argument.
//
// Memory: a task is one 56-byte slot in a slab of 64 KiB chunks (mmap'd,
// grown on demand, returned to the system when empty; no fixed limit). A
// callback of up to 16 bytes (two pointers) is stored inline in the slot;
// larger ones, loop frames, mailboxes and messages are heap-allocated. A
// sleeping task also holds one 8-byte entry in the sleep heap. A task started
// by sleep/sleep_until outside any callback, with a callback stored inline,
// sleeps in a compact slot instead: 16 bytes (serial, state and heap position,
// deadline) plus the callback rounded up to 8 or 16 bytes, in chunks that hold
// one callback type each (the chunk knows how to run and destroy it). With its
// heap entry that is 32 bytes for a callback of up to 8 bytes (a function and
// one context pointer: see call<fn>(ctx)), 40 bytes for 9 to 16. It wakes,
// runs and sleeps again there as long as it sleeps with a callable of that
// type; it moves into a 56-byte slot when it chooses another continuation or
// gets a message, and its handles stay valid. The first compact_after()
// sleepers of each callback type (64 by default) take full slots, as a chunk
// of their own would cost more.
//
// Threads: a Scheduler and its tasks belong to one thread. Nothing here is
// thread-safe; use one Scheduler per thread.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace cbtask {

class Scheduler;
class Task;

// ---- clocks ---------------------------------------------------------------

// Time source of a Scheduler: nanoseconds on a monotonic scale, and a way to
// wait. Inject a FakeClock to make sleep tests deterministic.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::int64_t now_ns() = 0;
  // Wait until now_ns() >= deadline_ns (may return early; the caller re-checks).
  virtual void sleep_until_ns(std::int64_t deadline_ns) = 0;
};

// CLOCK_MONOTONIC; waits with clock_nanosleep(TIMER_ABSTIME).
class SteadyClock final : public Clock {
 public:
  std::int64_t now_ns() override;
  void sleep_until_ns(std::int64_t deadline_ns) override;
};

// The process-wide SteadyClock, the default clock of every Scheduler.
Clock& steady_clock();

// A clock that only moves when told to; waiting jumps straight to the deadline.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(std::int64_t start_ns = 0) noexcept : now_(start_ns) {}
  std::int64_t now_ns() override { return now_; }
  void sleep_until_ns(std::int64_t deadline_ns) override {
    ++waits_;
    if (deadline_ns > now_) now_ = deadline_ns;
  }
  void advance_ns(std::int64_t ns) {
    if (ns < 0) throw std::invalid_argument("cbtask::FakeClock: time cannot go backwards");
    now_ += ns;
  }
  void advance_ms(std::int64_t ms) { advance_ns(ms * 1000000); }
  // How many times the scheduler waited on this clock.
  std::uint64_t waits() const noexcept { return waits_; }

 private:
  std::int64_t now_;
  std::uint64_t waits_ = 0;
};

// ---- internals shared by the templates below --------------------------------

namespace detail {

inline constexpr std::size_t kInlineBytes = 16;
// Task slots live in chunks of this size, aligned to it.
inline constexpr std::size_t kChunkBytes = 64 * 1024;

struct Node;
struct Ext;
struct MsgHeader;
struct ChunkHeader;
struct Access;

// How a task's pending callback is run and destroyed (one static table per
// callable type).
struct StepOps {
  // Moves the callable out of `storage` (so the task may store its next
  // continuation there) and calls it.
  void (*run)(Scheduler&, Node*, void* storage);
  void (*destroy)(Scheduler&, void* storage) noexcept;
  const void* want;  // receive steps: tag of the awaited message type
  // Inline steps: move the callable from one storage to another (a compact
  // sleeper moving into a full slot); nullptr for the others.
  void (*relocate)(void* from, void* to) noexcept;
};

enum class State : std::uint8_t { Free, Ready, Running, Sleeping, Receiving, Dying };

// The head every task slot starts with, full (Node) or compact: 16 bytes.
struct Slot {
  std::uint32_t serial;  // 0 when free or dead; handles compare it
  std::uint32_t bits;    // sleep-heap index << 5 | compact flag (16) | moved / has-step flag (8) | State
  union {
    std::int64_t deadline;  // Sleeping (and Running, once sleep() was called)
    Slot* next;             // Ready: run queue
    Slot* free_next;        // Free: the chunk's free list
  };

  static constexpr std::uint32_t kStateMask = 0x7u;
  static constexpr std::uint32_t kMoved = 0x8u;    // full slots: see moved()
  static constexpr std::uint32_t kHasStep = 0x8u;  // compact slots: a callable is stored
  static constexpr std::uint32_t kCompact = 0x10u;
  static constexpr unsigned kIndexShift = 5;
  State state() const noexcept { return static_cast<State>(bits & kStateMask); }
  void set_state(State s) noexcept { bits = (bits & ~kStateMask) | static_cast<std::uint32_t>(s); }
  std::uint32_t heap_index() const noexcept { return bits >> kIndexShift; }
  void set_heap_index(std::uint32_t i) noexcept {
    bits = (i << kIndexShift) | (bits & ((1u << kIndexShift) - 1));
  }
  // A full slot whose task started in a compact one (handles may point there).
  bool moved() const noexcept { return (bits & (kMoved | kCompact)) == kMoved; }
  // A compact sleeper's slot.
  bool compact() const noexcept { return (bits & kCompact) != 0; }
};
static_assert(sizeof(Slot) == 16, "cbtask: slot head layout changed");

// A full task slot: 56 bytes (48 with 32-bit pointers). Fields are shared by
// state (a task is in at most one of the run queue, the sleep heap or a free list).
struct Node : Slot {
  const StepOps* ops;  // pending callback, or nullptr
  alignas(8) unsigned char buf[kInlineBytes];
  Slot* prev;  // Ready: run queue (a compact slot in the queue has none; see ready_prev)
  Ext* ext;    // loop frames and mailbox, allocated on first use
};
static_assert(sizeof(Node) == (sizeof(void*) == 8 ? 56 : 48), "cbtask: task node layout changed");

// A compact sleeper is a Slot followed by its callable (8 or 16 bytes), in a
// chunk whose header holds the callable's StepOps.
template <class F>
inline constexpr std::uint32_t compact_bytes = sizeof(Slot) + (sizeof(F) <= 8 ? 8 : 16);
inline void* compact_storage(Slot* s) noexcept { return reinterpret_cast<unsigned char*>(s) + sizeof(Slot); }
// A process-wide number per callable type of compact sleepers.
std::uint32_t new_compact_type() noexcept;
template <class F>
std::uint32_t compact_type() noexcept {
  static const std::uint32_t type = new_compact_type();
  return type;
}

// One sleeper in the sleep heap: its slot (chunk number and index) and its
// place in the call order among equal deadlines. The deadline is in the slot.
struct SleepEntry {
  std::uint32_t seq;
  std::uint32_t id;
};

// A running loop of a task; frames of nested loops form a stack.
class Frame {
 public:
  Frame* parent = nullptr;
  // Runs the next iteration; false when the loop is over (nothing was run).
  virtual bool advance() = 0;
  // The loop is over: install its `done` continuation into the task, if any.
  virtual bool take_done(Scheduler&, Node*) = 0;
  virtual void destroy(Scheduler&) noexcept = 0;

 protected:
  ~Frame() = default;
};

struct Ext {
  Frame* frames = nullptr;        // innermost loop
  MsgHeader* mail_tail = nullptr;  // circular list: mail_tail->next is the oldest
};

struct MsgHeader {
  MsgHeader* next;
  const void* type;
  void (*destroy)(Scheduler&, MsgHeader*) noexcept;
};

// A growable array of sleep-heap entries. On Linux it is an anonymous
// mapping grown with mremap: growing neither copies nor leaves the old array
// behind as resident garbage (std::vector does), and only pages that hold
// entries are resident. Elsewhere it falls back to realloc.
class SleepArray {
 public:
  SleepArray() noexcept = default;
  ~SleepArray();
  SleepArray(const SleepArray&) = delete;
  SleepArray& operator=(const SleepArray&) = delete;
  std::size_t size() const noexcept { return size_; }
  std::size_t capacity() const noexcept { return cap_; }
  bool empty() const noexcept { return size_ == 0; }
  SleepEntry& operator[](std::size_t i) noexcept { return data_[i]; }
  const SleepEntry& operator[](std::size_t i) const noexcept { return data_[i]; }
  SleepEntry front() const noexcept { return data_[0]; }
  SleepEntry back() const noexcept { return data_[size_ - 1]; }
  void pop_back() noexcept { --size_; }
  void push_back(SleepEntry e) {
    if (size_ == cap_) resize(cap_ ? 2 * cap_ : kMinCapacity);
    data_[size_++] = e;
  }
  // Give back capacity beyond twice the size (never below the minimum).
  void shrink() noexcept;

 private:
  static constexpr std::size_t kMinCapacity = 4096 / sizeof(SleepEntry);  // one page
  void resize(std::size_t cap);
  void release() noexcept;
  SleepEntry* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t cap_ = 0;
};

template <class T>
struct TypeTag {
  static constexpr char id = 0;
};
template <class T>
constexpr const void* tag_of() noexcept {
  return &TypeTag<T>::id;
}

template <class F>
inline constexpr bool fits_inline = sizeof(F) <= kInlineBytes && alignof(F) <= 8 &&
                                    std::is_nothrow_move_constructible_v<F>;

struct NoOp {
  void operator()() const noexcept {}
};
struct Forever {
  bool operator()() const noexcept { return true; }
};
struct Deduce {};

// The message type a receive callback takes, from its one parameter.
template <class M>
struct arg_of_member;
#define CBTASK_ARG_OF(QUAL)                                  \
  template <class R, class C, class A>                       \
  struct arg_of_member<R (C::*)(A) QUAL> {                   \
    using type = std::decay_t<A>;                            \
  };
CBTASK_ARG_OF()
CBTASK_ARG_OF(const)
CBTASK_ARG_OF(noexcept)
CBTASK_ARG_OF(const noexcept)
#undef CBTASK_ARG_OF

template <class F, class = void>
struct arg_of {
  static_assert(sizeof(F) == 0,
                "cbtask: cannot deduce the message type of this callback (generic lambda or "
                "overloaded call operator): write receive<T>(callback)");
};
template <class F>
struct arg_of<F, std::void_t<decltype(&F::operator())>> : arg_of_member<decltype(&F::operator())> {};
template <class R, class A>
struct arg_of<R (*)(A), void> {
  using type = std::decay_t<A>;
};
template <class R, class A>
struct arg_of<R (*)(A) noexcept, void> {
  using type = std::decay_t<A>;
};

template <class T, class F>
struct msg_type {
  using type = std::decay_t<T>;
};
template <class F>
struct msg_type<Deduce, F> {
  using type = typename arg_of<F>::type;
};

}  // namespace detail

// ---- task handles -----------------------------------------------------------

// A handle to a task: cheap to copy, safe to use after the task ended (it then
// reports !alive() and cancel() returns false). Must not outlive its Scheduler.
class Task {
 public:
  Task() noexcept = default;

  // The task has not ended and was not cancelled.
  bool alive() const noexcept;
  // End the task: it never runs a callback again; its callback, loops and
  // queued messages are destroyed now and its slot is freed (a task that
  // cancels itself ends when its running callback returns). False if it had
  // already ended.
  bool cancel();
  // Scheduler::send(*this, msg).
  template <class T>
  bool send(T&& msg) const;

  Scheduler* scheduler() const noexcept { return sched_; }
  // A number that tells live tasks apart (reused after 2^32 tasks).
  std::uint32_t id() const noexcept { return serial_; }

  friend bool operator==(const Task& a, const Task& b) noexcept {
    return a.sched_ == b.sched_ && a.node_ == b.node_ && a.serial_ == b.serial_;
  }
  friend bool operator!=(const Task& a, const Task& b) noexcept { return !(a == b); }

 private:
  friend class Scheduler;
  Task(Scheduler* s, detail::Slot* n, std::uint32_t serial, std::uint32_t slot_bytes) noexcept
      : sched_(s), node_(n), serial_(serial), slot_bytes_(slot_bytes) {}
  Scheduler* sched_ = nullptr;
  detail::Slot* node_ = nullptr;  // the slot the task started in (may be freed or unmapped since)
  std::uint32_t serial_ = 0;
  std::uint32_t slot_bytes_ = 0;  // its size: node_ is only read in a chunk of slots that size
};

// ---- function and context ------------------------------------------------------

// A callback of 8 bytes that calls Fn(ctx): the C style of a function and one
// context pointer, with the function in the type. A task started sleeping with
// one takes the smallest compact slot:
//   void on_timer(Timer* t);
//   s.sleep(100, cbtask::call<on_timer>(&timer));
template <auto Fn, class T>
struct Call {
  T* ctx;
  void operator()() const { Fn(ctx); }
};
template <auto Fn, class T>
Call<Fn, T> call(T* ctx) noexcept {
  static_assert(std::is_invocable_v<decltype(Fn), T*>, "cbtask::call<Fn>(ctx): Fn must be callable with ctx");
  return Call<Fn, T>{ctx};
}

// ---- statistics ---------------------------------------------------------------

struct Stats {
  std::size_t tasks = 0;      // live tasks (every state)
  std::size_t ready = 0;      // in the run queue
  std::size_t sleeping = 0;   // in the sleep heap
  std::size_t compact = 0;    // of those, in compact slots
  std::size_t receiving = 0;  // waiting for a message
  std::size_t messages = 0;   // queued in mailboxes, not yet received
  std::size_t chunks = 0;     // slab chunks mapped (including one kept spare)
  std::size_t chunk_bytes = 0;      // bytes of those chunks
  std::size_t heap_bytes = 0;       // sleep heap capacity in bytes
  std::size_t aux_bytes = 0;        // heap bytes in use for large callbacks, loops, mailboxes, messages
  std::size_t cache_bytes = 0;      // freed heap blocks kept for reuse (see Scheduler::trim)
  std::uint64_t dispatched = 0;     // callbacks (and loop iterations) run so far
  static constexpr std::size_t task_bytes = sizeof(detail::Node);
  // A compact sleeper (see sleep_until): this head plus its callback, 8 or 16 bytes.
  static constexpr std::size_t compact_head_bytes = sizeof(detail::Slot);
  static constexpr std::size_t sleep_entry_bytes = sizeof(detail::SleepEntry);
  // Every byte the scheduler holds for tasks.
  std::size_t memory_bytes() const noexcept { return chunk_bytes + heap_bytes + aux_bytes + cache_bytes; }
};

// ---- the scheduler ------------------------------------------------------------

class Scheduler {
 public:
  // Sleepers are polled every this many dispatches while tasks are ready
  // (and whenever none is): bounds how long a busy loop can delay a wake-up.
  static constexpr unsigned kDefaultPollInterval = 64;
  static constexpr std::int64_t kForever = std::numeric_limits<std::int64_t>::max();
  // New sleepers of a callback type get compact slots once this many of that
  // type were started (before, a chunk of their own would cost more than it saves).
  static constexpr unsigned kDefaultCompactAfter = 64;

  explicit Scheduler(Clock& clock = steady_clock());
  // Destroys every remaining task (callbacks, loops, messages) and unmaps all memory.
  // Must not be called from one of its own callbacks.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // -- starting tasks and choosing continuations

  // Start one task per callback, ready to run in argument order. Returns a
  // Task for one callback, std::array<Task, N> for N.
  template <class... F>
  auto fork(F&&... f);

  // Run body forever, one iteration per turn.
  template <class Body>
  Task loop(Body&& body);
  // for (init(); cond(); step()) body(); then done(). One iteration per turn.
  template <class Init, class Cond, class Step, class Body, class Done = detail::NoOp>
  Task for_(Init&& init, Cond&& cond, Step&& step, Body&& body, Done&& done = Done{});
  // while (cond()) body(); then done().
  template <class Cond, class Body, class Done = detail::NoOp>
  Task while_(Cond&& cond, Body&& body, Done&& done = Done{});
  // do body(); while (cond()); then done().
  template <class Body, class Cond, class Done = detail::NoOp>
  Task do_while(Body&& body, Cond&& cond, Done&& done = Done{});

  // Run f after ms milliseconds (negative: as soon as possible).
  template <class F>
  Task sleep(std::int64_t ms, F&& f);
  template <class Rep, class Period, class F>
  Task sleep(std::chrono::duration<Rep, Period> d, F&& f);
  // Run f once now_ns() >= deadline_ns. Equal deadlines run in call order.
  // Outside a callback, a callback stored inline (up to 16 bytes) makes a
  // compact sleeper (see Memory at the top).
  template <class F>
  Task sleep_until(std::int64_t deadline_ns, F&& f);
  // C style: run fn(ctx) after ms milliseconds (a 16-byte callback;
  // call<fn>(ctx) puts the function in the type and takes 8).
  Task sleep(std::int64_t ms, void (*fn)(void*), void* ctx);
  // Run f after every task that is ready now had its turn.
  template <class F>
  Task yield(F&& f);

  // Run f(T) with the oldest message of type T in the task's mailbox, waiting
  // until there is one. T defaults to f's parameter type. Messages of other
  // types stay queued for a later receive.
  template <class T = detail::Deduce, class F>
  Task receive(F&& f);
  // Queue msg (as std::decay_t<T>) in the task's mailbox and wake it if it
  // waits for that type. False (msg dropped) if the task has ended.
  template <class T>
  bool send(const Task& to, T&& msg);

  // End a task (see Task::cancel).
  bool cancel(const Task& t);

  // The task whose callback is running (throws std::logic_error outside one).
  Task self() const;
  bool in_task() const noexcept { return current_ != nullptr; }

  // -- running

  // Run until no task is ready or sleeping (tasks waiting for messages may
  // remain), or stop() was called. Waits on the clock for sleepers. Returns
  // the number of callbacks run.
  std::size_t run();
  // Run ready tasks and sleepers that are due, without waiting.
  std::size_t run_until_idle();
  // Like run(), but return once the clock reaches deadline_ns.
  std::size_t run_until(std::int64_t deadline_ns);
  template <class Rep, class Period>
  std::size_t run_for(std::chrono::duration<Rep, Period> d) {
    return run_until(deadline_after(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  // Run one ready callback (waking due sleepers first if it is time to poll).
  // False if no task was ready. Never waits.
  bool dispatch();
  // Make the current run() return after the running callback.
  void stop() noexcept { stop_ = true; }

  // -- inspection and tuning

  std::int64_t now_ns() const { return clock_->now_ns(); }
  Clock& clock() const noexcept { return *clock_; }
  void set_poll_interval(unsigned dispatches);
  // Give cached memory back: recycled heap blocks and the spare slab chunk.
  void trim() noexcept;
  unsigned poll_interval() const noexcept { return poll_interval_; }
  // Start sleepers of a callback type in compact slots once `sleepers` of that
  // type were started outside callbacks (0: from the first; see Memory at the top).
  void set_compact_after(unsigned sleepers) noexcept { compact_after_ = sleepers; }
  unsigned compact_after() const noexcept { return compact_after_; }
  Stats stats() const noexcept;

  // The scheduler running a callback on this thread right now, or nullptr.
  static Scheduler* running() noexcept;

 private:
  friend class Task;
  friend struct detail::Access;

  enum class Cont : std::uint8_t { None, Yield, Sleep, Receive, Frame };

  // Owns a freshly allocated node until commit(); frees it on exceptions.
  class NewTask {
   public:
    explicit NewTask(Scheduler& s) : s_(s), n(s.alloc_node()) {}
    ~NewTask() {
      if (n) s_.destroy_task(n);
    }
    Task commit() noexcept {
      Task t = s_.handle(n);
      n = nullptr;
      return t;
    }
    NewTask(const NewTask&) = delete;
    NewTask& operator=(const NewTask&) = delete;

   private:
    Scheduler& s_;

   public:
    detail::Node* n;
  };

  // A task's handle: to the slot it started in (a compact one, if it moved since).
  Task handle(detail::Slot* n) const noexcept {
    if (n->bits & (detail::Slot::kMoved | detail::Slot::kCompact)) return other_handle(n);
    return Task(const_cast<Scheduler*>(this), n, n->serial, sizeof(detail::Node));
  }
  Task other_handle(detail::Slot* n) const noexcept;
  // The running task if called from its callback (after checking that it has
  // not chosen a continuation yet; moved into a full slot if it ran from a
  // compact one), else nullptr.
  detail::Node* claim() {
    if (!current_) return nullptr;
    if (cont_ != Cont::None) throw_second_continuation();
    if (current_->compact()) return promote(current_);
    return static_cast<detail::Node*>(current_);
  }
  // The running task runs from a compact slot of this callable type.
  bool running_compact(std::uint32_t type) const noexcept;
  [[noreturn]] static void throw_second_continuation();
  std::int64_t deadline_after(std::int64_t ns) const;
  template <class F>
  Task spawn(F&& f);
  template <class F>
  void install_step(detail::Node* n, F&& f);
  template <class M, class F>
  void install_receive(detail::Node* n, F&& f);
  template <class T, class... A>
  T* make_aux(A&&... a);
  template <class FrameT, class... A>
  Task start_loop(A&&... a);
  template <class D, class F>
  Task start_compact(std::int64_t deadline_ns, F&& f);

  // Heap blocks for boxed callbacks, loop frames, mailboxes and messages.
  // Blocks of up to kSmallMax bytes come in 16-byte classes and are recycled
  // through a small per-class cache (at most kCacheDepth blocks each), so a
  // message exchange does not call malloc; trim() empties the cache.
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kSmallMax = 128;
  static constexpr std::size_t kClasses = kSmallMax / kGranule;
  static constexpr unsigned kCacheDepth = 64;
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr bool small(std::size_t size, std::size_t align) noexcept {
    return size <= kSmallMax && align <= kGranule;
  }
  void* aux_alloc(std::size_t size, std::size_t align) {
    if (small(size, align)) {
      const std::size_t c = (size - 1) / kGranule;
      const std::size_t bytes = (c + 1) * kGranule;
      void* p;
      if (FreeBlock* b = cache_[c]) {
        cache_[c] = b->next;
        --cache_count_[c];
        cache_bytes_ -= bytes;
        p = b;
      } else {
        p = ::operator new(bytes);
      }
      aux_bytes_ += bytes;
      return p;
    }
    void* p = align > __STDCPP_DEFAULT_NEW_ALIGNMENT__ ? ::operator new(size, std::align_val_t(align))
                                                       : ::operator new(size);
    aux_bytes_ += size;
    return p;
  }
  void aux_free(void* p, std::size_t size, std::size_t align) noexcept {
    if (small(size, align)) {
      const std::size_t c = (size - 1) / kGranule;
      const std::size_t bytes = (c + 1) * kGranule;
      aux_bytes_ -= bytes;
      if (cache_count_[c] < kCacheDepth && !tearing_down_) {
        cache_[c] = ::new (p) FreeBlock{cache_[c]};
        ++cache_count_[c];
        cache_bytes_ += bytes;
      } else {
        ::operator delete(p);
      }
      return;
    }
    aux_bytes_ -= size;
    if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__)
      ::operator delete(p, std::align_val_t(align));
    else
      ::operator delete(p);
  }

  // scheduler.cpp
  // Slots of class cls (0: full, k + 1: compact sleepers of compact_type k).
  detail::Slot* alloc_slot(std::uint32_t cls, std::uint32_t bytes, const detail::StepOps* ops);
  detail::Node* alloc_node();
  bool use_compact(std::uint32_t type);
  detail::Slot* alloc_compact(std::uint32_t type, std::uint32_t bytes, const detail::StepOps* ops);
  Task commit_compact(detail::Slot* c, std::int64_t deadline_ns);
  void free_slot(detail::Slot* n) noexcept;
  detail::ChunkHeader*& partial_list(std::uint32_t cls) noexcept;
  detail::ChunkHeader* map_chunk(std::uint32_t bytes);
  void unmap_chunk(detail::ChunkHeader* c) noexcept;
  void list_chunk(detail::ChunkHeader* c) noexcept;
  void unlist_chunk(detail::ChunkHeader* c) noexcept;
  // The live task slot with this serial that a handle refers to, or nullptr
  // (n may point into unmapped memory: it is only read once its chunk is
  // known to be mapped with slots of that size).
  detail::Slot* resolve(const detail::Slot* n, std::uint32_t serial, std::uint32_t bytes) const noexcept;
  detail::Slot* moved_node(std::uint32_t serial) const noexcept;
  detail::Slot* target(const Task& t) const;
  // target(), moving a compact sleeper into a full slot.
  detail::Node* target_node(const Task& t);
  detail::Node* promote(detail::Slot* c);
  void kill_serial(detail::Slot* n) noexcept;
  void destroy_task(detail::Slot* n) noexcept;
  void destroy_ext(detail::Ext* e) noexcept;
  detail::Ext* ensure_ext(detail::Node* n);
  void push_frame(detail::Node* n, detail::Frame* f) noexcept;
  void deliver(detail::Node* n, detail::MsgHeader* m) noexcept;
  detail::MsgHeader* take_message(detail::Node* n, const void* type) noexcept;
  static bool has_message(const detail::Node* n, const void* type) noexcept;
  void push_ready(detail::Slot* n) noexcept;
  void push_full(detail::Node* n) noexcept;
  void append_ready(detail::Slot* n) noexcept;
  detail::Slot* pop_ready() noexcept;
  detail::Slot* ready_prev(detail::Slot* n) const noexcept;
  void link_ready(detail::Slot* a, detail::Slot* b) noexcept;
  void unlink_ready(detail::Slot* n) noexcept;
  void replace_ready(detail::Slot* old, detail::Node* n) noexcept;
  void park_receiver(detail::Node* n) noexcept;
  detail::Slot* slot_of(std::uint32_t id) const noexcept;
  static std::uint32_t id_of(const detail::Slot* s) noexcept;
  bool earlier(detail::SleepEntry a, detail::SleepEntry b) const noexcept;
  void heap_push(detail::Slot* n);
  void heap_pop() noexcept;
  void heap_erase(detail::Slot* n) noexcept;
  void sift_up(std::size_t i, detail::SleepEntry e, detail::Slot* s) noexcept;
  void sift_down(std::size_t i, detail::SleepEntry e, detail::Slot* s) noexcept;
  void renumber_sleepers();
  void wake_due(std::int64_t now) noexcept;
  std::size_t run_loop(std::int64_t limit, bool wait);
  void execute(detail::Slot* n);
  void execute_compact(detail::Slot* n);
  void settle(detail::Node* n);

  Clock* clock_;
  detail::Slot* current_ = nullptr;
  Cont cont_ = Cont::None;
  bool running_ = false;
  bool stop_ = false;
  bool tearing_down_ = false;
  unsigned poll_interval_ = kDefaultPollInterval;
  unsigned since_poll_ = 0;
  detail::Slot* head_ = nullptr;  // run queue (FIFO)
  detail::Slot* tail_ = nullptr;
  detail::SleepArray heap_;  // sleepers, binary min-heap on (deadline, seq)
  std::uint32_t sleep_seq_ = 0;  // renumbered before it wraps
  std::uint32_t last_serial_ = 0;
  detail::ChunkHeader* partial_ = nullptr;  // full-slot chunks with a free slot
  // Per compact type: its chunks with a free slot; sleepers of it started so far.
  struct CompactClass {
    detail::ChunkHeader* partial = nullptr;
    std::uint32_t started = 0;
  };
  std::vector<CompactClass> compact_;
  unsigned compact_after_ = kDefaultCompactAfter;
  detail::ChunkHeader* spare_ = nullptr;    // one empty chunk kept mapped
  std::vector<detail::ChunkHeader*> chunks_;  // every mapped chunk, sorted
  std::vector<detail::ChunkHeader*> by_number_;  // every mapped chunk by its number (sleep-heap ids)
  std::vector<std::uint32_t> free_numbers_;      // numbers of unmapped chunks, to reuse
  // Tasks that started as compact sleepers and moved into a full slot, by
  // serial: where they are and the slot their handles point to.
  struct Moved {
    detail::Node* node;
    detail::Slot* home;
    std::uint32_t home_bytes;
  };
  std::unordered_map<std::uint32_t, Moved> moved_;
  std::size_t tasks_ = 0;
  std::size_t ready_ = 0;
  std::size_t receiving_ = 0;
  std::size_t compact_sleepers_ = 0;
  std::size_t messages_ = 0;
  std::size_t aux_bytes_ = 0;
  std::size_t cache_bytes_ = 0;
  FreeBlock* cache_[kClasses] = {};
  unsigned cache_count_[kClasses] = {};
  std::uint64_t dispatched_ = 0;
};

// ---- template internals -----------------------------------------------------

namespace detail {

// The scheduler internals the step, frame and message templates need.
struct Access {
  static void* alloc(Scheduler& s, std::size_t size, std::size_t align) { return s.aux_alloc(size, align); }
  static void release(Scheduler& s, void* p, std::size_t size, std::size_t align) noexcept {
    s.aux_free(p, size, align);
  }
  template <class F>
  static void install_step(Scheduler& s, Node* n, F&& f) {
    s.install_step(n, std::forward<F>(f));
  }
  static MsgHeader* take_message(Scheduler& s, Node* n, const void* type) noexcept {
    return s.take_message(n, type);
  }
  // Tests: the last sequence number handed out (to reach the renumbering before 2^32).
  static void set_sleep_seq(Scheduler& s, std::uint32_t seq) noexcept { s.sleep_seq_ = seq; }
};

template <class T>
T* stored(void* storage) noexcept {
  return std::launder(static_cast<T*>(storage));
}

// Destroys and frees a heap-allocated object at scope exit.
template <class T>
struct Owned {
  Scheduler& s;
  T* p;
  ~Owned() {
    p->~T();
    Access::release(s, p, sizeof(T), alignof(T));
  }
};

template <class F>
struct InlineStep {
  static void run(Scheduler&, Node*, void* storage) {
    F* p = stored<F>(storage);
    F f(std::move(*p));
    p->~F();
    f();
  }
  static void destroy(Scheduler&, void* storage) noexcept { stored<F>(storage)->~F(); }
  static void relocate(void* from, void* to) noexcept {
    F* p = stored<F>(from);
    ::new (to) F(std::move(*p));
    p->~F();
  }
  static constexpr StepOps ops{&run, &destroy, nullptr, &relocate};
};

template <class F>
struct BoxedStep {
  static void run(Scheduler& s, Node*, void* storage) {
    Owned<F> box{s, *stored<F*>(storage)};
    (*box.p)();
  }
  static void destroy(Scheduler& s, void* storage) noexcept {
    F* p = *stored<F*>(storage);
    p->~F();
    Access::release(s, p, sizeof(F), alignof(F));
  }
  static constexpr StepOps ops{&run, &destroy, nullptr, nullptr};
};

template <class T>
struct Msg final : MsgHeader {
  T value;
  template <class U>
  explicit Msg(U&& u) : MsgHeader{nullptr, tag_of<T>(), &Msg::drop}, value(std::forward<U>(u)) {}
  static void drop(Scheduler& s, MsgHeader* h) noexcept {
    Msg* m = static_cast<Msg*>(h);
    m->~Msg();
    Access::release(s, m, sizeof(Msg), alignof(Msg));
  }
};

template <class T>
struct Received {
  Scheduler& s;
  Msg<T>* m;
  ~Received() { Msg<T>::drop(s, m); }
};

template <class T, class F, bool Inline>
struct ReceiveStep {
  // Only scheduled once a T is queued, so take_message cannot fail.
  static void run(Scheduler& s, Node* n, void* storage) {
    Received<T> msg{s, static_cast<Msg<T>*>(Access::take_message(s, n, tag_of<T>()))};
    if constexpr (Inline) {
      F* p = stored<F>(storage);
      F f(std::move(*p));
      p->~F();
      f(std::move(msg.m->value));
    } else {
      Owned<F> box{s, *stored<F*>(storage)};
      (*box.p)(std::move(msg.m->value));
    }
  }
  static void destroy(Scheduler& s, void* storage) noexcept {
    if constexpr (Inline) {
      stored<F>(storage)->~F();
    } else {
      F* p = *stored<F*>(storage);
      p->~F();
      Access::release(s, p, sizeof(F), alignof(F));
    }
  }
  static constexpr StepOps ops{&run, &destroy, tag_of<T>(), nullptr};
};

// for (init(); cond(); step()) body(); then done(). CheckFirst=false makes it
// a do-while (the first iteration skips cond).
template <bool CheckFirst, class Init, class Cond, class Step, class Body, class Done>
class LoopFrame final : public Frame {
 public:
  template <class I, class C, class S, class B, class D>
  LoopFrame(I&& i, C&& c, S&& s, B&& b, D&& d)
      : init_(std::forward<I>(i)),
        cond_(std::forward<C>(c)),
        step_(std::forward<S>(s)),
        done_(std::forward<D>(d)),
        body_(std::forward<B>(b)) {}

  bool advance() override {
    if (!started_) {
      started_ = true;
      init_();
      if (CheckFirst && !static_cast<bool>(cond_())) return false;
    } else {
      step_();
      if (!static_cast<bool>(cond_())) return false;
    }
    body_();
    return true;
  }

  bool take_done(Scheduler& s, Node* n) override {
    if constexpr (std::is_same_v<Done, NoOp>) {
      (void)s;
      (void)n;
      return false;
    } else {
      Access::install_step(s, n, std::move(done_));
      return true;
    }
  }

  void destroy(Scheduler& s) noexcept override {
    this->~LoopFrame();
    Access::release(s, this, sizeof(LoopFrame), alignof(LoopFrame));
  }

 private:
  // The flag and the parts that are usually empty structs first, so they
  // share one word instead of each padding to the body's alignment.
  bool started_ = false;
  Init init_;
  Cond cond_;
  Step step_;
  Done done_;
  Body body_;
};

template <class F>
void require_step() {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "cbtask: a callback must be callable with no arguments");
}
template <class F>
void require_cond() {
  static_assert(std::is_invocable_v<std::decay_t<F>&>, "cbtask: a loop condition must be callable with no arguments");
  static_assert(std::is_convertible_v<std::invoke_result_t<std::decay_t<F>&>, bool>,
                "cbtask: a loop condition must return something convertible to bool");
}

}  // namespace detail

// ---- template definitions ------------------------------------------------------

// A T constructed in aux memory (boxed callbacks, loop frames, messages);
// the block is given back if the constructor throws.
template <class T, class... A>
T* Scheduler::make_aux(A&&... a) {
  void* mem = aux_alloc(sizeof(T), alignof(T));
  try {
    return ::new (mem) T(std::forward<A>(a)...);
  } catch (...) {
    aux_free(mem, sizeof(T), alignof(T));
    throw;
  }
}

template <class F>
void Scheduler::install_step(detail::Node* n, F&& f) {
  using D = std::decay_t<F>;
  if constexpr (detail::fits_inline<D>) {
    ::new (static_cast<void*>(n->buf)) D(std::forward<F>(f));
    n->ops = &detail::InlineStep<D>::ops;
  } else {
    ::new (static_cast<void*>(n->buf)) D*(make_aux<D>(std::forward<F>(f)));
    n->ops = &detail::BoxedStep<D>::ops;
  }
}

template <class M, class F>
void Scheduler::install_receive(detail::Node* n, F&& f) {
  using D = std::decay_t<F>;
  static_assert(std::is_invocable_v<D&, M&&>,
                "cbtask: a receive callback must be callable with one argument of the message type");
  if constexpr (detail::fits_inline<D>) {
    ::new (static_cast<void*>(n->buf)) D(std::forward<F>(f));
    n->ops = &detail::ReceiveStep<M, D, true>::ops;
  } else {
    ::new (static_cast<void*>(n->buf)) D*(make_aux<D>(std::forward<F>(f)));
    n->ops = &detail::ReceiveStep<M, D, false>::ops;
  }
}

template <class F>
Task Scheduler::spawn(F&& f) {
  detail::require_step<F>();
  NewTask t(*this);
  install_step(t.n, std::forward<F>(f));
  push_ready(t.n);
  return t.commit();
}

template <class... F>
auto Scheduler::fork(F&&... f) {
  static_assert(sizeof...(F) >= 1, "cbtask: fork needs at least one callback");
  if constexpr (sizeof...(F) == 1) {
    return spawn(std::forward<F>(f)...);
  } else {
    // Braced initialisation evaluates left to right: tasks start in argument order.
    return std::array<Task, sizeof...(F)>{spawn(std::forward<F>(f))...};
  }
}

template <class FrameT, class... A>
Task Scheduler::start_loop(A&&... a) {
  detail::Node* n = claim();
  if (n) {
    ensure_ext(n);
    push_frame(n, make_aux<FrameT>(std::forward<A>(a)...));
    cont_ = Cont::Frame;
    return handle(n);
  }
  NewTask t(*this);
  ensure_ext(t.n);
  push_frame(t.n, make_aux<FrameT>(std::forward<A>(a)...));
  push_ready(t.n);
  return t.commit();
}

template <class Body>
Task Scheduler::loop(Body&& body) {
  detail::require_step<Body>();
  using FrameT = detail::LoopFrame<true, detail::NoOp, detail::Forever, detail::NoOp, std::decay_t<Body>,
                                   detail::NoOp>;
  return start_loop<FrameT>(detail::NoOp{}, detail::Forever{}, detail::NoOp{}, std::forward<Body>(body),
                            detail::NoOp{});
}

template <class Init, class Cond, class Step, class Body, class Done>
Task Scheduler::for_(Init&& init, Cond&& cond, Step&& step, Body&& body, Done&& done) {
  detail::require_step<Init>();
  detail::require_cond<Cond>();
  detail::require_step<Step>();
  detail::require_step<Body>();
  detail::require_step<Done>();
  using FrameT = detail::LoopFrame<true, std::decay_t<Init>, std::decay_t<Cond>, std::decay_t<Step>,
                                   std::decay_t<Body>, std::decay_t<Done>>;
  return start_loop<FrameT>(std::forward<Init>(init), std::forward<Cond>(cond), std::forward<Step>(step),
                            std::forward<Body>(body), std::forward<Done>(done));
}

template <class Cond, class Body, class Done>
Task Scheduler::while_(Cond&& cond, Body&& body, Done&& done) {
  detail::require_cond<Cond>();
  detail::require_step<Body>();
  detail::require_step<Done>();
  using FrameT = detail::LoopFrame<true, detail::NoOp, std::decay_t<Cond>, detail::NoOp, std::decay_t<Body>,
                                   std::decay_t<Done>>;
  return start_loop<FrameT>(detail::NoOp{}, std::forward<Cond>(cond), detail::NoOp{}, std::forward<Body>(body),
                            std::forward<Done>(done));
}

template <class Body, class Cond, class Done>
Task Scheduler::do_while(Body&& body, Cond&& cond, Done&& done) {
  detail::require_step<Body>();
  detail::require_cond<Cond>();
  detail::require_step<Done>();
  using FrameT = detail::LoopFrame<false, detail::NoOp, std::decay_t<Cond>, detail::NoOp, std::decay_t<Body>,
                                   std::decay_t<Done>>;
  return start_loop<FrameT>(detail::NoOp{}, std::forward<Cond>(cond), detail::NoOp{}, std::forward<Body>(body),
                            std::forward<Done>(done));
}

template <class F>
Task Scheduler::sleep(std::int64_t ms, F&& f) {
  std::int64_t ns;
  if (__builtin_mul_overflow(ms, std::int64_t{1000000}, &ns)) ns = ms < 0 ? 0 : kForever;
  return sleep_until(deadline_after(ns), std::forward<F>(f));
}

template <class Rep, class Period, class F>
Task Scheduler::sleep(std::chrono::duration<Rep, Period> d, F&& f) {
  // Compare in floating point so durations beyond ~292 years clamp instead of overflowing.
  const long double ns = std::chrono::duration<long double, std::nano>(d).count();
  const std::int64_t whole = ns >= static_cast<long double>(kForever) ? kForever
                             : ns <= 0                                ? 0
                                                                      : static_cast<std::int64_t>(ns);
  return sleep_until(deadline_after(whole), std::forward<F>(f));
}

template <class F>
Task Scheduler::sleep_until(std::int64_t deadline_ns, F&& f) {
  detail::require_step<F>();
  using D = std::decay_t<F>;
  if constexpr (detail::fits_inline<D>) {
    // A task running from a compact slot sleeps on in it if the callable is of its type.
    if (current_ && cont_ == Cont::None && current_->compact() && running_compact(detail::compact_type<D>())) {
      ::new (detail::compact_storage(current_)) D(std::forward<F>(f));
      current_->bits |= detail::Slot::kHasStep;
      current_->deadline = deadline_ns;
      cont_ = Cont::Sleep;
      return handle(current_);
    }
  }
  if (detail::Node* n = claim()) {
    install_step(n, std::forward<F>(f));
    n->deadline = deadline_ns;
    cont_ = Cont::Sleep;
    return handle(n);
  }
  if constexpr (detail::fits_inline<D>) {
    if (use_compact(detail::compact_type<D>())) return start_compact<D>(deadline_ns, std::forward<F>(f));
  }
  NewTask t(*this);
  install_step(t.n, std::forward<F>(f));
  t.n->deadline = deadline_ns;
  heap_push(t.n);
  return t.commit();
}

// A new task sleeping in a compact slot of D's type.
template <class D, class F>
Task Scheduler::start_compact(std::int64_t deadline_ns, F&& f) {
  detail::Slot* c = alloc_compact(detail::compact_type<D>(), detail::compact_bytes<D>, &detail::InlineStep<D>::ops);
  try {
    ::new (detail::compact_storage(c)) D(std::forward<F>(f));
  } catch (...) {
    free_slot(c);
    throw;
  }
  return commit_compact(c, deadline_ns);
}

template <class F>
Task Scheduler::yield(F&& f) {
  detail::require_step<F>();
  if (detail::Node* n = claim()) {
    install_step(n, std::forward<F>(f));
    cont_ = Cont::Yield;
    return handle(n);
  }
  return spawn(std::forward<F>(f));
}

template <class T, class F>
Task Scheduler::receive(F&& f) {
  using M = typename detail::msg_type<T, std::decay_t<F>>::type;
  if (detail::Node* n = claim()) {
    install_receive<M>(n, std::forward<F>(f));
    cont_ = Cont::Receive;
    return handle(n);
  }
  NewTask t(*this);
  install_receive<M>(t.n, std::forward<F>(f));
  park_receiver(t.n);
  return t.commit();
}

template <class T>
bool Scheduler::send(const Task& to, T&& msg) {
  using V = std::decay_t<T>;
  using M = detail::Msg<V>;
  detail::Node* n = target_node(to);
  if (!n) return false;
  ensure_ext(n);
  deliver(n, make_aux<M>(std::forward<T>(msg)));
  return true;
}

template <class T>
bool Task::send(T&& msg) const {
  if (!sched_) throw std::invalid_argument("cbtask: send to an empty Task handle");
  return sched_->send(*this, std::forward<T>(msg));
}

// ---- the default scheduler and free functions ---------------------------------

// This thread's default Scheduler (steady clock), created on first use.
Scheduler& default_scheduler();
// The scheduler running a callback on this thread, else the default one.
inline Scheduler& current_scheduler() {
  Scheduler* s = Scheduler::running();
  return s ? *s : default_scheduler();
}

template <class... F>
auto fork(F&&... f) {
  return current_scheduler().fork(std::forward<F>(f)...);
}
template <class Body>
Task loop(Body&& body) {
  return current_scheduler().loop(std::forward<Body>(body));
}
template <class Init, class Cond, class Step, class Body, class Done = detail::NoOp>
Task for_(Init&& init, Cond&& cond, Step&& step, Body&& body, Done&& done = Done{}) {
  return current_scheduler().for_(std::forward<Init>(init), std::forward<Cond>(cond), std::forward<Step>(step),
                                  std::forward<Body>(body), std::forward<Done>(done));
}
template <class Cond, class Body, class Done = detail::NoOp>
Task while_(Cond&& cond, Body&& body, Done&& done = Done{}) {
  return current_scheduler().while_(std::forward<Cond>(cond), std::forward<Body>(body), std::forward<Done>(done));
}
template <class Body, class Cond, class Done = detail::NoOp>
Task do_while(Body&& body, Cond&& cond, Done&& done = Done{}) {
  return current_scheduler().do_while(std::forward<Body>(body), std::forward<Cond>(cond),
                                      std::forward<Done>(done));
}
template <class F>
Task sleep(std::int64_t ms, F&& f) {
  return current_scheduler().sleep(ms, std::forward<F>(f));
}
template <class Rep, class Period, class F>
Task sleep(std::chrono::duration<Rep, Period> d, F&& f) {
  return current_scheduler().sleep(d, std::forward<F>(f));
}
template <class F>
Task sleep_until(std::int64_t deadline_ns, F&& f) {
  return current_scheduler().sleep_until(deadline_ns, std::forward<F>(f));
}
inline Task sleep(std::int64_t ms, void (*fn)(void*), void* ctx) { return current_scheduler().sleep(ms, fn, ctx); }
template <class F>
Task yield(F&& f) {
  return current_scheduler().yield(std::forward<F>(f));
}
template <class T = detail::Deduce, class F>
Task receive(F&& f) {
  return current_scheduler().receive<T>(std::forward<F>(f));
}
template <class T>
bool send(const Task& to, T&& msg) {
  return to.send(std::forward<T>(msg));
}
inline Task self() { return current_scheduler().self(); }
inline std::size_t run() { return current_scheduler().run(); }

}  // namespace cbtask
