#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "json.h"

static void check_quoted(const char *in, const char *expected, int line)
{
    struct rtp_json j;
    rtp_json_init(&j);
    rtp_json_append_quoted(&j, in);
    if (!j.buf || strcmp(j.buf, expected) != 0) {
        check_failures++;
        fprintf(stderr, "%s:%d: quoted \"%s\" is %s, expected %s\n", __FILE__, line, in,
                j.buf ? j.buf : "(null)", expected);
    }
    rtp_json_free(&j);
}
#define CHECK_QUOTED(in, expected) check_quoted(in, expected, __LINE__)

void test_json_escape(void)
{
    CHECK_QUOTED("", "\"\"");
    CHECK_QUOTED("sum", "\"sum\"");
    CHECK_QUOTED("a\"b\\c", "\"a\\\"b\\\\c\"");
    CHECK_QUOTED("l1\nl2\r\t\b\f", "\"l1\\nl2\\r\\t\\b\\f\"");
    CHECK_QUOTED("\x01\x1f", "\"\\u0001\\u001f\"");
    CHECK_QUOTED("/path/ok", "\"/path/ok\"");
    CHECK_QUOTED("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    CHECK_QUOTED("\x7f", "\"\x7f\""); /* DEL needs no escape in JSON */
}

void test_json_escape_invalid_utf8(void)
{
#define FFFD "\xef\xbf\xbd"
    CHECK_QUOTED("a\xff" "b", "\"a" FFFD "b\"");
    CHECK_QUOTED("\xc0\xaf", "\"" FFFD FFFD "\"");             /* overlong '/' */
    CHECK_QUOTED("\xed\xa0\x80", "\"" FFFD FFFD FFFD "\"");    /* surrogate */
    CHECK_QUOTED("\xe2\x82", "\"" FFFD FFFD "\"");             /* truncated at end */
    CHECK_QUOTED("\xf4\x90\x80\x80", "\"" FFFD FFFD FFFD FFFD "\""); /* > U+10FFFF */
    CHECK_QUOTED("\xe0\x80\xaf", "\"" FFFD FFFD FFFD "\"");    /* overlong 3-byte */
#undef FFFD
}

void test_json_builder(void)
{
    struct rtp_json j;
    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    rtp_json_string(&j, "s", "x\"y");
    rtp_json_i64(&j, "min", INT64_MIN);
    rtp_json_u64(&j, "max", UINT64_MAX);
    rtp_json_bool(&j, "t", true);
    rtp_json_bool(&j, "f", false);
    rtp_json_begin_object(&j, "empty");
    rtp_json_end_object(&j);
    rtp_json_begin_array(&j, "a");
    rtp_json_i64(&j, NULL, 1);
    rtp_json_string(&j, NULL, "two");
    rtp_json_begin_object(&j, NULL);
    rtp_json_f64(&j, "half", 0.5);
    rtp_json_end_object(&j);
    rtp_json_end_array(&j);
    rtp_json_raw(&j, "raw", "{\"k\":[]}");
    rtp_json_end_object(&j);
    CHECK_STR(rtp_json_result(&j),
              "{\"s\":\"x\\\"y\",\"min\":-9223372036854775808,\"max\":18446744073709551615,"
              "\"t\":true,\"f\":false,\"empty\":{},\"a\":[1,\"two\",{\"half\":0.5}],"
              "\"raw\":{\"k\":[]}}");
    rtp_json_free(&j);

    /* Growing well past the initial buffer. */
    rtp_json_init(&j);
    rtp_json_begin_array(&j, NULL);
    for (int k = 0; k < 1000; k++)
        rtp_json_i64(&j, NULL, 1000000 + k);
    rtp_json_end_array(&j);
    const char *r = rtp_json_result(&j);
    CHECK(r && strlen(r) == 2 + 1000 * 7 + 999 && strncmp(r, "[1000000,1000001,", 17) == 0);
    rtp_json_free(&j);
}

void test_json_doubles(void)
{
    char buf[32];
    CHECK_STR(rtp_json_format_double(5.0, buf, sizeof buf), "5");
    CHECK_STR(rtp_json_format_double(0.1, buf, sizeof buf), "0.1");
    CHECK_STR(rtp_json_format_double(0.25, buf, sizeof buf), "0.25");
    CHECK_STR(rtp_json_format_double(-2.5, buf, sizeof buf), "-2.5");
    CHECK_STR(rtp_json_format_double(1e-7, buf, sizeof buf), "1e-07");
    CHECK_STR(rtp_json_format_double(1.0 / 3.0, buf, sizeof buf), "0.3333333333333333");
    CHECK(strtod(rtp_json_format_double(0.1 + 0.2, buf, sizeof buf), NULL) == 0.1 + 0.2);
}

void test_json_failures(void)
{
    struct rtp_json j;
    rtp_json_init(&j);
    CHECK(rtp_json_result(&j) == NULL); /* empty document */
    rtp_json_begin_object(&j, NULL);
    CHECK(rtp_json_result(&j) == NULL); /* still open */
    rtp_json_f64(&j, "bad", NAN);
    rtp_json_end_object(&j);
    CHECK(rtp_json_result(&j) == NULL); /* NaN has no JSON form */
    rtp_json_free(&j);

    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    rtp_json_end_object(&j);
    rtp_json_end_object(&j); /* unbalanced */
    CHECK(rtp_json_result(&j) == NULL);
    rtp_json_free(&j);

    rtp_json_init(&j);
    rtp_json_i64(&j, NULL, 1);
    rtp_json_i64(&j, NULL, 2); /* two top-level values */
    CHECK(rtp_json_result(&j) == NULL);
    rtp_json_free(&j);

    rtp_json_init(&j);
    for (int k = 0; k < RTP_JSON_MAX_DEPTH + 1; k++)
        rtp_json_begin_array(&j, NULL);
    CHECK(j.failed);
    rtp_json_free(&j);
}
