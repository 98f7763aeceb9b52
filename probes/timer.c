#include "timer.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rtprobe.h"
#include "samplefile.h"
#include "subcommand.h"
#include "worst.h"

#define TIMER_THREAD_STACK (256 * 1024)
#define TIMER_LEAD_NS INT64_C(1000000) /* threads are asleep before the first deadline */
#define PM_QOS_DEVICE "/dev/cpu_dma_latency"

/* ---- arguments ------------------------------------------------------------ */

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " timer [absolute|relative] --output FILE [options]\n"
           "\n"
           "Timer wake-up latency, cyclictest's method: each thread sleeps with\n"
           "clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until the next deadline of\n"
           "an absolute schedule (start + k x interval) and records wake-up time minus\n"
           "deadline in ns. Deadlines already past at a wake-up are skipped and counted\n"
           "as missed periods. 'relative' sleeps one interval from each wake-up\n"
           "(cyclictest -r). /dev/cpu_dma_latency is held at 0 for the run when possible.\n"
           "\n"
           "options:\n"
           "  --output FILE        sample file to write (required)\n"
           "  --interval-us X      period in us, may be fractional, at least the clock\n"
           "                       resolution (default 1000)\n"
           "  --loops N            samples per thread, 1..%lld (default 10000 unless\n"
           "                       --duration-s is given; with both, the first limit wins)\n"
           "  --duration-s X       measure the deadlines within X seconds\n"
           "  --threads all|LIST   one thread per CPU this process may use, or per CPU of\n"
           "                       LIST (e.g. 0,2-3), each pinned; default one thread\n"
           "  --histogram-us N     keep a histogram of 1 us buckets over 0..N us (plus exact\n"
           "                       min, max, sum and overflows) instead of every sample;\n"
           "                       memory does not grow with --loops (N <= %lld)\n"
           "  --overflow-cycles N  histogram mode: cycle numbers of overflows kept per\n"
           "                       thread (default %lld)\n"
           "  --start-times        add a column start: each sample's deadline, CLOCK_MONOTONIC\n"
           "                       ns (what rtscope explain matches kernel events against)\n"
           "  --mark-worst K       when a sample enters its thread's K worst, append its window\n"
           "                       (start end cpu) to the file in $RTSCOPE_MARKS; histogram\n"
           "                       mode writes each thread's K worst into the trailer (worst)\n"
           "%s"
           "  --help               this text\n"
           "\n"
           "Columns: latency (ns), cycle, thread, cpu[, start (ns)]. Histogram mode writes no records\n"
           "and one trailer histogram per thread (docs/timer.md).\n"
           "\n"
           "exit codes: 0 written, 1 run failed (refused setting, I/O error), 2 usage error\n",
           (long long)TIMER_MAX_LOOPS, (long long)TIMER_MAX_HISTOGRAM_US,
           (long long)TIMER_DEFAULT_OVERFLOW_CYCLES, rtp_rt_options_help);
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

int timer_interval_ns(double interval_us, int64_t res_ns, int64_t *out, char *err, size_t errlen)
{
    if (!(interval_us > 0.0)) {
        set_err(err, errlen, "the interval must be greater than 0 us, got %g", interval_us);
        return -1;
    }
    int64_t ns = llround(interval_us * 1000.0);
    if (ns < res_ns || ns < 1) {
        set_err(err, errlen,
                "the interval %g us is below the resolution of CLOCK_MONOTONIC (%lld ns)",
                interval_us, (long long)res_ns);
        return -1;
    }
    *out = ns;
    return 0;
}

int timer_parse_cpulist(const char *text, bool *all, cpu_set_t *set, char *err, size_t errlen)
{
    CPU_ZERO(set);
    *all = false;
    if (strcmp(text, "all") == 0) {
        *all = true;
        return 0;
    }
    const char *p = text;
    if (!*p) {
        set_err(err, errlen, "empty CPU list; expected 'all' or a list such as 0,2-3");
        return -1;
    }
    while (*p) {
        char *end;
        if (*p < '0' || *p > '9')
            goto syntax;
        long lo = strtol(p, &end, 10), hi = lo;
        p = end;
        if (*p == '-') {
            p++;
            if (*p < '0' || *p > '9')
                goto syntax;
            hi = strtol(p, &end, 10);
            p = end;
        }
        if (lo > hi || hi >= CPU_SETSIZE) {
            set_err(err, errlen, "bad CPU range in '%s' (CPUs are 0..%d, ranges low-high)", text,
                    CPU_SETSIZE - 1);
            return -1;
        }
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, set);
        if (*p == ',') {
            p++;
            if (!*p)
                goto syntax;
        } else if (*p) {
            goto syntax;
        }
    }
    return 0;
