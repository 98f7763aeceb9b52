/* What every subcommand (exec, timer, storage) does around its own work: the
 * options they all take, the entry point, and the sample-file run from the
 * stop handlers to the trailer. */
#ifndef RTP_SUBCOMMAND_H
#define RTP_SUBCOMMAND_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "samplefile.h"
#include "util.h"

/* ---- command line --------------------------------------------------------- */

/* Where a subcommand keeps the options every subcommand takes. */
struct rtp_common_args {
    const char *cmd;           /* "exec": names the subcommand in messages */
    int *help;                 /* --help or -h seen */
    struct rtp_rt_options *rt; /* --priority, --cpu, --mlock */
    const char **output;       /* --output FILE */
};

/* Match argv[*i] against the options above. Returns 1 if consumed, 0 if it is
 * another argument, -1 on a bad value (message printed; exit code 2). */
int rtp_common_option(int argc, char **argv, int *i, const struct rtp_common_args *c);

/* rtp_option_value for a value that must not be empty, e.g. a path. */
int rtp_option_nonempty(const char *cmd, int argc, char **argv, int *i, const char *name,
                        const char **value);

/* True, after printing that cmd has no such option, if arg looks like an
 * option ("-x", not "-"). */
bool rtp_unknown_option(const char *cmd, const char *arg);

/* The one choice a subcommand takes as its first argument (exec's workload,
 * storage's mode, gpio's variant), from a table of structs whose first member
 * is the name (const char *). */
struct rtp_choices {
    const char *cmd;   /* "exec": names the subcommand in messages */
    const char *what;  /* "workload": names the choice in messages */
    const void *table;
    size_t count;      /* entries in table */
    size_t size;       /* sizeof one entry */
};

/* Index of the entry called name, or -1. */
int rtp_choice_find(const struct rtp_choices *c, const char *name);

/* Take name as the choice: its index into *chosen, which is -1 until a choice
 * is made. 0, or -1 after printing why (chosen twice, or no such name: the
 * valid names follow). */
int rtp_choice_set(const struct rtp_choices *c, const char *name, int *chosen);

/* Print that no choice was given, with the valid names; returns RTP_EXIT_USAGE. */
int rtp_choice_missing(const struct rtp_choices *c);

/* The body of rtp_cmd_<name> after parsing: the exit code of a bad command
 * line, or the help, or run(cfg). */
int rtp_subcommand_main(int parse_rc, int help, void (*print_help)(void),
                        int (*run)(const void *cfg), const void *cfg);

/* ---- the sample-file run -------------------------------------------------- */

struct rtp_run {
    struct rtp_json settings, params, trailer; /* built by the subcommand */
    char started_at[32];
    char finished_at[32];
    struct rtp_sf_writer *w; /* open between rtp_run_open and rtp_run_finish */
};

/* Empty documents, no writer, then the stop handlers. RTP_EXIT_OK, or
 * RTP_EXIT_FAILURE after printing why. */
int rtp_run_start(struct rtp_run *r);

/* Stamp started_at (unless the caller did) and open path with the header: the
 * caller sets workload, variant and the columns (and pairing_json); the rest
 * comes from r and the tool. RTP_EXIT_OK,
 * or RTP_EXIT_FAILURE after printing why. */
int rtp_run_open(struct rtp_run *r, const char *path, const struct rtp_sf_header *h,
                 enum rtp_sf_mode mode);

/* Stamp finished_at (started_at if the clock fails) and return it. */
const char *rtp_run_finished_at(struct rtp_run *r);

/* Write the trailer and rename the file into place; the writer is gone
 * afterwards either way. RTP_EXIT_OK, or RTP_EXIT_FAILURE after printing why
 * (then nothing is left at the output path). */
int rtp_run_finish(struct rtp_run *r);

/* Report a stop request ("stopped by signal N; <what>") and return its exit
 * code, 128 + N. */
int rtp_run_stopped(const char *what);

/* Remove an unfinished file and free the documents. */
void rtp_run_free(struct rtp_run *r);

#endif
