/* rtprobe storage: the storage I/O method of study 4.
 *
 * One test file is created under --dir and opened once. Each pass goes over
 * the whole file in blocks (pwrite or pread at increasing offsets); in
 * write_sync mode the pass ends with fsync (or fdatasync). Every pass's time
 * is one record; every block's time goes into a bounded histogram kept in the
 * trailer (a 1 GiB file in 4 KiB blocks is 262,144 blocks per pass: keeping
 * them all would cost more memory than the file's page cache).
 *
 * The file is written once in full before the first timed pass (not timed),
 * so every pass overwrites or reads allocated blocks and the passes are
 * alike. With --read-back (read mode) the file is then dropped from the page
 * cache and read back once, untimed: the timed reads find the pages a
 * sequential read of the file leaves (what fio's pre_read does), not the
 * pages the writes left, which on some kernels are smaller folios and
 * cost up to 4x more per 4 KiB copy (docs/storage.md). The probe removes the file on every exit path it controls,
 * including SIGINT, SIGTERM and SIGHUP. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "rtprobe.h"
#include "samplefile.h"
#include "subcommand.h"
#include "util.h"

#define STORAGE_MAX_SIZE (INT64_C(1) << 40)        /* 1 TiB */
#define STORAGE_MAX_BLOCK (INT64_C(64) << 20)      /* 64 MiB */
#define STORAGE_MAX_REPETITIONS INT64_C(10000000)  /* records stay in memory: 24 bytes each */
#define STORAGE_MAX_BUCKETS INT64_C(10000000)
#define STORAGE_DIRECT_ALIGN 4096                  /* buffer alignment for O_DIRECT */
#define STORAGE_DIRECT_MULTIPLE 512                /* smallest logical block size */
#define STORAGE_MAX_OVERFLOW_CYCLES 100
#define DROP_CACHES_PATH "/proc/sys/vm/drop_caches"

enum storage_mode { MODE_WRITE_SYNC, MODE_WRITE, MODE_READ, NMODES };

static const struct {
    const char *name;
    const char *help;
} modes[NMODES] = {
    {"write_sync", "write every block, then fsync, per pass"},
    {"write", "write every block, per pass (no sync: the page cache absorbs it)"},
    {"read", "read every block, per pass (page cache not dropped unless --drop-caches)"},
};

struct storage_config {
    int mode; /* -1 until given */
    const char *dir;
    const char *output;
    int64_t size;
    int64_t repetitions;
    int64_t block_size;
    bool direct;
    bool fdatasync;
    bool drop_caches;
    bool read_back;
    int64_t bucket_ns;
    int64_t buckets;
    struct rtp_rt_options rt;
    int help;
};

/* ---- arguments ------------------------------------------------------------ */

static const struct rtp_choices choices = {"storage", "mode", modes, NMODES, sizeof modes[0]};

static void print_help(void)
{
    printf("usage: " RTPROBE_NAME " storage MODE --output FILE [options]\n"
           "\n"
           "Create one test file under --dir, open it once, and time each of\n"
           "--repetitions passes over the whole file in blocks of --block-size bytes.\n"
           "Records: one per pass (duration ns, sync ns, block_max ns); the latency of\n"
           "every block goes into the trailer histogram 'block'. The file is written once\n"
           "in full before the first timed pass, and removed at the end (also on\n"
           "SIGINT/SIGTERM/SIGHUP).\n"
           "\n"
           "modes (first argument or --mode NAME):\n");
    for (int k = 0; k < NMODES; k++)
        printf("  %-11s %s\n", modes[k].name, modes[k].help);
    printf("\n"
           "options:\n"
           "  --output FILE        sample file to write (required)\n"
           "  --dir DIR            directory for the test file (default: .)\n"
           "  --size BYTES         file size, a multiple of the block size (default 4096);\n"
           "                       suffixes K, M, G (KiB, MiB, GiB) are accepted\n"
           "  --repetitions N      timed passes over the file, 1..%" PRId64 " (default 100000)\n"
           "  --block-size BYTES   bytes per read/write call (default 4096)\n"
           "  --direct             O_DIRECT: bypass the page cache (aligned buffer;\n"
           "                       sizes must be multiples of %d)\n"
           "  --fdatasync          write_sync only: fdatasync instead of fsync\n"
           "  --drop-caches        read only: drop the page cache before each pass\n"
           "                       (cold reads; needs root)\n"
           "  --read-back          read only: after writing the file, drop it from the page\n"
           "                       cache and read it back once (untimed), so the timed\n"
           "                       reads find the pages a sequential read leaves, as\n"
           "                       fio's pre_read does\n"
           "  --hist-bucket-ns N   block histogram bucket width in ns (default 100)\n"
           "  --hist-buckets N     block histogram buckets (default 20000: 0..2 ms; slower\n"
           "                       blocks are counted as overflow, with exact max)\n"
           "%s"
           "  --help               this text\n"
           "\n"
           "The four boolean options also take =true/=false (or a separate true/false).\n"
           "exit codes: 0 written, 1 run failed (directory missing or not writable, not\n"
           "enough free space, I/O error, refused setting), 2 usage error\n",
           STORAGE_MAX_REPETITIONS, STORAGE_DIRECT_MULTIPLE, rtp_rt_options_help);
}

