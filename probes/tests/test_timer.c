/* Unit tests of rtprobe timer: the fixed-memory histogram and its overflow
 * bookkeeping, interval and CPU-list validation, argument parsing.
 *
 * Built twice: into the shared unit-test binary (these functions, unused
 * there unless listed in check.h) and, with RTP_TIMER_TESTS_MAIN, into its
 * own runner build/asan/timer_tests (probes/Makefile, `make test`). */
#include <stdlib.h>

#include "check.h"
#include "rtprobe.h"
#include "timer.h"

#define ARGC(a) ((int)(sizeof(a) / sizeof((a)[0])))

void test_timer_hist_buckets_and_overflow(void)
{
    struct timer_hist h;
    CHECK(timer_hist_init(&h, 5, 1000, 2) == 0);
    /* Bucket k holds [1000k, 1000(k+1)); 5000 and above, and below 0, overflow. */
    const int64_t values[] = {0, 999, 1000, 4999, 5000, -1, 7000, 2500};
    for (int k = 0; k < ARGC(values); k++)
        timer_hist_add(&h, values[k], 10 + k);
    CHECK_I64(h.counts[0], 2);
    CHECK_I64(h.counts[1], 1);
    CHECK_I64(h.counts[2], 1);
    CHECK_I64(h.counts[3], 0);
    CHECK_I64(h.counts[4], 1);
    CHECK_I64(h.n, 8);
    CHECK_I64(h.overflow, 3);
    CHECK_I64(h.negative, 1);
    CHECK_I64(h.min, -1);
    CHECK_I64(h.max, 7000);
    CHECK_I64(h.sum, 0 + 999 + 1000 + 4999 + 5000 - 1 + 7000 + 2500);
    /* Room for two overflow cycle numbers: the third is counted, not kept. */
    CHECK_I64(h.cycles_len, 2);
    CHECK_I64(h.overflow_cycles[0], 14);
    CHECK_I64(h.overflow_cycles[1], 15);
    CHECK_I64(h.cycles_dropped, 1);
    uint64_t inside = 0;
    for (int k = 0; k < 5; k++)
        inside += h.counts[k];
    CHECK_I64(inside + h.overflow, h.n); /* nothing is lost */
    timer_hist_free(&h);
    CHECK(h.counts == NULL && h.overflow_cycles == NULL);
}

void test_timer_hist_no_cycle_list(void)
{
    struct timer_hist h;
    CHECK(timer_hist_init(&h, 1, 1000, 0) == 0);
    timer_hist_add(&h, 1000, 0);
    timer_hist_add(&h, 123456789, 1);
    CHECK_I64(h.overflow, 2);
    CHECK_I64(h.cycles_len, 0);
    CHECK_I64(h.cycles_dropped, 2);
    timer_hist_free(&h);
}

void test_timer_hist_json(void)
{
    struct timer_hist h;
    CHECK(timer_hist_init(&h, 3, 1000, 4) == 0);
    timer_hist_add(&h, 1500, 0);
    timer_hist_add(&h, 1700, 1);
    timer_hist_add(&h, 250331, 2);
    struct rtp_json j;
    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    timer_hist_json(&h, &j, "thread0");
    rtp_json_end_object(&j);
    CHECK_STR(rtp_json_result(&j),
              "{\"thread0\":{\"unit\":\"ns\",\"bucket_width\":1000,\"min_value\":0,\"counts\":[0,2,0],"
              "\"overflow\":1,\"overflow_cycles\":[2],\"overflow_cycles_dropped\":0,\"negative\":0,"
              "\"n\":3,\"min\":1500,\"max\":250331,\"sum\":253531}}");
    rtp_json_free(&j);

    /* An empty histogram reports min = max = 0, not the sentinels. */
    timer_hist_free(&h);
    CHECK(timer_hist_init(&h, 1, 1000, 1) == 0);
    rtp_json_init(&j);
    timer_hist_json(&h, &j, NULL);
    CHECK_STR(rtp_json_result(&j),
              "{\"unit\":\"ns\",\"bucket_width\":1000,\"min_value\":0,\"counts\":[0],\"overflow\":0,"
              "\"overflow_cycles\":[],\"overflow_cycles_dropped\":0,\"negative\":0,\"n\":0,\"min\":0,"
              "\"max\":0,\"sum\":0}");
    rtp_json_free(&j);
    timer_hist_free(&h);
}

