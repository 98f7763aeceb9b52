#include "exec.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "rtprobe.h"
#include "samplefile.h"
#include "worst.h"
#include "subcommand.h"
#include "util.h"

/* ---- workloads ------------------------------------------------------------
 * Each is called through a volatile function pointer with n read from a
 * volatile and its result stored into a volatile sink, so the compiler can
 * neither inline the call nor drop or precompute the work. */

__attribute__((noinline)) static uint64_t workload_sum(uint64_t n)
{
    uint64_t acc = 0;
    for (uint64_t i = 1; i <= n; i++) {
        acc += i;
        /* Keep the loop: without this barrier GCC replaces it by n(n+1)/2. */
        __asm__ volatile("" : "+r"(acc));
    }
    return acc;
}

__attribute__((noinline)) static uint64_t fib(uint64_t n)
{
    if (n < 2)
        return n;
    uint64_t a = fib(n - 1);
    uint64_t b = fib(n - 2);
    /* Keep both calls: otherwise GCC turns the second one into a loop with
     * an accumulator, halving the calls of the naive recursion. */
    __asm__ volatile("" : "+r"(b));
    return a + b;
}

__attribute__((noinline)) static uint64_t workload_fib(uint64_t n)
{
    return fib(n);
}

__attribute__((noinline)) static uint64_t workload_sleep(uint64_t ms)
{
    struct timespec req = rtp_ns_to_ts((int64_t)ms * 1000000), rem;
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem) == EINTR && !rtp_stop_signal)
        req = rem;
    return ms;
}

__attribute__((noinline)) static uint64_t workload_nothing(uint64_t n)
{
    (void)n;
    return 0;
}

/* touch: memory reserved once before the calls, each call writing one byte to
 * each of n pages no call wrote before. Unlocked, every write is a page fault
 * (the kernel allocates and zeroes the page then): the case --mlock remedies,
 * whose mlockall(MCL_FUTURE) makes the reservation resident at once. Huge
 * pages are asked off so that each 4 KiB page faults on its own. Past the
 * reservation's end (TOUCH_MAX_BYTES) the calls touch resident pages again. */
#define TOUCH_PAGE 4096
#define TOUCH_MAX_BYTES (INT64_C(1) << 30)
static unsigned char *touch_base;
static size_t touch_bytes, touch_next;

static int prepare_touch(uint64_t n, int64_t calls)
{
    uint64_t want = n * TOUCH_PAGE * (uint64_t)calls;
    touch_bytes = want < (uint64_t)TOUCH_MAX_BYTES ? (size_t)want : (size_t)TOUCH_MAX_BYTES;
    touch_bytes -= touch_bytes % TOUCH_PAGE;
    touch_next = 0;
    if (touch_bytes == 0)
        return 0;
    void *p = mmap(NULL, touch_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, RTPROBE_NAME " exec touch: cannot reserve %zu bytes: %s\n", touch_bytes,
                strerror(errno));
        return -1;
    }
    (void)madvise(p, touch_bytes, MADV_NOHUGEPAGE); /* a kernel without THP refuses: fine */
    touch_base = p;
    return 0;
}

__attribute__((noinline)) static uint64_t workload_touch(uint64_t n)
{
    for (uint64_t i = 0; i < n && touch_bytes > 0; i++) {
        touch_base[touch_next] = 1;
        touch_next = (touch_next + TOUCH_PAGE) % touch_bytes;
    }
    return n;
}

/* lock: each call takes a mutex with priority inheritance (PTHREAD_PRIO_INHERIT)
 * and lets it go. A holder thread, rtprobe-holder, a normal task on the probe's
 * CPUs, takes the same lock for n µs at a time, about one time in LOCK_PERIODS
 * (its pauses jittered so that they do not keep step with the calls). A call
 * that finds the lock held waits for it: the kernel runs the holder at the
 * caller's priority (sched_pi_setprio) until it lets go, ahead of any thread
 * between the two (the priority inversion inheritance bounds). n 0: no holder. */
#define LOCK_PERIODS 20
static pthread_mutex_t lock_mutex;

