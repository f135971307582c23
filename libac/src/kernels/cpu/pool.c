/*
 * cpu/pool.c - the CPU's kernels for pool.c: max_pool2d, avg_pool2d and
 * adaptive_avg_pool2d on planes, forward and backward.
 *
 * Every (image, channel) plane is pooled on its own, so threads share out
 * planes and results do not depend on the thread count. The common 2x2
 * window with stride 2 has loops of its own, written to vectorise. Padding
 * never wins a max (it is -inf) and counts as zeros in an average
 * (count_include_pad=True, PyTorch's default).
 */
#include "kernels/cpu/cpu_kernels.h"

#include <math.h>
#include <string.h>

#define POOL_GRAIN 16384   /* elements of work per parallel task, at least */

typedef struct {
    PoolGeom g;
    const float *x, *gy;
    float *y, *dx;
    int32_t *argmax;          /* forward: NULL when not kept */
    const int32_t *maxima;    /* backward: forward's argmax */
} PoolJob;

/* A window [lo, hi) along one axis, clipped to the input [0, size). */
static void pool_window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t size,
                        int64_t *lo, int64_t *hi)
{
    int64_t start = o * stride - pad;
    *hi = start + kernel < size ? start + kernel : size;
    *lo = start > 0 ? start : 0;
}

/* PyTorch's adaptive window o of out along an axis of size:
   [floor(o*size/out), ceil((o+1)*size/out)). */
static void adaptive_window(int64_t o, int64_t out, int64_t size, int64_t *lo, int64_t *hi)
{
    *lo = o * size / out;
    *hi = ((o + 1) * size + out - 1) / out;
}

static int64_t plane_grain(int64_t work_per_plane)
{
    return POOL_GRAIN / (work_per_plane > 0 ? work_per_plane : 1) + 1;
}

/* ---- max_pool2d ---------------------------------------------------------- */

/* The common window: 2x2, stride 2, no padding. */
static int is_2x2(const PoolGeom *g)
{
    return g->kh == 2 && g->kw == 2 && g->sh == 2 && g->sw == 2 && g->ph == 0 && g->pw == 0 &&
           g->dh == 1 && g->dw == 1 && g->oh * 2 <= g->h && g->ow * 2 <= g->w;
}

/* v replaces best when larger, or when it is the first NaN (which then stays, as in PyTorch). */
static int max_takes(float v, float best) { return (v > best) | ((v != v) & (best == best)); }

/*
 * The common 2x2 window with stride 2 and no padding, where every window lies
 * inside. Written as selects over a row of windows so that it vectorises;
 * the first maximum in window order (top-left, top-right, bottom-left,
 * bottom-right) wins ties. Selects do not carry NaN the way PyTorch does, so
 * this returns 0 when the plane holds a NaN, and max_pool_plane redoes it.
 */
static int max_pool_plane_2x2(const PoolGeom *g, const float *x, float *y, int32_t *argmax)
{
    int64_t oh, ow;
    int nan_seen = 0;
    for (oh = 0; oh < g->oh; oh++) {
        const float *restrict top = x + 2 * oh * g->w, *restrict bottom = top + g->w;
        float *restrict out = y + oh * g->ow;
        int32_t *restrict at = argmax ? argmax + oh * g->ow : NULL;
        const int32_t row = (int32_t)(2 * oh * g->w), below = (int32_t)g->w;
        if (at) {
            for (ow = 0; ow < g->ow; ow++) {
                float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow];
                float d = bottom[2 * ow + 1];
                float upper = b > a ? b : a, lower = d > c ? d : c;
                int32_t upper_at = b > a, lower_at = below + (d > c), pick_lower = lower > upper;
                out[ow] = lower > upper ? lower : upper;
                at[ow] = row + 2 * (int32_t)ow + upper_at + pick_lower * (lower_at - upper_at);
                nan_seen |= (a != a) | (b != b) | (c != c) | (d != d);
            }
            continue;
        }
        for (ow = 0; ow < g->ow; ow++) {
            float a = top[2 * ow], b = top[2 * ow + 1], c = bottom[2 * ow], d = bottom[2 * ow + 1];
            float upper = b > a ? b : a, lower = d > c ? d : c;
            out[ow] = lower > upper ? lower : upper;
            nan_seen |= (a != a) | (b != b) | (c != c) | (d != d);
        }
    }
    return !nan_seen;
}

