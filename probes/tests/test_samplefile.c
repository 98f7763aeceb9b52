#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "samplefile.h"

static const struct rtp_sf_column cols3[] = {
    {"duration", "ns", RTP_SF_I64},
    {"count", "count", RTP_SF_U64},
    {"ratio", "", RTP_SF_F64},
};

static const struct rtp_sf_header header3 = {
    .workload = "exec",
    .variant = "sum",
    .runtime = "native",
    .tool = "rtprobe",
    .tool_version = "0.1.0",
    .started_at = "2026-11-22T10:30:00.123Z",
    .settings_json = "{\"mlock\":true}",
    .params_json = "{\"n\":3}",
    .columns = cols3,
    .ncolumns = 3,
};

static const char header3_json[] =
    "{\"format\":\"rtscope-samples\",\"version\":1,\"workload\":\"exec\",\"variant\":\"sum\","
    "\"runtime\":\"native\",\"tool\":\"rtprobe\",\"tool_version\":\"0.1.0\","
    "\"started_at\":\"2026-11-22T10:30:00.123Z\",\"settings\":{\"mlock\":true},"
    "\"params\":{\"n\":3},\"columns\":[{\"name\":\"duration\",\"unit\":\"ns\",\"type\":\"i64\"},"
    "{\"name\":\"count\",\"unit\":\"count\",\"type\":\"u64\"},"
    "{\"name\":\"ratio\",\"unit\":\"\",\"type\":\"f64\"}]}";

static const char trailer3_json[] = "{\"finished_at\":\"2026-11-22T10:30:01.000Z\"}";

/* The three records below, as the file must hold them (little-endian). */
static const unsigned char records3[3 * 24] = {
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* -1 */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* UINT64_MAX */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f, /* 0.5 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, /* INT64_MIN */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 0 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc0, /* -2.0 */
    0x15, 0xcd, 0x5b, 0x07, 0x00, 0x00, 0x00, 0x00, /* 123456789 */
    0x2a, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 42 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, /* 1.0 */
};

static void append3(struct rtp_sf_writer *w)
{
    union rtp_sf_value r[3];
    r[0].i = -1;
    r[1].u = UINT64_MAX;
    r[2].f = 0.5;
    CHECK(rtp_sf_append(w, r) == 0);
    r[0].i = INT64_MIN;
    r[1].u = 0;
    r[2].f = -2.0;
    CHECK(rtp_sf_append(w, r) == 0);
    r[0].i = 123456789;
    r[1].u = 42;
    r[2].f = 1.0;
    CHECK(rtp_sf_append(w, r) == 0);
    CHECK(rtp_sf_count(w) == 3);
}

static char *make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/rtprobe-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char p[1024];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static unsigned char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            unsigned char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

static uint32_t get_u32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64le(const unsigned char *p)
{
    return (uint64_t)get_u32le(p) | (uint64_t)get_u32le(p + 4) << 32;
}

void test_crc32(void)
{
    CHECK(rtp_crc32(0, "123456789", 9) == 0xCBF43926u);
    CHECK(rtp_crc32(0, "", 0) == 0);
    CHECK(rtp_crc32(0, "The quick brown fox jumps over the lazy dog", 43) == 0x414FA339u);
    /* Incremental equals one-shot. */
    CHECK(rtp_crc32(rtp_crc32(0, "1234", 4), "56789", 5) == 0xCBF43926u);
}

static void write_file3(const char *path, enum rtp_sf_mode mode)
{
    char err[256] = "";
    struct rtp_sf_writer *w = rtp_sf_open(path, &header3, mode, err, sizeof err);
    CHECK(w != NULL);
    if (!w) {
        fprintf(stderr, "open: %s\n", err);
        return;
    }
    if (mode == RTP_SF_BUFFER)
        CHECK(rtp_sf_reserve(w, 2) == 0); /* fewer than appended: must still grow */
    append3(w);
    CHECK(rtp_sf_finish(w, trailer3_json, err, sizeof err) == 0);
}

void test_samplefile_layout(void)
{
    char *dir = make_tmpdir();
    CHECK(dir != NULL);
    if (!dir)
        return;
    char path[600];
    snprintf(path, sizeof path, "%s/out.rts", dir);
    write_file3(path, RTP_SF_BUFFER);
    CHECK(count_entries(dir) == 1); /* no temporary file left behind */

    size_t len = 0;
    unsigned char *b = read_all(path, &len);
    CHECK(b != NULL);
    if (!b) {
        remove_dir(dir);
        return;
    }
    size_t hlen = strlen(header3_json), tlen = strlen(trailer3_json);
    CHECK(len == 12 + hlen + sizeof records3 + tlen + 24);
    if (len == 12 + hlen + sizeof records3 + tlen + 24) {
        CHECK(memcmp(b, "RTSCSF01", 8) == 0);
        CHECK(get_u32le(b + 8) == hlen);
        CHECK(memcmp(b + 12, header3_json, hlen) == 0);
        const unsigned char *rec = b + 12 + hlen;
        CHECK(memcmp(rec, records3, sizeof records3) == 0);
        const unsigned char *tr = rec + sizeof records3;
        CHECK(memcmp(tr, trailer3_json, tlen) == 0);
        const unsigned char *tail = tr + tlen;
        CHECK(get_u32le(tail) == tlen);
        CHECK(get_u64le(tail + 4) == 3);
        CHECK(get_u32le(tail + 12) == rtp_crc32(0, records3, sizeof records3));
        CHECK(memcmp(tail + 16, "RTSCEND1", 8) == 0);
    }
    free(b);
    remove_dir(dir);
}

