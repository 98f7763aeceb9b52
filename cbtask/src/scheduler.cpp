// The non-template part of the cbtask Scheduler: the task slab, the run
// queue, the sleep heap, mailboxes and the dispatch trampoline.
#include "cbtask/cbtask.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>

#if defined(__SANITIZE_ADDRESS__)
#define CBTASK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CBTASK_ASAN 1
#endif
#endif

#ifdef CBTASK_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#endif

namespace cbtask {

namespace detail {

// Slab chunk: this header, then task slots of one size (56-byte full slots,
// or compact sleepers of one callable type). Chunks are aligned to their
// size, so a slot finds its chunk by masking its address.
struct ChunkHeader {
  Slot* free;         // recycled slots (LIFO)
  ChunkHeader* prev;  // list of chunks of its class with a free slot
  ChunkHeader* next;
  const StepOps* ops;   // compact chunks: how to run and destroy their callables
  std::uint32_t used;   // live slots
  std::uint32_t bump;   // slots handed out since the chunk was (re)started
  std::uint32_t slot_bytes;
  std::uint32_t capacity;  // slots that fit
  std::uint32_t cls;       // 0: full slots; k + 1: compact sleepers of compact_type k
  std::uint32_t number;    // index in by_number_: the high bits of its slots' sleep-heap ids
  bool listed;
};

std::uint32_t new_compact_type() noexcept {
  static std::atomic<std::uint32_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}

SleepArray::~SleepArray() { release(); }

void SleepArray::release() noexcept {
  if (!data_) return;
#ifdef __linux__
  munmap(data_, cap_ * sizeof(SleepEntry));
#else
  std::free(data_);
#endif
  data_ = nullptr;
  cap_ = 0;
}

void SleepArray::resize(std::size_t cap) {
  void* p;
#ifdef __linux__
  p = data_ ? mremap(data_, cap_ * sizeof(SleepEntry), cap * sizeof(SleepEntry), MREMAP_MAYMOVE)
            : mmap(nullptr, cap * sizeof(SleepEntry), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
#else
  p = std::realloc(data_, cap * sizeof(SleepEntry));
  if (!p) throw std::bad_alloc();
#endif
  data_ = static_cast<SleepEntry*>(p);
  cap_ = cap;
}

void SleepArray::shrink() noexcept {
  if (size_ == 0) {
    release();
    return;
  }
  std::size_t cap = kMinCapacity;
  while (cap < 2 * size_) cap *= 2;
  if (cap >= cap_) return;
  try {
    resize(cap);
  } catch (const std::bad_alloc&) {
    // Keeping the larger array is harmless.
  }
}

}  // namespace detail

namespace {

using detail::ChunkHeader;
using detail::Ext;
using detail::MsgHeader;
using detail::Node;
using detail::SleepEntry;
using detail::Slot;
using detail::State;

using detail::kChunkBytes;
constexpr std::size_t kFirstSlot = 64;
static_assert(sizeof(ChunkHeader) <= kFirstSlot, "chunk header overlaps the first slot");
// A sleep-heap id is a chunk number and a slot index.
constexpr unsigned kIndexBits = 12;
constexpr std::uint32_t kIndexMask = (1u << kIndexBits) - 1;
constexpr std::size_t kMaxChunks = std::size_t{1} << (32 - kIndexBits);
static_assert((kChunkBytes - kFirstSlot) / sizeof(Slot) <= kIndexMask + 1, "slot index does not fit in an id");
// The sleep-heap index shares a word with the state and two flags (5 bits).
constexpr std::size_t kMaxSleepers = (std::size_t{1} << (32 - Slot::kIndexShift)) - 1;

thread_local Scheduler* tl_running = nullptr;

Slot* slot_at(ChunkHeader* c, std::uint32_t i) noexcept {
  return reinterpret_cast<Slot*>(reinterpret_cast<char*>(c) + kFirstSlot + std::size_t{i} * c->slot_bytes);
}

ChunkHeader* chunk_of(const Slot* n) noexcept {
  return reinterpret_cast<ChunkHeader*>(reinterpret_cast<std::uintptr_t>(n) & ~(kChunkBytes - 1));
}

// Under ASan a free slot is cleared (so LeakSanitizer sees no stale pointers
// in it) and poisoned except its first word (serial and state, which handles
// and the teardown sweep read).
constexpr std::size_t kSlotHead = 8;
void poison_slot(Slot* n, std::size_t bytes) noexcept {
#ifdef CBTASK_ASAN
  Slot* link = n->free_next;
  std::memset(reinterpret_cast<char*>(n) + kSlotHead, 0, bytes - kSlotHead);
  n->free_next = link;
  ASAN_POISON_MEMORY_REGION(reinterpret_cast<char*>(n) + kSlotHead, bytes - kSlotHead);
#else
  (void)n;
  (void)bytes;
#endif
}
void unpoison_slot(Slot* n, std::size_t bytes) noexcept {
#ifdef CBTASK_ASAN
  ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<char*>(n) + kSlotHead, bytes - kSlotHead);
#else
  (void)n;
  (void)bytes;
#endif
}

// The sleep order: by deadline, then by sequence number (call order among equal deadlines).
inline bool sleeps_before(std::int64_t da, std::uint32_t sa, std::int64_t db, std::uint32_t sb) noexcept {
  return da < db || (da == db && sa < sb);
}

// The C-style callback of sleep(ms, fn, ctx).
struct FnCtx {
  void (*fn)(void*);
  void* ctx;
  void operator()() const { fn(ctx); }
};

// Sets the thread's running scheduler and the re-entrance flag for one run.
class RunScope {
 public:
  RunScope(Scheduler* s, bool& running) : prev_(tl_running), running_(running) {
    running_ = true;
    tl_running = s;
  }
  ~RunScope() {
    running_ = false;
    tl_running = prev_;
  }
  RunScope(const RunScope&) = delete;
  RunScope& operator=(const RunScope&) = delete;

