/* rtprobe gpio: latency of GPIO writes and reads through the Linux GPIO
 * character device (uAPI v2), as nerves_rt_perf measured on a Raspberry Pi
 * with Circuits.GPIO, and `gpio port`: the same line driven for the BEAM
 * harness over a port (docs/gpio.md).
 *
 *   write  per iteration: set 1 (timed), set 0 (timed); columns write_1, write_0, cpu
 *   read   per iteration: one read (timed); columns duration, value, cpu
 *   blink  an LED loop on an absolute schedule: 1 at each period's start, 0 at its middle;
 *          columns period (between consecutive rising edges), lateness (of the rising edge), cpu
 *   With --start-times a last column start (CLOCK_MONOTONIC ns): the write of 1's start (write_0 starts at
 *   start + write_1, the same clock reading), the read's start, blink's deadline. --mark-worst K marks the
 *   samples entering the K worst of the explained value: write_1, duration, lateness (rtscope setting explain).
 *   port   no sample file: {packet,2} frames on stdin/stdout, "1"/"0" set -> "k", "r" -> "0"/"1";
 *          first frame "ready", or "E<message>" and exit 1 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/gpio.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "rtprobe.h"
#include "samplefile.h"
#include "subcommand.h"
#include "util.h"
#include "worst.h"

#define GPIO_MAX_ITERATIONS INT64_C(100000000)
#define GPIO_MAX_MS 3600000.0
#define CONSUMER "rtscope"

struct gpio_variant {
    const char *name;
    bool output;       /* the line is requested as an output */
    bool sample_file;  /* writes one (port does not) */
    const char *help;
};

static const struct gpio_variant variants[] = {
    {"write", true, true, "set the line to 1, then 0, each call timed (columns write_1, write_0)"},
    {"read", false, true, "read the line (an input), each call timed (columns duration, value)"},
    {"blink", true, true, "an LED loop: 1 at each --period-ms start, 0 at its middle (period jitter)"},
    {"port", true, false, "drive the line for the BEAM harness over a port ({packet,2} frames)"},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

struct gpio_config {
    const struct gpio_variant *variant;
    const char *chip;
    int64_t line;
    int64_t iterations;
    double pause_ms;
    double period_ms;
    const char *output;
    bool start_times;   /* --start-times: a last column start */
    int64_t mark_worst; /* --mark-worst K */
    struct rtp_rt_options rt;
    int help;
};

/* What a measured variant's loop needs besides the config: the sample file and the worst-sample marks. */
struct gpio_sink {
    struct rtp_sf_writer *w;
    struct rtp_worst worst;
    int marker_fd; /* -1: no marks */
};

static const struct rtp_choices choices = {"gpio", "variant", variants, NVARIANTS, sizeof variants[0]};

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " gpio VARIANT --chip /dev/gpiochipN --line N --output FILE [options]\n"
           "\n"
           "GPIO write and read latency through the Linux GPIO character device (uAPI v2).\n"
           "\n"
           "variants:\n");
    for (size_t k = 0; k < NVARIANTS; k++)
        printf("  %-6s %s\n", variants[k].name, variants[k].help);
    printf("\n"
           "options:\n"
           "  --chip PATH        the GPIO chip (default /dev/gpiochip0)\n"
           "  --line N           the line's offset on the chip (default 0)\n"
           "  --output FILE      sample file to write (required, except for port)\n"
           "  --iterations N     recorded calls, or periods for blink (default 1000)\n"
           "  --pause-ms X       pause between calls in ms, 0 for none (default 1)\n"
           "  --period-ms X      blink period in ms (default 10)\n"
           "  --start-times      add a column start, CLOCK_MONOTONIC ns: the write of 1's or\n"
           "                     the read's start, blink's deadline (what rtscope explain\n"
           "                     matches kernel events against)\n"
           "  --mark-worst K     when a sample enters the K worst (write_1, duration, blink's\n"
           "                     lateness), append its window (start end cpu) to the file in\n"
           "                     $RTSCOPE_MARKS\n"
           "%s"
           "  --help             this text\n"
           "\n"
           "exit codes: 0 written, 1 run failed (no such chip or line, line busy, no permission),\n"
           "2 usage error\n",
           rtp_rt_options_help);
}