void test_samplefile_stream_equals_buffer(void)
{
    char *dir = make_tmpdir();
    CHECK(dir != NULL);
    if (!dir)
        return;
    char p1[600], p2[600];
    snprintf(p1, sizeof p1, "%s/buffer.rts", dir);
    snprintf(p2, sizeof p2, "%s/stream.rts", dir);
    write_file3(p1, RTP_SF_BUFFER);
    write_file3(p2, RTP_SF_STREAM);
    size_t l1 = 0, l2 = 0;
    unsigned char *b1 = read_all(p1, &l1), *b2 = read_all(p2, &l2);
    CHECK(b1 && b2 && l1 == l2 && l1 > 0 && memcmp(b1, b2, l1) == 0);
    free(b1);
    free(b2);
    CHECK(count_entries(dir) == 2);
    remove_dir(dir);
}

void test_samplefile_empty(void)
{
    char *dir = make_tmpdir();
    CHECK(dir != NULL);
    if (!dir)
        return;
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/empty.rts", dir);
    struct rtp_sf_header h = header3;
    h.settings_json = NULL;
    h.params_json = NULL;
    h.ncolumns = 1;
    struct rtp_sf_writer *w = rtp_sf_open(path, &h, RTP_SF_STREAM, err, sizeof err);
    CHECK(w != NULL);
    if (w)
        CHECK(rtp_sf_finish(w, NULL, err, sizeof err) == 0);
    size_t len = 0;
    unsigned char *b = read_all(path, &len);
    CHECK(b != NULL);
    if (b && len > 12 + 24) {
        uint32_t hlen = get_u32le(b + 8);
        CHECK(len == 12 + hlen + 2 + 24);
        const char *empty_objects = "\"settings\":{},\"params\":{}";
        CHECK(memmem(b + 12, hlen, empty_objects, strlen(empty_objects)) != NULL);
        CHECK(memcmp(b + 12 + hlen, "{}", 2) == 0);
        CHECK(get_u32le(b + len - 24) == 2);
        CHECK(get_u64le(b + len - 20) == 0);
        CHECK(get_u32le(b + len - 12) == 0); /* CRC of no bytes */
        CHECK(memcmp(b + len - 8, "RTSCEND1", 8) == 0);
    }
    free(b);
    remove_dir(dir);
}

void test_samplefile_abort_and_replace(void)
{
    char *dir = make_tmpdir();
    CHECK(dir != NULL);
    if (!dir)
        return;
    char path[600], err[256];
    snprintf(path, sizeof path, "%s/out.rts", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("stale", f);
        fclose(f);
    }
    /* Opening removes the stale file at once; aborting leaves nothing. */
    struct rtp_sf_writer *w = rtp_sf_open(path, &header3, RTP_SF_BUFFER, err, sizeof err);
    CHECK(w != NULL);
    CHECK(access(path, F_OK) != 0);
    if (w) {
        append3(w);
        CHECK(count_entries(dir) == 1); /* only the temporary file */
        rtp_sf_abort(w);
    }
    CHECK(count_entries(dir) == 0);

    /* A finished file replaces an existing one. */
    f = fopen(path, "w");
    if (f) {
        fputs("stale", f);
        fclose(f);
    }
    write_file3(path, RTP_SF_STREAM);
    size_t len = 0;
    unsigned char *b = read_all(path, &len);
    CHECK(b && len > 8 && memcmp(b, "RTSCSF01", 8) == 0);
    free(b);
    CHECK(count_entries(dir) == 1);
    remove_dir(dir);
}

void test_samplefile_open_errors(void)
{
    char err[256] = "";
    struct rtp_sf_writer *w =
        rtp_sf_open("/nonexistent-rtprobe-dir/x.rts", &header3, RTP_SF_BUFFER, err, sizeof err);
    CHECK(w == NULL);
    CHECK(strstr(err, "/nonexistent-rtprobe-dir/x.rts") != NULL);
    CHECK(strstr(err, "No such file or directory") != NULL);

    struct rtp_sf_header h = header3;
    h.ncolumns = 0;
    err[0] = '\0';
    CHECK(rtp_sf_open("/tmp/never-written.rts", &h, RTP_SF_BUFFER, err, sizeof err) == NULL);
    CHECK(err[0] != '\0');
    h = header3;
    h.variant = NULL;
    CHECK(rtp_sf_open("/tmp/never-written.rts", &h, RTP_SF_BUFFER, err, sizeof err) == NULL);
    CHECK(rtp_sf_open("", &header3, RTP_SF_BUFFER, err, sizeof err) == NULL);
    CHECK(access("/tmp/never-written.rts", F_OK) != 0);
}