static void *lock_holder(void *arg)
{
    const int64_t hold_ns = (int64_t)(uintptr_t)arg * 1000;
    unsigned seed = (unsigned)rtp_now_ns();
    for (;;) {
        pthread_mutex_lock(&lock_mutex);
        for (int64_t until = rtp_now_ns() + hold_ns; rtp_now_ns() < until;)
            ;
        pthread_mutex_unlock(&lock_mutex);
        int64_t pause = (LOCK_PERIODS - 1) * hold_ns + (int64_t)(rand_r(&seed) % 1000) * hold_ns / 1000;
        struct timespec req = rtp_ns_to_ts(pause);
        clock_nanosleep(CLOCK_MONOTONIC, 0, &req, NULL);
    }
    return NULL;
}

static int prepare_lock(uint64_t n, int64_t calls)
{
    (void)calls;
    pthread_mutexattr_t mattr;
    int err = pthread_mutexattr_init(&mattr);
    if (!err)
        err = pthread_mutexattr_setprotocol(&mattr, PTHREAD_PRIO_INHERIT);
    if (!err)
        err = pthread_mutex_init(&lock_mutex, &mattr);
    if (err) {
        fprintf(stderr, RTPROBE_NAME " exec lock: no priority-inheritance mutex here: %s\n", strerror(err));
        return -1;
    }
    if (n == 0)
        return 0;
    /* A normal task whatever the caller's policy, and no signal of the run's (they stop the calls). */
    pthread_attr_t attr;
    struct sched_param normal = {0};
    sigset_t all, before;
    pthread_attr_init(&attr);
    pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
    pthread_attr_setschedparam(&attr, &normal);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &before);
    pthread_t holder;
    err = pthread_create(&holder, &attr, lock_holder, (void *)(uintptr_t)n);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    pthread_attr_destroy(&attr);
    if (err) {
        fprintf(stderr, RTPROBE_NAME " exec lock: cannot start the holder thread: %s\n", strerror(err));
        return -1;
    }
    pthread_setname_np(holder, RTPROBE_NAME "-holder");
    pthread_detach(holder);
    return 0;
}

__attribute__((noinline)) static uint64_t workload_lock(uint64_t n)
{
    pthread_mutex_lock(&lock_mutex);
    pthread_mutex_unlock(&lock_mutex);
    return n;
}

static const struct exec_variant variants[] = {
    {"sum", workload_sum, 4000, INT64_C(10000000000), "sum of 1..n in a loop (default n 4000)", NULL},
    {"fib", workload_fib, 20, 50, "naive recursive fib(n), fib(0)=0, fib(1)=1 (default n 20)", NULL},
    {"sleep", workload_sleep, 5, 3600000, "clock_nanosleep for n ms, CLOCK_MONOTONIC (default 5)", NULL},
    {"nothing", workload_nothing, 0, 0, "an empty, non-inlined call (takes no n)", NULL},
    {"touch", workload_touch, 256, 65536,
     "write to n pages never written before: n page faults unless --mlock (default 256)", prepare_touch},
    {"lock", workload_lock, 10000, 1000000,
     "take a PI mutex that another thread holds n us 1 time in 20\n"
     "           (default 10000; 0: no holder)", prepare_lock},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static const struct rtp_choices choices = {"exec", "workload", variants, NVARIANTS, sizeof variants[0]};

const struct exec_variant *exec_variants(size_t *count)
{
    *count = NVARIANTS;
    return variants;
}

const struct exec_variant *exec_find_variant(const char *name)
{
    int k = rtp_choice_find(&choices, name);
    return k < 0 ? NULL : &variants[k];
}

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " exec WORKLOAD --output FILE [options]\n"
           "\n"
           "Time each of --iterations calls of WORKLOAD with CLOCK_MONOTONIC and write\n"
           "one record per call (duration ns, cpu) to a rtscope sample file.\n"
           "One warm-up call is made first and not recorded.\n"
           "\n"
           "workloads (first argument or --workload NAME):\n");
    for (size_t k = 0; k < NVARIANTS; k++)
        printf("  %-8s %s\n", variants[k].name, variants[k].help);
    printf("\n"
           "options:\n"
           "  --output FILE      sample file to write (required)\n"
           "  --n N              workload parameter (sleep: milliseconds)\n"
           "  --ms N             same as --n, for sleep only\n"
           "  --iterations N     recorded calls, 1..%lld (default 10000)\n"
           "  --pause-ms X       pause between calls in ms, may be fractional, 0 for none\n"
           "                     (default 5)\n"
           "  --start-times      add a column start: each call's start, CLOCK_MONOTONIC ns\n"
           "                     (what rtscope explain matches kernel events against)\n"
           "  --mark-worst K     when a call enters the K worst, append its window\n"
           "                     (start end cpu) to the file in $RTSCOPE_MARKS\n"
           "%s"
           "  --help             this text\n"
           "\n"
           "exit codes: 0 written, 1 run failed (refused setting, I/O error), 2 usage error\n",
           (long long)EXEC_MAX_ITERATIONS, rtp_rt_options_help);
}

