#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rtprobe.h"

/* ---- strict argument parsing ------------------------------------------ */

enum rtp_parse_status rtp_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out)
{
    if (!text || !*text)
        return RTP_PARSE_EMPTY;
    const char *digits = (text[0] == '-' || text[0] == '+') ? text + 1 : text;
    if (!isdigit((unsigned char)digits[0]))
        return RTP_PARSE_SYNTAX; /* strtoll would accept spaces and a lone sign */
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    if (*end != '\0')
        return RTP_PARSE_SYNTAX;
    if (errno == ERANGE || v < min || v > max)
        return RTP_PARSE_RANGE;
    *out = (int64_t)v;
    return RTP_PARSE_OK;
}

enum rtp_parse_status rtp_parse_f64(const char *text, double min, double max, double *out)
{
    if (!text || !*text)
        return RTP_PARSE_EMPTY;
    /* Only plain decimal notation: strtod also takes "nan", "inf", "0x1p3"
     * and leading spaces. */
    bool digit = false;
    for (const char *p = text; *p; p++) {
        if (isdigit((unsigned char)*p))
            digit = true;
        else if (!strchr("+-.eE", *p))
            return RTP_PARSE_SYNTAX;
    }
    if (!digit)
        return RTP_PARSE_SYNTAX;
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (*end != '\0')
        return RTP_PARSE_SYNTAX;
    if ((errno == ERANGE && fabs(v) > 1.0) || !isfinite(v) || v < min || v > max)
        return RTP_PARSE_RANGE;
    *out = v;
    return RTP_PARSE_OK;
}

int rtp_option_i64(const char *option, const char *text, int64_t min, int64_t max, int64_t *out)
{
    enum rtp_parse_status st = rtp_parse_i64(text, min, max, out);
    if (st == RTP_PARSE_OK)
        return 0;
    if (st == RTP_PARSE_RANGE)
        fprintf(stderr, RTPROBE_NAME ": %s: %s is out of range, expected an integer in %lld..%lld\n",
                option, text, (long long)min, (long long)max);
    else
        fprintf(stderr, RTPROBE_NAME ": %s: expected an integer in %lld..%lld, got '%s'\n", option,
                (long long)min, (long long)max, text ? text : "");
    return -1;
}

int rtp_option_f64(const char *option, const char *text, double min, double max, double *out)
{
    enum rtp_parse_status st = rtp_parse_f64(text, min, max, out);
    if (st == RTP_PARSE_OK)
        return 0;
    char lo[32], hi[32];
    snprintf(lo, sizeof lo, "%.15g", min);
    snprintf(hi, sizeof hi, "%.15g", max);
    if (st == RTP_PARSE_RANGE)
        fprintf(stderr, RTPROBE_NAME ": %s: %s is out of range, expected a number in %s..%s\n",
                option, text, lo, hi);
    else
        fprintf(stderr, RTPROBE_NAME ": %s: expected a number in %s..%s, got '%s'\n", option, lo,
                hi, text ? text : "");
    return -1;
}

int rtp_option_value(int argc, char **argv, int *i, const char *name, const char **value)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '=') {
        *value = arg + n + 1;
        return 1;
    }
    if (arg[n] != '\0')
        return 0; /* "--n" must not match "--name" */
    if (*i + 1 >= argc) {
        fprintf(stderr, RTPROBE_NAME ": %s needs a value\n", name);
        return -1;
    }
    *i += 1;
    *value = argv[*i];
    return 1;
}

/* ---- time -------------------------------------------------------------- */

int64_t rtp_ts_to_ns(struct timespec ts)
{
    return (int64_t)ts.tv_sec * RTP_NSEC_PER_SEC + ts.tv_nsec;
}

struct timespec rtp_ns_to_ts(int64_t ns)
{
    struct timespec ts;
    int64_t sec = ns / RTP_NSEC_PER_SEC;
    int64_t rem = ns % RTP_NSEC_PER_SEC;
    if (rem < 0) { /* C division truncates toward zero */
        rem += RTP_NSEC_PER_SEC;
        sec -= 1;
    }
    ts.tv_sec = (time_t)sec;
    ts.tv_nsec = (long)rem;
    return ts;
}

struct timespec rtp_ts_add_ns(struct timespec ts, int64_t ns)
{
    struct timespec d = rtp_ns_to_ts(ns);
    ts.tv_sec += d.tv_sec;
    ts.tv_nsec += d.tv_nsec;
    if (ts.tv_nsec >= RTP_NSEC_PER_SEC) {
        ts.tv_nsec -= RTP_NSEC_PER_SEC;
        ts.tv_sec += 1;
    }
    return ts;
}

int64_t rtp_ts_diff_ns(struct timespec end, struct timespec start)
{
    return (int64_t)(end.tv_sec - start.tv_sec) * RTP_NSEC_PER_SEC + (end.tv_nsec - start.tv_nsec);
}

int rtp_ts_cmp(struct timespec a, struct timespec b)
{
    if (a.tv_sec != b.tv_sec)
        return a.tv_sec < b.tv_sec ? -1 : 1;
    if (a.tv_nsec != b.tv_nsec)
        return a.tv_nsec < b.tv_nsec ? -1 : 1;
    return 0;
}

int64_t rtp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return rtp_ts_to_ns(ts);
}

int rtp_sleep_ns(int64_t ns)
{
    if (ns <= 0)
        return 0;
    struct timespec req = rtp_ns_to_ts(ns), rem;
    for (;;) {
        int rc = clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem);
        if (rc == 0)
            return 0;
        if (rc != EINTR || rtp_stop_signal)
            return -1;
        req = rem;
    }
}