 private:
  Scheduler* prev_;
  bool& running_;
};

}  // namespace

// ---- construction and teardown ----------------------------------------------

Scheduler::Scheduler(Clock& clock) : clock_(&clock) {}

Scheduler::~Scheduler() {
  tearing_down_ = true;
  // Destructors of callbacks may start new tasks; sweep until none is left.
  while (tasks_ > 0) {
    // Ready tasks first, from the head: compact ones are unlinked by a walk from there.
    while (Slot* s = pop_ready()) {
      s->set_state(State::Running);
      destroy_task(s);
    }
    for (std::size_t ci = 0; ci < chunks_.size(); ++ci) {
      ChunkHeader* c = chunks_[ci];
      for (std::uint32_t i = 0; i < c->bump; ++i) {
        Slot* n = slot_at(c, i);
        if (n->state() != State::Free && n->state() != State::Dying) destroy_task(n);
      }
    }
  }
  for (ChunkHeader* c : std::vector<ChunkHeader*>(chunks_)) unmap_chunk(c);
  trim();
}

void Scheduler::trim() noexcept {
  for (std::size_t c = 0; c < kClasses; ++c) {
    while (FreeBlock* b = cache_[c]) {
      cache_[c] = b->next;
      ::operator delete(b);
    }
    cache_count_[c] = 0;
  }
  cache_bytes_ = 0;
  if (spare_) unmap_chunk(spare_);
  heap_.shrink();
}

// ---- the task slab ---------------------------------------------------------------

ChunkHeader* Scheduler::map_chunk(std::uint32_t bytes) {
  std::uint32_t number;
  if (!free_numbers_.empty()) {
    number = free_numbers_.back();
  } else {
    if (by_number_.size() >= kMaxChunks) throw std::bad_alloc();
    by_number_.push_back(nullptr);
    // unmap_chunk gives numbers back without allocating.
    free_numbers_.reserve(by_number_.capacity());
    number = static_cast<std::uint32_t>(by_number_.size() - 1);
    free_numbers_.push_back(number);  // taken below, once the chunk is mapped
  }
  // Map twice the size and trim, to get a chunk aligned to its size.
  void* raw = mmap(nullptr, 2 * kChunkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = (base + kChunkBytes - 1) & ~(kChunkBytes - 1);
  if (aligned > base) munmap(raw, aligned - base);
  const std::uintptr_t end = base + 2 * kChunkBytes;
  if (end > aligned + kChunkBytes) munmap(reinterpret_cast<void*>(aligned + kChunkBytes), end - aligned - kChunkBytes);
  auto* c = ::new (reinterpret_cast<void*>(aligned)) ChunkHeader{};
  c->slot_bytes = bytes;
  c->capacity = static_cast<std::uint32_t>((kChunkBytes - kFirstSlot) / bytes);
  c->number = number;
  try {
    chunks_.insert(std::upper_bound(chunks_.begin(), chunks_.end(), c, std::less<ChunkHeader*>()), c);
  } catch (...) {
    munmap(c, kChunkBytes);
    throw;
  }
  free_numbers_.pop_back();
  by_number_[number] = c;
#ifdef CBTASK_ASAN
  __lsan_register_root_region(c, kChunkBytes);  // slots hold the only pointers to some heap blocks
#endif
  return c;
}

void Scheduler::unmap_chunk(ChunkHeader* c) noexcept {
  if (c->listed) unlist_chunk(c);
  if (spare_ == c) spare_ = nullptr;
  auto it = std::lower_bound(chunks_.begin(), chunks_.end(), c, std::less<ChunkHeader*>());
  if (it != chunks_.end() && *it == c) chunks_.erase(it);
  by_number_[c->number] = nullptr;
  free_numbers_.push_back(c->number);  // capacity reserved by map_chunk
#ifdef CBTASK_ASAN
  __lsan_unregister_root_region(c, kChunkBytes);
  // The next mapping at this address must not inherit poisoned shadow memory.
  ASAN_UNPOISON_MEMORY_REGION(c, kChunkBytes);
#endif
  munmap(c, kChunkBytes);
}

ChunkHeader*& Scheduler::partial_list(std::uint32_t cls) noexcept {
  return cls == 0 ? partial_ : compact_[cls - 1].partial;
}

void Scheduler::list_chunk(ChunkHeader* c) noexcept {
  ChunkHeader*& head = partial_list(c->cls);
  c->prev = nullptr;
  c->next = head;
  if (head) head->prev = c;
  head = c;
  c->listed = true;
}

void Scheduler::unlist_chunk(ChunkHeader* c) noexcept {
  if (c->prev)
    c->prev->next = c->next;
  else
    partial_list(c->cls) = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = nullptr;
  c->listed = false;
}

__attribute__((always_inline)) inline Slot* Scheduler::alloc_slot(std::uint32_t cls, std::uint32_t bytes,
                                                                   const detail::StepOps* ops) {
  ChunkHeader* c = partial_list(cls);
  if (!c) {
    if (spare_ && spare_->slot_bytes == bytes) {
      c = spare_;
      spare_ = nullptr;
    } else {
      c = map_chunk(bytes);
    }
    c->cls = cls;
    c->ops = ops;
    list_chunk(c);
  }
  Slot* n;
  if (c->free) {
    n = c->free;
    unpoison_slot(n, bytes);
    c->free = n->free_next;
  } else {
    n = slot_at(c, c->bump++);
    unpoison_slot(n, bytes);
  }
  ++c->used;
  if (!c->free && c->bump == c->capacity) unlist_chunk(c);
  if (++last_serial_ == 0) last_serial_ = 1;
  n->serial = last_serial_;
  n->bits = cls != 0 ? Slot::kCompact : 0;
  n->set_state(State::Running);  // owned by its creator until queued somewhere
  ++tasks_;
  return n;
}

Node* Scheduler::alloc_node() {
  Node* n = static_cast<Node*>(alloc_slot(0, sizeof(Node), nullptr));
  n->ops = nullptr;
  n->next = nullptr;
  n->prev = nullptr;
  n->ext = nullptr;
  return n;
}

bool Scheduler::use_compact(std::uint32_t type) {
  if (type >= compact_.size()) compact_.resize(type + 1);
  CompactClass& k = compact_[type];
  if (k.started >= compact_after_) return true;
  ++k.started;
  return false;
}

Slot* Scheduler::alloc_compact(std::uint32_t type, std::uint32_t bytes, const detail::StepOps* ops) {
  return alloc_slot(type + 1, bytes, ops);
}

Task Scheduler::commit_compact(Slot* c, std::int64_t deadline_ns) {
  c->bits |= Slot::kHasStep;
  c->deadline = deadline_ns;
  try {
    heap_push(c);
  } catch (...) {
    destroy_task(c);
    throw;
  }
  return Task(this, c, c->serial, chunk_of(c)->slot_bytes);
}

Task Scheduler::sleep(std::int64_t ms, void (*fn)(void*), void* ctx) {
  if (!fn) throw std::invalid_argument("cbtask: sleep with a null function");
  return sleep(ms, FnCtx{fn, ctx});
}

void Scheduler::free_slot(Slot* n) noexcept {
  ChunkHeader* c = chunk_of(n);
  n->serial = 0;
  n->set_state(State::Free);
  n->free_next = c->free;
  c->free = n;
  poison_slot(n, c->slot_bytes);
  --tasks_;
  if (--c->used == 0) {
    // Empty: restart it, keep it as the spare, or give it back to the system.
    c->free = nullptr;
    c->bump = 0;
    if (c->listed) unlist_chunk(c);
    if (tearing_down_) return;
    if (!spare_)
      spare_ = c;
    else
      unmap_chunk(c);
    return;
  }
  if (!c->listed) list_chunk(c);
}

// Inlined into its callers (all in this file): send() and cancel() take this path.
__attribute__((always_inline)) inline Slot* Scheduler::resolve(const Slot* n, std::uint32_t serial,
                                                                std::uint32_t bytes) const noexcept {
  if (!n || serial == 0) return nullptr;
  ChunkHeader* c = chunk_of(n);
  const bool mapped = chunks_.size() == 1 ? chunks_.front() == c
                                          : std::binary_search(chunks_.begin(), chunks_.end(), c, std::less<ChunkHeader*>());
  // A chunk of another slot size (reused since) is not read: n may not be a slot in it.
  if (mapped && c->slot_bytes == bytes && n->serial == serial) return const_cast<Slot*>(n);
  return moved_.empty() ? nullptr : moved_node(serial);
}

// Out of line, so that the fast path of resolve() keeps the serial in a register.
__attribute__((noinline)) Slot* Scheduler::moved_node(std::uint32_t serial) const noexcept {
  const auto it = moved_.find(serial);
  return it == moved_.end() ? nullptr : it->second.node;
}

__attribute__((always_inline)) inline Slot* Scheduler::target(const Task& t) const {
  if (!t.sched_) throw std::invalid_argument("cbtask: empty Task handle");
  if (t.sched_ != this) throw std::invalid_argument("cbtask: the Task belongs to another Scheduler");
  return resolve(t.node_, t.serial_, t.slot_bytes_);
}

Node* Scheduler::target_node(const Task& t) {
  Slot* n = target(t);
  if (!n) return nullptr;
  return n->compact() ? promote(n) : static_cast<Node*>(n);
}

// Moves a task from its compact slot into a full one, in its place (in the
// sleep heap, the run queue, or as the running task). Its serial stays, and
// moved_ leads its handles to the new slot.
Node* Scheduler::promote(Slot* c) {
  ChunkHeader* ch = chunk_of(c);
  Node* n = alloc_node();
  if (c->serial != 0) {  // (a task that cancelled itself has no handles to lead)
    try {
      moved_.emplace(c->serial, Moved{n, c, ch->slot_bytes});
    } catch (...) {
      free_slot(n);
      throw;
    }
    n->bits = Slot::kMoved;
  } else {
    n->bits = 0;
  }
  n->serial = c->serial;
  if (c->bits & Slot::kHasStep) {
    n->ops = ch->ops;
    ch->ops->relocate(detail::compact_storage(c), n->buf);
  }
  const State state = c->state();
  switch (state) {
    case State::Sleeping: {
      n->deadline = c->deadline;
      const std::uint32_t i = c->heap_index();
      heap_[i].id = id_of(n);
      n->set_heap_index(i);
      --compact_sleepers_;
      break;
    }
    case State::Ready:
      replace_ready(c, n);
      break;
    default:  // Running: the task whose callback runs
      n->deadline = c->deadline;
      current_ = n;
      break;
  }
  n->set_state(state);
  free_slot(c);
  return n;
}

bool Scheduler::running_compact(std::uint32_t type) const noexcept { return chunk_of(current_)->cls == type + 1; }

Task Scheduler::other_handle(Slot* n) const noexcept {
  auto* self = const_cast<Scheduler*>(this);
  if (n->compact()) return Task(self, n, n->serial, chunk_of(n)->slot_bytes);
  const Moved& m = moved_.find(n->serial)->second;
  return Task(self, m.home, n->serial, m.home_bytes);
}

// The task is dead from now on: handles no longer find it.
void Scheduler::kill_serial(Slot* n) noexcept {
  if (n->moved()) {
    moved_.erase(n->serial);
    n->bits &= ~Slot::kMoved;
  }
  n->serial = 0;
}

// Ends a task wherever it is. Its serial is cleared first, so destructors that
// run here see it as dead.
void Scheduler::destroy_task(Slot* s) noexcept {
  switch (s->state()) {
    case State::Ready:
      unlink_ready(s);
      break;
    case State::Sleeping:
      heap_erase(s);
      break;
    case State::Receiving:
      --receiving_;
      break;
    case State::Running:
      break;
    case State::Free:
    case State::Dying:
      assert(false && "destroying a dead task");
      return;
  }
  kill_serial(s);
  s->set_state(State::Dying);
  if (s->compact()) {
    // No loops or mailbox: only its callable, if one is stored.
    if (s->bits & Slot::kHasStep) {
      s->bits &= ~Slot::kHasStep;
      chunk_of(s)->ops->destroy(*this, detail::compact_storage(s));
    }
  } else {
    Node* n = static_cast<Node*>(s);
    if (const detail::StepOps* ops = n->ops) {
      n->ops = nullptr;
      ops->destroy(*this, n->buf);
    }
    if (Ext* e = n->ext) {
      n->ext = nullptr;
      destroy_ext(e);
    }
  }
  free_slot(s);
}

void Scheduler::destroy_ext(Ext* e) noexcept {
  while (detail::Frame* f = e->frames) {
    e->frames = f->parent;
    f->destroy(*this);
  }
  while (MsgHeader* tail = e->mail_tail) {
    MsgHeader* head = tail->next;
    if (head == tail)
      e->mail_tail = nullptr;
    else
      tail->next = head->next;
    --messages_;
    head->destroy(*this, head);
  }
  aux_free(e, sizeof(Ext), alignof(Ext));
}

Ext* Scheduler::ensure_ext(Node* n) {
  if (!n->ext) n->ext = ::new (aux_alloc(sizeof(Ext), alignof(Ext))) Ext{};
  return n->ext;
}

void Scheduler::push_frame(Node* n, detail::Frame* f) noexcept {
  f->parent = n->ext->frames;
  n->ext->frames = f;
}

// ---- mailboxes ----------------------------------------------------------------------

void Scheduler::deliver(Node* n, MsgHeader* m) noexcept {
  Ext* e = n->ext;
  if (e->mail_tail) {
    m->next = e->mail_tail->next;
    e->mail_tail->next = m;
  } else {
    m->next = m;
  }
  e->mail_tail = m;
  ++messages_;
  if (n->state() == State::Receiving && n->ops->want == m->type) {
    --receiving_;
    push_ready(n);
  }
}

MsgHeader* Scheduler::take_message(Node* n, const void* type) noexcept {
  Ext* e = n->ext;
  if (!e || !e->mail_tail) return nullptr;
  MsgHeader* prev = e->mail_tail;
  MsgHeader* cur = prev->next;
  for (;;) {
    if (cur->type == type) {
      if (cur == prev) {
        e->mail_tail = nullptr;  // it was the only message
      } else {
        prev->next = cur->next;
        if (cur == e->mail_tail) e->mail_tail = prev;
      }
      cur->next = nullptr;
      --messages_;
      return cur;
    }
    if (cur == e->mail_tail) return nullptr;
    prev = cur;
    cur = cur->next;
  }
}

bool Scheduler::has_message(const Node* n, const void* type) noexcept {
  const Ext* e = n->ext;
  if (!e || !e->mail_tail) return false;
  const MsgHeader* m = e->mail_tail;
  do {
    m = m->next;
    if (m->type == type) return true;
  } while (m != e->mail_tail);
  return false;
}

void Scheduler::park_receiver(Node* n) noexcept {
  n->set_state(State::Receiving);
  ++receiving_;
}

// ---- run queue -------------------------------------------------------------------------

// A doubly linked list, except that compact slots (tasks woken from a compact
// sleep) have no prev link, and the head's prev is not kept (pop_ready does
// not touch the next task): unlinking a compact slot (cancel, or a message
// that moves it into a full slot) finds its predecessor by walking from the head.
__attribute__((always_inline)) inline void Scheduler::append_ready(Slot* n) noexcept {
  if (tail_)
    tail_->next = n;
  else
    head_ = n;
  tail_ = n;
  n->set_state(State::Ready);
  ++ready_;
}

__attribute__((always_inline)) inline void Scheduler::push_full(Node* n) noexcept {
  n->next = nullptr;
  n->prev = tail_;
  append_ready(n);
}

void Scheduler::push_ready(Slot* n) noexcept {
  if (!n->compact()) {
    push_full(static_cast<Node*>(n));
    return;
  }
  n->next = nullptr;
  append_ready(n);
}

Slot* Scheduler::pop_ready() noexcept {
  Slot* n = head_;
  if (!n) return nullptr;
  head_ = n->next;
  if (!head_) tail_ = nullptr;
  --ready_;
  return n;
}

Slot* Scheduler::ready_prev(Slot* n) const noexcept {
  if (n == head_) return nullptr;
  if (!n->compact()) return static_cast<Node*>(n)->prev;
  Slot* p = head_;
  while (p->next != n) p = p->next;
  return p;
}

// Makes b follow a in the run queue (a nullptr a: b is the head; a nullptr b: a is the tail).
void Scheduler::link_ready(Slot* a, Slot* b) noexcept {
  if (a)
    a->next = b;
  else
    head_ = b;
  if (!b)
    tail_ = a;
  else if (!b->compact())
    static_cast<Node*>(b)->prev = a;
}

void Scheduler::unlink_ready(Slot* n) noexcept {
  link_ready(ready_prev(n), n->next);
  --ready_;
}

// n takes old's place in the run queue.
void Scheduler::replace_ready(Slot* old, Node* n) noexcept {
  Slot* next = old->next;
  link_ready(ready_prev(old), n);
  link_ready(n, next);
}

// ---- sleep heap ----------------------------------------------------------------------------

Slot* Scheduler::slot_of(std::uint32_t id) const noexcept { return slot_at(by_number_[id >> kIndexBits], id & kIndexMask); }

std::uint32_t Scheduler::id_of(const Slot* s) noexcept {
  const ChunkHeader* c = chunk_of(s);
  const auto offset = static_cast<std::size_t>(reinterpret_cast<const char*>(s) - reinterpret_cast<const char*>(c)) - kFirstSlot;
  // Division by a constant is a multiplication: spell out the slot sizes there are.
  std::size_t index;
  switch (c->slot_bytes) {
    case sizeof(Node):
      index = offset / sizeof(Node);
      break;
    case sizeof(Slot) + 8:
      index = offset / (sizeof(Slot) + 8);
      break;
    case sizeof(Slot) + 16:
      index = offset / (sizeof(Slot) + 16);
      break;
    default:
      index = offset / c->slot_bytes;
  }
  return c->number << kIndexBits | static_cast<std::uint32_t>(index);
}

bool Scheduler::earlier(SleepEntry a, SleepEntry b) const noexcept {
  return sleeps_before(slot_of(a.id)->deadline, a.seq, slot_of(b.id)->deadline, b.seq);
}

void Scheduler::heap_push(Slot* n) {
  if (heap_.size() >= kMaxSleepers)
    throw std::length_error("cbtask: more than 134217727 sleeping tasks in one Scheduler");
  if (sleep_seq_ == std::numeric_limits<std::uint32_t>::max()) renumber_sleepers();
  const SleepEntry e{sleep_seq_ + 1, id_of(n)};
  heap_.push_back(e);
  ++sleep_seq_;
  if (n->compact()) ++compact_sleepers_;
  n->set_state(State::Sleeping);
  sift_up(heap_.size() - 1, e, n);
}

// Sequence numbers are 32 bits: before they wrap, the sleepers are numbered
// again from 1 in their order (which keeps the heap as it is).
void Scheduler::renumber_sleepers() {
  std::vector<std::uint32_t> order(heap_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [this](std::uint32_t a, std::uint32_t b) { return earlier(heap_[a], heap_[b]); });
  for (std::size_t r = 0; r < order.size(); ++r) heap_[order[r]].seq = static_cast<std::uint32_t>(r + 1);
  sleep_seq_ = static_cast<std::uint32_t>(order.size());
}

void Scheduler::heap_pop() noexcept {
  const SleepEntry last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last, slot_of(last.id));
}

void Scheduler::heap_erase(Slot* n) noexcept {
  if (n->compact()) --compact_sleepers_;
  const std::size_t i = n->heap_index();
  const SleepEntry last = heap_.back();
  heap_.pop_back();
  if (i < heap_.size()) {
    Slot* s = slot_of(last.id);
    if (i > 0 && earlier(last, heap_[(i - 1) / 2]))
      sift_up(i, last, s);
    else
      sift_down(i, last, s);
  }
}

// The sifts place entry e (of slot s) from the hole at i, and keep every
// moved slot's heap index up to date. (e is passed, not read back from the
// hole: it was just written in two halves, and reading it whole would wait.)
void Scheduler::sift_up(std::size_t i, SleepEntry e, Slot* s) noexcept {
  const std::int64_t d = s->deadline;
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    const SleepEntry p = heap_[parent];
    Slot* ps = slot_of(p.id);
    if (!sleeps_before(d, e.seq, ps->deadline, p.seq)) break;
    heap_[i] = p;
    ps->set_heap_index(static_cast<std::uint32_t>(i));
    i = parent;
  }
  heap_[i] = e;
  s->set_heap_index(static_cast<std::uint32_t>(i));
}