/* A dilated window along one axis: its first tap inside [0, size), *first, and
   the end (exclusive) of its taps there, *end, stepping by dil. */
static void dilated_window(int64_t o, int64_t stride, int64_t pad, int64_t kernel, int64_t dil,
                           int64_t size, int64_t *first, int64_t *end)
{
    int64_t start = o * stride - pad, last = start + (kernel - 1) * dil;
    while (start < 0) start += dil;
    while (last >= size) last -= dil;
    *first = start;
    *end = last + 1;
}

/* Max windows with dilation (or adaptive windows, kh == 0), the general loop. */
static void max_pool_plane_strided(const PoolGeom *g, const float *x, float *y, int32_t *argmax)
{
    const int64_t dh = g->kh ? g->dh : 1, dw = g->kh ? g->dw : 1;
    int64_t oh, ow, i, j;
    for (oh = 0; oh < g->oh; oh++) {
        int64_t h0, h1;
        if (g->kh) dilated_window(oh, g->sh, g->ph, g->kh, dh, g->h, &h0, &h1);
        else adaptive_window(oh, g->oh, g->h, &h0, &h1);
        for (ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1, best_at;
            float best = -INFINITY;
            if (g->kh) dilated_window(ow, g->sw, g->pw, g->kw, dw, g->w, &w0, &w1);
            else adaptive_window(ow, g->ow, g->w, &w0, &w1);
            best_at = h0 * g->w + w0;
            for (i = h0; i < h1; i += dh)
                for (j = w0; j < w1; j += dw)
                    if (max_takes(x[i * g->w + j], best)) {
                        best = x[i * g->w + j];
                        best_at = i * g->w + j;
                    }
            y[oh * g->ow + ow] = best;
            if (argmax) argmax[oh * g->ow + ow] = (int32_t)best_at;
        }
    }
}

static void max_pool_plane(const PoolGeom *g, const float *x, float *y, int32_t *argmax)
{
    int64_t oh, ow, i, j;
    for (oh = 0; oh < g->oh; oh++) {
        int64_t h0, h1;
        pool_window(oh, g->sh, g->ph, g->kh, g->h, &h0, &h1);
        for (ow = 0; ow < g->ow; ow++) {
            int64_t w0, w1, best_at;
            float best = -INFINITY;
            pool_window(ow, g->sw, g->pw, g->kw, g->w, &w0, &w1);
            best_at = h0 * g->w + w0;
            for (i = h0; i < h1; i++)
                for (j = w0; j < w1; j++)
                    if (max_takes(x[i * g->w + j], best)) {
                        best = x[i * g->w + j];
                        best_at = i * g->w + j;
                    }
            y[oh * g->ow + ow] = best;
            if (argmax) argmax[oh * g->ow + ow] = (int32_t)best_at;
        }
    }
}

static void max_pool_task(void *ctx, int64_t begin, int64_t end)
{
    const PoolJob *job = ctx;
    const PoolGeom *g = &job->g;
    const int two_by_two = is_2x2(g);
    int64_t plane;
    for (plane = begin; plane < end; plane++) {
        const float *x = job->x + plane * g->h * g->w;
        float *y = job->y + plane * g->oh * g->ow;
        int32_t *argmax = job->argmax ? job->argmax + plane * g->oh * g->ow : NULL;
        if (g->kh == 0 || g->dh != 1 || g->dw != 1) max_pool_plane_strided(g, x, y, argmax);
        else if (!two_by_two || !max_pool_plane_2x2(g, x, y, argmax)) max_pool_plane(g, x, y, argmax);
    }
}

int cpu_max_pool2d(const PoolGeom *g, const float *x, float *y, int32_t *argmax)
{
    PoolJob job;
    job.g = *g;
    job.x = x;
    job.y = y;
    job.argmax = argmax;
    parallel_for(g->planes, plane_grain(g->kh ? g->oh * g->ow * g->kh * g->kw : g->h * g->w + g->oh * g->ow),
                 max_pool_task, &job);
    return AC_OK;
}

