/* Helpers shared by every rtprobe subcommand: strict argument parsing,
 * timespec arithmetic, clocks and sleeps, RFC 3339 time stamps, and the
 * real-time setup options (--priority, --cpu, --mlock). */
#ifndef RTP_UTIL_H
#define RTP_UTIL_H

#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "json.h"

#define RTP_NSEC_PER_SEC INT64_C(1000000000)

/* ---- strict argument parsing ------------------------------------------ */

enum rtp_parse_status {
    RTP_PARSE_OK = 0,
    RTP_PARSE_EMPTY,  /* empty string */
    RTP_PARSE_SYNTAX, /* not a number, or trailing garbage, or whitespace */
    RTP_PARSE_RANGE   /* a number, but outside [min, max] or overflowing */
};

/* Decimal integer, optional sign, nothing else (no spaces, no 0x). */
enum rtp_parse_status rtp_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out);
/* Finite decimal number ("5", "0.25", "1e3"); no nan, inf or hex floats. */
enum rtp_parse_status rtp_parse_f64(const char *text, double min, double max, double *out);

/* The same, for an option's value: on failure print
 * "rtprobe: <option>: expected ..., got '<text>'" to stderr and return -1. */
int rtp_option_i64(const char *option, const char *text, int64_t min, int64_t max, int64_t *out);
int rtp_option_f64(const char *option, const char *text, double min, double max, double *out);

/* Match argv[*i] against "--name value" or "--name=value". Returns 1 and sets
 * *value (advancing *i past a separate value), 0 if argv[*i] is another
 * argument, -1 if the value is missing (message printed). */
int rtp_option_value(int argc, char **argv, int *i, const char *name, const char **value);

/* ---- time -------------------------------------------------------------- */

int64_t rtp_ts_to_ns(struct timespec ts);
/* Normalised: 0 <= tv_nsec < 1e9, also for negative ns. */
struct timespec rtp_ns_to_ts(int64_t ns);
struct timespec rtp_ts_add_ns(struct timespec ts, int64_t ns);
/* end - start in ns. */
int64_t rtp_ts_diff_ns(struct timespec end, struct timespec start);
int rtp_ts_cmp(struct timespec a, struct timespec b);

/* CLOCK_MONOTONIC in ns. */
int64_t rtp_now_ns(void);

/* Sleep ns on CLOCK_MONOTONIC (relative); resumes after signals unless a stop
 * was requested. Returns 0, or -1 when interrupted by a stop request. */
int rtp_sleep_ns(int64_t ns);
/* Sleep until an absolute CLOCK_MONOTONIC time; same return convention. */
int rtp_sleep_until(struct timespec deadline);

/* "2026-11-22T10:30:00.123Z" (UTC, milliseconds). buf needs 32 bytes.
 * Returns 0, or -1 if the time cannot be represented. */
int rtp_format_rfc3339(struct timespec realtime, char *buf, size_t len);
/* The current CLOCK_REALTIME formatted as above. */
int rtp_now_rfc3339(char *buf, size_t len);

/* ---- stop on SIGINT/SIGTERM -------------------------------------------- */

/* After rtp_install_stop_handlers, SIGINT/SIGTERM/SIGHUP set
 * rtp_stop_signal (instead of killing the process) so a probe can stop its
 * loop and remove its partial output. */
extern volatile sig_atomic_t rtp_stop_signal;
int rtp_install_stop_handlers(void);

/* ---- real-time setup ---------------------------------------------------- */

struct rtp_rt_options {
    int priority; /* SCHED_FIFO priority, 0 = not requested */
    int cpu;      /* CPU to pin to, -1 = not requested */
    bool mlock;   /* mlockall(MCL_CURRENT | MCL_FUTURE) */
};

/* Help lines for the three options, for subcommand --help texts. */
extern const char rtp_rt_options_help[];

void rtp_rt_options_init(struct rtp_rt_options *o);
/* Returns 1 if argv[*i] was a real-time option (consumed), 0 if it is not
 * one, -1 on a bad value (message printed; exit code 2). */
int rtp_rt_parse_option(int argc, char **argv, int *i, struct rtp_rt_options *o);
/* Pin, lock memory, then raise the priority. Returns RTP_EXIT_OK, or the exit
 * code after printing why: 2 for a CPU this process may not use, 1 when the
 * kernel refuses mlockall or SCHED_FIFO. */
int rtp_rt_apply(const struct rtp_rt_options *o);
/* Members "rt_priority" (only if requested), "cpu" (only if requested) and
 * "mlock" into the object currently open in j. */
void rtp_rt_settings_json(const struct rtp_rt_options *o, struct rtp_json *j);

/* "0-3,6,8-9". Returns 0, or -1 if buf is too small. */
int rtp_format_cpuset(const cpu_set_t *set, char *buf, size_t len);

#endif
