/* rtprobe: the rtscope native probe. Dispatches to one subcommand per
 * workload; each writes one rtscope sample file. */
#include <stdio.h>
#include <string.h>

#include "rtprobe.h"

/* Adding a subcommand is one line here: X(name, help). It names the function
 * rtp_cmd_<name>(int argc, char **argv), defined in <name>.c (the Makefile
 * builds every .c file in this folder). */
#define SUBCOMMANDS(X) \
    X(exec, "time repeated calls of a workload (sum, fib, sleep, nothing)") \
    X(interleave, "several exec runs in one process, taking turns in blocks (paired arms)") \
    X(timer, "timer wake-up latency: clock_nanosleep on an absolute schedule (absolute, relative)") \
    X(storage, "time passes of block reads/writes over one file (write_sync, write, read)") \
    X(gpio, "GPIO write/read latency and an LED blink loop, GPIO character device (write, read, blink, port)")

#define DECLARE_SUBCOMMAND(name, help) int rtp_cmd_##name(int argc, char **argv);
SUBCOMMANDS(DECLARE_SUBCOMMAND)

struct subcommand {
    const char *name;
    rtp_subcommand_fn run;
    const char *help;
};

#define SUBCOMMAND_ENTRY(name, help) {#name, rtp_cmd_##name, help},
static const struct subcommand subcommands[] = {SUBCOMMANDS(SUBCOMMAND_ENTRY)};
#define NSUBCOMMANDS (sizeof subcommands / sizeof subcommands[0])

static void print_names(FILE *f)
{
    for (size_t k = 0; k < NSUBCOMMANDS; k++)
        fprintf(f, "%s%s", k ? ", " : "", subcommands[k].name);
}

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " SUBCOMMAND [options]\n"
           "       " RTPROBE_NAME " SUBCOMMAND --help\n"
           "\n"
           "The rtscope native probe: measures one workload and writes a rtscope\n"
           "sample file (docs/sample-format.md).\n"
           "\n"
           "subcommands:\n");
    for (size_t k = 0; k < NSUBCOMMANDS; k++)
        printf("  %-10s %s\n", subcommands[k].name, subcommands[k].help);
    printf("\n"
           "  --help       this text\n"
           "  --version    print the version\n"
           "\n"
           "exit codes: 0 success, 1 the run failed, 2 usage error\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, RTPROBE_NAME ": missing subcommand; valid subcommands: ");
        print_names(stderr);
        fprintf(stderr, " (see '" RTPROBE_NAME " --help')\n");
        return RTP_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        print_help();
        return RTP_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf(RTPROBE_NAME " " RTPROBE_VERSION "\n");
        return RTP_EXIT_OK;
    }
    for (size_t k = 0; k < NSUBCOMMANDS; k++)
        if (strcmp(cmd, subcommands[k].name) == 0)
            return subcommands[k].run(argc - 1, argv + 1);
    fprintf(stderr, RTPROBE_NAME ": unknown subcommand '%s'; valid subcommands: ", cmd);
    print_names(stderr);
    fputc('\n', stderr);
    return RTP_EXIT_USAGE;
}
