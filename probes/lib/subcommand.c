#include "subcommand.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtprobe.h"

/* ---- command line --------------------------------------------------------- */

int rtp_common_option(int argc, char **argv, int *i, const struct rtp_common_args *c)
{
    if (strcmp(argv[*i], "--help") == 0 || strcmp(argv[*i], "-h") == 0) {
        *c->help = 1;
        return 1;
    }
    int m = rtp_rt_parse_option(argc, argv, i, c->rt);
    if (m != 0)
        return m;
    return rtp_option_nonempty(c->cmd, argc, argv, i, "--output", c->output);
}

int rtp_option_nonempty(const char *cmd, int argc, char **argv, int *i, const char *name,
                        const char **value)
{
    const char *v;
    int m = rtp_option_value(argc, argv, i, name, &v);
    if (m <= 0)
        return m;
    if (!*v) {
        fprintf(stderr, RTPROBE_NAME " %s: %s must not be empty\n", cmd, name);
        return -1;
    }
    *value = v;
    return 1;
}

bool rtp_unknown_option(const char *cmd, const char *arg)
{
    if (arg[0] != '-' || arg[1] == '\0')
        return false;
    fprintf(stderr, RTPROBE_NAME " %s: unknown option '%s'; see '" RTPROBE_NAME " %s --help'\n", cmd,
            arg, cmd);
    return true;
}

static const char *choice_name(const struct rtp_choices *c, size_t k)
{
    return *(const char *const *)((const char *)c->table + k * c->size);
}

static void print_choice_names(const struct rtp_choices *c)
{
    fprintf(stderr, "valid %ss: ", c->what);
    for (size_t k = 0; k < c->count; k++)
        fprintf(stderr, "%s%s", k ? ", " : "", choice_name(c, k));
    fputc('\n', stderr);
}

int rtp_choice_find(const struct rtp_choices *c, const char *name)
{
    for (size_t k = 0; k < c->count; k++)
        if (strcmp(choice_name(c, k), name) == 0)
            return (int)k;
    return -1;
}

int rtp_choice_set(const struct rtp_choices *c, const char *name, int *chosen)
{
    if (*chosen >= 0) {
        fprintf(stderr, RTPROBE_NAME " %s: %s given twice ('%s' and '%s')\n", c->cmd, c->what,
                choice_name(c, (size_t)*chosen), name);
        return -1;
    }
    int k = rtp_choice_find(c, name);
    if (k < 0) {
        fprintf(stderr, RTPROBE_NAME " %s: unknown %s '%s'; ", c->cmd, c->what, name);
        print_choice_names(c);
        return -1;
    }
    *chosen = k;
    return 0;
}

int rtp_choice_missing(const struct rtp_choices *c)
{
    fprintf(stderr, RTPROBE_NAME " %s: no %s given; ", c->cmd, c->what);
    print_choice_names(c);
    return RTP_EXIT_USAGE;
}

int rtp_subcommand_main(int parse_rc, int help, void (*print_help)(void),
                        int (*run)(const void *cfg), const void *cfg)
{
    if (parse_rc != 0)
        return parse_rc;
    if (help) {
        print_help();
        return RTP_EXIT_OK;
    }
    return run(cfg);
}

/* ---- the sample-file run -------------------------------------------------- */

