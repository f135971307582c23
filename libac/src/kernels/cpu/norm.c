/*
 * cpu/norm.c - the CPU's kernels for norm.c: batch and layer normalisation,
 * forward and backward.
 *
 * Batch norm: in training the mean and variance are the batch's, computed in
 * two passes (mean first, then squared deviations from it) with per-plane
 * float sums gathered in double, and the running statistics are updated in
 * place: running = (1 - momentum) * running + momentum * batch, with the
 * unbiased variance, as PyTorch does. Each channel is one task, so results
 * do not depend on the thread count. Backward is the fused formula:
 * dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat)) in training.
 *
 * Layer norm: each row gets its own mean and biased variance (same two
 * passes). Backward is the same fused formula per row, with g * w in place
 * of g; the weight and bias gradients are summed over rows by tasks that
 * each own a block of columns.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

#define NORM_GRAIN 16384   /* elements per parallel task, at least */

/* Sum of (x - center)^2 over n floats, in eight fixed lanes. */
static float sum_squared_deviations(const float *x, int64_t n, float center)
{
    float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, total, d;
    int64_t q = 0;
    int l;
    for (; q + 8 <= n; q += 8)
        for (l = 0; l < 8; l++) {
            d = x[q + l] - center;
            lanes[l] += d * d;
        }
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; q < n; q++) {
        d = x[q] - center;
        total += d * d;
    }
    return total;
}

/* Sum of g * (x - center) over n floats, in eight fixed lanes. */
static float sum_products(const float *g, const float *x, int64_t n, float center)
{
    float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, total;
    int64_t q = 0;
    int l;
    for (; q + 8 <= n; q += 8)
        for (l = 0; l < 8; l++) lanes[l] += g[q + l] * (x[q + l] - center);
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (; q < n; q++) total += g[q] * (x[q] - center);
    return total;
}

static int64_t channel_grain(const BatchNormArgs *job)
{
    int64_t per_channel = job->n * job->s;
    return NORM_GRAIN / (per_channel > 0 ? per_channel : 1) + 1;
}

/* ---- forward ------------------------------------------------------------- */

/* Plane p (image p / c's channel p % c) scaled and shifted by its channel's mean and
   invstd, and weight and bias. */
static void normalize_plane(const BatchNormArgs *job, int64_t p)
{
    const int64_t c = p % job->c;
    const float scale = job->invstd[c] * (job->weight ? job->weight[c] : 1.0f);
    const float shift = (job->bias ? job->bias[c] : 0.0f) - job->mean[c] * scale;
    const float *x = job->x + p * job->s;
    float *y = job->y + p * job->s;
    int64_t q;
    for (q = 0; q < job->s; q++) y[q] = x[q] * scale + shift;
}

/* Training: each channel's batch statistics, the running ones updated, then its planes. */
static void norm_forward_task(void *ctx, int64_t begin, int64_t end)
{
    const BatchNormArgs *job = ctx;
    const int64_t m = job->n * job->s;
    int64_t c, n;
    for (c = begin; c < end; c++) {
        double sum = 0.0, squares = 0.0, var;
        float mean, invstd;
        for (n = 0; n < job->n; n++)
            sum += vec_sum(job->x + (n * job->c + c) * job->s, job->s);
        mean = (float)(sum / (double)m);
        for (n = 0; n < job->n; n++)
            squares += sum_squared_deviations(job->x + (n * job->c + c) * job->s, job->s, mean);
        var = squares / (double)m;
        invstd = (float)(1.0 / sqrt(var + (double)job->eps));
        if (job->running_mean) {
            job->running_mean[c] = (1.0f - job->momentum) * job->running_mean[c] +
                                   job->momentum * mean;
            job->running_var[c] = (1.0f - job->momentum) * job->running_var[c] +
                                  job->momentum * (float)(squares / (double)(m - 1));
        }
        job->mean[c] = mean;
        job->invstd[c] = invstd;
        for (n = 0; n < job->n; n++) normalize_plane(job, n * job->c + c);
    }
}

/* Eval: planes [begin, end) by the running statistics, in memory order. */
static void norm_eval_task(void *ctx, int64_t begin, int64_t end)
{
    const BatchNormArgs *job = ctx;
    int64_t p;
    for (p = begin; p < end; p++) normalize_plane(job, p);
}

int cpu_batch_norm(const BatchNormArgs *a)
{
    int64_t c;
    if (a->training) {
        parallel_for(a->c, channel_grain(a), norm_forward_task, (void *)a);
        return AC_OK;
    }
    /* Eval reads and writes whole planes in order: the channel-major walk of training
       hops between images, one plane of a few pixels (4x4 in ResNet's last stage) at a time. */
    for (c = 0; c < a->c; c++) {
        a->mean[c] = a->running_mean[c];
        a->invstd[c] = (float)(1.0 / sqrt((double)a->running_var[c] + (double)a->eps));
    }
    parallel_for(a->n * a->c, NORM_GRAIN / (a->s > 0 ? a->s : 1) + 1, norm_eval_task, (void *)a);
    return AC_OK;
}

