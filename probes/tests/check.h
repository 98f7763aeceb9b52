/* A minimal test runner: each test is a function; a test passes when none of
 * its CHECKs failed. test_main.c lists the tests and prints the totals. */
#ifndef RTP_CHECK_H
#define RTP_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

extern int check_failures; /* failed CHECKs in the current test */

#define CHECK(cond)                                                                    \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            check_failures++;                                                          \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);   \
        }                                                                              \
    } while (0)

#define CHECK_I64(actual, expected)                                                    \
    do {                                                                               \
        int64_t a_ = (int64_t)(actual), e_ = (int64_t)(expected);                      \
        if (a_ != e_) {                                                                \
            check_failures++;                                                          \
            fprintf(stderr, "%s:%d: %s is %" PRId64 ", expected %" PRId64 "\n",        \
                    __FILE__, __LINE__, #actual, a_, e_);                              \
        }                                                                              \
    } while (0)

#define CHECK_STR(actual, expected)                                                    \
    do {                                                                               \
        const char *a_ = (actual), *e_ = (expected);                                   \
        if (!a_ || strcmp(a_, e_) != 0) {                                              \
            check_failures++;                                                          \
            fprintf(stderr, "%s:%d: %s is \"%s\", expected \"%s\"\n", __FILE__,        \
                    __LINE__, #actual, a_ ? a_ : "(null)", e_);                        \
        }                                                                              \
    } while (0)

/* Tests, defined in the test_*.c files. */
#define TEST_LIST(X)                                                                   \
    X(test_parse_i64)                                                                  \
    X(test_parse_f64)                                                                  \
    X(test_option_value)                                                               \
    X(test_timespec_math)                                                              \
    X(test_rfc3339)                                                                    \
    X(test_sleep_ns)                                                                   \
    X(test_cpuset_format)                                                              \
    X(test_rt_parse_option)                                                            \
    X(test_rt_apply_rejects_unavailable_cpu)                                           \
    X(test_rt_settings_json)                                                           \
    X(test_json_escape)                                                                \
    X(test_json_escape_invalid_utf8)                                                   \
    X(test_json_builder)                                                               \
    X(test_json_doubles)                                                               \
    X(test_json_failures)                                                              \
    X(test_crc32)                                                                      \
    X(test_samplefile_layout)                                                          \
    X(test_samplefile_stream_equals_buffer)                                            \
    X(test_samplefile_empty)                                                           \
    X(test_samplefile_abort_and_replace)                                               \
    X(test_samplefile_open_errors)                                                     \
    X(test_exec_defaults)                                                              \
    X(test_exec_variants_and_n)                                                        \
    X(test_exec_bad_arguments)                                                        \
    X(test_interleave_arms_and_order)                                                  \
    X(test_interleave_bad_arguments)                                                   \
    X(test_worst_keeps_the_k_largest)                                                  \
    X(test_worst_keeps_entries_and_sorts_them)                                         \
    X(test_worst_marks_to_the_marks_file)

#define DECLARE_TEST(name) void name(void);
TEST_LIST(DECLARE_TEST)
#undef DECLARE_TEST

#endif