/* "4096", "4K", "4KiB", "1M", "1G" (binary multiples). -1 with a message. */
static int parse_size(const char *option, const char *text, int64_t min, int64_t max, int64_t *out)
{
    static const struct {
        const char *suffix;
        int shift;
    } suffixes[] = {{"", 0},   {"K", 10}, {"k", 10}, {"KiB", 10}, {"M", 20},
                    {"MiB", 20}, {"G", 30}, {"GiB", 30}, {"T", 40}, {"TiB", 40}};
    size_t len = strlen(text), digits = 0;
    while (digits < len && text[digits] >= '0' && text[digits] <= '9')
        digits++;
    char number[32];
    if (digits == 0 || digits >= sizeof number)
        goto bad;
    memcpy(number, text, digits);
    number[digits] = '\0';
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        if (strcmp(text + digits, suffixes[k].suffix) != 0)
            continue;
        int64_t n;
        if (rtp_parse_i64(number, 0, INT64_MAX >> suffixes[k].shift, &n) != RTP_PARSE_OK)
            goto range;
        n <<= suffixes[k].shift;
        if (n < min || n > max)
            goto range;
        *out = n;
        return 0;
    }
bad:
    fprintf(stderr,
            RTPROBE_NAME " storage: %s: expected a byte count such as 4096, 4K, 1M or 1G, got '%s'\n",
            option, text);
    return -1;
range:
    fprintf(stderr, RTPROBE_NAME " storage: %s: must be %" PRId64 "..%" PRId64 " bytes, got '%s'\n",
            option, min, max, text);
    return -1;
}

/* "--name", "--name=BOOL" or "--name BOOL" (BOOL: true/false). 1 matched,
 * 0 another argument, -1 bad value. */
static int bool_option(int argc, char **argv, int *i, const char *name, bool *out)
{
    const char *arg = argv[*i];
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0)
        return 0;
    if (arg[n] == '\0') {
        *out = true;
        if (*i + 1 < argc && (strcmp(argv[*i + 1], "true") == 0 || strcmp(argv[*i + 1], "false") == 0)) {
            *i += 1;
            *out = strcmp(argv[*i], "true") == 0;
        }
        return 1;
    }
    if (arg[n] != '=')
        return 0;
    if (strcmp(arg + n + 1, "true") == 0 || strcmp(arg + n + 1, "false") == 0) {
        *out = strcmp(arg + n + 1, "true") == 0;
        return 1;
    }
    fprintf(stderr, RTPROBE_NAME " storage: %s: expected true or false, got '%s'\n", name, arg + n + 1);
    return -1;
}

static int set_mode(struct storage_config *cfg, const char *name)
{
    return rtp_choice_set(&choices, name, &cfg->mode);
}