/* v when keep is 1, else +0: a mask on the bits, which vectorises (and keeps NaN out of v's 0s). */
static float keep_if(float v, int keep)
{
    union { float f; uint32_t u; } bits;
    bits.f = v;
    bits.u &= (uint32_t)0 - (uint32_t)keep;
    return bits.f;
}

/*
 * Backward of the 2x2, stride 2 case: windows do not overlap, so each input
 * element gets its window's gradient or zero, written in one pass with no
 * clearing first; a last odd row or column, in no window, gets zeros.
 */
static void max_pool_backward_plane_2x2(const PoolGeom *g, const float *gy, const int32_t *argmax,
                                        float *dx)
{
    int64_t oh, ow, i;
    for (oh = 0; oh < g->oh; oh++) {
        float *restrict top = dx + 2 * oh * g->w, *restrict bottom = top + g->w;
        const float *restrict grad = gy + oh * g->ow;
        const int32_t *restrict at = argmax + oh * g->ow;
        const int32_t row = (int32_t)(2 * oh * g->w), below = (int32_t)g->w;
        for (ow = 0; ow < g->ow; ow++) {
            const int32_t first = row + 2 * (int32_t)ow;
            top[2 * ow] = keep_if(grad[ow], at[ow] == first);
            top[2 * ow + 1] = keep_if(grad[ow], at[ow] == first + 1);
            bottom[2 * ow] = keep_if(grad[ow], at[ow] == first + below);
            bottom[2 * ow + 1] = keep_if(grad[ow], at[ow] == first + below + 1);
        }
        if (g->w % 2) top[g->w - 1] = bottom[g->w - 1] = 0.0f;
    }
    if (g->h % 2)
        for (i = 0; i < g->w; i++) dx[(g->h - 1) * g->w + i] = 0.0f;
}

static void max_pool_backward_task(void *ctx, int64_t begin, int64_t end)
{
    const PoolJob *job = ctx;
    const PoolGeom *g = &job->g;
    const int64_t in_size = g->h * g->w, out_size = g->oh * g->ow;
    int64_t plane, q;
    for (plane = begin; plane < end; plane++) {
        float *dx = job->dx + plane * in_size;
        const float *gy = job->gy + plane * out_size;
        const int32_t *argmax = job->maxima + plane * out_size;
        if (is_2x2(g)) {
            max_pool_backward_plane_2x2(g, gy, argmax, dx);
            continue;
        }
        memset(dx, 0, (size_t)in_size * sizeof(float));
        for (q = 0; q < out_size; q++) dx[argmax[q]] += gy[q];
    }
}

int cpu_max_pool2d_backward(const PoolGeom *g, const float *gy, const int32_t *argmax, float *dx)
{
    PoolJob job;
    job.g = *g;
    job.gy = gy;
    job.dx = dx;
    job.maxima = argmax;
    parallel_for(g->planes, plane_grain(g->h * g->w), max_pool_backward_task, &job);
    return AC_OK;
}

/* ---- avg_pool2d and adaptive_avg_pool2d ---------------------------------- */

/* The rows [h0, h1) and the columns [w0, w1) of window (oh, ow) of an
   average within the input, and what each of its elements weighs: `fixed`,
   1 / (kh * kw), for avg_pool2d, where padding counts as zeros, else
   (adaptive) 1 / the window's size. The loops below pass `adaptive` as a
   constant, so each pool gets a copy of them without the other's arithmetic
   (a shared copy ran avg_pool2d 2x2 20% slower). */
static inline void average_rows(const PoolGeom *g, const int adaptive, int64_t oh, int64_t *h0,
                                int64_t *h1)
{
    if (adaptive) adaptive_window(oh, g->oh, g->h, h0, h1);
    else pool_window(oh, g->sh, g->ph, g->kh, g->h, h0, h1);
}

