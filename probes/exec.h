/* rtprobe exec: time repeated calls of a small workload (sum, fib, sleep,
 * nothing, touch), one record per call. */
#ifndef RTP_EXEC_H
#define RTP_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "samplefile.h"
#include "subcommand.h"
#include "util.h"

struct exec_variant {
    const char *name;
    uint64_t (*fn)(uint64_t n);
    int64_t default_n;
    int64_t max_n; /* 0: the variant takes no n */
    const char *help;
    int (*prepare)(uint64_t n, int64_t calls); /* optional: before the first call; -1 after saying why */
};

struct exec_config {
    const struct exec_variant *variant;
    int64_t n;
    int64_t iterations;
    double pause_ms;
    bool start_times; /* --start-times: a column with each call's start (CLOCK_MONOTONIC ns) */
    int64_t mark_worst; /* --mark-worst K: mark the K worst so far in $RTSCOPE_MARKS */
    const char *output;
    struct rtp_rt_options rt;
    int help; /* --help seen: print help, exit 0 */
};

#define EXEC_MAX_ITERATIONS INT64_C(100000000)
#define EXEC_MAX_PAUSE_MS 3600000.0

/* The subcommand: rtprobe exec ... */
int rtp_cmd_exec(int argc, char **argv);

/* The table of variants, *count entries. */
const struct exec_variant *exec_variants(size_t *count);

/* The variant called name, or NULL. */
const struct exec_variant *exec_find_variant(const char *name);

/* Parse argv (argv[0] is "exec"). Returns 0, or RTP_EXIT_USAGE after printing
 * the problem to stderr. */
int exec_parse_args(int argc, char **argv, struct exec_config *cfg);

/* What one run of cfg is, as its sample file says it: the settings and params
 * documents into r (after rtp_run_start), workload, variant and columns into h
 * (the rest zero). */
void exec_describe(const struct exec_config *cfg, struct rtp_run *r, struct rtp_sf_header *h);

/* The values of one record: duration ns, cpu, start (CLOCK_MONOTONIC ns; a
 * column only with --start-times). */
#define EXEC_NCOLUMNS 3

/* The untimed warm-up call of cfg's workload. A variant with a prepare
 * function needs it called first. */
void exec_warm_up(const struct exec_config *cfg);

/* One timed call of cfg's workload with cfg's n: its record into rec. */
void exec_timed_call(const struct exec_config *cfg, union rtp_sf_value rec[EXEC_NCOLUMNS]);

#endif