static int parse_args(int argc, char **argv, struct gpio_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->chip = "/dev/gpiochip0";
    cfg->iterations = 1000;
    cfg->pause_ms = 1.0;
    cfg->period_ms = 10.0;
    rtp_rt_options_init(&cfg->rt);
    const struct rtp_common_args common = {"gpio", &cfg->help, &cfg->rt, &cfg->output};
    int chosen = -1;

    for (int i = 1; i < argc && !cfg->help; i++) {
        const char *v;
        int m;
        if ((m = rtp_common_option(argc, argv, &i, &common)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_nonempty("gpio", argc, argv, &i, "--chip", &v)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            cfg->chip = v;
        } else if ((m = rtp_option_value(argc, argv, &i, "--line", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--line", v, 0, 511, &cfg->line) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--iterations", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--iterations", v, 1, GPIO_MAX_ITERATIONS, &cfg->iterations) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--pause-ms", &v)) != 0) {
            if (m < 0 || rtp_option_f64("--pause-ms", v, 0.0, GPIO_MAX_MS, &cfg->pause_ms) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--period-ms", &v)) != 0) {
            if (m < 0 || rtp_option_f64("--period-ms", v, 0.01, GPIO_MAX_MS, &cfg->period_ms) != 0)
                return RTP_EXIT_USAGE;
        } else if (strcmp(argv[i], "--start-times") == 0) {
            cfg->start_times = true;
        } else if ((m = rtp_option_value(argc, argv, &i, "--mark-worst", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--mark-worst", v, 0, 1000000, &cfg->mark_worst) != 0)
                return RTP_EXIT_USAGE;
        } else if (rtp_unknown_option("gpio", argv[i]) || rtp_choice_set(&choices, argv[i], &chosen) != 0) {
            return RTP_EXIT_USAGE;
        }
    }
    if (cfg->help)
        return 0;
    if (chosen < 0)
        return rtp_choice_missing(&choices);
    cfg->variant = &variants[chosen];
    if (cfg->variant->sample_file && !cfg->output) {
        fprintf(stderr, RTPROBE_NAME " gpio: --output FILE is required\n");
        return RTP_EXIT_USAGE;
    }
    return 0;
}

/* ---- the line ------------------------------------------------------------- */

static void list_chips(char *buf, size_t len)
{
    glob_t g;
    buf[0] = '\0';
    if (glob("/dev/gpiochip*", 0, NULL, &g) != 0) {
        snprintf(buf, len, "none");
        return;
    }
    size_t used = 0;
    for (size_t k = 0; k < g.gl_pathc && used < len; k++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", k ? ", " : "", g.gl_pathv[k]);
    globfree(&g);
}

/* The line's file descriptor, or -1 with the reason in err. */
static int open_line(const char *chip, int64_t line, bool output, char *err, size_t errlen)
{
    int fd = open(chip, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        char chips[512];
        list_chips(chips, sizeof chips);
        if (e == ENOENT)
            snprintf(err, errlen, "no GPIO chip %s; chips here: %s", chip, chips);
        else if (e == EACCES || e == EPERM)
            snprintf(err, errlen, "no permission to open %s: run as root or as a member of its group", chip);
        else
            snprintf(err, errlen, "cannot open %s: %s", chip, strerror(e));
        return -1;
    }
    struct gpiochip_info info;
    memset(&info, 0, sizeof info);
    if (ioctl(fd, GPIO_GET_CHIPINFO_IOCTL, &info) != 0) {
        snprintf(err, errlen, "%s is not a GPIO chip (%s)", chip, strerror(errno));
        close(fd);
        return -1;
    }
    if (line < 0 || line >= (int64_t)info.lines) {
        snprintf(err, errlen, "no line %lld on %s: %s (%s) has %u lines, 0..%u", (long long)line, chip,
                 info.name, info.label, info.lines, info.lines ? info.lines - 1 : 0);
        close(fd);
        return -1;
    }
    struct gpio_v2_line_request req;
    memset(&req, 0, sizeof req);
    req.offsets[0] = (uint32_t)line;
    req.num_lines = 1;
    snprintf(req.consumer, sizeof req.consumer, CONSUMER);
    req.config.flags = output ? GPIO_V2_LINE_FLAG_OUTPUT : GPIO_V2_LINE_FLAG_INPUT;
    if (ioctl(fd, GPIO_V2_GET_LINE_IOCTL, &req) != 0) {
        int e = errno;
        if (e == EBUSY) {
            struct gpio_v2_line_info li;
            memset(&li, 0, sizeof li);
            li.offset = (uint32_t)line;
            const char *who = ioctl(fd, GPIO_V2_GET_LINEINFO_IOCTL, &li) == 0 && li.consumer[0]
                                  ? li.consumer
                                  : "unknown";
            snprintf(err, errlen, "line %lld of %s is busy: another consumer holds it (%s)", (long long)line,
                     chip, who);
        } else {
            snprintf(err, errlen, "cannot request line %lld of %s: %s", (long long)line, chip, strerror(e));
        }
        close(fd);
        return -1;
    }
    close(fd);
    return req.fd;
}

static inline int set_value(int fd, int value)
{
    struct gpio_v2_line_values v = {.bits = (uint64_t)value, .mask = 1};
    return ioctl(fd, GPIO_V2_LINE_SET_VALUES_IOCTL, &v);
}

static inline int get_value(int fd)
{
    struct gpio_v2_line_values v = {.bits = 0, .mask = 1};
    return ioctl(fd, GPIO_V2_LINE_GET_VALUES_IOCTL, &v) == 0 ? (int)(v.bits & 1) : -1;
}

/* ---- port: the BEAM's way to the line ------------------------------------- */

static int read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n == 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
        if (n > 0)
            got += (size_t)n;
    }
    return 1;
}

static int send_frame(const char *data, size_t len)
{
    unsigned char frame[2 + 256];
    if (len > 256)
        len = 256;
    frame[0] = (unsigned char)(len >> 8);
    frame[1] = (unsigned char)(len & 0xff);
    memcpy(frame + 2, data, len);
    return write(STDOUT_FILENO, frame, len + 2) == (ssize_t)(len + 2) ? 0 : -1;
}

static int run_port(const struct gpio_config *cfg)
{
    char err[400];
    int fd = open_line(cfg->chip, cfg->line, true, err, sizeof err);
    if (fd < 0) {
        char msg[402];
        int n = snprintf(msg, sizeof msg, "E%s", err);
        send_frame(msg, (size_t)(n < (int)sizeof msg ? n : (int)sizeof msg - 1));
        return RTP_EXIT_FAILURE;
    }
    if (send_frame("ready", 5) != 0)
        return RTP_EXIT_FAILURE;
    for (;;) {
        unsigned char head[2], cmd[16];
        int r = read_full(STDIN_FILENO, head, 2);
        if (r <= 0)
            break; /* the port closed: release the line */
        size_t len = ((size_t)head[0] << 8) | head[1];
        if (len == 0 || len > sizeof cmd || read_full(STDIN_FILENO, cmd, len) <= 0)
            break;
        char reply;
        if (cmd[0] == '1' || cmd[0] == '0')
            reply = set_value(fd, cmd[0] - '0') == 0 ? 'k' : 'e';
        else if (cmd[0] == 'r') {
            int v = get_value(fd);
            reply = v < 0 ? 'e' : (char)('0' + v);
        } else
            reply = '?';
        if (send_frame(&reply, 1) != 0)
            break;
    }
    close(fd);
    return RTP_EXIT_OK;
}

/* ---- the measured variants ------------------------------------------------ */

/* The last column, start, only with --start-times. */
static const struct rtp_sf_column write_columns[] = {{"write_1", "ns", RTP_SF_I64},
                                                     {"write_0", "ns", RTP_SF_I64},
                                                     {"cpu", "", RTP_SF_I64},
                                                     {"start", "ns", RTP_SF_I64}};
static const struct rtp_sf_column read_columns[] = {{"duration", "ns", RTP_SF_I64},
                                                    {"value", "", RTP_SF_I64},
                                                    {"cpu", "", RTP_SF_I64},
                                                    {"start", "ns", RTP_SF_I64}};
static const struct rtp_sf_column blink_columns[] = {{"period", "ns", RTP_SF_I64},
                                                     {"lateness", "ns", RTP_SF_I64},
                                                     {"cpu", "", RTP_SF_I64},
                                                     {"start", "ns", RTP_SF_I64}};

/* One sample: appended, and marked when its explained value (from start, for value ns) enters the worst. */
static void record(struct gpio_sink *out, union rtp_sf_value rec[4], int64_t start, int64_t value)
{
    rec[3].i = start;
    rtp_sf_append(out->w, rec); /* errors are reported by rtp_sf_finish */
    if (out->marker_fd >= 0 && rtp_worst_offer(&out->worst, value))
        rtp_mark_window(out->marker_fd, start, start + value);
}

static int measure(const struct gpio_config *cfg, int fd, struct gpio_sink *out)
{
    const bool is_write = strcmp(cfg->variant->name, "write") == 0;
    const int64_t pause_ns = llround(cfg->pause_ms * 1e6);
    for (int64_t k = -1; k < cfg->iterations; k++) { /* k = -1: the warm-up, not recorded */
        struct timespec t0, t1, t2;
        union rtp_sf_value rec[4];
        int failed;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (is_write) {
            failed = set_value(fd, 1);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            failed |= set_value(fd, 0);
            clock_gettime(CLOCK_MONOTONIC, &t2);
            rec[0].i = rtp_ts_diff_ns(t1, t0);
            rec[1].i = rtp_ts_diff_ns(t2, t1);
        } else {
            int v = get_value(fd);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            failed = v < 0;
            rec[0].i = rtp_ts_diff_ns(t1, t0);
            rec[1].i = v;
        }
        if (failed) {
            fprintf(stderr, RTPROBE_NAME " gpio: the line stopped answering: %s\n", strerror(errno));
            return RTP_EXIT_FAILURE;
        }
        rec[2].i = sched_getcpu();
        if (k >= 0)
            record(out, rec, rtp_ts_to_ns(t0), rec[0].i);
        if (rtp_stop_signal || (k + 1 < cfg->iterations && rtp_sleep_ns(pause_ns) != 0))
            return -1;
    }
    return RTP_EXIT_OK;
}

static int blink(const struct gpio_config *cfg, int fd, struct gpio_sink *out)
{
    const int64_t period = llround(cfg->period_ms * 1e6);
    struct timespec start, deadline, previous = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &start);
    deadline = rtp_ts_add_ns(start, period);
    for (int64_t k = -1; k < cfg->iterations; k++) { /* k = -1: the first edge has no period yet */
        struct timespec rise;
        if (rtp_sleep_until(deadline) != 0)
            return -1;
        if (set_value(fd, 1) != 0)
            goto failed;
        clock_gettime(CLOCK_MONOTONIC, &rise);
        if (k >= 0) {
            union rtp_sf_value rec[4];
            rec[0].i = rtp_ts_diff_ns(rise, previous);
            rec[1].i = rtp_ts_diff_ns(rise, deadline);
            rec[2].i = sched_getcpu();
            record(out, rec, rtp_ts_to_ns(deadline), rec[1].i);
        }
        previous = rise;
        if (rtp_sleep_until(rtp_ts_add_ns(deadline, period / 2)) != 0)
            return -1;
        if (set_value(fd, 0) != 0)
            goto failed;
        deadline = rtp_ts_add_ns(deadline, period);
    }
    return RTP_EXIT_OK;
failed:
    fprintf(stderr, RTPROBE_NAME " gpio: the line stopped answering: %s\n", strerror(errno));
    return RTP_EXIT_FAILURE;
}

static int run(const void *arg)
{
    const struct gpio_config *cfg = arg;
    if (!cfg->variant->sample_file)
        return run_port(cfg);
    char err[400];
    struct rtp_run sf;
    struct gpio_sink out = {.marker_fd = cfg->mark_worst > 0 ? rtp_marker_open(RTPROBE_NAME " gpio") : -1};
    if (out.marker_fd == -2)
        return RTP_EXIT_FAILURE;
    if (rtp_worst_init(&out.worst, out.marker_fd >= 0 ? (int)cfg->mark_worst : 0) != 0) {
        fprintf(stderr, RTPROBE_NAME ": out of memory\n");
        if (out.marker_fd >= 0)
            close(out.marker_fd);
        return RTP_EXIT_FAILURE;
    }
    int fd = -1;
    int rc = rtp_run_start(&sf);
    if (rc != RTP_EXIT_OK || (rc = rtp_rt_apply(&cfg->rt)) != RTP_EXIT_OK)
        goto out;
    fd = open_line(cfg->chip, cfg->line, cfg->variant->output, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, RTPROBE_NAME " gpio: %s\n", err);
        rc = RTP_EXIT_FAILURE;
        goto out;
    }
    const bool is_blink = strcmp(cfg->variant->name, "blink") == 0;
    rtp_json_begin_object(&sf.settings, NULL);
    rtp_rt_settings_json(&cfg->rt, &sf.settings);
    rtp_json_end_object(&sf.settings);
    rtp_json_begin_object(&sf.params, NULL);
    rtp_json_string(&sf.params, "chip", cfg->chip);
    rtp_json_i64(&sf.params, "line", cfg->line);
    rtp_json_i64(&sf.params, "iterations", cfg->iterations);
    if (is_blink)
        rtp_json_f64(&sf.params, "period_ms", cfg->period_ms);
    else
        rtp_json_f64(&sf.params, "pause_ms", cfg->pause_ms);
    rtp_json_end_object(&sf.params);
    const struct rtp_sf_column *columns = is_blink ? blink_columns
                                          : cfg->variant->output ? write_columns
                                                                 : read_columns;
    const struct rtp_sf_header header = {.workload = "gpio",
                                         .variant = cfg->variant->name,
                                         .columns = columns,
                                         .ncolumns = cfg->start_times ? 4 : 3}; /* start: the last column */
    if ((rc = rtp_run_open(&sf, cfg->output, &header, RTP_SF_BUFFER)) != RTP_EXIT_OK)
        goto out;
    out.w = sf.w;
    if (rtp_sf_reserve(sf.w, (size_t)cfg->iterations) != 0) {
        fprintf(stderr, RTPROBE_NAME ": cannot allocate memory for %lld records\n",
                (long long)cfg->iterations);
        rc = RTP_EXIT_FAILURE;
        goto out;
    }
    rc = is_blink ? blink(cfg, fd, &out) : measure(cfg, fd, &out);
    if (rc < 0) {
        rc = rtp_run_stopped("no sample file written");
        goto out;
    }
    if (rc != RTP_EXIT_OK)
        goto out;
    set_value(fd, 0); /* leave the line low */
    rtp_json_begin_object(&sf.trailer, NULL);
    rtp_json_string(&sf.trailer, "finished_at", rtp_run_finished_at(&sf));
    rtp_json_end_object(&sf.trailer);
    rc = rtp_run_finish(&sf);
out:
    if (fd >= 0)
        close(fd);
    rtp_run_free(&sf);
    rtp_worst_free(&out.worst);
    if (out.marker_fd >= 0)
        close(out.marker_fd);
    return rc;
}

int rtp_cmd_gpio(int argc, char **argv)
{
    struct gpio_config cfg;
    int rc = parse_args(argc, argv, &cfg);
    return rtp_subcommand_main(rc, cfg.help, print_help, run, &cfg);
}
