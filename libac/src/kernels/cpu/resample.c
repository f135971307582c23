/*
 * cpu/resample.c - the CPU's kernels for resample.c: each output row along
 * one dim is a weighted sum of a few input rows (or a fill value), and the
 * backward scatters the gradient back along the same taps.
 *
 * Rows are `inner` contiguous elements, so a resample along H of NCHW moves
 * whole rows of W. Forward splits the (outer, out) rows among threads, each
 * written by one; backward splits `outer` slices, each summed by one thread
 * in a fixed order, so results do not depend on the thread count.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

#define RESAMPLE_GRAIN 16384   /* elements of work per parallel task, at least */

typedef struct {
    const ResampleArgs *a;
    const void *x;
    void *y;
    const float *gy;
    float *dx;
} ResampleJob;

static int64_t resample_grain(int64_t work_per_row)
{
    return RESAMPLE_GRAIN / (work_per_row > 0 ? work_per_row : 1) + 1;
}

/* Output rows [begin, end) of (outer * out) by copying (taps 1, no weight). */
static void copy_rows(void *ctx, int64_t begin, int64_t end)
{
    const ResampleJob *job = ctx;
    const ResampleArgs *a = job->a;
    const size_t row = (size_t)a->inner * a->elem_size;
    int64_t r, k;
    for (r = begin; r < end; r++) {
        const int64_t o = r / a->out, j = r % a->out, i = a->index[j];
        char *dst = (char *)job->y + (size_t)r * row;
        if (i >= 0) {
            memcpy(dst, (const char *)job->x + (size_t)(o * a->in + i) * row, row);
            continue;
        }
        for (k = 0; k < a->inner; k++)
            memcpy(dst + (size_t)k * a->elem_size, a->fill_bytes, a->elem_size);
    }
}

/* The last dim (inner 1) of 4-byte elements, slices [begin, end) of outer: a gather. */
static void gather_slices(void *ctx, int64_t begin, int64_t end)
{
    const ResampleJob *job = ctx;
    const ResampleArgs *a = job->a;
    const int64_t *restrict index = a->index;
    uint32_t fill;
    int64_t o, j;
    memcpy(&fill, a->fill_bytes, sizeof fill);
    for (o = begin; o < end; o++) {
        const uint32_t *restrict src = (const uint32_t *)job->x + o * a->in;
        uint32_t *restrict dst = (uint32_t *)job->y + o * a->out;
        for (j = 0; j < a->out; j++) dst[j] = index[j] >= 0 ? src[index[j]] : fill;
    }
}

/* Output rows [begin, end) as weighted sums of float32 rows. */
static void weighted_rows(void *ctx, int64_t begin, int64_t end)
{
    const ResampleJob *job = ctx;
    const ResampleArgs *a = job->a;
    const float *x = job->x;
    int64_t r, k;
    int t;
    for (r = begin; r < end; r++) {
        const int64_t o = r / a->out, j = r % a->out;
        float *restrict dst = (float *)job->y + r * a->inner;
        for (t = 0; t < a->taps; t++) {
            const int64_t i = a->index[j * a->taps + t];
            const float w = a->weight ? a->weight[j * a->taps + t] : 1.0f;
            const float *restrict src = i >= 0 ? x + (o * a->in + i) * a->inner : x;
            if (i < 0) {
                for (k = 0; k < a->inner; k++) dst[k] = t ? dst[k] + w * a->fill : w * a->fill;
            } else if (t == 0) {
                for (k = 0; k < a->inner; k++) dst[k] = w * src[k];
            } else {
                for (k = 0; k < a->inner; k++) dst[k] += w * src[k];
            }
        }
    }
}

/* The last dim (inner 1) as weighted sums, slices [begin, end) of outer. */
static void weighted_slices(void *ctx, int64_t begin, int64_t end)
{
    const ResampleJob *job = ctx;
    const ResampleArgs *a = job->a;
    int64_t o, j;
    int t;
    for (o = begin; o < end; o++) {
        const float *restrict src = (const float *)job->x + o * a->in;
        float *restrict dst = (float *)job->y + o * a->out;
        for (j = 0; j < a->out; j++) {
            float sum = 0.0f;
            for (t = 0; t < a->taps; t++) {
                const int64_t i = a->index[j * a->taps + t];
                const float w = a->weight ? a->weight[j * a->taps + t] : 1.0f;
                const float v = w * (i >= 0 ? src[i] : a->fill);
                sum = t ? sum + v : v;
            }
            dst[j] = sum;
        }
    }
}

int cpu_resample(const ResampleArgs *a, const void *x, void *y)
{
    ResampleJob job;
    const int copy = a->taps == 1 && !a->weight;
    memset(&job, 0, sizeof job);
    job.a = a;
    job.x = x;
    job.y = y;
    if (a->inner == 1 && (!copy || a->elem_size == 4))
        parallel_for(a->outer, resample_grain(a->out * a->taps), copy ? gather_slices
                                                                       : weighted_slices, &job);
    else
        parallel_for(a->outer * a->out, resample_grain(a->inner * a->taps),
                     copy ? copy_rows : weighted_rows, &job);
    return AC_OK;
}

/* Slices [begin, end) of outer: dx's slice cleared, then every tap's share added. */
static void backward_slices(void *ctx, int64_t begin, int64_t end)
{
    const ResampleJob *job = ctx;
    const ResampleArgs *a = job->a;
    int64_t o, j, k;
    int t;
    for (o = begin; o < end; o++) {
        float *dx = job->dx + o * a->in * a->inner;
        memset(dx, 0, (size_t)(a->in * a->inner) * sizeof(float));
        for (j = 0; j < a->out; j++) {
            const float *restrict g = job->gy + (o * a->out + j) * a->inner;
            for (t = 0; t < a->taps; t++) {
                const int64_t i = a->index[j * a->taps + t];
                const float w = a->weight ? a->weight[j * a->taps + t] : 1.0f;
                float *restrict d;
                if (i < 0) continue;
                d = dx + i * a->inner;
                for (k = 0; k < a->inner; k++) d[k] += w * g[k];
            }
        }
    }
}

int cpu_resample_backward(const ResampleArgs *a, const float *gy, float *dx)
{
    ResampleJob job;
    memset(&job, 0, sizeof job);
    job.a = a;
    job.gy = gy;
    job.dx = dx;
    parallel_for(a->outer, resample_grain((a->in + a->out * a->taps) * a->inner), backward_slices,
                 &job);
    return AC_OK;
}
