/* rtprobe interleave: several exec runs (the arms) measured in one process,
 * taking turns in blocks of timed calls, each arm writing its own sample file
 * (the `interleaved` design, probes/README.md "interleave"). */
#ifndef RTP_INTERLEAVE_H
#define RTP_INTERLEAVE_H

#include <stddef.h>
#include <stdint.h>

#include "exec.h"

#define INTERLEAVE_MAX_ARMS 16
#define INTERLEAVE_MAX_WRITES 64

/* A file an arm writes before each of its blocks (--write ARM:PATH=VALUE): a
 * machine-wide setting switched with the arms. */
struct interleave_write {
    int arm;
    const char *path; /* into argv */
    const char *value;
};

struct interleave_config {
    int64_t block;           /* B: timed calls of an arm per block */
    int *order;              /* the arm of each block (malloc'd), norder entries */
    size_t norder;
    int narms;
    struct exec_config arms[INTERLEAVE_MAX_ARMS];
    struct interleave_write writes[INTERLEAVE_MAX_WRITES];
    int nwrites;
    char *write_args[INTERLEAVE_MAX_WRITES]; /* copies of the --write arguments, split in place */
    int help;                /* --help seen (also inside an arm): print help, exit 0 */
};

/* The subcommand: rtprobe interleave ... */
int rtp_cmd_interleave(int argc, char **argv);

/* Parse argv (argv[0] is "interleave") and check the arms against each other
 * and the order. Returns 0, or RTP_EXIT_USAGE after printing the problem to
 * stderr. Free with interleave_config_free either way. */
int interleave_parse_args(int argc, char **argv, struct interleave_config *cfg);

void interleave_config_free(struct interleave_config *cfg);

#endif