static int parse_args(int argc, char **argv, struct storage_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = -1;
    cfg->dir = ".";
    cfg->size = 4096;
    cfg->repetitions = 100000;
    cfg->block_size = 4096;
    cfg->bucket_ns = 100;
    cfg->buckets = 20000;
    rtp_rt_options_init(&cfg->rt);
    const struct rtp_common_args common = {"storage", &cfg->help, &cfg->rt, &cfg->output};

    for (int i = 1; i < argc && !cfg->help; i++) {
        const char *v;
        int m;
        if ((m = rtp_common_option(argc, argv, &i, &common)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
            continue;
        }
        if ((m = bool_option(argc, argv, &i, "--direct", &cfg->direct)) != 0 ||
            (m = bool_option(argc, argv, &i, "--fdatasync", &cfg->fdatasync)) != 0 ||
            (m = bool_option(argc, argv, &i, "--drop-caches", &cfg->drop_caches)) != 0 ||
            (m = bool_option(argc, argv, &i, "--read-back", &cfg->read_back)) != 0 ||
            (m = rtp_option_nonempty("storage", argc, argv, &i, "--dir", &cfg->dir)) != 0) {
            if (m < 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--mode", &v)) != 0) {
            if (m < 0 || set_mode(cfg, v) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--size", &v)) != 0) {
            if (m < 0 || parse_size("--size", v, 1, STORAGE_MAX_SIZE, &cfg->size) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--block-size", &v)) != 0) {
            if (m < 0 || parse_size("--block-size", v, 1, STORAGE_MAX_BLOCK, &cfg->block_size) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--repetitions", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--repetitions", v, 1, STORAGE_MAX_REPETITIONS,
                                        &cfg->repetitions) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--hist-bucket-ns", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--hist-bucket-ns", v, 1, RTP_NSEC_PER_SEC, &cfg->bucket_ns) != 0)
                return RTP_EXIT_USAGE;
        } else if ((m = rtp_option_value(argc, argv, &i, "--hist-buckets", &v)) != 0) {
            if (m < 0 || rtp_option_i64("--hist-buckets", v, 1, STORAGE_MAX_BUCKETS, &cfg->buckets) != 0)
                return RTP_EXIT_USAGE;
        } else if (rtp_unknown_option("storage", argv[i]) || set_mode(cfg, argv[i]) != 0) {
            return RTP_EXIT_USAGE;
        }
    }
    if (cfg->help)
        return 0;

    if (cfg->mode < 0)
        return rtp_choice_missing(&choices);
    if (!cfg->output) {
        fprintf(stderr, RTPROBE_NAME " storage: --output FILE is required\n");
        return RTP_EXIT_USAGE;
    }
    if (cfg->size % cfg->block_size != 0) {
        int64_t below = cfg->size / cfg->block_size * cfg->block_size, above = below + cfg->block_size;
        fprintf(stderr,
                RTPROBE_NAME " storage: --size %" PRId64 " is not a multiple of --block-size %" PRId64,
                cfg->size, cfg->block_size);
        if (below > 0)
            fprintf(stderr, " (nearest multiples: %" PRId64 ", %" PRId64 ")\n", below, above);
        else
            fprintf(stderr, " (the smallest valid size is %" PRId64 ")\n", above);
        return RTP_EXIT_USAGE;
    }
    if (cfg->direct && cfg->block_size % STORAGE_DIRECT_MULTIPLE != 0) {
        fprintf(stderr,
                RTPROBE_NAME " storage: --direct needs a --block-size that is a multiple of %d, got %" PRId64
                             "\n",
                STORAGE_DIRECT_MULTIPLE, cfg->block_size);
        return RTP_EXIT_USAGE;
    }
    if (cfg->fdatasync && cfg->mode != MODE_WRITE_SYNC) {
        fprintf(stderr, RTPROBE_NAME " storage: --fdatasync applies to mode write_sync only\n");
        return RTP_EXIT_USAGE;
    }
    if (cfg->drop_caches && cfg->mode != MODE_READ) {
        fprintf(stderr, RTPROBE_NAME " storage: --drop-caches applies to mode read only\n");
        return RTP_EXIT_USAGE;
    }
    if (cfg->read_back && (cfg->mode != MODE_READ || cfg->direct || cfg->drop_caches)) {
        fprintf(stderr, RTPROBE_NAME " storage: --read-back applies to mode read through the page cache only "
                                     "(not with --direct or --drop-caches)\n");
        return RTP_EXIT_USAGE;
    }
    return 0;
}

/* ---- block latency histogram ------------------------------------------------ */

struct histogram {
    int64_t bucket_ns;
    int64_t nbuckets;
    uint64_t *counts;
    uint64_t overflow;
    uint64_t n;
    int64_t min, max, sum;
    int64_t cycles[STORAGE_MAX_OVERFLOW_CYCLES]; /* indices of the first overflowing blocks */
    size_t ncycles;
};

static int hist_init(struct histogram *h, int64_t bucket_ns, int64_t nbuckets)
{
    memset(h, 0, sizeof *h);
    h->bucket_ns = bucket_ns;
    h->nbuckets = nbuckets;
    h->counts = calloc((size_t)nbuckets, sizeof *h->counts);
    if (!h->counts)
        return -1;
    /* Touch every page now so adding never page-faults while timing. */
    memset(h->counts, 0, (size_t)nbuckets * sizeof *h->counts);
    return 0;
}

static inline void hist_add(struct histogram *h, int64_t v, int64_t index)
{
    int64_t b = v / h->bucket_ns;
    if (v >= 0 && b < h->nbuckets) {
        h->counts[b]++;
    } else {
        h->overflow++;
        if (h->ncycles < STORAGE_MAX_OVERFLOW_CYCLES)
            h->cycles[h->ncycles++] = index;
    }
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (h->n == 0 || v > h->max)
        h->max = v;
    h->sum += v;
    h->n++;
}

/* The histogram as a trailer member; trailing empty buckets are left out
 * (they hold nothing, and every value beyond is counted in overflow). */
static void hist_json(const struct histogram *h, struct rtp_json *j, const char *key)
{
    int64_t used = h->nbuckets;
    while (used > 0 && h->counts[used - 1] == 0)
        used--;
    if (used == 0)
        used = 1;
    rtp_json_begin_object(j, key);
    rtp_json_string(j, "unit", "ns");
    rtp_json_i64(j, "bucket_width", h->bucket_ns);
    rtp_json_i64(j, "min_value", 0);
    rtp_json_begin_array(j, "counts");
    for (int64_t b = 0; b < used; b++)
        rtp_json_u64(j, NULL, h->counts[b]);
    rtp_json_end_array(j);
    rtp_json_u64(j, "overflow", h->overflow);
    rtp_json_begin_array(j, "overflow_cycles");
    for (size_t k = 0; k < h->ncycles; k++)
        rtp_json_i64(j, NULL, h->cycles[k]);
    rtp_json_end_array(j);
    rtp_json_u64(j, "n", h->n);
    rtp_json_i64(j, "min", h->min);
    rtp_json_i64(j, "max", h->max);
    rtp_json_i64(j, "sum", h->sum);
    rtp_json_end_object(j);
}

/* ---- the target directory ---------------------------------------------------- */

/* "4.0 KiB", "1.0 GiB". buf needs 32 bytes. */
static const char *human_bytes(uint64_t n, char *buf, size_t len)
{
    static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    size_t u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRIu64 " bytes", n);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
    return buf;
}

static const char *fs_name(long type)
{
    switch ((unsigned long)type) {
    case 0xEF53: return "ext2/ext3/ext4";
    case 0x01021994: return "tmpfs";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x4d44: return "vfat";
    case 0x65735546: return "fuse";
    case 0x6969: return "nfs";
    case 0x794c7630: return "overlayfs";
    case 0xF2F52010: return "f2fs";
    case 0x2011BAB0: return "exfat";
    case 0x5346544e: return "ntfs";
    case 0x858458f6: return "ramfs";
    default: return "unknown";
    }
}

/* Check that dir exists, is a directory, and has room for the test file.
 * RTP_EXIT_OK, or RTP_EXIT_FAILURE after printing why. */
static int check_dir(const struct storage_config *cfg, struct statfs *fs)
{
    struct stat st;
    if (stat(cfg->dir, &st) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: cannot use directory '%s': %s\n", cfg->dir, strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    if (!S_ISDIR(st.st_mode)) {
        fprintf(stderr, RTPROBE_NAME " storage: '%s' is not a directory\n", cfg->dir);
        return RTP_EXIT_FAILURE;
    }
    if (access(cfg->dir, W_OK | X_OK) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: directory '%s' is not writable: %s\n", cfg->dir,
                strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    struct statvfs vfs;
    if (statvfs(cfg->dir, &vfs) != 0 || statfs(cfg->dir, fs) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: cannot read free space of '%s': %s\n", cfg->dir,
                strerror(errno));
        return RTP_EXIT_FAILURE;
    }
    /* f_bavail: blocks available to this (unprivileged) user; the file also
     * needs a few metadata blocks, so ask for one block per MiB extra. */
    uint64_t avail = (uint64_t)vfs.f_bavail * (uint64_t)vfs.f_frsize;
    uint64_t need = (uint64_t)cfg->size + ((uint64_t)cfg->size >> 20) * vfs.f_frsize + vfs.f_frsize;
    if (avail < need) {
        char a[32], b[32];
        fprintf(stderr,
                RTPROBE_NAME " storage: not enough free space in '%s': the test file needs %s (%" PRId64
                             " bytes), only %s (%" PRIu64 " bytes) are available\n",
                cfg->dir, human_bytes((uint64_t)cfg->size, a, sizeof a), cfg->size, human_bytes(avail, b, sizeof b),
                avail);
        return RTP_EXIT_FAILURE;
    }
    return RTP_EXIT_OK;
}

/* ---- the run -------------------------------------------------------------------- */

static const struct rtp_sf_column storage_columns[] = {
    {"duration", "ns", RTP_SF_I64},  /* the whole pass, sync included */
    {"sync", "ns", RTP_SF_I64},      /* the fsync/fdatasync call ending the pass; 0 without */
    {"block_max", "ns", RTP_SF_I64}, /* the slowest block of the pass */
};

struct test_file {
    char *path;
    int fd;
};

static void test_file_remove(struct test_file *tf)
{
    if (tf->fd >= 0)
        close(tf->fd);
    tf->fd = -1;
    if (tf->path) {
        unlink(tf->path);
        free(tf->path);
        tf->path = NULL;
    }
}

/* Create a uniquely named file in cfg->dir and open it for the run. */
static int test_file_create(const struct storage_config *cfg, struct test_file *tf)
{
    tf->fd = -1;
    size_t len = strlen(cfg->dir) + 64;
    tf->path = malloc(len);
    if (!tf->path) {
        fprintf(stderr, RTPROBE_NAME " storage: out of memory\n");
        return -1;
    }
    snprintf(tf->path, len, "%s/rtprobe-storage-%ld-XXXXXX", cfg->dir, (long)getpid());
    int fd = mkstemp(tf->path);
    if (fd < 0) {
        fprintf(stderr, RTPROBE_NAME " storage: cannot create a test file in '%s': %s\n", cfg->dir,
                strerror(errno));
        free(tf->path);
        tf->path = NULL;
        return -1;
    }
    if (!cfg->direct) {
        tf->fd = fd;
        return 0;
    }
    tf->fd = open(tf->path, O_RDWR | O_DIRECT | O_CLOEXEC);
    int e = errno;
    close(fd);
    if (tf->fd < 0) {
        fprintf(stderr, RTPROBE_NAME " storage: --direct: cannot open %s with O_DIRECT: %s%s\n", tf->path,
                strerror(e), e == EINVAL ? " (the filesystem does not support O_DIRECT)" : "");
        test_file_remove(tf);
        return -1;
    }
    return 0;
}

static void io_error(const struct storage_config *cfg, const char *what, int64_t offset, ssize_t got, int err)
{
    if (got >= 0)
        fprintf(stderr, RTPROBE_NAME " storage: short %s at offset %" PRId64 ": %zd of %" PRId64 " bytes\n",
                what, offset, got, cfg->block_size);
    else
        fprintf(stderr, RTPROBE_NAME " storage: %s at offset %" PRId64 " failed: %s%s\n", what, offset,
                strerror(err),
                cfg->direct && err == EINVAL
                    ? " (O_DIRECT: the block size must be a multiple of the device's logical block size)"
                    : "");
}

/* One untimed pass over the whole file (preparing it); `what` names it in errors. */
static int untimed_pass(const struct storage_config *cfg, int fd, char *buf, bool reading, const char *what)
{
    for (int64_t off = 0; off < cfg->size; off += cfg->block_size) {
        ssize_t n = reading ? pread(fd, buf, (size_t)cfg->block_size, off)
                            : pwrite(fd, buf, (size_t)cfg->block_size, off);
        if (n != cfg->block_size) {
            io_error(cfg, what, off, n, errno);
            return -1;
        }
        if (rtp_stop_signal)
            return -1;
    }
    return 0;
}

/* Write the whole file once, then sync: not timed. With --read-back, then
 * drop the file's (clean, synced) pages and read it back in order, so
 * readahead fills the cache as it does for any sequential reader. */
static int lay_out(const struct storage_config *cfg, int fd, char *buf)
{
    if (untimed_pass(cfg, fd, buf, false, "write (preparing the file)") != 0)
        return -1;
    if (fsync(fd) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: fsync (preparing the file) failed: %s\n", strerror(errno));
        return -1;
    }
    if (!cfg->read_back)
        return 0;
    int e = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (e != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: --read-back: dropping the file from the page cache failed: %s\n",
                strerror(e));
        return -1;
    }
    return untimed_pass(cfg, fd, buf, true, "read (reading the file back)");
}