int rtp_sleep_until(struct timespec deadline)
{
    for (;;) {
        int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL);
        if (rc == 0)
            return 0;
        if (rc != EINTR || rtp_stop_signal)
            return -1;
    }
}

int rtp_format_rfc3339(struct timespec realtime, char *buf, size_t len)
{
    struct tm tm;
    time_t sec = realtime.tv_sec;
    if (!gmtime_r(&sec, &tm))
        return -1;
    char date[24];
    if (strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return -1;
    int n = snprintf(buf, len, "%s.%03ldZ", date, realtime.tv_nsec / 1000000L);
    return (n < 0 || (size_t)n >= len) ? -1 : 0;
}

int rtp_now_rfc3339(char *buf, size_t len)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    return rtp_format_rfc3339(ts, buf, len);
}

/* ---- stop on SIGINT/SIGTERM -------------------------------------------- */

volatile sig_atomic_t rtp_stop_signal = 0;

static void on_stop_signal(int sig)
{
    rtp_stop_signal = sig;
}

int rtp_install_stop_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: sleeps must return EINTR so loops notice the stop. */
    const int signals[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t k = 0; k < sizeof signals / sizeof signals[0]; k++)
        if (sigaction(signals[k], &sa, NULL) != 0)
            return -1;
    return 0;
}

/* ---- real-time setup ---------------------------------------------------- */

const char rtp_rt_options_help[] =
    "  --priority N       run under SCHED_FIFO with priority N (1..99); exit 1 if\n"
    "                     the kernel refuses\n"
    "  --cpu N            pin to CPU N (one this process may use)\n"
    "  --mlock            lock current and future memory (mlockall); exit 1 if the\n"
    "                     kernel refuses\n";

void rtp_rt_options_init(struct rtp_rt_options *o)
{
    o->priority = 0;
    o->cpu = -1;
    o->mlock = false;
}

int rtp_rt_parse_option(int argc, char **argv, int *i, struct rtp_rt_options *o)
{
    const char *v;
    int m;
    int64_t n;
    if (strcmp(argv[*i], "--mlock") == 0) {
        o->mlock = true;
        return 1;
    }
    if ((m = rtp_option_value(argc, argv, i, "--priority", &v)) != 0) {
        if (m < 0)
            return -1;
        int lo = sched_get_priority_min(SCHED_FIFO);
        int hi = sched_get_priority_max(SCHED_FIFO);
        if (lo < 0 || hi < 0) {
            lo = 1;
            hi = 99;
        }
        if (rtp_option_i64("--priority", v, lo, hi, &n) != 0)
            return -1;
        o->priority = (int)n;
        return 1;
    }
    if ((m = rtp_option_value(argc, argv, i, "--cpu", &v)) != 0) {
        if (m < 0)
            return -1;
        if (rtp_option_i64("--cpu", v, 0, CPU_SETSIZE - 1, &n) != 0)
            return -1;
        o->cpu = (int)n;
        return 1;
    }
    return 0;
}

int rtp_format_cpuset(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return -1;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, set))
            continue;
        int last = c;
        while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, set))
            last++;
        int n = (last == c) ? snprintf(buf + used, len - used, "%s%d", used ? "," : "", c)
                            : snprintf(buf + used, len - used, "%s%d-%d", used ? "," : "", c, last);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
        c = last;
    }
    return 0;
}

int rtp_rt_apply(const struct rtp_rt_options *o)
{
    if (o->cpu >= 0) {
        cpu_set_t allowed;
        CPU_ZERO(&allowed);
        if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
            fprintf(stderr, RTPROBE_NAME ": cannot read the CPU affinity: %s\n", strerror(errno));
            return RTP_EXIT_FAILURE;
        }
        if (!CPU_ISSET(o->cpu, &allowed)) {
            char list[256];
            if (rtp_format_cpuset(&allowed, list, sizeof list) != 0)
                snprintf(list, sizeof list, "(too many to list)");
            fprintf(stderr,
                    RTPROBE_NAME ": --cpu %d: CPU %d does not exist, is offline or is not allowed "
                                 "for this process; allowed CPUs: %s\n",
                    o->cpu, o->cpu, list);
            return RTP_EXIT_USAGE;
        }
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(o->cpu, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0) {
            fprintf(stderr, RTPROBE_NAME ": pinning to CPU %d refused by the kernel: %s\n", o->cpu,
                    strerror(errno));
            return RTP_EXIT_FAILURE;
        }
    }
    if (o->mlock && mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        fprintf(stderr, RTPROBE_NAME ": mlockall refused by the kernel: %s\n", strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    if (o->priority > 0) {
        struct sched_param sp;
        memset(&sp, 0, sizeof sp);
        sp.sched_priority = o->priority;
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
            fprintf(stderr, RTPROBE_NAME ": SCHED_FIFO priority %d refused by the kernel: %s\n",
                    o->priority, strerror(errno));
            return RTP_EXIT_FAILURE;
        }
    }
    return RTP_EXIT_OK;
}

void rtp_rt_settings_json(const struct rtp_rt_options *o, struct rtp_json *j)
{
    if (o->priority > 0)
        rtp_json_i64(j, "rt_priority", o->priority);
    if (o->cpu >= 0)
        rtp_json_i64(j, "cpu", o->cpu);
    rtp_json_bool(j, "mlock", o->mlock);
}