void test_timer_interval(void)
{
    char err[256];
    int64_t ns = -1;
    CHECK(timer_interval_ns(1000.0, 1, &ns, err, sizeof err) == 0 && ns == 1000000);
    CHECK(timer_interval_ns(0.5, 1, &ns, err, sizeof err) == 0 && ns == 500);
    CHECK(timer_interval_ns(200.0, 1, &ns, err, sizeof err) == 0 && ns == 200000);
    ns = 7;
    CHECK(timer_interval_ns(0.0, 1, &ns, err, sizeof err) == -1 && ns == 7);
    CHECK(strstr(err, "greater than 0") != NULL);
    CHECK(timer_interval_ns(-5.0, 1, &ns, err, sizeof err) == -1);
    /* Positive but below a 1 ns clock: rounds to 0 ns. */
    CHECK(timer_interval_ns(0.0004, 1, &ns, err, sizeof err) == -1);
    CHECK(strstr(err, "below the resolution of CLOCK_MONOTONIC (1 ns)") != NULL);
    /* A coarse clock (4 ms ticks, a kernel without high-resolution timers). */
    CHECK(timer_interval_ns(1000.0, 4000000, &ns, err, sizeof err) == -1);
    CHECK(strstr(err, "below the resolution of CLOCK_MONOTONIC (4000000 ns)") != NULL);
    CHECK(timer_interval_ns(4000.0, 4000000, &ns, err, sizeof err) == 0 && ns == 4000000);
}

void test_timer_cpulist(void)
{
    char err[256];
    bool all;
    cpu_set_t set;
    CHECK(timer_parse_cpulist("all", &all, &set, err, sizeof err) == 0 && all && CPU_COUNT(&set) == 0);
    CHECK(timer_parse_cpulist("1", &all, &set, err, sizeof err) == 0 && !all);
    CHECK(CPU_COUNT(&set) == 1 && CPU_ISSET(1, &set));
    CHECK(timer_parse_cpulist("0,2-3,7", &all, &set, err, sizeof err) == 0);
    CHECK(CPU_COUNT(&set) == 4 && CPU_ISSET(0, &set) && CPU_ISSET(2, &set) && CPU_ISSET(3, &set) &&
          CPU_ISSET(7, &set));
    const char *bad[] = {"", "a", "1-0", "0,", "0-", ",1", "1,,2", "-1", "1 ", "99999", "0-2000"};
    for (int k = 0; k < ARGC(bad); k++) {
        err[0] = '\0';
        CHECK(timer_parse_cpulist(bad[k], &all, &set, err, sizeof err) == -1);
        CHECK(err[0] != '\0');
    }
}

void test_timer_parse_args(void)
{
    struct timer_config c;
    char *defaults[] = {"timer", "--output", "t.rts"};
    CHECK(timer_parse_args(ARGC(defaults), defaults, &c) == 0);
    CHECK(c.mode == TIMER_MODE_ABSOLUTE && strcmp(c.variant, "absolute") == 0);
    CHECK(c.interval_us == 1000.0 && c.interval_ns == 1000000);
    CHECK_I64(c.loops, 10000);
    CHECK_I64(timer_samples_per_thread(&c), 10000);
    CHECK(!c.loops_given && c.duration_s == 0.0 && c.histogram_us == 0 && c.threads_text == NULL);
    CHECK(c.rt.priority == 0 && c.rt.cpu == -1 && !c.rt.mlock);

    char *full[] = {"timer", "relative", "--output=o", "--interval-us", "200", "--loops", "5000",
                    "--threads", "0-1", "--histogram-us", "400", "--overflow-cycles", "7",
                    "--priority", "90", "--mlock"};
    CHECK(timer_parse_args(ARGC(full), full, &c) == 0);
    CHECK(c.mode == TIMER_MODE_RELATIVE && strcmp(c.variant, "relative") == 0);
    CHECK(c.interval_ns == 200000 && c.loops == 5000 && c.loops_given);
    CHECK(c.histogram_us == 400 && c.overflow_cycles == 7 && !c.threads_all);
    CHECK(CPU_COUNT(&c.threads) == 2 && c.rt.priority == 90 && c.rt.mlock);

    /* A duration counts the deadlines within it; with --loops, the first limit wins. */
    char *duration[] = {"timer", "--output", "o", "--interval-us", "200", "--duration-s", "1"};
    CHECK(timer_parse_args(ARGC(duration), duration, &c) == 0);
    CHECK_I64(timer_samples_per_thread(&c), 5000);
    char *both[] = {"timer", "--output", "o", "--interval-us", "200", "--duration-s", "1", "--loops", "100"};
    CHECK(timer_parse_args(ARGC(both), both, &c) == 0);
    CHECK_I64(timer_samples_per_thread(&c), 100);
}