static int drop_caches(int fd)
{
    sync();
    if (pwrite(fd, "1\n", 2, 0) != 2) {
        fprintf(stderr, RTPROBE_NAME " storage: writing " DROP_CACHES_PATH " failed: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

/* One pass over the file. 0, or -1 after printing why (or on a stop signal). */
static int one_pass(const struct storage_config *cfg, int fd, char *buf, struct histogram *h, int64_t pass,
                    union rtp_sf_value rec[3])
{
    const int64_t nblocks = cfg->size / cfg->block_size;
    const size_t bs = (size_t)cfg->block_size;
    const bool reading = cfg->mode == MODE_READ;
    int64_t block_max = 0, sync_ns = 0;
    struct timespec start, t, t2;

    clock_gettime(CLOCK_MONOTONIC, &start);
    t = start;
    for (int64_t b = 0; b < nblocks; b++) {
        const int64_t off = b * cfg->block_size;
        ssize_t n = reading ? pread(fd, buf, bs, off) : pwrite(fd, buf, bs, off);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        if (n != (ssize_t)bs) {
            io_error(cfg, reading ? "read" : "write", off, n, errno);
            return -1;
        }
        const int64_t d = rtp_ts_diff_ns(t2, t);
        hist_add(h, d, pass * nblocks + b);
        if (d > block_max)
            block_max = d;
        t = t2;
        if (rtp_stop_signal)
            return -1;
    }
    if (cfg->mode == MODE_WRITE_SYNC) {
        int rc = cfg->fdatasync ? fdatasync(fd) : fsync(fd);
        clock_gettime(CLOCK_MONOTONIC, &t2);
        if (rc != 0) {
            fprintf(stderr, RTPROBE_NAME " storage: %s failed: %s\n", cfg->fdatasync ? "fdatasync" : "fsync",
                    strerror(errno));
            return -1;
        }
        sync_ns = rtp_ts_diff_ns(t2, t);
        t = t2;
    }
    rec[0].i = rtp_ts_diff_ns(t, start);
    rec[1].i = sync_ns;
    rec[2].i = block_max;
    return 0;
}

static void fill_buffer(char *buf, size_t len)
{
    /* Non-zero, non-repeating bytes: nothing on the way can compress or
     * deduplicate the blocks. */
    uint64_t x = UINT64_C(0x9E3779B97F4A7C15);
    for (size_t k = 0; k < len; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[k] = (char)(x >> 24);
    }
}

static void build_json(const struct storage_config *cfg, struct rtp_json *settings, struct rtp_json *params)
{
    rtp_json_begin_object(settings, NULL);
    rtp_rt_settings_json(&cfg->rt, settings);
    rtp_json_end_object(settings);
    rtp_json_begin_object(params, NULL);
    rtp_json_i64(params, "size", cfg->size);
    rtp_json_i64(params, "repetitions", cfg->repetitions);
    rtp_json_i64(params, "block_size", cfg->block_size);
    rtp_json_string(params, "dir", cfg->dir);
    rtp_json_bool(params, "direct", cfg->direct);
    rtp_json_bool(params, "fdatasync", cfg->fdatasync);
    rtp_json_bool(params, "drop_caches", cfg->drop_caches);
    if (cfg->read_back) /* only when set: runs without it keep the parameters they always had */
        rtp_json_bool(params, "read_back", true);
    rtp_json_end_object(params);
}

static void build_trailer(const struct storage_config *cfg, const struct histogram *h, const struct statfs *fs,
                          const char *finished_at, struct rtp_json *j)
{
    char note[256];
    rtp_json_begin_object(j, NULL);
    rtp_json_string(j, "finished_at", finished_at);
    rtp_json_begin_object(j, "counters");
    rtp_json_i64(j, "blocks_per_pass", cfg->size / cfg->block_size);
    rtp_json_u64(j, "blocks", h->n);
    rtp_json_i64(j, "bytes", cfg->size * cfg->repetitions);
    rtp_json_u64(j, "block_overflows", h->overflow);
    rtp_json_end_object(j);
    rtp_json_begin_object(j, "histograms");
    hist_json(h, j, "block");
    rtp_json_end_object(j);
    rtp_json_begin_array(j, "notes");
    snprintf(note, sizeof note, "target filesystem: %s (statfs type 0x%lx)", fs_name((long)fs->f_type),
             (unsigned long)fs->f_type);
    rtp_json_string(j, NULL, note);
    if ((unsigned long)fs->f_type == 0x01021994 || (unsigned long)fs->f_type == 0x858458f6)
        rtp_json_string(j, NULL, "the test file was in memory (tmpfs/ramfs): no disk was involved");
    if (cfg->mode == MODE_READ && !cfg->direct && !cfg->drop_caches)
        rtp_json_string(j, NULL, "reads were served from the page cache (caches not dropped, as in the study)");
    if (h->overflow)
        rtp_json_string(j, NULL, "some blocks were slower than the block histogram's range: counted as "
                                 "overflow (exact max kept); widen it with --hist-bucket-ns/--hist-buckets");
    rtp_json_end_array(j);
    rtp_json_end_object(j);
}

static int run(const void *arg)
{
    const struct storage_config *cfg = arg;
    struct rtp_run sf;
    struct histogram hist = {0};
    struct test_file tf = {NULL, -1};
    struct statfs fs;
    char *buf = NULL;
    int dc_fd = -1;
    int rc = rtp_run_start(&sf);

    if (rc != RTP_EXIT_OK)
        goto out;
    if (cfg->drop_caches) {
        dc_fd = open(DROP_CACHES_PATH, O_WRONLY | O_CLOEXEC);
        if (dc_fd < 0) {
            int e = errno;
            fprintf(stderr, RTPROBE_NAME " storage: --drop-caches needs root%s: cannot open " DROP_CACHES_PATH
                                         " for writing: %s\n",
                    geteuid() != 0 ? " (this process is not root)" : "", strerror(e));
            rc = RTP_EXIT_FAILURE;
            goto out;
        }
    }
    if ((rc = check_dir(cfg, &fs)) != RTP_EXIT_OK || (rc = rtp_rt_apply(&cfg->rt)) != RTP_EXIT_OK)
        goto out;
    rc = RTP_EXIT_FAILURE;

    build_json(cfg, &sf.settings, &sf.params);
    if (posix_memalign((void **)&buf, STORAGE_DIRECT_ALIGN, (size_t)cfg->block_size) != 0 ||
        hist_init(&hist, cfg->bucket_ns, cfg->buckets) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: cannot allocate the buffers\n");
        goto out;
    }
    fill_buffer(buf, (size_t)cfg->block_size);

    const struct rtp_sf_header header = {
        .workload = "storage",
        .variant = modes[cfg->mode].name,
        .columns = storage_columns,
        .ncolumns = sizeof storage_columns / sizeof storage_columns[0],
    };
    /* Records stay in memory: no sample-file I/O disturbs the timed passes. */
    if ((rc = rtp_run_open(&sf, cfg->output, &header, RTP_SF_BUFFER)) != RTP_EXIT_OK)
        goto out;
    rc = RTP_EXIT_FAILURE;
    if (rtp_sf_reserve(sf.w, (size_t)cfg->repetitions) != 0) {
        fprintf(stderr, RTPROBE_NAME " storage: cannot allocate memory for %" PRId64 " records\n",
                cfg->repetitions);
        goto out;
    }
    if (test_file_create(cfg, &tf) != 0)
        goto out;
    if (lay_out(cfg, tf.fd, buf) != 0)
        goto stopped_or_out;

    for (int64_t pass = 0; pass < cfg->repetitions; pass++) {
        union rtp_sf_value rec[3];
        if (cfg->drop_caches && drop_caches(dc_fd) != 0)
            goto out;
        if (one_pass(cfg, tf.fd, buf, &hist, pass, rec) != 0)
            goto stopped_or_out;
        rtp_sf_append(sf.w, rec); /* errors are reported by rtp_sf_finish */
    }
    test_file_remove(&tf);

    build_trailer(cfg, &hist, &fs, rtp_run_finished_at(&sf), &sf.trailer);
    rc = rtp_run_finish(&sf);
    goto out;

stopped_or_out:
    if (rtp_stop_signal)
        rc = rtp_run_stopped("test file removed, no sample file written");
out:
    test_file_remove(&tf);
    rtp_run_free(&sf);
    if (dc_fd >= 0)
        close(dc_fd);
    free(buf);
    free(hist.counts);
    return rc;
}

int rtp_cmd_storage(int argc, char **argv)
{
    struct storage_config cfg;
    int rc = parse_args(argc, argv, &cfg);
    return rtp_subcommand_main(rc, cfg.help, print_help, run, &cfg);
}