static void norm_backward_task(void *ctx, int64_t begin, int64_t end)
{
    const BatchNormArgs *job = ctx;
    const double m = (double)(job->n * job->s);
    int64_t c, n, q;
    for (c = begin; c < end; c++) {
        const float mean = job->mean[c], invstd = job->invstd[c];
        const float w = job->weight ? job->weight[c] : 1.0f;
        double sum_g = 0.0, sum_gx = 0.0;
        float mean_g, mean_gx, scale;
        for (n = 0; n < job->n; n++) {
            const float *x = job->x + (n * job->c + c) * job->s;
            const float *g = job->gy + (n * job->c + c) * job->s;
            sum_g += vec_sum(g, job->s);
            sum_gx += sum_products(g, x, job->s, mean);
        }
        sum_gx *= invstd;   /* now the sum of g * xhat */
        if (job->dweight) job->dweight[c] = (float)sum_gx;
        if (job->dbias) job->dbias[c] = (float)sum_g;
        if (!job->dx) continue;
        scale = w * invstd;
        mean_g = job->training ? (float)(sum_g / m) : 0.0f;
        mean_gx = job->training ? (float)(sum_gx / m) : 0.0f;
        for (n = 0; n < job->n; n++) {
            const float *x = job->x + (n * job->c + c) * job->s;
            const float *g = job->gy + (n * job->c + c) * job->s;
            float *dx = job->dx + (n * job->c + c) * job->s;
            for (q = 0; q < job->s; q++)
                dx[q] = scale * (g[q] - mean_g - (x[q] - mean) * invstd * mean_gx);
        }
    }
}

int cpu_batch_norm_backward(const BatchNormArgs *a)
{
    parallel_for(a->c, channel_grain(a), norm_backward_task, (void *)a);
    return AC_OK;
}

/* ---- layer norm ---------------------------------------------------------- */

static int64_t row_grain(int64_t cols)
{
    return NORM_GRAIN / (cols > 0 ? cols : 1) + 1;
}

static void layer_norm_forward_task(void *ctx, int64_t begin, int64_t end)
{
    const LayerNormArgs *job = ctx;
    int64_t r, q;
    for (r = begin; r < end; r++) {
        const float *x = job->x + r * job->cols;
        float *y = job->y + r * job->cols;
        float mean = vec_sum(x, job->cols) / (float)job->cols;
        float var = sum_squared_deviations(x, job->cols, mean) / (float)job->cols;
        float invstd = (float)(1.0 / sqrt((double)var + (double)job->eps));
        job->mean[r] = mean;
        job->invstd[r] = invstd;
        for (q = 0; q < job->cols; q++) {
            float v = (x[q] - mean) * invstd;
            if (job->weight) v *= job->weight[q];
            if (job->bias) v += job->bias[q];
            y[q] = v;
        }
    }
}

int cpu_layer_norm(const LayerNormArgs *a)
{
    parallel_for(a->rows, row_grain(a->cols), layer_norm_forward_task, (void *)a);
    return AC_OK;
}

static void layer_norm_dx_task(void *ctx, int64_t begin, int64_t end)
{
    const LayerNormArgs *job = ctx;
    const int64_t d = job->cols;
    int64_t r, q;
    for (r = begin; r < end; r++) {
        const float *x = job->x + r * d, *g = job->gy + r * d;
        const float mean = job->mean[r], invstd = job->invstd[r];
        float *dx = job->dx + r * d;
        float sum_g, sum_gx, mean_g, mean_gx;
        if (job->weight) {   /* dx holds g * w until it is overwritten below */
            for (q = 0; q < d; q++) dx[q] = g[q] * job->weight[q];
            g = dx;
        }
        sum_g = vec_sum(g, d);
        sum_gx = sum_products(g, x, d, mean) * invstd;
        mean_g = sum_g / (float)d;
        mean_gx = sum_gx / (float)d;
        for (q = 0; q < d; q++) dx[q] = invstd * (g[q] - mean_g - (x[q] - mean) * invstd * mean_gx);
    }
}

/* The weight and bias gradients of columns [begin, end), summed over rows in order. */
static void layer_norm_affine_task(void *ctx, int64_t begin, int64_t end)
{
    const LayerNormArgs *job = ctx;
    int64_t r, q;
    for (q = begin; q < end; q++) {
        if (job->dweight) job->dweight[q] = 0.0f;
        if (job->dbias) job->dbias[q] = 0.0f;
    }
    for (r = 0; r < job->rows; r++) {
        const float *x = job->x + r * job->cols, *g = job->gy + r * job->cols;
        const float mean = job->mean[r], invstd = job->invstd[r];
        for (q = begin; q < end; q++) {
            if (job->dweight) job->dweight[q] += g[q] * (x[q] - mean) * invstd;
            if (job->dbias) job->dbias[q] += g[q];
        }
    }
}

int cpu_layer_norm_backward(const LayerNormArgs *a)
{
    if (a->dx) parallel_for(a->rows, row_grain(a->cols), layer_norm_dx_task, (void *)a);
    if (a->dweight || a->dbias)
        parallel_for(a->cols, NORM_GRAIN / (a->rows > 0 ? a->rows : 1) + 1,
                     layer_norm_affine_task, (void *)a);
    return AC_OK;
}