void Scheduler::sift_down(std::size_t i, SleepEntry e, Slot* s) noexcept {
  const std::int64_t d = s->deadline;
  const std::size_t size = heap_.size();
  for (;;) {
    std::size_t child = 2 * i + 1;
    if (child >= size) break;
    Slot* cs = slot_of(heap_[child].id);
    if (child + 1 < size) {
      Slot* right = slot_of(heap_[child + 1].id);
      if (sleeps_before(right->deadline, heap_[child + 1].seq, cs->deadline, heap_[child].seq)) {
        ++child;
        cs = right;
      }
    }
    if (!sleeps_before(cs->deadline, heap_[child].seq, d, e.seq)) break;
    heap_[i] = heap_[child];
    cs->set_heap_index(static_cast<std::uint32_t>(i));
    i = child;
  }
  heap_[i] = e;
  s->set_heap_index(static_cast<std::uint32_t>(i));
}

void Scheduler::wake_due(std::int64_t now) noexcept {
  while (!heap_.empty()) {
    Slot* top = slot_of(heap_.front().id);
    if (top->deadline > now) break;
    heap_pop();
    if (top->compact()) --compact_sleepers_;
    push_ready(top);
  }
}

// ---- continuations ---------------------------------------------------------------------------

void Scheduler::throw_second_continuation() {
  throw std::logic_error(
      "cbtask: this callback already chose its task's continuation (one of sleep, sleep_until, receive, "
      "yield, loop, for_, while_, do_while per callback; use fork for another task)");
}

