/* Unit tests of lib/worst.c: the K worst so far (the samples rtprobe --mark-worst marks) and the marks file. */
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
    int64_t kept[3];
    memcpy(kept, w.heap, sizeof kept);
    int64_t lo = kept[0], sum = kept[0] + kept[1] + kept[2];
    CHECK_I64(lo, 7);          /* the heap's root is the smallest of the three largest */
    CHECK_I64(sum, 7 + 9 + 10);
    rtp_worst_free(&w);
    CHECK(rtp_worst_init(&w, 0) == 0);
    CHECK(!rtp_worst_offer(&w, 100)); /* k = 0: nothing is ever a candidate */
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