int rtp_run_start(struct rtp_run *r)
{
    rtp_json_init(&r->settings);
    rtp_json_init(&r->params);
    rtp_json_init(&r->trailer);
    r->started_at[0] = r->finished_at[0] = '\0';
    r->w = NULL;
    if (rtp_install_stop_handlers() != 0) {
        fprintf(stderr, RTPROBE_NAME ": cannot install signal handlers: %s\n", strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    return RTP_EXIT_OK;
}

/* ---- a duet's start gate (src/rtscope/experiment/duet.py) ------------------ */

static bool gate_file(const char *gate, const char *suffix, char *path, size_t size)
{
    return (size_t)snprintf(path, size, "%s.%s", gate, suffix) < size;
}

/* With RTSCOPE_DUET_GATE set (an arm of a duet): create GATE.ARM, then wait until every arm's file is there,
 * so that the arms measure side by side from the same moment; give up when GATE.abort appears (another arm
 * failed) or after RTSCOPE_DUET_GATE_S seconds. Once per process. */
static int duet_gate(void)
{
    static bool passed;
    const char *gate = getenv("RTSCOPE_DUET_GATE"), *arm = getenv("RTSCOPE_DUET_ARM");
    const char *arms_text = getenv("RTSCOPE_DUET_ARMS"), *wait_text = getenv("RTSCOPE_DUET_GATE_S");
    if (passed || !gate || !*gate)
        return RTP_EXIT_OK;
    passed = true;
    long arms = arms_text ? strtol(arms_text, NULL, 10) : 0;
    long wait_s = wait_text ? strtol(wait_text, NULL, 10) : 120;
    char path[4096], name[32];
    if (!arm || !*arm || arms < 1 || arms > 64 || !gate_file(gate, arm, path, sizeof path)) {
        fprintf(stderr, RTPROBE_NAME ": RTSCOPE_DUET_GATE needs RTSCOPE_DUET_ARM and RTSCOPE_DUET_ARMS (1..64)\n");
        return RTP_EXIT_USAGE;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, RTPROBE_NAME ": duet: cannot create %s: %s\n", path, strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    close(fd);
    const int64_t until = rtp_now_ns() + (int64_t)wait_s * 1000000000LL;
    for (;;) {
        long ready = 0;
        for (long i = 0; i < arms; i++) {
            snprintf(name, sizeof name, "%ld", i);
            if (gate_file(gate, name, path, sizeof path) && access(path, F_OK) == 0)
                ready++;
        }
        if (ready == arms)
            return RTP_EXIT_OK;
        if (gate_file(gate, "abort", path, sizeof path) && access(path, F_OK) == 0) {
            fprintf(stderr, RTPROBE_NAME ": duet: another arm failed before the start\n");
            return RTP_EXIT_FAILURE;
        }
        if (rtp_now_ns() > until) {
            fprintf(stderr, RTPROBE_NAME ": duet: %ld of %ld arms reached the start gate within %ld s\n", ready,
                    arms, wait_s);
            return RTP_EXIT_FAILURE;
        }
        if (rtp_sleep_ns(1000000) != 0)
            return RTP_EXIT_FAILURE; /* stopped while waiting */
    }
}

int rtp_run_open(struct rtp_run *r, const char *path, const struct rtp_sf_header *h,
                 enum rtp_sf_mode mode)
{
    char err[512];
    int gate = duet_gate();
    if (gate != RTP_EXIT_OK)
        return gate;
    if (!rtp_json_result(&r->settings) || !rtp_json_result(&r->params) ||
        (!r->started_at[0] && rtp_now_rfc3339(r->started_at, sizeof r->started_at) != 0)) {
        fprintf(stderr, RTPROBE_NAME ": cannot build the header\n");
        return RTP_EXIT_FAILURE;
    }
    struct rtp_sf_header header = *h;
    header.runtime = "native";
    header.tool = RTPROBE_NAME;
    header.tool_version = RTPROBE_VERSION;
    header.started_at = r->started_at;
    header.settings_json = rtp_json_result(&r->settings);
    header.params_json = rtp_json_result(&r->params);
    r->w = rtp_sf_open(path, &header, mode, err, sizeof err);
    if (!r->w) {
        fprintf(stderr, RTPROBE_NAME ": %s\n", err);
        return RTP_EXIT_FAILURE;
    }
    return RTP_EXIT_OK;
}

const char *rtp_run_finished_at(struct rtp_run *r)
{
    if (rtp_now_rfc3339(r->finished_at, sizeof r->finished_at) != 0)
        snprintf(r->finished_at, sizeof r->finished_at, "%s", r->started_at);
    return r->finished_at;
}

int rtp_run_finish(struct rtp_run *r)
{
    char err[512];
    if (!rtp_json_result(&r->trailer)) {
        fprintf(stderr, RTPROBE_NAME ": cannot build the trailer\n");
        rtp_sf_abort(r->w);
        r->w = NULL;
        return RTP_EXIT_FAILURE;
    }
    int finished = rtp_sf_finish(r->w, rtp_json_result(&r->trailer), err, sizeof err);
    r->w = NULL;
    if (finished != 0) {
        fprintf(stderr, RTPROBE_NAME ": %s\n", err);
        return RTP_EXIT_FAILURE;
    }
    return RTP_EXIT_OK;
}

int rtp_run_stopped(const char *what)
{
    fprintf(stderr, RTPROBE_NAME ": stopped by signal %d; %s\n", (int)rtp_stop_signal, what);
    return 128 + (int)rtp_stop_signal;
}

void rtp_run_free(struct rtp_run *r)
{
    if (r->w)
        rtp_sf_abort(r->w);
    r->w = NULL;
    rtp_json_free(&r->settings);
    rtp_json_free(&r->params);
    rtp_json_free(&r->trailer);
}