syntax:
    set_err(err, errlen, "cannot read CPU list '%s'; expected 'all' or a list such as 0,2-3", text);
    return -1;
}

static const struct {
    const char *name;
    enum timer_mode mode;
} variants[] = {{"absolute", TIMER_MODE_ABSOLUTE}, {"relative", TIMER_MODE_RELATIVE}};
static const struct rtp_choices choices = {"timer", "variant", variants, sizeof variants / sizeof variants[0],
                                           sizeof variants[0]};

int timer_parse_args(int argc, char **argv, struct timer_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = TIMER_MODE_ABSOLUTE;
    cfg->variant = "absolute";
    cfg->interval_us = TIMER_DEFAULT_INTERVAL_US;
    cfg->loops = TIMER_DEFAULT_LOOPS;
    cfg->overflow_cycles = TIMER_DEFAULT_OVERFLOW_CYCLES;
    rtp_rt_options_init(&cfg->rt);
    int chosen = -1; /* absolute unless given */
    char err[256];
    const struct rtp_common_args common = {"timer", &cfg->help, &cfg->rt, &cfg->output};

    for (int i = 1; i < argc && !cfg->help; i++) {
        const char *v;
        int m;
        if ((m = rtp_common_option(argc, argv, &i, &common)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            continue;
        }
        if ((m = rtp_option_value(argc, argv, &i, "--variant", &v)) != 0) {
            if (m < 0 || rtp_choice_set(&choices, v, &chosen) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--interval-us", &v)) != 0) {
            if (m < 0 || rtp_option_f64("--interval-us", v, 0.0, TIMER_MAX_INTERVAL_US, &cfg->interval_us) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--loops", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--loops", v, 1, TIMER_MAX_LOOPS, &cfg->loops) != 0)
                return RTP_EXIT_USAGE;
            cfg->loops_given = true;
        } else if ((m = rtp_option_value(argc, argv, &i, "--duration-s", &v)) != 0) {
            if (m < 0 || rtp_option_f64("--duration-s", v, 0.0, TIMER_MAX_DURATION_S, &cfg->duration_s) != 0)
                return RTP_EXIT_USAGE;
            if (cfg->duration_s <= 0.0) {
                fprintf(stderr, RTPROBE_NAME " timer: --duration-s must be greater than 0\n");
                return RTP_EXIT_USAGE;
            }
        } else if ((m = rtp_option_value(argc, argv, &i, "--threads", &v)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            if (timer_parse_cpulist(v, &cfg->threads_all, &cfg->threads, err, sizeof err) != 0) {
                fprintf(stderr, RTPROBE_NAME " timer: --threads: %s\n", err);
                return RTP_EXIT_USAGE;
            }
            cfg->threads_text = v;
        } else if ((m = rtp_option_value(argc, argv, &i, "--histogram-us", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--histogram-us", v, 1, TIMER_MAX_HISTOGRAM_US, &cfg->histogram_us) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--overflow-cycles", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--overflow-cycles", v, 0, TIMER_MAX_OVERFLOW_CYCLES,
                                        &cfg->overflow_cycles) != 0)
                return RTP_EXIT_USAGE;
        } else if (strcmp(argv[i], "--start-times") == 0) {
            cfg->start_times = true;
        } else if ((m = rtp_option_value(argc, argv, &i, "--mark-worst", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--mark-worst", v, 0, 1000000, &cfg->mark_worst) != 0)
                return RTP_EXIT_USAGE;
        } else if (rtp_unknown_option("timer", argv[i]) || rtp_choice_set(&choices, argv[i], &chosen) != 0) {
            return RTP_EXIT_USAGE;
        }
    }
    if (chosen >= 0) {
        cfg->mode = variants[chosen].mode;
        cfg->variant = variants[chosen].name;
    }
    if (cfg->help)
        return 0;

    if (!cfg->output) {
        fprintf(stderr, RTPROBE_NAME " timer: --output FILE is required\n");
        return RTP_EXIT_USAGE;
    }
    struct timespec res;
    if (clock_getres(CLOCK_MONOTONIC, &res) != 0) {
        fprintf(stderr, RTPROBE_NAME " timer: clock_getres(CLOCK_MONOTONIC) failed: %s\n", strerror(errno));
        return RTP_EXIT_USAGE;
    }
    if (timer_interval_ns(cfg->interval_us, rtp_ts_to_ns(res), &cfg->interval_ns, err, sizeof err) != 0) {
        fprintf(stderr, RTPROBE_NAME " timer: --interval-us: %s\n", err);
        return RTP_EXIT_USAGE;
    }
    if (cfg->threads_text && cfg->rt.cpu >= 0) {
        fprintf(stderr, RTPROBE_NAME " timer: --cpu pins the one thread; with --threads each thread is pinned "
                                     "to its CPU: give one of them\n");
        return RTP_EXIT_USAGE;
    }
    if (cfg->duration_s > 0.0 && timer_samples_per_thread(cfg) < 1) {
        fprintf(stderr, RTPROBE_NAME " timer: --duration-s %g is shorter than one interval (%g us)\n",
                cfg->duration_s, cfg->interval_us);
        return RTP_EXIT_USAGE;
    }
    return 0;
}

int64_t timer_samples_per_thread(const struct timer_config *cfg)
{
    if (cfg->duration_s > 0.0) {
        int64_t deadlines = llround(cfg->duration_s * 1e9) / cfg->interval_ns;
        return (cfg->loops_given && cfg->loops < deadlines) ? cfg->loops : deadlines;
    }
    return cfg->loops;
}

/* ---- histogram ------------------------------------------------------------ */

/* Write to every page so that later stores do not fault (calloc'd pages may
 * be mapped lazily, and a compiler may drop a memset of calloc'd memory). */
static void touch(void *p, size_t bytes)
{
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;
    volatile char *c = p;
    for (size_t k = 0; k < bytes; k += step)
        c[k] = 0;
    if (bytes)
        c[bytes - 1] = 0;
}

int timer_hist_init(struct timer_hist *h, int64_t nbuckets, int64_t bucket_ns, int64_t cycles_cap)
{
    memset(h, 0, sizeof *h);
    h->nbuckets = nbuckets;
    h->bucket_ns = bucket_ns;
    h->cycles_cap = cycles_cap;
    h->min = INT64_MAX;
    h->max = INT64_MIN;
    h->counts = calloc((size_t)nbuckets, sizeof *h->counts);
    h->overflow_cycles = calloc(cycles_cap > 0 ? (size_t)cycles_cap : 1, sizeof *h->overflow_cycles);
    if (!h->counts || !h->overflow_cycles) {
        timer_hist_free(h);
        return -1;
    }
    touch(h->counts, (size_t)nbuckets * sizeof *h->counts);
    touch(h->overflow_cycles, (size_t)(cycles_cap > 0 ? cycles_cap : 1) * sizeof *h->overflow_cycles);
    return 0;
}

void timer_hist_free(struct timer_hist *h)
{
    free(h->counts);
    free(h->overflow_cycles);
    h->counts = NULL;
    h->overflow_cycles = NULL;
}

void timer_hist_add(struct timer_hist *h, int64_t value, int64_t cycle)
{
    h->n++;
    h->sum += value;
    if (value < h->min)
        h->min = value;
    if (value > h->max)
        h->max = value;
    /* Values outside [0, nbuckets * bucket_ns) are overflows: counted, and
     * their cycle numbers kept while there is room, never dropped silently. */
    if (value >= 0 && value / h->bucket_ns < h->nbuckets) {
        h->counts[value / h->bucket_ns]++;
        return;
    }
    h->overflow++;
    if (value < 0)
        h->negative++;
    if (h->cycles_len < h->cycles_cap)
        h->overflow_cycles[h->cycles_len++] = cycle;
    else
        h->cycles_dropped++;
}

void timer_hist_json(const struct timer_hist *h, struct rtp_json *j, const char *key)
{
    rtp_json_begin_object(j, key);
    rtp_json_string(j, "unit", "ns");
    rtp_json_i64(j, "bucket_width", h->bucket_ns);
    rtp_json_i64(j, "min_value", 0);
    rtp_json_begin_array(j, "counts");
    for (int64_t k = 0; k < h->nbuckets; k++)
        rtp_json_u64(j, NULL, h->counts[k]);
    rtp_json_end_array(j);
    rtp_json_u64(j, "overflow", h->overflow);
    rtp_json_begin_array(j, "overflow_cycles");
    for (int64_t k = 0; k < h->cycles_len; k++)
        rtp_json_i64(j, NULL, h->overflow_cycles[k]);
    rtp_json_end_array(j);
    rtp_json_u64(j, "overflow_cycles_dropped", h->cycles_dropped);
    rtp_json_u64(j, "negative", h->negative);
    rtp_json_u64(j, "n", h->n);
    rtp_json_i64(j, "min", h->n ? h->min : 0);
    rtp_json_i64(j, "max", h->n ? h->max : 0);
    rtp_json_i64(j, "sum", h->sum);
    rtp_json_end_object(j);
}

/* ---- measurement threads -------------------------------------------------- */

struct timer_sample {
    int64_t deadline; /* CLOCK_MONOTONIC ns */
    int64_t latency;
    int64_t cycle;
    int32_t cpu;
};

enum { START_WAIT, START_GO, START_ABORT };

struct timer_shared {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int ready;
    int state;
    int64_t start_ns;
    int marker_fd; /* $RTSCOPE_MARKS, or -1 */
};

struct timer_thread {
    int index;
    int cpu; /* the CPU it is pinned to, -1 if not pinned */
    pthread_t handle;
    bool created;
    const struct timer_config *cfg;
    struct timer_shared *shared;
    int64_t limit;                 /* samples to take */
    struct timer_sample *samples;  /* NULL in histogram mode */
    struct timer_hist hist;
    struct rtp_worst worst;        /* --mark-worst: the K worst so far */
    int64_t n;                     /* samples taken */
    int64_t cycles;                /* deadlines passed: samples + missed */
    uint64_t missed;
    int error;                     /* errno of a failed clock call */
};

static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * RTP_NSEC_PER_SEC + ts.tv_nsec;
}

static inline struct timespec to_ts(int64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / RTP_NSEC_PER_SEC), .tv_nsec = (long)(ns % RTP_NSEC_PER_SEC)};
    return ts;
}

/* No allocation, no I/O: a store into pre-touched memory. */
static inline void record(struct timer_thread *t, int64_t deadline, int64_t latency, int64_t cycle)
{
    if (t->samples) {
        struct timer_sample *s = &t->samples[t->n];
        s->deadline = deadline;
        s->latency = latency;
        s->cycle = cycle;
        s->cpu = sched_getcpu();
    } else {
        timer_hist_add(&t->hist, latency, cycle);
    }
    t->n++;
    if (rtp_worst_would_keep(&t->worst, latency)) {
        /* --mark-worst K: the K worst so far, whole (histogram mode writes them into the trailer), and the
         * window of each as it enters. */
        const struct rtp_worst_entry e = {.value = latency, .start = deadline, .cycle = cycle,
                                          .cpu = t->samples ? t->samples[t->n - 1].cpu : sched_getcpu()};
        rtp_worst_keep(&t->worst, &e);
        if (t->shared->marker_fd >= 0)
            rtp_mark_window(t->shared->marker_fd, deadline, deadline + latency);
    }
}

static void measure_absolute(struct timer_thread *t, int64_t start, int64_t end)
{
    const int64_t interval = t->cfg->interval_ns;
    int64_t next = start + interval, cycle = 0;
    while (t->n < t->limit && !rtp_stop_signal && next <= end) {
        struct timespec deadline = to_ts(next);
        int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        if (rc == EINTR)
            continue; /* the loop condition sees a stop request */
        if (rc != 0) {
            t->error = rc;
            break;
        }
        int64_t now = now_ns();
        record(t, next, now - next, cycle);
        next += interval;
        cycle++;
        if (t->n >= t->limit)
            break; /* the last sample: a deadline passed meanwhile is after the run, not missed */
        if (now > next) { /* woke after the next deadline: skip what has passed, and count it */
            int64_t skip = (now - next + interval - 1) / interval;
            /* Deadlines beyond the end of a duration are not missed, just not measured. */
            int64_t within = next <= end ? (end - next) / interval + 1 : 0;
            int64_t missed = skip < within ? skip : within;
            next += skip * interval;
            cycle += missed;
            t->missed += (uint64_t)missed;
        }
    }
    t->cycles = cycle;
}

static void measure_relative(struct timer_thread *t, int64_t start, int64_t end)
{
    const int64_t interval = t->cfg->interval_ns;
    const struct timespec period = to_ts(interval);
    int64_t cycle = 0;
    /* The first sleep starts at the common start time, like the absolute variant. */
    struct timespec first = to_ts(start);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &first, NULL) == EINTR && !rtp_stop_signal)
        ;
    while (t->n < t->limit && !rtp_stop_signal) {
        int64_t next = now_ns() + interval;
        if (next > end)
            break;
        int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &period, NULL);
        if (rc == EINTR)
            continue;
        if (rc != 0) {
            t->error = rc;
            break;
        }
        record(t, next, now_ns() - next, cycle);
        cycle++;
    }
    t->cycles = cycle;
}

