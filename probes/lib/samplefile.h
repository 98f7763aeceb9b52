/* Writer for the rtscope sample file (docs/sample-format.md, version 1).
 *
 * The file is written to a temporary file beside the output path and renamed
 * over it only when complete, so a killed probe never leaves a valid-looking
 * file at the output path. Opening removes any old file at the output path,
 * so a failed run never leaves a stale one there either. */
#ifndef RTP_SAMPLEFILE_H
#define RTP_SAMPLEFILE_H

#include <stddef.h>
#include <stdint.h>

#define RTP_SF_MAGIC "RTSCSF01"
#define RTP_SF_END_MAGIC "RTSCEND1"
#define RTP_SF_VERSION 1
#define RTP_SF_TAIL_SIZE 24 /* u32 trailer len + u64 count + u32 crc + end magic */

enum rtp_sf_type { RTP_SF_I64, RTP_SF_U64, RTP_SF_F64 };

struct rtp_sf_column {
    const char *name;
    const char *unit; /* "ns", "bytes", "count" or "" */
    enum rtp_sf_type type;
};

union rtp_sf_value {
    int64_t i;
    uint64_t u;
    double f;
};

struct rtp_sf_header {
    const char *workload;
    const char *variant;
    const char *runtime;
    const char *tool;
    const char *tool_version;
    const char *started_at;    /* RFC 3339 UTC */
    const char *settings_json; /* a JSON object; NULL means {} */
    const char *params_json;   /* a JSON object; NULL means {} */
    const char *pairing_json;  /* a JSON object: key "pairing" (an interleaved arm); NULL: no key */
    const struct rtp_sf_column *columns;
    size_t ncolumns; /* >= 1; the first column is the primary measurement */
};

enum rtp_sf_mode {
    RTP_SF_STREAM, /* records go to the (stdio-buffered) file as appended */
    RTP_SF_BUFFER  /* records stay in memory until rtp_sf_finish: no I/O while measuring */
};

struct rtp_sf_writer;

/* Create the temporary file and write magic and header. NULL on failure with
 * the reason in err. */
struct rtp_sf_writer *rtp_sf_open(const char *path, const struct rtp_sf_header *header,
                                  enum rtp_sf_mode mode, char *err, size_t errlen);

/* Buffer mode: allocate and touch memory for nrecords so appending them
 * neither allocates nor page-faults. 0, or -1 when out of memory. */
int rtp_sf_reserve(struct rtp_sf_writer *w, size_t nrecords);

/* Append one record: ncolumns values, in column order. 0, or -1 on failure
 * (the failure is also reported by rtp_sf_finish). */
int rtp_sf_append(struct rtp_sf_writer *w, const union rtp_sf_value *values);

uint64_t rtp_sf_count(const struct rtp_sf_writer *w);

/* Write the records still buffered, the trailer (a JSON object, NULL means
 * {}) and the tail, sync, and rename into place. Frees w. 0, or -1 with the
 * reason in err (then nothing is left at the output path). */
int rtp_sf_finish(struct rtp_sf_writer *w, const char *trailer_json, char *err, size_t errlen);

/* Discard: remove the temporary file and free w. */
void rtp_sf_abort(struct rtp_sf_writer *w);

/* CRC-32 (IEEE 802.3, reflected, as zlib crc32). Start with crc = 0. */
uint32_t rtp_crc32(uint32_t crc, const void *buf, size_t len);

#endif
