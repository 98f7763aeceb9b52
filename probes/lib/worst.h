/* The K worst samples so far, and their marks (rtscope setting explain).
 *
 * The kernel's trace ring buffer keeps only the end of a long run; when a sample enters the K worst of its
 * thread, the probe appends "START END CPU" (CLOCK_MONOTONIC ns) to the file named by $RTSCOPE_MARKS, and
 * rtscope's window keeper copies that window's events out of the ring buffer while it still holds them.
 * Every sample of the final K worst entered them when it was taken, so each one's window is kept, and only
 * about K * (1 + ln(N / K)) marks are written over N samples.
 *
 * A probe that keeps no samples (rtprobe timer's histogram mode) keeps the K worst samples themselves here
 * (value, start, cycle, cpu) and writes them into its trailer, so rtscope can still explain them. */
#ifndef RTP_WORST_H
#define RTP_WORST_H

#include <stdbool.h>
#include <stdint.h>

#define RTP_MARKS_ENV "RTSCOPE_MARKS"

struct rtp_worst_entry {
    int64_t value;
    int64_t start; /* CLOCK_MONOTONIC ns: the sample's interval is [start, start + value] */
    int64_t cycle;
    int32_t cpu;
};

struct rtp_worst {
    struct rtp_worst_entry *heap; /* min-heap (on value) of the k largest seen */
    int k, n;
};

/* 0, or -1 when out of memory. k = 0: never a candidate. */
int rtp_worst_init(struct rtp_worst *w, int k);
void rtp_worst_free(struct rtp_worst *w);
/* Whether v is among the k largest so far (then it is kept). No allocation. */
bool rtp_worst_offer(struct rtp_worst *w, int64_t v);
/* Whether a value would enter (a cheap test before gathering the rest of an entry). */
bool rtp_worst_would_keep(const struct rtp_worst *w, int64_t v);
/* Like rtp_worst_offer, keeping the whole entry. */
bool rtp_worst_keep(struct rtp_worst *w, const struct rtp_worst_entry *e);
/* Sort the kept entries largest first, in place (the heap is no longer one: call once, at the end). */
void rtp_worst_sort(struct rtp_worst *w);

/* The file of $RTSCOPE_MARKS opened for appending: an fd, -1 when the variable is unset, or -2 after
 * printing why it cannot be opened. */
int rtp_marker_open(const char *who);
/* One window mark, with the CPU it is written on (a single O_APPEND write: whole lines between threads). */
void rtp_mark_window(int fd, int64_t start_ns, int64_t end_ns);

#endif