static void *measure(void *arg)
{
    struct timer_thread *t = arg;
    struct timer_shared *s = t->shared;
    pthread_mutex_lock(&s->lock);
    s->ready++;
    pthread_cond_broadcast(&s->cond);
    while (s->state == START_WAIT)
        pthread_cond_wait(&s->cond, &s->lock);
    int state = s->state;
    int64_t start = s->start_ns;
    pthread_mutex_unlock(&s->lock);
    if (state != START_GO)
        return NULL;
    int64_t end = t->cfg->duration_s > 0.0 ? start + llround(t->cfg->duration_s * 1e9) : INT64_MAX;
    if (t->cfg->mode == TIMER_MODE_ABSOLUTE)
        measure_absolute(t, start, end);
    else
        measure_relative(t, start, end);
    return NULL;
}

/* ---- the run -------------------------------------------------------------- */

static const struct rtp_sf_column sample_columns[] = {
    {"latency", "ns", RTP_SF_I64},
    {"cycle", "count", RTP_SF_I64},
    {"thread", "", RTP_SF_I64},
    {"cpu", "", RTP_SF_I64},
    {"start", "ns", RTP_SF_I64}, /* with --start-times only: the last column */
};

struct timer_run {
    const struct timer_config *cfg;
    struct timer_thread *threads;
    int nthreads;
    int64_t res_ns;
    int pm_qos_fd;
    char pm_qos_error[160];
    struct timer_shared shared;
};

