/* Unit tests of lib/worst.c: the K worst so far (the samples rtprobe --mark-worst marks) and the marks file. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "worst.h"

void test_worst_keeps_the_k_largest(void)
{
    struct rtp_worst w;
    CHECK(rtp_worst_init(&w, 3) == 0);
    /* The first three enter; then only a value above the smallest kept one. */
    const int64_t values[] = {5, 1, 9, 1, 2, 7, 7, 3, 10};
    const int entered[] = {1, 1, 1, 0, 1, 1, 1, 0, 1};
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++)
        CHECK_I64(rtp_worst_offer(&w, values[k]), entered[k]);
    int64_t lo = w.heap[0].value, sum = w.heap[0].value + w.heap[1].value + w.heap[2].value;
    CHECK_I64(lo, 7);          /* the heap's root is the smallest of the three largest */
    CHECK_I64(sum, 7 + 9 + 10);
    rtp_worst_free(&w);
    CHECK(rtp_worst_init(&w, 0) == 0);
    CHECK(!rtp_worst_offer(&w, 100)); /* k = 0: nothing is ever a candidate */
    rtp_worst_free(&w);
}

void test_worst_keeps_entries_and_sorts_them(void)
{
    struct rtp_worst w;
    CHECK(rtp_worst_init(&w, 4) == 0);
    const int64_t values[] = {5, 1, 9, 1, 2, 7, 3, 10, 4};
    for (size_t k = 0; k < sizeof values / sizeof values[0]; k++) {
        const struct rtp_worst_entry e = {.value = values[k], .start = 1000 * (int64_t)k, .cycle = (int64_t)k,
                                          .cpu = (int32_t)k % 2};
        const bool would = rtp_worst_would_keep(&w, e.value);
        CHECK_I64(rtp_worst_keep(&w, &e), would);
    }
    rtp_worst_sort(&w);
    CHECK_I64(w.n, 4);
    const int64_t want[] = {10, 9, 7, 5}, cycle[] = {7, 2, 5, 0};
    for (int k = 0; k < 4; k++) {
        CHECK_I64(w.heap[k].value, want[k]);
        CHECK_I64(w.heap[k].cycle, cycle[k]);   /* the rest of the entry travels with its value */
        CHECK_I64(w.heap[k].start, 1000 * cycle[k]);
        CHECK_I64(w.heap[k].cpu, cycle[k] % 2);
    }
    rtp_worst_free(&w);
}

void test_worst_marks_to_the_marks_file(void)
{
    char path[] = "/tmp/rtp-marks-XXXXXX";
    int tmp = mkstemp(path);
    CHECK(tmp >= 0);
    close(tmp);
    unsetenv(RTP_MARKS_ENV);
    CHECK_I64(rtp_marker_open("test"), -1); /* unset: no marks */
    setenv(RTP_MARKS_ENV, path, 1);
    int fd = rtp_marker_open("test");
    CHECK(fd >= 0);
    rtp_mark_window(fd, 1000, 2500);
    rtp_mark_window(fd, 3000, 3001);
    close(fd);
    FILE *f = fopen(path, "r");
    long long s, e;
    int cpu;
    CHECK(f && fscanf(f, "%lld %lld %d", &s, &e, &cpu) == 3);
    CHECK_I64(s, 1000);
    CHECK_I64(e, 2500);
    CHECK(cpu >= 0);
    CHECK(fscanf(f, "%lld %lld %d", &s, &e, &cpu) == 3);
    CHECK_I64(s, 3000);
    if (f)
        fclose(f);
    unlink(path);
    setenv(RTP_MARKS_ENV, "/nonexistent-dir/marks", 1);
    CHECK_I64(rtp_marker_open("test"), -2); /* said why on stderr */
    unsetenv(RTP_MARKS_ENV);
}