std::int64_t Scheduler::deadline_after(std::int64_t ns) const {
  const std::int64_t now = clock_->now_ns();
  if (ns <= 0) return now;
  std::int64_t t;
  return __builtin_add_overflow(now, ns, &t) ? kForever : t;
}

Task Scheduler::self() const {
  if (!current_) throw std::logic_error("cbtask: self() called outside a task's callback");
  return handle(current_);
}

bool Scheduler::cancel(const Task& t) {
  if (!t.sched_) return false;
  Slot* n = target(t);
  if (!n) return false;
  if (n == current_) {
    kill_serial(current_);  // dead from now on; settle() frees it when its callback returns
    return true;
  }
  destroy_task(n);
  return true;
}

bool Task::alive() const noexcept { return sched_ && sched_->resolve(node_, serial_, slot_bytes_); }

bool Task::cancel() { return sched_ ? sched_->cancel(*this) : false; }

// ---- dispatch ----------------------------------------------------------------------------------

// Runs one callback of a task: its pending step, or the next iteration of its
// innermost loop. Then queues the task according to the continuation it
// chose. Inlined into the run loop: this is the hot path of every dispatch.
__attribute__((always_inline)) inline void Scheduler::execute(Slot* s) {
  if (s->compact()) {
    execute_compact(s);
    return;
  }
  Node* n = static_cast<Node*>(s);
  n->set_state(State::Running);
  current_ = n;
  cont_ = Cont::None;
  try {
    if (const detail::StepOps* ops = n->ops) {
      n->ops = nullptr;
      ops->run(*this, n, n->buf);
    } else {
      detail::Frame* f = n->ext->frames;
      if (!f->advance()) {
        // Loop over. take_done may throw (allocation); the frame stays linked until then.
        const bool has_done = f->take_done(*this, n);
        n->ext->frames = f->parent;
        f->destroy(*this);
        if (has_done) cont_ = Cont::Yield;
      }
    }
    current_ = nullptr;
    settle(n);
  } catch (...) {
    current_ = nullptr;
    cont_ = Cont::None;
    destroy_task(n);
    throw;
  }
  ++dispatched_;
}

