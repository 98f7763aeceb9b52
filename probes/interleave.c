#include "interleave.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtprobe.h"
#include "samplefile.h"
#include "subcommand.h"
#include "util.h"

/* An arm may be a variant that makes one timed call per sample with nothing
 * of its own going on between calls: no prepare step (touch's reservation and
 * lock's holder thread would carry into the other arms' blocks). */
static bool interleavable(const struct exec_variant *v)
{
    return v->prepare == NULL;
}

static void print_interleavable(FILE *f)
{
    size_t count;
    const struct exec_variant *v = exec_variants(&count);
    for (size_t k = 0, listed = 0; k < count; k++)
        if (interleavable(&v[k]))
            fprintf(f, "%s%s", listed++ ? ", " : "", v[k].name);
}

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " interleave --block B --order 0,1,1,0,...\n"
           "           --arm exec WORKLOAD [exec options] --output FILE\n"
           "           --arm exec WORKLOAD [exec options] --output FILE [--arm ...]\n"
           "\n"
           "Measure several exec runs (the arms) in one process, taking turns in blocks:\n"
           "block k of the order is B timed calls of arm order[k], each call followed by\n"
           "its pause as in exec. Whatever drifts on the machine meanwhile falls on every\n"
           "arm alike. Each arm writes the sample file its exec run would, plus a header\n"
           "key pairing {arm, arms, block_samples, blocks}; an arm's warm-up call is made,\n"
           "untimed, at the start of its first block.\n"
           "\n"
           "  --block B     timed calls of an arm per block (>= 1)\n"
           "  --order LIST  the arm of each block, comma-separated arm indexes; arm i\n"
           "                appears exactly iterations / B times\n"
           "  --write ARM:PATH=VALUE\n"
           "                write VALUE into the file PATH before each of arm ARM's blocks\n"
           "                that follows another arm's (a machine-wide setting switched with\n"
           "                the arms; every arm must write the same files); repeatable\n"
           "  --arm ...     what 'rtprobe exec' takes for one run, from the word exec on;\n"
           "                2 to %d arms\n"
           "\n"
           "Arms may differ in the workload (",
           INTERLEAVE_MAX_ARMS);
    print_interleavable(stdout);
    printf("), --n/--ms, --priority\n"
           "and --cpu (applied to the measuring thread before each of the arm's blocks).\n"
           "--iterations, --pause-ms, --mlock and --start-times must be the same in every\n"
           "arm; --mark-worst is not taken; each arm needs its own --output.\n"
           "\n"
           "exit codes: 0 every file written, 1 run failed (refused setting, I/O error; no\n"
           "file left), 2 usage error (nothing measured or written)\n");
}

/* ---- command line --------------------------------------------------------- */

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(RTPROBE_NAME " interleave: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return RTP_EXIT_USAGE;
}

/* The arm starting at argv[0] ("exec"), argc words up to the next --arm. */
static int parse_arm(int index, int argc, char **argv, struct exec_config *arm)
{
    if (argc == 0)
        return usage("--arm %d is empty: give what 'rtprobe exec' takes, e.g. --arm exec sum --output FILE",
                     index);
    if (strcmp(argv[0], "exec") != 0)
        return usage("arm %d is '%s': interleave measures exec arms; begin each arm with the word exec "
                     "(--arm exec WORKLOAD ...)", index, argv[0]);
    if (exec_parse_args(argc, argv, arm) != 0)
        return usage("arm %d is not a valid exec run (why: above)", index);
    return 0;
}

