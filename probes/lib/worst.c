#include "worst.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int rtp_worst_init(struct rtp_worst *w, int k)
{
    w->k = k;
    w->n = 0;
    w->heap = NULL;
    if (k > 0 && !(w->heap = calloc((size_t)k, sizeof *w->heap)))
        return -1;
    return 0;
}

void rtp_worst_free(struct rtp_worst *w)
{
    free(w->heap);
    w->heap = NULL;
}

static void sift_down(int64_t *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l] < h[m])
            m = l;
        if (r < n && h[r] < h[m])
            m = r;
        if (m == i)
            return;
        int64_t t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

bool rtp_worst_offer(struct rtp_worst *w, int64_t v)
{
    if (w->k <= 0)
        return false;
    if (w->n < w->k) {
        int i = w->n++;
        w->heap[i] = v;
        while (i > 0 && w->heap[(i - 1) / 2] > w->heap[i]) {
            int64_t t = w->heap[i];
            w->heap[i] = w->heap[(i - 1) / 2];
            w->heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return true;
    }
    if (v <= w->heap[0])
        return false;
    w->heap[0] = v;
    sift_down(w->heap, w->n, 0);
    return true;
}

int rtp_marker_open(const char *who)
{
    const char *path = getenv(RTP_MARKS_ENV);
    if (!path || !*path)
        return -1;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot open %s=%s: %s\n", who, RTP_MARKS_ENV, path, strerror(errno));
        return -2;
    }
    return fd;
}

void rtp_mark_window(int fd, int64_t start_ns, int64_t end_ns)
{
    char line[80];
    int len = snprintf(line, sizeof line, "%lld %lld %d\n", (long long)start_ns, (long long)end_ns, sched_getcpu());
    if (write(fd, line, (size_t)len) < 0) {
        /* A lost mark loses one explanation, never the measurement. */
    }
}