// A task woken from a compact sleep. Its callback may move it into a full
// slot (by choosing a continuation other than a sleep with a callable of its
// type, or by a message to itself); current_ follows it.
__attribute__((noinline)) void Scheduler::execute_compact(Slot* s) {
  s->set_state(State::Running);
  current_ = s;
  cont_ = Cont::None;
  try {
    s->bits &= ~Slot::kHasStep;  // run moves the callable out before calling it
    chunk_of(s)->ops->run(*this, nullptr, detail::compact_storage(s));
    s = current_;
    current_ = nullptr;
    if (!s->compact()) {
      settle(static_cast<Node*>(s));
    } else if (s->serial != 0 && cont_ == Cont::Sleep) {
      heap_push(s);
    } else {
      destroy_task(s);  // finished (no other continuation is chosen in a compact slot), or cancelled
    }
  } catch (...) {
    s = current_;
    current_ = nullptr;
    cont_ = Cont::None;
    destroy_task(s);
    throw;
  }
  ++dispatched_;
}

__attribute__((always_inline)) inline void Scheduler::settle(Node* n) {
  if (n->serial == 0) {  // cancelled by its own callback
    destroy_task(n);
    return;
  }
  switch (cont_) {
    case Cont::None:
      if (n->ext && n->ext->frames)
        push_full(n);  // next iteration of the innermost loop, after a yield
      else
        destroy_task(n);  // finished
      return;
    case Cont::Yield:
    case Cont::Frame:
      push_full(n);
      return;
    case Cont::Sleep:
      heap_push(n);
      return;
    case Cont::Receive:
      if (has_message(n, n->ops->want))
        push_full(n);
      else
        park_receiver(n);
      return;
  }
}

