/* The K worst samples so far, and their marks in a tracefs trace_marker (rtscope setting explain).
 *
 * rtscope's tracing reader keeps only the last moments of the kernel's events; when a sample enters the
 * K worst of its thread, the probe writes "rtscope-window START END" (CLOCK_MONOTONIC ns) to the
 * trace_marker named by $RTSCOPE_TRACE_MARKER, and the reader saves the events of that window. Every sample
 * of the final K worst entered them when it was taken, so each one's window is saved, and only
 * K * (1 + ln(N / K)) windows are written over N samples on average. */
#ifndef RTP_WORST_H
#define RTP_WORST_H

#include <stdbool.h>
#include <stdint.h>

#define RTP_TRACE_MARKER_ENV "RTSCOPE_TRACE_MARKER"

struct rtp_worst {
    int64_t *heap; /* min-heap of the k largest values seen */
    int k, n;
};

/* 0, or -1 when out of memory. k = 0: never a candidate. */
int rtp_worst_init(struct rtp_worst *w, int k);
void rtp_worst_free(struct rtp_worst *w);
/* Whether v is among the k largest so far (then it is kept). No allocation. */
bool rtp_worst_offer(struct rtp_worst *w, int64_t v);

/* The trace_marker of $RTSCOPE_TRACE_MARKER opened for writing: an fd, -1 when the variable is unset,
 * or -2 after printing why it cannot be opened. */
int rtp_marker_open(const char *who);
/* One window mark (a single write: atomic between threads). */
void rtp_mark_window(int fd, int64_t start_ns, int64_t end_ns);

#endif