/* The arms may differ in the variant, n, priority and cpu only. */
static int check_equal(const struct interleave_config *cfg)
{
    const struct exec_config *a0 = &cfg->arms[0];
    for (int i = 0; i < cfg->narms; i++) {
        const struct exec_config *a = &cfg->arms[i];
        const char *what = NULL;
        if (!interleavable(a->variant)) {
            fprintf(stderr, RTPROBE_NAME " interleave: arm %d is exec %s: interleave takes exec ", i,
                    a->variant->name);
            print_interleavable(stderr);
            fprintf(stderr, " (one timed call per sample, nothing of the arm's own running between calls)\n");
            return RTP_EXIT_USAGE;
        }
        if (a->mark_worst > 0)
            return usage("arm %d has --mark-worst: it marks the worst calls of one run; interleave does not "
                         "take it", i);
        if (a->iterations != a0->iterations)
            what = "--iterations";
        else if (a->pause_ms != a0->pause_ms)
            what = "--pause-ms";
        else if (a->rt.mlock != a0->rt.mlock)
            what = "--mlock";
        else if (a->start_times != a0->start_times)
            what = "--start-times";
        if (what)
            return usage("arm 0 and arm %d differ in %s: arms may differ only in the workload, --n/--ms, "
                         "--priority and --cpu; give every arm the same %s", i, what, what);
        for (int j = 0; j < i; j++)
            if (strcmp(a->output, cfg->arms[j].output) == 0)
                return usage("arm %d and arm %d would write the same file %s: give each arm its own --output",
                             j, i, a->output);
    }
    if (a0->iterations % cfg->block != 0)
        return usage("iterations %lld is not a multiple of the block size %lld: give every arm a multiple "
                     "of --block", (long long)a0->iterations, (long long)cfg->block);
    return 0;
}

/* --write ARM:PATH=VALUE, split in a copy kept in cfg. */
static int parse_write(const char *arg, struct interleave_config *cfg)
{
    if (cfg->nwrites == INTERLEAVE_MAX_WRITES)
        return usage("more than %d --write options", INTERLEAVE_MAX_WRITES);
    char *copy = strdup(arg);
    if (!copy)
        return usage("out of memory");
    cfg->write_args[cfg->nwrites] = copy;
    char *colon = strchr(copy, ':'), *eq = colon ? strchr(colon + 1, '=') : NULL;
    int64_t arm;
    if (!colon || !eq || colon[1] == '\0' || colon[1] == '=')
        return usage("--write '%s' is not ARM:PATH=VALUE (e.g. --write 1:/proc/sys/kernel/sched_rt_runtime_us=-1)",
                     arg);
    *colon = *eq = '\0';
    if (rtp_parse_i64(copy, 0, INTERLEAVE_MAX_ARMS - 1, &arm) != RTP_PARSE_OK)
        return usage("--write '%s': '%s' is not an arm index", arg, copy);
    cfg->writes[cfg->nwrites++] = (struct interleave_write){.arm = (int)arm, .path = colon + 1, .value = eq + 1};
    return 0;
}

/* Every arm writes each file exactly once (so each block's state is the arm's own, whatever came before). */
static int check_writes(const struct interleave_config *cfg)
{
    for (int w = 0; w < cfg->nwrites; w++) {
        const struct interleave_write *x = &cfg->writes[w];
        if (x->arm >= cfg->narms)
            return usage("--write %d:%s: there is no arm %d (arms 0..%d)", x->arm, x->path, x->arm, cfg->narms - 1);
        for (int i = 0; i < cfg->narms; i++) {
            int times = 0;
            for (int v = 0; v < cfg->nwrites; v++)
                times += cfg->writes[v].arm == i && strcmp(cfg->writes[v].path, x->path) == 0;
            if (times != 1)
                return usage("arm %d writes %s %d times: every arm writes each --write file exactly once", i,
                             x->path, times);
        }
    }
    return 0;
}