/* The CPUs to measure on (one thread each), or a single unpinned thread.
 * RTP_EXIT_OK, or RTP_EXIT_USAGE after naming a CPU this process may not use. */
static int plan_threads(struct timer_run *r, int *cpus)
{
    const struct timer_config *cfg = r->cfg;
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        fprintf(stderr, RTPROBE_NAME " timer: cannot read the CPU affinity: %s\n", strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    if (!cfg->threads_text) {
        cpus[0] = cfg->rt.cpu; /* -1, or pinned with the whole process by --cpu */
        r->nthreads = 1;
        return RTP_EXIT_OK;
    }
    char list[256];
    if (rtp_format_cpuset(&allowed, list, sizeof list) != 0)
        snprintf(list, sizeof list, "(too many to list)");
    r->nthreads = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (cfg->threads_all ? !CPU_ISSET(c, &allowed) : !CPU_ISSET(c, &cfg->threads))
            continue;
        if (!CPU_ISSET(c, &allowed)) {
            fprintf(stderr,
                    RTPROBE_NAME " timer: --threads: CPU %d does not exist, is offline or is not allowed "
                                 "for this process; allowed CPUs: %s\n",
                    c, list);
            return RTP_EXIT_USAGE;
        }
        cpus[r->nthreads++] = c;
    }
    return RTP_EXIT_OK;
}

