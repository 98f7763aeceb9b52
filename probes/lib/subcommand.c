#include "subcommand.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

int rtp_run_open(struct rtp_run *r, const char *path, const struct rtp_sf_header *h,
                 enum rtp_sf_mode mode)
{
    char err[512];
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