void test_timer_bad_arguments(void)
{
    struct timer_config c;
    fprintf(stderr, "(expected messages follow)\n");
    char *no_output[] = {"timer"};
    CHECK(timer_parse_args(ARGC(no_output), no_output, &c) == RTP_EXIT_USAGE);
    char *zero[] = {"timer", "--output", "o", "--interval-us", "0"};
    CHECK(timer_parse_args(ARGC(zero), zero, &c) == RTP_EXIT_USAGE);
    char *tiny[] = {"timer", "--output", "o", "--interval-us", "0.0001"};
    CHECK(timer_parse_args(ARGC(tiny), tiny, &c) == RTP_EXIT_USAGE);
    char *negative[] = {"timer", "--output", "o", "--interval-us", "-200"};
    CHECK(timer_parse_args(ARGC(negative), negative, &c) == RTP_EXIT_USAGE);
    char *variant[] = {"timer", "--output", "o", "posix"};
    CHECK(timer_parse_args(ARGC(variant), variant, &c) == RTP_EXIT_USAGE);
    char *twice[] = {"timer", "--output", "o", "absolute", "relative"};
    CHECK(timer_parse_args(ARGC(twice), twice, &c) == RTP_EXIT_USAGE);
    char *cpu_and_threads[] = {"timer", "--output", "o", "--cpu", "0", "--threads", "0"};
    CHECK(timer_parse_args(ARGC(cpu_and_threads), cpu_and_threads, &c) == RTP_EXIT_USAGE);
    char *short_duration[] = {"timer", "--output", "o", "--interval-us", "1000", "--duration-s", "0.0005"};
    CHECK(timer_parse_args(ARGC(short_duration), short_duration, &c) == RTP_EXIT_USAGE);
    char *loops[] = {"timer", "--output", "o", "--loops", "0"};
    CHECK(timer_parse_args(ARGC(loops), loops, &c) == RTP_EXIT_USAGE);
    char *hist[] = {"timer", "--output", "o", "--histogram-us", "0"};
    CHECK(timer_parse_args(ARGC(hist), hist, &c) == RTP_EXIT_USAGE);
    char *threads[] = {"timer", "--output", "o", "--threads", "0-"};
    CHECK(timer_parse_args(ARGC(threads), threads, &c) == RTP_EXIT_USAGE);
    char *unknown[] = {"timer", "--output", "o", "--frobnicate"};
    CHECK(timer_parse_args(ARGC(unknown), unknown, &c) == RTP_EXIT_USAGE);
}

#ifdef RTP_TIMER_TESTS_MAIN
int check_failures;

#define TIMER_TESTS(X)                                                                 \
    X(test_timer_hist_buckets_and_overflow)                                            \
    X(test_timer_hist_no_cycle_list)                                                   \
    X(test_timer_hist_json)                                                            \
    X(test_timer_interval)                                                             \
    X(test_timer_cpulist)                                                              \
    X(test_timer_parse_args)                                                           \
    X(test_timer_bad_arguments)

#define RUN_TEST(name)                                                                 \
    check_failures = 0;                                                                \
    name();                                                                            \
    if (check_failures == 0) {                                                         \
        passed++;                                                                      \
    } else {                                                                           \
        failed++;                                                                      \
        fprintf(stderr, "FAIL %s (%d checks failed)\n", #name, check_failures);       \
    }

int main(void)
{
    int passed = 0, failed = 0;
    TIMER_TESTS(RUN_TEST)
    printf("timer tests: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
#endif
