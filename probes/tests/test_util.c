#include <stdlib.h>

#include "check.h"
#include "rtprobe.h"
#include "util.h"

void test_parse_i64(void)
{
    int64_t v = 0;
    CHECK(rtp_parse_i64("42", 0, 100, &v) == RTP_PARSE_OK && v == 42);
    CHECK(rtp_parse_i64("+7", 0, 100, &v) == RTP_PARSE_OK && v == 7);
    CHECK(rtp_parse_i64("-5", -10, 10, &v) == RTP_PARSE_OK && v == -5);
    CHECK(rtp_parse_i64("-5", 0, 10, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_i64("11", 0, 10, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_i64("", 0, 10, &v) == RTP_PARSE_EMPTY);
    CHECK(rtp_parse_i64(NULL, 0, 10, &v) == RTP_PARSE_EMPTY);
    CHECK(rtp_parse_i64(" 5", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("5 ", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("5x", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("0x10", 0, 100, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("1.5", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("-", -10, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("+", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("--5", -10, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_i64("9223372036854775807", 0, INT64_MAX, &v) == RTP_PARSE_OK &&
          v == INT64_MAX);
    CHECK(rtp_parse_i64("9223372036854775808", 0, INT64_MAX, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_i64("-9223372036854775809", INT64_MIN, 0, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_i64("99999999999999999999999", 0, INT64_MAX, &v) == RTP_PARSE_RANGE);
    /* A failed parse leaves *out alone. */
    v = 17;
    CHECK(rtp_parse_i64("abc", 0, 100, &v) == RTP_PARSE_SYNTAX && v == 17);
}

void test_parse_f64(void)
{
    double v = 0;
    CHECK(rtp_parse_f64("5", 0, 10, &v) == RTP_PARSE_OK && v == 5.0);
    CHECK(rtp_parse_f64("0.25", 0, 10, &v) == RTP_PARSE_OK && v == 0.25);
    CHECK(rtp_parse_f64(".5", 0, 10, &v) == RTP_PARSE_OK && v == 0.5);
    CHECK(rtp_parse_f64("1e3", 0, 1e4, &v) == RTP_PARSE_OK && v == 1000.0);
    CHECK(rtp_parse_f64("0", 0, 10, &v) == RTP_PARSE_OK && v == 0.0);
    CHECK(rtp_parse_f64("-1", 0, 10, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_f64("10.5", 0, 10, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_f64("1e999", 0, 1e300, &v) == RTP_PARSE_RANGE);
    CHECK(rtp_parse_f64("nan", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("inf", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("0x1p3", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64(" 1", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("1.5.2", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64(".", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("e5", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("5ms", 0, 10, &v) == RTP_PARSE_SYNTAX);
    CHECK(rtp_parse_f64("", 0, 10, &v) == RTP_PARSE_EMPTY);
}

void test_option_value(void)
{
    char *argv[] = {"exec", "--n=5", "--n", "7", "--name", "x", "--n"};
    int argc = 7;
    const char *v = NULL;
    int i = 1;
    CHECK(rtp_option_value(argc, argv, &i, "--n", &v) == 1 && i == 1 && strcmp(v, "5") == 0);
    i = 2;
    CHECK(rtp_option_value(argc, argv, &i, "--n", &v) == 1 && i == 3 && strcmp(v, "7") == 0);
    i = 4;
    CHECK(rtp_option_value(argc, argv, &i, "--n", &v) == 0 && i == 4);
    i = 6; /* a trailing option without its value */
    fprintf(stderr, "(expected message follows)\n");
    CHECK(rtp_option_value(argc, argv, &i, "--n", &v) == -1);
}

void test_timespec_math(void)
{
    struct timespec ts = rtp_ns_to_ts(-1);
    CHECK(ts.tv_sec == -1 && ts.tv_nsec == 999999999);
    ts = rtp_ns_to_ts(INT64_C(2500000000));
    CHECK(ts.tv_sec == 2 && ts.tv_nsec == 500000000);
    CHECK_I64(rtp_ts_to_ns(ts), INT64_C(2500000000));
    CHECK_I64(rtp_ts_to_ns(rtp_ns_to_ts(-1500000001)), -1500000001);

    struct timespec a = {1, 999999999};
    struct timespec b = rtp_ts_add_ns(a, 1);
    CHECK(b.tv_sec == 2 && b.tv_nsec == 0);
    b = rtp_ts_add_ns(b, -1);
    CHECK(b.tv_sec == 1 && b.tv_nsec == 999999999);
    b = rtp_ts_add_ns(a, INT64_C(3000000002));
    CHECK(b.tv_sec == 5 && b.tv_nsec == 1);

    struct timespec s = {10, 900000000}, e = {12, 100000000};
    CHECK_I64(rtp_ts_diff_ns(e, s), 1200000000);
    CHECK_I64(rtp_ts_diff_ns(s, e), -1200000000);
    CHECK(rtp_ts_cmp(s, e) < 0 && rtp_ts_cmp(e, s) > 0 && rtp_ts_cmp(s, s) == 0);
    struct timespec s2 = {10, 900000001};
    CHECK(rtp_ts_cmp(s, s2) < 0);

    int64_t t0 = rtp_now_ns(), t1 = rtp_now_ns();
    CHECK(t0 > 0 && t1 >= t0);
}

void test_rfc3339(void)
{
    char buf[32];
    struct timespec epoch = {0, 0};
    CHECK(rtp_format_rfc3339(epoch, buf, sizeof buf) == 0);
    CHECK_STR(buf, "1970-01-01T00:00:00.000Z");
    struct timespec t = {1795343400, 123999999}; /* milliseconds truncate */
    CHECK(rtp_format_rfc3339(t, buf, sizeof buf) == 0);
    CHECK_STR(buf, "2026-11-22T10:30:00.123Z");
    char small[10];
    CHECK(rtp_format_rfc3339(t, small, sizeof small) == -1);
    CHECK(rtp_now_rfc3339(buf, sizeof buf) == 0 && strlen(buf) == 24 && buf[23] == 'Z');
}

void test_sleep_ns(void)
{
    int64_t t0 = rtp_now_ns();
    CHECK(rtp_sleep_ns(2000000) == 0);
    int64_t slept = rtp_now_ns() - t0;
    CHECK(slept >= 2000000);
    CHECK(rtp_sleep_ns(0) == 0 && rtp_sleep_ns(-5) == 0);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    t0 = rtp_ts_to_ns(now);
    CHECK(rtp_sleep_until(rtp_ts_add_ns(now, 1000000)) == 0);
    CHECK(rtp_now_ns() - t0 >= 1000000);
}

void test_cpuset_format(void)
{
    cpu_set_t set;
    char buf[64];
    CPU_ZERO(&set);
    CHECK(rtp_format_cpuset(&set, buf, sizeof buf) == 0);
    CHECK_STR(buf, "");
    int cpus[] = {0, 1, 2, 5, 7, 8};
    for (size_t k = 0; k < sizeof cpus / sizeof cpus[0]; k++)
        CPU_SET(cpus[k], &set);
    CHECK(rtp_format_cpuset(&set, buf, sizeof buf) == 0);
    CHECK_STR(buf, "0-2,5,7-8");
    CHECK(rtp_format_cpuset(&set, buf, 5) == -1);
}

void test_rt_parse_option(void)
{
    struct rtp_rt_options o;
    rtp_rt_options_init(&o);
    CHECK(o.priority == 0 && o.cpu == -1 && !o.mlock);
    char *argv[] = {"x", "--priority", "90", "--cpu=3", "--mlock", "--other",
                    "--priority=0", "--priority", "100", "--cpu", "-1", "--priority", "9x"};
    int argc = 13, i;
    i = 1;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == 1 && i == 2 && o.priority == 90);
    i = 3;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == 1 && o.cpu == 3);
    i = 4;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == 1 && o.mlock);
    i = 5;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == 0 && i == 5);
    fprintf(stderr, "(four expected messages follow)\n");
    i = 6;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == -1);
    i = 7;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == -1);
    i = 9;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == -1);
    i = 11;
    CHECK(rtp_rt_parse_option(argc, argv, &i, &o) == -1);
    CHECK(o.priority == 90 && o.cpu == 3); /* failed parses change nothing */
}

void test_rt_apply_rejects_unavailable_cpu(void)
{
    struct rtp_rt_options o;
    rtp_rt_options_init(&o);
    CHECK(rtp_rt_apply(&o) == RTP_EXIT_OK); /* nothing requested, nothing done */
    cpu_set_t allowed;
    CHECK(sched_getaffinity(0, sizeof allowed, &allowed) == 0);
    int missing = -1;
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (!CPU_ISSET(c, &allowed)) {
            missing = c;
            break;
        }
    CHECK(missing >= 0);
    o.cpu = missing;
    fprintf(stderr, "(expected message follows)\n");
    CHECK(rtp_rt_apply(&o) == RTP_EXIT_USAGE);
    cpu_set_t after;
    CHECK(sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&after, &allowed));
}

void test_rt_settings_json(void)
{
    struct rtp_rt_options o;
    struct rtp_json j;
    rtp_rt_options_init(&o);
    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    rtp_rt_settings_json(&o, &j);
    rtp_json_end_object(&j);
    CHECK_STR(rtp_json_result(&j), "{\"mlock\":false}");
    rtp_json_free(&j);

    o.priority = 90;
    o.cpu = 1;
    o.mlock = true;
    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    rtp_rt_settings_json(&o, &j);
    rtp_json_end_object(&j);
    CHECK_STR(rtp_json_result(&j), "{\"rt_priority\":90,\"cpu\":1,\"mlock\":true}");
    rtp_json_free(&j);
}