/* Parse LIST into cfg->order and check that arm i appears iterations / B times. */
static int parse_order(const char *list, struct interleave_config *cfg)
{
    size_t n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    cfg->order = calloc(n, sizeof *cfg->order);
    if (!cfg->order)
        return usage("out of memory for an order of %zu blocks", n);
    char *copy = strdup(list);
    if (!copy)
        return usage("out of memory");
    int rc = 0;
    char *rest = copy;
    for (size_t k = 0; k < n && rc == 0; k++) {
        char *item = strsep(&rest, ",");
        int64_t a;
        if (rtp_parse_i64(item, 0, cfg->narms - 1, &a) != RTP_PARSE_OK)
            rc = usage("--order entry '%s' at position %zu is not an arm index: valid are 0..%d", item, k,
                       cfg->narms - 1);
        else
            cfg->order[cfg->norder++] = (int)a;
    }
    free(copy);
    if (rc)
        return rc;
    const int64_t want = cfg->arms[0].iterations / cfg->block;
    for (int i = 0; i < cfg->narms; i++) {
        int64_t count = 0;
        for (size_t k = 0; k < cfg->norder; k++)
            count += cfg->order[k] == i;
        if (count != want)
            return usage("arm %d (exec %s) appears %lld time%s in --order, it must appear iterations %lld / "
                         "block %lld = %lld times", i, cfg->arms[i].variant->name, (long long)count,
                         count == 1 ? "" : "s", (long long)cfg->arms[i].iterations, (long long)cfg->block,
                         (long long)want);
    }
    return 0;
}

int interleave_parse_args(int argc, char **argv, struct interleave_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    const char *order = NULL;
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--arm") != 0; i++) {
        const char *v;
        int m;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            cfg->help = 1;
        } else if ((m = rtp_option_value(argc, argv, &i, "--block", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--block", v, 1, EXEC_MAX_ITERATIONS, &cfg->block) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_nonempty("interleave", argc, argv, &i, "--order", &order)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_nonempty("interleave", argc, argv, &i, "--write", &v)) != 0) {
            if (m < 0 || parse_write(v, cfg) != 0)
                return RTP_EXIT_USAGE;
        } else if (!rtp_unknown_option("interleave", argv[i])) {
            return usage("unexpected argument '%s' before the first --arm", argv[i]);
        } else {
            return RTP_EXIT_USAGE;
        }
    }
    while (i < argc && !cfg->help) {
        int end = i + 1;
        while (end < argc && strcmp(argv[end], "--arm") != 0)
            end++;
        if (cfg->narms == INTERLEAVE_MAX_ARMS)
            return usage("more than %d arms", INTERLEAVE_MAX_ARMS);
        struct exec_config *arm = &cfg->arms[cfg->narms];
        if (parse_arm(cfg->narms, end - i - 1, argv + i + 1, arm) != 0)
            return RTP_EXIT_USAGE;
        cfg->help = arm->help;
        cfg->narms++;
        i = end;
    }
    if (cfg->help)
        return 0;
    if (cfg->block == 0)
        return usage("--block B is required: the timed calls of an arm per block");
    if (!order)
        return usage("--order is required: the arm of each block (--order 0,1,1,0,...)");
    if (cfg->narms < 2)
        return usage("needs at least 2 arms (--arm exec ...), got %d", cfg->narms);
    int rc = check_equal(cfg);
    if (!rc)
        rc = check_writes(cfg);
    return rc ? rc : parse_order(order, cfg);
}

void interleave_config_free(struct interleave_config *cfg)
{
    free(cfg->order);
    cfg->order = NULL;
    for (int w = 0; w < INTERLEAVE_MAX_WRITES; w++) { /* one past nwrites: a --write refused midway */
        free(cfg->write_args[w]);
        cfg->write_args[w] = NULL;
    }
}

/* ---- the run -------------------------------------------------------------- */

/* What each block's arm sets on the measuring thread: its CPU (or the CPUs the
 * process had) and its SCHED_FIFO priority (or the policy the process had). */
struct thread_state {
    bool switching; /* some arm sets --priority or --cpu */
    cpu_set_t cpus;
    int policy;
    struct sched_param param;
};

static int use_arm(const struct thread_state *s, int index, const struct rtp_rt_options *o)
{
    if (!s->switching)
        return 0;
    cpu_set_t one;
    const cpu_set_t *set = &s->cpus;
    if (o->cpu >= 0) {
        CPU_ZERO(&one);
        CPU_SET(o->cpu, &one);
        set = &one;
    }
    struct sched_param fifo = {.sched_priority = o->priority};
    if (sched_setaffinity(0, sizeof *set, set) != 0 ||
        (o->priority > 0 ? sched_setscheduler(0, SCHED_FIFO, &fifo)
                         : sched_setscheduler(0, s->policy, &s->param)) != 0) {
        fprintf(stderr, RTPROBE_NAME " interleave: the kernel refused arm %d's CPU or priority: %s\n", index,
                strerror(errno));
        return -1;
    }
    return 0;
}