static int allocate(struct timer_run *r, const int *cpus)
{
    const struct timer_config *cfg = r->cfg;
    const int64_t limit = timer_samples_per_thread(cfg);
    if (!cfg->histogram_us) {
        /* Refuse before touching more than half the memory: the OOM killer
         * would end the run without a word. */
        double need = (double)limit * r->nthreads * sizeof(struct timer_sample);
        double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
        if (phys > 0 && need > phys / 2) {
            fprintf(stderr,
                    RTPROBE_NAME " timer: keeping %lld samples x %d thread(s) needs %.0f MiB, more than half "
                                 "of the memory; use --histogram-us for long runs\n",
                    (long long)limit, r->nthreads, need / 1048576.0);
            return RTP_EXIT_FAILURE;
        }
    }
    r->threads = calloc((size_t)r->nthreads, sizeof *r->threads);
    if (!r->threads)
        goto oom;
    for (int k = 0; k < r->nthreads; k++) {
        struct timer_thread *t = &r->threads[k];
        t->index = k;
        t->cpu = cpus[k];
        t->cfg = cfg;
        t->shared = &r->shared;
        t->limit = limit;
        if (rtp_worst_init(&t->worst, (int)cfg->mark_worst) != 0)
            goto oom;
        if (cfg->histogram_us) {
            if (timer_hist_init(&t->hist, cfg->histogram_us, TIMER_BUCKET_NS, cfg->overflow_cycles) != 0)
                goto oom;
        } else {
            t->samples = malloc((size_t)limit * sizeof *t->samples);
            if (!t->samples)
                goto oom;
            touch(t->samples, (size_t)limit * sizeof *t->samples);
        }
    }
    return RTP_EXIT_OK;
oom:
    fprintf(stderr, RTPROBE_NAME " timer: out of memory for %lld %s per thread\n",
            (long long)(cfg->histogram_us ? cfg->histogram_us : limit),
            cfg->histogram_us ? "histogram buckets" : "samples");
    return RTP_EXIT_FAILURE;
}