static int set_variant(struct exec_config *cfg, const char *name)
{
    int k = cfg->variant ? (int)(cfg->variant - variants) : -1;
    if (rtp_choice_set(&choices, name, &k) != 0)
        return -1;
    cfg->variant = &variants[k];
    return 0;
}

int exec_parse_args(int argc, char **argv, struct exec_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->iterations = 10000;
    cfg->pause_ms = 5.0;
    rtp_rt_options_init(&cfg->rt);
    const char *n_text = NULL, *n_option = NULL;
    const struct rtp_common_args common = {"exec", &cfg->help, &cfg->rt, &cfg->output};

    for (int i = 1; i < argc && !cfg->help; i++) {
        const char *v;
        int m;
        if ((m = rtp_common_option(argc, argv, &i, &common)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            continue;
        }
        if ((m = rtp_option_value(argc, argv, &i, "--workload", &v)) != 0) {
            if (m < 0 || set_variant(cfg, v) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--n", &v)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            n_option = "--n";
            n_text = v;
        } else if ((m = rtp_option_value(argc, argv, &i, "--ms", &v)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            n_option = "--ms";
            n_text = v;
        } else if ((m = rtp_option_value(argc, argv, &i, "--iterations", &v)) != 0) {
            if (m < 0 ||
                rtp_option_i64("--iterations", v, 1, EXEC_MAX_ITERATIONS, &cfg->iterations) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--pause-ms", &v)) != 0) {
            if (m < 0 || rtp_option_f64("--pause-ms", v, 0.0, EXEC_MAX_PAUSE_MS, &cfg->pause_ms) != 0)
                return RTP_EXIT_USAGE;
        } else if (strcmp(argv[i], "--start-times") == 0) {
            cfg->start_times = true;
        } else if ((m = rtp_option_value(argc, argv, &i, "--mark-worst", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--mark-worst", v, 0, 1000000, &cfg->mark_worst) != 0)
                return RTP_EXIT_USAGE;
        } else if (rtp_unknown_option("exec", argv[i]) || set_variant(cfg, argv[i]) != 0) {
            return RTP_EXIT_USAGE;
        }
    }
    if (cfg->help)
        return 0;

    if (!cfg->variant)
        return rtp_choice_missing(&choices);
    if (!cfg->output) {
        fprintf(stderr, RTPROBE_NAME " exec: --output FILE is required\n");
        return RTP_EXIT_USAGE;
    }
    cfg->n = cfg->variant->default_n;
    if (n_text) {
        if (cfg->variant->max_n == 0) {
            fprintf(stderr, RTPROBE_NAME " exec: workload '%s' takes no %s\n", cfg->variant->name,
                    n_option);
            return RTP_EXIT_USAGE;
        }
        if (strcmp(n_option, "--ms") == 0 && strcmp(cfg->variant->name, "sleep") != 0) {
            fprintf(stderr, RTPROBE_NAME " exec: --ms applies to the sleep workload only; use --n\n");
            return RTP_EXIT_USAGE;
        }
        if (rtp_option_i64(n_option, n_text, 0, cfg->variant->max_n, &cfg->n) != 0)
            return RTP_EXIT_USAGE;
    }
    return 0;
}

/* ---- the run -------------------------------------------------------------- */

static const struct rtp_sf_column exec_columns[] = {
    {"duration", "ns", RTP_SF_I64},
    {"cpu", "", RTP_SF_I64},
    {"start", "ns", RTP_SF_I64}, /* with --start-times only: the last column */
};

static volatile uint64_t n_source; /* the workload's n, read anew per call */
static volatile uint64_t sink;     /* every result lands here */

void exec_describe(const struct exec_config *cfg, struct rtp_run *r, struct rtp_sf_header *h)
{
    rtp_json_begin_object(&r->settings, NULL);
    rtp_rt_settings_json(&cfg->rt, &r->settings);
    rtp_json_end_object(&r->settings);
    rtp_json_begin_object(&r->params, NULL);
    rtp_json_i64(&r->params, "n", cfg->n);
    rtp_json_i64(&r->params, "iterations", cfg->iterations);
    rtp_json_f64(&r->params, "pause_ms", cfg->pause_ms);
    rtp_json_end_object(&r->params);
    memset(h, 0, sizeof *h);
    h->workload = "exec";
    h->variant = cfg->variant->name;
    h->columns = exec_columns;
    h->ncolumns = sizeof exec_columns / sizeof exec_columns[0] - (cfg->start_times ? 0 : 1);
}

void exec_warm_up(const struct exec_config *cfg)
{
    uint64_t (*volatile call)(uint64_t) = cfg->variant->fn;
    n_source = (uint64_t)cfg->n;
    sink = call(n_source);
}

void exec_timed_call(const struct exec_config *cfg, union rtp_sf_value rec[EXEC_NCOLUMNS])
{
    uint64_t (*volatile call)(uint64_t) = cfg->variant->fn;
    n_source = (uint64_t)cfg->n;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t result = call(n_source);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    sink = result;
    rec[0].i = rtp_ts_diff_ns(t1, t0);
    rec[1].i = sched_getcpu();
    rec[2].i = rtp_ts_to_ns(t0);
}

static int run(const void *arg)
{
    const struct exec_config *cfg = arg;
    struct rtp_run sf;
    struct rtp_worst worst;
    int marker_fd = cfg->mark_worst > 0 ? rtp_marker_open(RTPROBE_NAME " exec") : -1;
    if (marker_fd == -2)
        return RTP_EXIT_FAILURE;
    if (rtp_worst_init(&worst, marker_fd >= 0 ? (int)cfg->mark_worst : 0) != 0) {
        fprintf(stderr, RTPROBE_NAME ": out of memory\n");
        return RTP_EXIT_FAILURE;
    }
    int rc = rtp_run_start(&sf);
    if (rc != RTP_EXIT_OK || (rc = rtp_rt_apply(&cfg->rt)) != RTP_EXIT_OK)
        goto out;

    struct rtp_sf_header header;
    exec_describe(cfg, &sf, &header);
    if ((rc = rtp_run_open(&sf, cfg->output, &header, RTP_SF_BUFFER)) != RTP_EXIT_OK)
        goto out;
    rc = RTP_EXIT_FAILURE;
    if (rtp_sf_reserve(sf.w, (size_t)cfg->iterations) != 0) {
        fprintf(stderr, RTPROBE_NAME ": cannot allocate memory for %lld records\n",
                (long long)cfg->iterations);
        goto out;
    }

    const int64_t pause_ns = llround(cfg->pause_ms * 1e6);
    if (cfg->variant->prepare && cfg->variant->prepare((uint64_t)cfg->n, cfg->iterations + 1) != 0)
        goto out;
    exec_warm_up(cfg); /* not recorded */
    if (rtp_sleep_ns(pause_ns) != 0)
        goto interrupted;

    for (int64_t k = 0; k < cfg->iterations; k++) {
        union rtp_sf_value rec[EXEC_NCOLUMNS];
        exec_timed_call(cfg, rec);
        rtp_sf_append(sf.w, rec); /* errors are reported by rtp_sf_finish */
        if (marker_fd >= 0 && rtp_worst_offer(&worst, rec[0].i))
            rtp_mark_window(marker_fd, rec[2].i, rec[2].i + rec[0].i);
        if (rtp_stop_signal)
            goto interrupted;
        if (k + 1 < cfg->iterations && rtp_sleep_ns(pause_ns) != 0)
            goto interrupted;
    }

    rtp_json_begin_object(&sf.trailer, NULL);
    rtp_json_string(&sf.trailer, "finished_at", rtp_run_finished_at(&sf));
    rtp_json_end_object(&sf.trailer);
    rc = rtp_run_finish(&sf);
    goto out;

interrupted:
    rc = rtp_run_stopped("no sample file written");
out:
    rtp_run_free(&sf);
    rtp_worst_free(&worst);
    if (marker_fd >= 0)
        close(marker_fd);
    return rc;
}

int rtp_cmd_exec(int argc, char **argv)
{
    struct exec_config cfg;
    int rc = exec_parse_args(argc, argv, &cfg);
    return rtp_subcommand_main(rc, cfg.help, print_help, run, &cfg);
}
