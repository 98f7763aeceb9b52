#include "samplefile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"

struct rtp_sf_writer {
    FILE *fp;
    char *path;
    char *tmp_path;
    enum rtp_sf_mode mode;
    size_t ncolumns;
    size_t record_size;
    uint64_t count;
    uint32_t crc; /* stream mode: running CRC of the records written so far */
    unsigned char *scratch; /* stream mode: one encoded record */
    unsigned char *buf;     /* buffer mode: encoded records */
    size_t buf_used;
    size_t buf_cap;
    int error; /* first errno seen, 0 if none */
    const char *error_what;
};

/* ---- CRC-32 ------------------------------------------------------------- */

static uint32_t crc_table[256];
static bool crc_table_ready;

static void crc_init(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[n] = c;
    }
    crc_table_ready = true;
}

uint32_t rtp_crc32(uint32_t crc, const void *buf, size_t len)
{
    if (!crc_table_ready)
        crc_init();
    const unsigned char *p = buf;
    crc = ~crc;
    while (len--)
        crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* ---- little-endian encoding --------------------------------------------- */

static void put_u32le(unsigned char *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (unsigned char)(v >> (8 * k));
}

static void encode_record(const struct rtp_sf_writer *w, const union rtp_sf_value *values,
                          unsigned char *out)
{
    for (size_t c = 0; c < w->ncolumns; c++) {
        uint64_t bits;
        /* The union's members all have 8 bytes; copy the bits of the double
         * rather than type-punning through a pointer. */
        memcpy(&bits, &values[c], sizeof bits);
        put_u64le(out + 8 * c, bits);
    }
}

/* ---- writer ------------------------------------------------------------- */

static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static void note_error(struct rtp_sf_writer *w, const char *what)
{
    if (!w->error) {
        w->error = errno ? errno : EIO;
        w->error_what = what;
    }
}

static const char *type_name(enum rtp_sf_type t)
{
    switch (t) {
    case RTP_SF_I64: return "i64";
    case RTP_SF_U64: return "u64";
    case RTP_SF_F64: return "f64";
    }
    return NULL;
}

static char *build_header(const struct rtp_sf_header *h)
{
    struct rtp_json j;
    rtp_json_init(&j);
    rtp_json_begin_object(&j, NULL);
    rtp_json_string(&j, "format", "rtscope-samples");
    rtp_json_i64(&j, "version", RTP_SF_VERSION);
    rtp_json_string(&j, "workload", h->workload);
    rtp_json_string(&j, "variant", h->variant);
    rtp_json_string(&j, "runtime", h->runtime);
    rtp_json_string(&j, "tool", h->tool);
    rtp_json_string(&j, "tool_version", h->tool_version);
    rtp_json_string(&j, "started_at", h->started_at);
    rtp_json_raw(&j, "settings", h->settings_json ? h->settings_json : "{}");
    rtp_json_raw(&j, "params", h->params_json ? h->params_json : "{}");
    if (h->pairing_json)
        rtp_json_raw(&j, "pairing", h->pairing_json);
    rtp_json_begin_array(&j, "columns");
    for (size_t c = 0; c < h->ncolumns; c++) {
        rtp_json_begin_object(&j, NULL);
        rtp_json_string(&j, "name", h->columns[c].name);
        rtp_json_string(&j, "unit", h->columns[c].unit);
        rtp_json_string(&j, "type", type_name(h->columns[c].type));
        rtp_json_end_object(&j);
    }
    rtp_json_end_array(&j);
    rtp_json_end_object(&j);
    char *out = rtp_json_result(&j) ? strdup(j.buf) : NULL;
    rtp_json_free(&j);
    return out;
}

static bool header_valid(const struct rtp_sf_header *h)
{
    if (!h->workload || !h->variant || !h->runtime || !h->tool || !h->tool_version ||
        !h->started_at || !h->columns || h->ncolumns == 0)
        return false;
    for (size_t c = 0; c < h->ncolumns; c++)
        if (!h->columns[c].name || !h->columns[c].unit || !type_name(h->columns[c].type))
            return false;
    return true;
}

static void free_writer(struct rtp_sf_writer *w)
{
    if (w->fp)
        fclose(w->fp);
    free(w->buf);
    free(w->scratch);
    free(w->path);
    free(w->tmp_path);
    free(w);
}

struct rtp_sf_writer *rtp_sf_open(const char *path, const struct rtp_sf_header *header,
                                  enum rtp_sf_mode mode, char *err, size_t errlen)
{
    if (!path || !*path || !header_valid(header)) {
        set_err(err, errlen, "invalid sample-file header or path");
        return NULL;
    }
    if (header->ncolumns > SIZE_MAX / 8) {
        set_err(err, errlen, "too many columns");
        return NULL;
    }
    /* The file is renamed over `path` at the end: never over a device, FIFO or directory (as root,
     * `--output /dev/null` would otherwise replace the device with a regular file). */
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        set_err(err, errlen, "%s exists and is not a regular file: give the name of a file to write", path);
        return NULL;
    }
    struct rtp_sf_writer *w = calloc(1, sizeof *w);
    char *hdr = build_header(header);
    if (!w || !hdr) {
        free(w);
        free(hdr);
        set_err(err, errlen, "out of memory building the header");
        return NULL;
    }
    w->mode = mode;
    w->ncolumns = header->ncolumns;
    w->record_size = 8 * header->ncolumns;
    w->path = strdup(path);
    size_t tlen = strlen(path) + sizeof ".partial-XXXXXX";
    w->tmp_path = malloc(tlen);
    w->scratch = malloc(w->record_size);
    if (!w->path || !w->tmp_path || !w->scratch) {
        free(hdr);
        free_writer(w);
        set_err(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(w->tmp_path, tlen, "%s.partial-XXXXXX", path);

    size_t hlen = strlen(hdr);
    if (hlen > UINT32_MAX) {
        free(hdr);
        free_writer(w);
        set_err(err, errlen, "header too long");
        return NULL;
    }
    int fd = mkstemp(w->tmp_path);
    if (fd < 0) {
        set_err(err, errlen, "cannot create a temporary file beside %s: %s", path, strerror(errno));
        free(hdr);
        w->tmp_path[0] = '\0';
        free_writer(w);
        return NULL;
    }
    /* mkstemp creates 0600; give the result the usual 0666 & ~umask. */
    mode_t mask = umask(0);
    umask(mask);
    if (fchmod(fd, 0666 & ~mask) != 0 || !(w->fp = fdopen(fd, "wb"))) {
        set_err(err, errlen, "cannot open %s: %s", w->tmp_path, strerror(errno));
        if (!w->fp)
            close(fd);
        unlink(w->tmp_path);
        free(hdr);
        free_writer(w);
        return NULL;
    }
    if (unlink(path) != 0 && errno != ENOENT) {
        set_err(err, errlen, "cannot replace %s: %s", path, strerror(errno));
        free(hdr);
        rtp_sf_abort(w);
        return NULL;
    }

    unsigned char len4[4];
    put_u32le(len4, (uint32_t)hlen);
    errno = 0;
    if (fwrite(RTP_SF_MAGIC, 1, 8, w->fp) != 8 || fwrite(len4, 1, 4, w->fp) != 4 ||
        fwrite(hdr, 1, hlen, w->fp) != hlen) {
        set_err(err, errlen, "cannot write %s: %s", w->tmp_path, strerror(errno ? errno : EIO));
        free(hdr);
        rtp_sf_abort(w);
        return NULL;
    }
    free(hdr);
    return w;
}

static int grow_buffer(struct rtp_sf_writer *w, size_t need)
{
    if (need <= w->buf_cap)
        return 0;
    size_t cap = w->buf_cap ? w->buf_cap : 64 * w->record_size;
    while (cap < need) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    unsigned char *nb = realloc(w->buf, cap);
    if (!nb)
        return -1;
    w->buf = nb;
    w->buf_cap = cap;
    return 0;
}

int rtp_sf_reserve(struct rtp_sf_writer *w, size_t nrecords)
{
    if (w->mode != RTP_SF_BUFFER)
        return 0;
    if (nrecords > (SIZE_MAX - w->buf_used) / w->record_size) {
        errno = ENOMEM;
        note_error(w, "reserving memory for the records");
        return -1;
    }
    size_t need = w->buf_used + nrecords * w->record_size;
    if (need > w->buf_cap) {
        unsigned char *nb = realloc(w->buf, need);
        if (!nb) {
            errno = ENOMEM;
            note_error(w, "reserving memory for the records");
            return -1;
        }
        w->buf = nb;
        w->buf_cap = need;
    }
    /* Touch every page now, not during measurement. */
    memset(w->buf + w->buf_used, 0, w->buf_cap - w->buf_used);
    return 0;
}

int rtp_sf_append(struct rtp_sf_writer *w, const union rtp_sf_value *values)
{
    if (w->error)
        return -1;
    if (w->mode == RTP_SF_BUFFER) {
        if (grow_buffer(w, w->buf_used + w->record_size) != 0) {
            errno = ENOMEM;
            note_error(w, "buffering a record");
            return -1;
        }
        encode_record(w, values, w->buf + w->buf_used);
        w->buf_used += w->record_size;
    } else {
        encode_record(w, values, w->scratch);
        w->crc = rtp_crc32(w->crc, w->scratch, w->record_size);
        errno = 0;
        if (fwrite(w->scratch, 1, w->record_size, w->fp) != w->record_size) {
            note_error(w, "writing a record");
            return -1;
        }
    }
    w->count++;
    return 0;
}

uint64_t rtp_sf_count(const struct rtp_sf_writer *w)
{
    return w->count;
}

int rtp_sf_finish(struct rtp_sf_writer *w, const char *trailer_json, char *err, size_t errlen)
{
    const char *trailer = trailer_json ? trailer_json : "{}";
    size_t tlen = strlen(trailer);
    if (w->error) {
        set_err(err, errlen, "%s failed: %s", w->error_what, strerror(w->error));
        rtp_sf_abort(w);
        return -1;
    }
    if (tlen > UINT32_MAX) {
        set_err(err, errlen, "trailer too long");
        rtp_sf_abort(w);
        return -1;
    }
    errno = 0;
    if (w->mode == RTP_SF_BUFFER) {
        w->crc = rtp_crc32(0, w->buf, w->buf_used);
        if (fwrite(w->buf, 1, w->buf_used, w->fp) != w->buf_used)
            goto io_error;
    }
    unsigned char tail[RTP_SF_TAIL_SIZE];
    put_u32le(tail, (uint32_t)tlen);
    put_u64le(tail + 4, w->count);
    put_u32le(tail + 12, w->crc);
    memcpy(tail + 16, RTP_SF_END_MAGIC, 8);
    if (fwrite(trailer, 1, tlen, w->fp) != tlen || fwrite(tail, 1, sizeof tail, w->fp) != sizeof tail)
        goto io_error;
    if (fflush(w->fp) != 0 || fsync(fileno(w->fp)) != 0)
        goto io_error;
    FILE *fp = w->fp;
    w->fp = NULL;
    if (fclose(fp) != 0)
        goto io_error;
    if (rename(w->tmp_path, w->path) != 0) {
        set_err(err, errlen, "cannot rename %s to %s: %s", w->tmp_path, w->path, strerror(errno));
        rtp_sf_abort(w);
        return -1;
    }
    free_writer(w);
    return 0;

io_error:
    set_err(err, errlen, "cannot write %s: %s", w->tmp_path, strerror(errno ? errno : EIO));
    rtp_sf_abort(w);
    return -1;
}

void rtp_sf_abort(struct rtp_sf_writer *w)
{
    if (!w)
        return;
    if (w->fp) {
        fclose(w->fp);
        w->fp = NULL;
    }
    if (w->tmp_path && w->tmp_path[0])
        unlink(w->tmp_path);
    free_writer(w);
}