static void release(struct timer_run *r)
{
    if (!r->threads)
        return;
    for (int k = 0; k < r->nthreads; k++) {
        free(r->threads[k].samples);
        timer_hist_free(&r->threads[k].hist);
        rtp_worst_free(&r->threads[k].worst);
    }
    free(r->threads);
    r->threads = NULL;
}

/* Hold the PM QoS CPU latency request at 0 us (no deep C-states) while the
 * file stays open, as cyclictest does. Failure is a note, not an error. */
static void hold_pm_qos(struct timer_run *r)
{
    r->pm_qos_fd = open(PM_QOS_DEVICE, O_RDWR | O_CLOEXEC);
    if (r->pm_qos_fd < 0) {
        snprintf(r->pm_qos_error, sizeof r->pm_qos_error, "%s", strerror(errno));
        return;
    }
    int32_t zero = 0;
    if (write(r->pm_qos_fd, &zero, sizeof zero) != (ssize_t)sizeof zero) {
        snprintf(r->pm_qos_error, sizeof r->pm_qos_error, "write: %s", strerror(errno));
        close(r->pm_qos_fd);
        r->pm_qos_fd = -1;
    }
}

/* Start the threads, release them together, wait for them. RTP_EXIT_OK or
 * RTP_EXIT_FAILURE (message printed). */
static int run_threads(struct timer_run *r)
{
    struct timer_shared *s = &r->shared;
    pthread_attr_t attr;
    int rc = RTP_EXIT_OK, created = 0;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, TIMER_THREAD_STACK);
    /* The threads inherit SCHED_FIFO and the priority set by --priority. */
    pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
    for (int k = 0; k < r->nthreads; k++) {
        struct timer_thread *t = &r->threads[k];
        cpu_set_t one;
        CPU_ZERO(&one);
        if (r->cfg->threads_text) {
            CPU_SET(t->cpu, &one);
            pthread_attr_setaffinity_np(&attr, sizeof one, &one);
        }
        int e = pthread_create(&t->handle, &attr, measure, t);
        if (e != 0) {
            fprintf(stderr, RTPROBE_NAME " timer: cannot start measurement thread %d: %s\n", k, strerror(e));
            rc = RTP_EXIT_FAILURE;
            break;
        }
        t->created = true;
        created++;
    }
    pthread_attr_destroy(&attr);

    pthread_mutex_lock(&s->lock);
    while (s->ready < created)
        pthread_cond_wait(&s->cond, &s->lock);
    s->start_ns = now_ns() + TIMER_LEAD_NS;
    s->state = rc == RTP_EXIT_OK ? START_GO : START_ABORT;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);

    for (int k = 0; k < r->nthreads; k++)
        if (r->threads[k].created)
            pthread_join(r->threads[k].handle, NULL);
    for (int k = 0; k < r->nthreads && rc == RTP_EXIT_OK; k++) {
        if (r->threads[k].error) {
            fprintf(stderr, RTPROBE_NAME " timer: clock_nanosleep failed in thread %d: %s\n", k,
                    strerror(r->threads[k].error));
            rc = RTP_EXIT_FAILURE;
        }
    }
    return rc;
}

static void build_settings(const struct timer_run *r, struct rtp_json *j)
{
    rtp_json_begin_object(j, NULL);
    rtp_rt_settings_json(&r->cfg->rt, j);
    if (r->pm_qos_fd >= 0)
        rtp_json_i64(j, "cpu_dma_latency_us", 0);
    rtp_json_end_object(j);
}

