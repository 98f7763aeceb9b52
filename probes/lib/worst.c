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

static void sift_down(struct rtp_worst_entry *h, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && h[l].value < h[m].value)
            m = l;
        if (r < n && h[r].value < h[m].value)
            m = r;
        if (m == i)
            return;
        struct rtp_worst_entry t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
}

bool rtp_worst_would_keep(const struct rtp_worst *w, int64_t v)
{
    return w->k > 0 && (w->n < w->k || v > w->heap[0].value);
}

bool rtp_worst_keep(struct rtp_worst *w, const struct rtp_worst_entry *e)
{
    if (!rtp_worst_would_keep(w, e->value))
        return false;
    if (w->n < w->k) {
        int i = w->n++;
        w->heap[i] = *e;
        while (i > 0 && w->heap[(i - 1) / 2].value > w->heap[i].value) {
            struct rtp_worst_entry t = w->heap[i];
            w->heap[i] = w->heap[(i - 1) / 2];
            w->heap[(i - 1) / 2] = t;
            i = (i - 1) / 2;
        }
        return true;
    }
    w->heap[0] = *e;
    sift_down(w->heap, w->n, 0);
    return true;
}

bool rtp_worst_offer(struct rtp_worst *w, int64_t v)
{
    const struct rtp_worst_entry e = {.value = v};
    return rtp_worst_keep(w, &e);
}

void rtp_worst_sort(struct rtp_worst *w)
{
    /* Heap sort on the min-heap: the smallest goes to the end each time, so the array ends largest first. */
    for (int n = w->n; n > 1; n--) {
        struct rtp_worst_entry t = w->heap[0];
        w->heap[0] = w->heap[n - 1];
        w->heap[n - 1] = t;
        sift_down(w->heap, n - 1, 0);
    }
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
