/* rtprobe timer: timer wake-up latency by cyclictest's method.
 *
 * Each measurement thread sleeps with clock_nanosleep(CLOCK_MONOTONIC,
 * TIMER_ABSTIME) until the next deadline of an absolute schedule (start +
 * k * interval) and records latency = wake-up time - deadline, in ns.
 * Deadlines that have already passed when a thread wakes are skipped and
 * counted as missed periods. Either every sample is kept (pre-allocated
 * before measuring) or, for long runs, a fixed histogram of 1 us buckets
 * with exact min, max and sum, an overflow count and the cycle numbers of
 * the overflows. */
#ifndef RTP_TIMER_H
#define RTP_TIMER_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

#include "json.h"
#include "util.h"

#define TIMER_DEFAULT_INTERVAL_US 1000.0
#define TIMER_MAX_INTERVAL_US 10000000.0 /* 10 s: a stop request waits at most one interval */
#define TIMER_DEFAULT_LOOPS INT64_C(10000)
#define TIMER_MAX_LOOPS INT64_C(10000000000)
#define TIMER_MAX_DURATION_S (366.0 * 24 * 3600)
#define TIMER_BUCKET_NS INT64_C(1000) /* histogram buckets of 1 us */
#define TIMER_MAX_HISTOGRAM_US INT64_C(1000000)
#define TIMER_DEFAULT_OVERFLOW_CYCLES INT64_C(1000)
#define TIMER_MAX_OVERFLOW_CYCLES INT64_C(1000000)

enum timer_mode {
    TIMER_MODE_ABSOLUTE, /* clock_nanosleep(TIMER_ABSTIME) to start + k * interval */
    TIMER_MODE_RELATIVE  /* clock_nanosleep(interval) from the previous wake-up (cyclictest -r) */
};

struct timer_config {
    enum timer_mode mode;
    const char *variant;      /* "absolute" or "relative" */
    double interval_us;       /* as given */
    int64_t interval_ns;      /* rounded to ns, >= the clock resolution */
    int64_t loops;            /* samples per thread (the limit when duration is also given) */
    bool loops_given;
    double duration_s;        /* 0: no duration limit */
    int64_t histogram_us;     /* 0: keep every sample; else histogram range in us */
    int64_t overflow_cycles;  /* histogram mode: overflow cycle numbers kept per thread */
    const char *threads_text; /* --threads as given, NULL: one thread */
    bool threads_all;
    cpu_set_t threads;        /* --threads CPU list (unless threads_all) */
    bool start_times;         /* --start-times: a column with each sample's deadline (CLOCK_MONOTONIC ns) */
    int64_t mark_worst;       /* --mark-worst K: mark each thread's K worst so far in $RTSCOPE_MARKS */
    const char *output;
    struct rtp_rt_options rt;
    int help;
};

/* Parse argv (argv[0] is "timer"). Returns 0, or RTP_EXIT_USAGE after
 * printing the problem to stderr. Checks the interval against the
 * resolution of CLOCK_MONOTONIC (clock_getres). */
int timer_parse_args(int argc, char **argv, struct timer_config *cfg);

/* interval_us -> ns, rejecting values <= 0 and below the clock resolution
 * res_ns. Returns 0, or -1 with the reason in err. */
int timer_interval_ns(double interval_us, int64_t res_ns, int64_t *out, char *err, size_t errlen);

/* "all" or a CPU list "0,2-3". Returns 0, or -1 with the reason in err. */
int timer_parse_cpulist(const char *text, bool *all, cpu_set_t *set, char *err, size_t errlen);

/* Samples one thread keeps: min(loops, deadlines in the duration). */
int64_t timer_samples_per_thread(const struct timer_config *cfg);

/* ---- fixed-memory latency histogram ---------------------------------- */

struct timer_hist {
    uint64_t *counts;          /* nbuckets buckets of bucket_ns, from 0 */
    int64_t nbuckets;
    int64_t bucket_ns;
    uint64_t n;                /* every value added */
    uint64_t overflow;         /* values >= nbuckets * bucket_ns, or < 0 */
    uint64_t negative;         /* of which below 0 (never expected with TIMER_ABSTIME) */
    int64_t min, max, sum;     /* exact, over every value */
    int64_t *overflow_cycles;  /* cycle numbers of the first overflows */
    int64_t cycles_cap;
    int64_t cycles_len;
    uint64_t cycles_dropped;   /* overflows whose cycle number was not kept */
};

/* Allocate and touch (page in) the buckets and the overflow-cycle list:
 * adding values afterwards neither allocates nor faults. 0, or -1 when out
 * of memory. */
int timer_hist_init(struct timer_hist *h, int64_t nbuckets, int64_t bucket_ns, int64_t cycles_cap);
void timer_hist_free(struct timer_hist *h);
void timer_hist_add(struct timer_hist *h, int64_t value, int64_t cycle);
/* The histogram as the sample-file trailer object (docs/sample-format.md),
 * written as member key of the object open in j. */
void timer_hist_json(const struct timer_hist *h, struct rtp_json *j, const char *key);

int rtp_cmd_timer(int argc, char **argv);

#endif