/* Whole numbers as integers ("200", not "2e+02"). */
static void json_number(struct rtp_json *j, const char *key, double v)
{
    if (v == floor(v) && fabs(v) < 9e15)
        rtp_json_i64(j, key, (int64_t)v);
    else
        rtp_json_f64(j, key, v);
}

static void build_params(const struct timer_config *cfg, struct rtp_json *j)
{
    rtp_json_begin_object(j, NULL);
    json_number(j, "interval_us", cfg->interval_us);
    if (cfg->loops_given || cfg->duration_s <= 0.0)
        rtp_json_i64(j, "loops", cfg->loops);
    if (cfg->duration_s > 0.0)
        json_number(j, "duration_s", cfg->duration_s);
    if (cfg->threads_text)
        rtp_json_string(j, "threads", cfg->threads_text);
    if (cfg->histogram_us) {
        rtp_json_i64(j, "histogram_us", cfg->histogram_us);
        rtp_json_i64(j, "overflow_cycles", cfg->overflow_cycles);
    }
    rtp_json_end_object(j);
}

/* Histogram mode keeps no samples: the K worst of each thread (--mark-worst K) go into the trailer, largest
 * first per thread, so rtscope can explain them (docs/sample-format.md, `worst`). */
static void worst_json(const struct timer_run *r, struct rtp_json *j)
{
    rtp_json_begin_array(j, "worst");
    for (int k = 0; k < r->nthreads; k++) {
        struct rtp_worst *w = &r->threads[k].worst;
        rtp_worst_sort(w);
        for (int i = 0; i < w->n; i++) {
            rtp_json_begin_object(j, NULL);
            rtp_json_i64(j, "thread", k);
            rtp_json_i64(j, "value", w->heap[i].value);
            rtp_json_i64(j, "start", w->heap[i].start);
            rtp_json_i64(j, "cycle", w->heap[i].cycle);
            rtp_json_i64(j, "cpu", w->heap[i].cpu);
            rtp_json_end_object(j);
        }
    }
    rtp_json_end_array(j);
}

static void build_trailer(struct timer_run *r, const char *finished_at, struct rtp_json *j)
{
    const struct timer_config *cfg = r->cfg;
    uint64_t missed = 0, overflows = 0, negative = 0, dropped = 0;
    for (int k = 0; k < r->nthreads; k++) {
        missed += r->threads[k].missed;
        overflows += r->threads[k].hist.overflow;
        negative += r->threads[k].hist.negative;
        dropped += r->threads[k].hist.cycles_dropped;
    }
    rtp_json_begin_object(j, NULL);
    rtp_json_string(j, "finished_at", finished_at);
    rtp_json_begin_object(j, "counters");
    rtp_json_u64(j, "missed_periods", missed);
    if (cfg->histogram_us)
        rtp_json_u64(j, "overflows", overflows);
    rtp_json_end_object(j);
    rtp_json_i64(j, "clock_resolution_ns", r->res_ns);
    rtp_json_begin_array(j, "threads");
    for (int k = 0; k < r->nthreads; k++) {
        const struct timer_thread *t = &r->threads[k];
        rtp_json_begin_object(j, NULL);
        rtp_json_i64(j, "thread", k);
        if (t->cpu >= 0)
            rtp_json_i64(j, "cpu", t->cpu);
        rtp_json_i64(j, "samples", t->n);
        rtp_json_i64(j, "cycles", t->cycles);
        rtp_json_u64(j, "missed_periods", t->missed);
        rtp_json_end_object(j);
    }
    rtp_json_end_array(j);
    if (cfg->histogram_us) {
        rtp_json_begin_object(j, "histograms");
        for (int k = 0; k < r->nthreads; k++) {
            char name[32];
            snprintf(name, sizeof name, "thread%d", k);
            timer_hist_json(&r->threads[k].hist, j, name);
        }
        rtp_json_end_object(j);
    }
    if (cfg->histogram_us && cfg->mark_worst > 0)
        worst_json(r, j);
    rtp_json_begin_array(j, "notes");
    char note[320];
    if (r->pm_qos_fd < 0) {
        snprintf(note, sizeof note,
                 "could not hold " PM_QOS_DEVICE " at 0 (%s): deep CPU idle states may add latency",
                 r->pm_qos_error);
        rtp_json_string(j, NULL, note);
    }
    if (missed) {
        snprintf(note, sizeof note,
                 "%llu missed periods: a wake-up came after the next deadline, and the deadlines already "
                 "past were skipped",
                 (unsigned long long)missed);
        rtp_json_string(j, NULL, note);
    }
    if (negative) {
        snprintf(note, sizeof note, "%llu negative latencies (woke before the deadline), counted as overflows",
                 (unsigned long long)negative);
        rtp_json_string(j, NULL, note);
    }
    if (dropped) {
        snprintf(note, sizeof note,
                 "%llu overflow cycle numbers not kept (--overflow-cycles %lld per thread); the overflow "
                 "counts are complete",
                 (unsigned long long)dropped, (long long)cfg->overflow_cycles);
        rtp_json_string(j, NULL, note);
    }
    rtp_json_end_array(j);
    rtp_json_end_object(j);
}

