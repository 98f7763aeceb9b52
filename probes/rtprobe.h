/* rtprobe: the rtscope native probe. One binary, one subcommand per workload. */
#ifndef RTPROBE_H
#define RTPROBE_H

#define RTPROBE_VERSION "0.1.0"
#define RTPROBE_NAME "rtprobe"

/* Exit codes shared by every subcommand. */
enum {
    RTP_EXIT_OK = 0,
    RTP_EXIT_FAILURE = 1, /* the run could not be done (refused setting, I/O error) */
    RTP_EXIT_USAGE = 2    /* bad command line */
};

/* A subcommand rtp_cmd_<name> gets argv without the program name: argv[0] is
 * the subcommand's name. It returns the process exit code. The list of
 * subcommands is in rtprobe.c. */
typedef int (*rtp_subcommand_fn)(int argc, char **argv);

#endif
