/* A small JSON writer: escaped strings, numbers, booleans, nested objects and
 * arrays, for sample-file headers and trailers. Not a parser. */
#ifndef RTP_JSON_H
#define RTP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RTP_JSON_MAX_DEPTH 16

struct rtp_json {
    char *buf;
    size_t len;
    size_t cap;
    int depth;
    bool first[RTP_JSON_MAX_DEPTH]; /* no member written yet at this depth */
    bool failed;                     /* out of memory, bad value or bad nesting */
};

void rtp_json_init(struct rtp_json *j);
void rtp_json_free(struct rtp_json *j);

/* Every value function takes a key: pass the member name inside an object,
 * NULL inside an array or for the top-level value. */
void rtp_json_begin_object(struct rtp_json *j, const char *key);
void rtp_json_end_object(struct rtp_json *j);
void rtp_json_begin_array(struct rtp_json *j, const char *key);
void rtp_json_end_array(struct rtp_json *j);
void rtp_json_string(struct rtp_json *j, const char *key, const char *value);
void rtp_json_i64(struct rtp_json *j, const char *key, int64_t value);
void rtp_json_u64(struct rtp_json *j, const char *key, uint64_t value);
/* Non-finite values have no JSON form: they mark the document failed. */
void rtp_json_f64(struct rtp_json *j, const char *key, double value);
void rtp_json_bool(struct rtp_json *j, const char *key, bool value);
/* Insert text that is already valid JSON (e.g. an object built elsewhere). */
void rtp_json_raw(struct rtp_json *j, const char *key, const char *json);

/* The finished document (NUL-terminated, owned by j), or NULL when anything
 * failed or an object/array is still open. */
const char *rtp_json_result(const struct rtp_json *j);

/* Append s as a quoted JSON string to j's buffer: escapes '"', '\\' and
 * control characters; invalid UTF-8 bytes become U+FFFD so the output is
 * always valid UTF-8. */
void rtp_json_append_quoted(struct rtp_json *j, const char *s);

/* Shortest "%.*g" text of a finite double that reads back to the same value
 * (5.0 -> "5", 0.1 -> "0.1"). buf needs 32 bytes. Returns buf. */
char *rtp_json_format_double(double v, char *buf, size_t len);

#endif