static int write_records(struct rtp_sf_writer *w, const struct timer_run *r)
{
    for (int k = 0; k < r->nthreads; k++) {
        const struct timer_thread *t = &r->threads[k];
        for (int64_t i = 0; t->samples && i < t->n; i++) {
            union rtp_sf_value rec[5];
            rec[0].i = t->samples[i].latency;
            rec[1].i = t->samples[i].cycle;
            rec[2].i = k;
            rec[3].i = t->samples[i].cpu;
            rec[4].i = t->samples[i].deadline;
            if (rtp_sf_append(w, rec) != 0)
                return -1;
        }
    }
    return 0;
}

static int run(const void *arg)
{
    const struct timer_config *cfg = arg;
    struct rtp_run sf;
    struct timer_run r;
    int cpus[CPU_SETSIZE];
    int rc;

    memset(&r, 0, sizeof r);
    r.cfg = cfg;
    r.pm_qos_fd = -1;
    r.shared.marker_fd = cfg->mark_worst > 0 ? rtp_marker_open(RTPROBE_NAME " timer") : -1;
    if (r.shared.marker_fd == -2)
        return RTP_EXIT_FAILURE;
    pthread_mutex_init(&r.shared.lock, NULL);
    pthread_cond_init(&r.shared.cond, NULL);
    struct timespec res;
    clock_getres(CLOCK_MONOTONIC, &res);
    r.res_ns = rtp_ts_to_ns(res);

    if ((rc = rtp_run_start(&sf)) != RTP_EXIT_OK)
        goto out;
    if ((rc = plan_threads(&r, cpus)) != RTP_EXIT_OK)
        goto out;
    if ((rc = rtp_rt_apply(&cfg->rt)) != RTP_EXIT_OK)
        goto out;
    if ((rc = allocate(&r, cpus)) != RTP_EXIT_OK)
        goto out;
    hold_pm_qos(&r);

    build_settings(&r, &sf.settings);
    build_params(cfg, &sf.params);
    const struct rtp_sf_header header = {
        .workload = "timer",
        .variant = cfg->variant,
        .columns = sample_columns,
        .ncolumns = sizeof sample_columns / sizeof sample_columns[0] - (cfg->start_times ? 0 : 1),
    };
    /* Stream mode: nothing is written until the threads are done. */
    if ((rc = rtp_run_open(&sf, cfg->output, &header, RTP_SF_STREAM)) != RTP_EXIT_OK)
        goto out;

    rc = run_threads(&r);
    if (rtp_stop_signal)
        rc = rtp_run_stopped("no sample file written");
    if (rc != RTP_EXIT_OK)
        goto out;

    build_trailer(&r, rtp_run_finished_at(&sf), &sf.trailer);
    write_records(sf.w, &r); /* errors are reported by rtp_sf_finish */
    rc = rtp_run_finish(&sf);
out:
    rtp_run_free(&sf);
    if (r.pm_qos_fd >= 0)
        close(r.pm_qos_fd);
    if (r.shared.marker_fd >= 0)
        close(r.shared.marker_fd);
    release(&r);
    pthread_mutex_destroy(&r.shared.lock);
    pthread_cond_destroy(&r.shared.cond);
    return rc;
}

int rtp_cmd_timer(int argc, char **argv)
{
    struct timer_config cfg;
    int rc = timer_parse_args(argc, argv, &cfg);
    return rtp_subcommand_main(rc, cfg.help, print_help, run, &cfg);
}
