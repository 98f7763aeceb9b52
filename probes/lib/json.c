#include "json.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rtp_json_init(struct rtp_json *j)
{
    memset(j, 0, sizeof *j);
    j->first[0] = true;
}

void rtp_json_free(struct rtp_json *j)
{
    free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}

static void put_bytes(struct rtp_json *j, const char *s, size_t n)
{
    if (j->failed)
        return;
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (j->len + n + 1 > cap)
            cap *= 2;
        char *nb = realloc(j->buf, cap);
        if (!nb) {
            j->failed = true;
            return;
        }
        j->buf = nb;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

static void put_str(struct rtp_json *j, const char *s)
{
    put_bytes(j, s, strlen(s));
}

/* Length of the valid UTF-8 sequence starting at s, or 0 if it is invalid
 * (overlong forms, surrogates and values above U+10FFFF are invalid). */
static size_t utf8_sequence_length(const unsigned char *s)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0; /* also catches the terminating NUL */
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void rtp_json_append_quoted(struct rtp_json *j, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    put_bytes(j, "\"", 1);
    while (*p) {
        unsigned char c = *p;
        char esc[8];
        switch (c) {
        case '"': put_str(j, "\\\""); p++; continue;
        case '\\': put_str(j, "\\\\"); p++; continue;
        case '\b': put_str(j, "\\b"); p++; continue;
        case '\f': put_str(j, "\\f"); p++; continue;
        case '\n': put_str(j, "\\n"); p++; continue;
        case '\r': put_str(j, "\\r"); p++; continue;
        case '\t': put_str(j, "\\t"); p++; continue;
        default: break;
        }
        if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put_str(j, esc);
            p++;
            continue;
        }
        size_t n = utf8_sequence_length(p);
        if (n == 0) {
            put_str(j, "\xEF\xBF\xBD"); /* U+FFFD replacement character */
            p++;
        } else {
            put_bytes(j, (const char *)p, n);
            p += n;
        }
    }
    put_bytes(j, "\"", 1);
}

/* Comma and key before a value; key is NULL inside arrays. */
static void member(struct rtp_json *j, const char *key)
{
    if (j->failed)
        return;
    if (j->depth == 0 && !j->first[0]) {
        j->failed = true; /* a second top-level value */
        return;
    }
    if (!j->first[j->depth])
        put_bytes(j, ",", 1);
    j->first[j->depth] = false;
    if (key) {
        rtp_json_append_quoted(j, key);
        put_bytes(j, ":", 1);
    }
}

static void open_container(struct rtp_json *j, const char *key, const char *open)
{
    member(j, key);
    if (j->depth + 1 >= RTP_JSON_MAX_DEPTH) {
        j->failed = true;
        return;
    }
    put_str(j, open);
    j->depth++;
    j->first[j->depth] = true;
}

static void close_container(struct rtp_json *j, const char *close)
{
    if (j->depth == 0) {
        j->failed = true;
        return;
    }
    put_str(j, close);
    j->depth--;
}

void rtp_json_begin_object(struct rtp_json *j, const char *key) { open_container(j, key, "{"); }
void rtp_json_end_object(struct rtp_json *j) { close_container(j, "}"); }
void rtp_json_begin_array(struct rtp_json *j, const char *key) { open_container(j, key, "["); }
void rtp_json_end_array(struct rtp_json *j) { close_container(j, "]"); }

void rtp_json_string(struct rtp_json *j, const char *key, const char *value)
{
    member(j, key);
    rtp_json_append_quoted(j, value);
}

void rtp_json_i64(struct rtp_json *j, const char *key, int64_t value)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRId64, value);
    member(j, key);
    put_str(j, buf);
}

void rtp_json_u64(struct rtp_json *j, const char *key, uint64_t value)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, value);
    member(j, key);
    put_str(j, buf);
}

char *rtp_json_format_double(double v, char *buf, size_t len)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

void rtp_json_f64(struct rtp_json *j, const char *key, double value)
{
    char buf[32];
    if (!isfinite(value)) {
        j->failed = true;
        return;
    }
    member(j, key);
    put_str(j, rtp_json_format_double(value, buf, sizeof buf));
}

void rtp_json_bool(struct rtp_json *j, const char *key, bool value)
{
    member(j, key);
    put_str(j, value ? "true" : "false");
}

void rtp_json_raw(struct rtp_json *j, const char *key, const char *json)
{
    member(j, key);
    put_str(j, json);
}

const char *rtp_json_result(const struct rtp_json *j)
{
    if (j->failed || j->depth != 0 || j->len == 0)
        return NULL;
    return j->buf;
}