/* Apply every arm's settings once before anything is measured, so a refused
 * one ends the run before it starts (exit codes as exec's). */
static int check_settings(const struct interleave_config *cfg, struct thread_state *s)
{
    s->switching = false;
    for (int i = 0; i < cfg->narms; i++)
        s->switching |= cfg->arms[i].rt.priority > 0 || cfg->arms[i].rt.cpu >= 0;
    if (sched_getaffinity(0, sizeof s->cpus, &s->cpus) != 0 || (s->policy = sched_getscheduler(0)) < 0 ||
        sched_getparam(0, &s->param) != 0) {
        fprintf(stderr, RTPROBE_NAME " interleave: cannot read the scheduling state: %s\n", strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    for (int i = 0; i < cfg->narms; i++) {
        int rc = rtp_rt_apply(&cfg->arms[i].rt);
        if (rc != RTP_EXIT_OK) {
            fprintf(stderr, RTPROBE_NAME " interleave: (arm %d)\n", i);
            return rc;
        }
        if (use_arm(s, i, &(struct rtp_rt_options){.cpu = -1}) != 0) /* back to the process's own */
            return RTP_EXIT_FAILURE;
    }
    return RTP_EXIT_OK;
}

/* Arm i's pairing header: its index, the arms, B and its blocks' positions in the order. */
static void pairing_json(const struct interleave_config *cfg, int arm, struct rtp_json *j)
{
    rtp_json_begin_object(j, NULL);
    rtp_json_i64(j, "arm", arm);
    rtp_json_i64(j, "arms", cfg->narms);
    rtp_json_i64(j, "block_samples", cfg->block);
    rtp_json_begin_array(j, "blocks");
    for (size_t k = 0; k < cfg->norder; k++)
        if (cfg->order[k] == arm)
            rtp_json_i64(j, NULL, (int64_t)k);
    rtp_json_end_array(j);
    rtp_json_end_object(j);
}

/* Open every arm's file (header with pairing) and reserve its records. */
static int open_arms(const struct interleave_config *cfg, struct rtp_run *runs)
{
    for (int i = 0; i < cfg->narms; i++) {
        const struct exec_config *a = &cfg->arms[i];
        struct rtp_sf_header header;
        struct rtp_json pairing;
        rtp_json_init(&pairing);
        exec_describe(a, &runs[i], &header);
        pairing_json(cfg, i, &pairing);
        header.pairing_json = rtp_json_result(&pairing);
        int rc = header.pairing_json ? rtp_run_open(&runs[i], a->output, &header, RTP_SF_BUFFER)
                                     : RTP_EXIT_FAILURE;
        rtp_json_free(&pairing);
        if (rc != RTP_EXIT_OK)
            return RTP_EXIT_FAILURE;
        if (rtp_sf_reserve(runs[i].w, (size_t)a->iterations) != 0) {
            fprintf(stderr, RTPROBE_NAME ": cannot allocate memory for %lld records\n", (long long)a->iterations);
            return RTP_EXIT_FAILURE;
        }
    }
    return RTP_EXIT_OK;
}

/* The blocks in order. 0, -1 after a stop request, -2 when an arm's settings were refused. */
/* Arm i's --write files, written before its block when the block before was another arm's. */
static int write_arm_files(const struct interleave_config *cfg, int i, int64_t *switched)
{
    for (int w = 0; w < cfg->nwrites; w++) {
        const struct interleave_write *x = &cfg->writes[w];
        if (x->arm != i)
            continue;
        FILE *f = fopen(x->path, "w");
        if (!f || fputs(x->value, f) == EOF || fclose(f) != 0) {
            fprintf(stderr, RTPROBE_NAME " interleave: arm %d cannot write %s into %s: %s\n", i, x->value,
                    x->path, strerror(errno));
            return -1;
        }
    }
    if (cfg->nwrites)
        switched[i]++;
    return 0;
}

static int measure(const struct interleave_config *cfg, const struct thread_state *s, struct rtp_run *runs,
                   int64_t *switched)
{
    const int64_t pause_ns = llround(cfg->arms[0].pause_ms * 1e6);
    bool warm[INTERLEAVE_MAX_ARMS] = {false};
    for (size_t k = 0; k < cfg->norder; k++) {
        const int i = cfg->order[k];
        const struct exec_config *a = &cfg->arms[i];
        if (use_arm(s, i, &a->rt) != 0)
            return -2;
        if ((k == 0 || cfg->order[k - 1] != i) && write_arm_files(cfg, i, switched) != 0)
            return -2;
        if (!warm[i]) {
            warm[i] = true;
            exec_warm_up(a); /* not recorded */
            if (rtp_sleep_ns(pause_ns) != 0)
                return -1;
        }
        for (int64_t c = 0; c < cfg->block; c++) {
            union rtp_sf_value rec[EXEC_NCOLUMNS];
            exec_timed_call(a, rec);
            rtp_sf_append(runs[i].w, rec); /* errors are reported by rtp_sf_finish */
            if (rtp_stop_signal)
                return -1;
            bool last = k + 1 == cfg->norder && c + 1 == cfg->block;
            if (!last && rtp_sleep_ns(pause_ns) != 0)
                return -1;
        }
        if (cfg->arms[i].iterations == (int64_t)rtp_sf_count(runs[i].w))
            rtp_run_finished_at(&runs[i]); /* the arm's last block */
    }
    return 0;
}

/* Write every arm's trailer and file; on a failure, remove the files already written. */
static int finish_arms(const struct interleave_config *cfg, struct rtp_run *runs, const int64_t *switched)
{
    for (int i = 0; i < cfg->narms; i++) {
        rtp_json_begin_object(&runs[i].trailer, NULL);
        rtp_json_string(&runs[i].trailer, "finished_at", runs[i].finished_at);
        if (cfg->nwrites)
            rtp_json_i64(&runs[i].trailer, "blocks_switched_to", switched[i]); /* its --write files written */
        rtp_json_end_object(&runs[i].trailer);
        if (rtp_run_finish(&runs[i]) != RTP_EXIT_OK) {
            for (int j = 0; j < i; j++)
                unlink(cfg->arms[j].output);
            fprintf(stderr, RTPROBE_NAME " interleave: arm %d's file could not be written; no file left\n", i);
            return RTP_EXIT_FAILURE;
        }
    }
    return RTP_EXIT_OK;
}

static int run(const void *arg)
{
    const struct interleave_config *cfg = arg;
    struct rtp_run runs[INTERLEAVE_MAX_ARMS];
    struct thread_state state;
    int rc = RTP_EXIT_OK;
    for (int i = 0; i < cfg->narms; i++)
        if (rtp_run_start(&runs[i]) != RTP_EXIT_OK)
            rc = RTP_EXIT_FAILURE;
    if (rc == RTP_EXIT_OK)
        rc = check_settings(cfg, &state);
    if (rc == RTP_EXIT_OK)
        rc = open_arms(cfg, runs);
    if (rc == RTP_EXIT_OK) {
        int64_t switched[INTERLEAVE_MAX_ARMS] = {0};
        int m = measure(cfg, &state, runs, switched);
        rc = m == -1   ? rtp_run_stopped("no sample file written")
             : m == -2 ? RTP_EXIT_FAILURE
                       : finish_arms(cfg, runs, switched);
    }
    for (int i = 0; i < cfg->narms; i++)
        rtp_run_free(&runs[i]); /* removes what is unfinished */
    return rc;
}

int rtp_cmd_interleave(int argc, char **argv)
{
    struct interleave_config cfg;
    int rc = interleave_parse_args(argc, argv, &cfg);
    rc = rtp_subcommand_main(rc, cfg.help, print_help, run, &cfg);
    interleave_config_free(&cfg);
    return rc;
}