static inline void average_cols(const PoolGeom *g, const int adaptive, int64_t ow, int64_t *w0,
                                int64_t *w1)
{
    if (adaptive) adaptive_window(ow, g->ow, g->w, w0, w1);
    else pool_window(ow, g->sw, g->pw, g->kw, g->w, w0, w1);
}

static inline float average_weight(const int adaptive, float fixed, int64_t h0, int64_t h1,
                                   int64_t w0, int64_t w1)
{
    return adaptive ? 1.0f / (float)((h1 - h0) * (w1 - w0)) : fixed;
}

/* Planes per task: an adaptive window's size is not known up front, but all
   of them together cover the plane about once. */
static int64_t average_grain(const PoolGeom *g)
{
    return plane_grain(g->kh == 0 ? g->h * g->w + g->oh * g->ow : g->oh * g->ow * g->kh * g->kw);
}

static inline __attribute__((always_inline)) void
average_planes(const PoolJob *job, int64_t begin, int64_t end, const int adaptive)
{
    const PoolGeom *g = &job->g;
    const float fixed = adaptive ? 0.0f : 1.0f / (float)(g->kh * g->kw);
    int64_t plane, oh, ow, i, j;
    for (plane = begin; plane < end; plane++) {
        const float *x = job->x + plane * g->h * g->w;
        float *y = job->y + plane * g->oh * g->ow;
        for (oh = 0; oh < g->oh; oh++) {
            int64_t h0, h1;
            average_rows(g, adaptive, oh, &h0, &h1);
            for (ow = 0; ow < g->ow; ow++) {
                int64_t w0, w1;
                float sum = 0.0f;
                average_cols(g, adaptive, ow, &w0, &w1);
                for (i = h0; i < h1; i++)
                    for (j = w0; j < w1; j++) sum += x[i * g->w + j];
                y[oh * g->ow + ow] = sum * average_weight(adaptive, fixed, h0, h1, w0, w1);
            }
        }
    }
}

static void average_task(void *ctx, int64_t begin, int64_t end)
{
    const PoolJob *job = ctx;
    if (job->g.kh == 0) average_planes(job, begin, end, 1);
    else average_planes(job, begin, end, 0);
}

int cpu_avg_pool2d(const PoolGeom *g, const float *x, float *y)
{
    PoolJob job;
    job.g = *g;
    job.x = x;
    job.y = y;
    parallel_for(g->planes, average_grain(g), average_task, &job);
    return AC_OK;
}

static inline __attribute__((always_inline)) void
average_backward_planes(const PoolJob *job, int64_t begin, int64_t end, const int adaptive)
{
    const PoolGeom *g = &job->g;
    const float fixed = adaptive ? 0.0f : 1.0f / (float)(g->kh * g->kw);
    int64_t plane, oh, ow, i, j;
    for (plane = begin; plane < end; plane++) {
        float *dx = job->dx + plane * g->h * g->w;
        const float *gy = job->gy + plane * g->oh * g->ow;
        memset(dx, 0, (size_t)(g->h * g->w) * sizeof(float));
        for (oh = 0; oh < g->oh; oh++) {
            int64_t h0, h1;
            average_rows(g, adaptive, oh, &h0, &h1);
            for (ow = 0; ow < g->ow; ow++) {
                int64_t w0, w1;
                float share;
                average_cols(g, adaptive, ow, &w0, &w1);
                share = gy[oh * g->ow + ow] * average_weight(adaptive, fixed, h0, h1, w0, w1);
                for (i = h0; i < h1; i++)
                    for (j = w0; j < w1; j++) dx[i * g->w + j] += share;
            }
        }
    }
}

static void average_backward_task(void *ctx, int64_t begin, int64_t end)
{
    const PoolJob *job = ctx;
    if (job->g.kh == 0) average_backward_planes(job, begin, end, 1);
    else average_backward_planes(job, begin, end, 0);
}

int cpu_avg_pool2d_backward(const PoolGeom *g, const float *gy, float *dx)
{
    PoolJob job;
    job.g = *g;
    job.gy = gy;
    job.dx = dx;
    parallel_for(g->planes, average_grain(g), average_backward_task, &job);
    return AC_OK;
}