std::size_t Scheduler::run_loop(std::int64_t limit, bool wait) {
  if (running_) throw std::logic_error("cbtask: run()/dispatch() called from inside one of this scheduler's callbacks");
  RunScope scope(this, running_);
  stop_ = false;
  const bool bounded = limit != kForever;
  std::size_t count = 0;
  while (!stop_) {
    if (head_) {
      if ((bounded || !heap_.empty()) && ++since_poll_ >= poll_interval_) {
        since_poll_ = 0;
        const std::int64_t now = clock_->now_ns();
        if (now >= limit) break;
        wake_due(now);
      }
      execute(pop_ready());
      ++count;
      continue;
    }
    if (heap_.empty()) break;
    const std::int64_t now = clock_->now_ns();
    if (now >= limit) break;
    const std::int64_t next = slot_of(heap_.front().id)->deadline;
    if (next > now) {
      if (!wait) break;
      clock_->sleep_until_ns(std::min(next, limit));
      continue;
    }
    wake_due(now);
    since_poll_ = 0;
  }
  return count;
}

std::size_t Scheduler::run() { return run_loop(kForever, true); }
std::size_t Scheduler::run_until_idle() { return run_loop(kForever, false); }
std::size_t Scheduler::run_until(std::int64_t deadline_ns) { return run_loop(deadline_ns, true); }

bool Scheduler::dispatch() {
  if (running_) throw std::logic_error("cbtask: run()/dispatch() called from inside one of this scheduler's callbacks");
  RunScope scope(this, running_);
  if (!heap_.empty() && (!head_ || ++since_poll_ >= poll_interval_)) {
    since_poll_ = 0;
    wake_due(clock_->now_ns());
  }
  Slot* n = pop_ready();
  if (!n) return false;
  execute(n);
  return true;
}

void Scheduler::set_poll_interval(unsigned dispatches) {
  if (dispatches == 0) throw std::invalid_argument("cbtask: poll interval must be at least 1 dispatch");
  poll_interval_ = dispatches;
}

Stats Scheduler::stats() const noexcept {
  Stats s;
  s.tasks = tasks_;
  s.ready = ready_;
  s.sleeping = heap_.size();
  s.compact = compact_sleepers_;
  s.receiving = receiving_;
  s.messages = messages_;
  s.chunks = chunks_.size();
  s.chunk_bytes = chunks_.size() * kChunkBytes;
  s.heap_bytes = heap_.capacity() * sizeof(SleepEntry);
  s.aux_bytes = aux_bytes_;
  s.cache_bytes = cache_bytes_;
  s.dispatched = dispatched_;
  return s;
}

Scheduler* Scheduler::running() noexcept { return tl_running; }

Scheduler& default_scheduler() {
  thread_local Scheduler s;
  return s;
}

}  // namespace cbtask
