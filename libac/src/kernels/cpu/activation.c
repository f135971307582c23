/*
 * cpu/activation.c - the CPU's kernels for activation.c: relu, sigmoid, tanh,
 * gelu, softmax and log_softmax, forward and backward.
 *
 * The transcendental work runs in the vectorised kernels (kernels/vecmath.c).
 * softmax subtracts the row's max before exp, writes the exps into its output
 * row and sums them there, in an order fixed by the row length: the same bits
 * whatever the thread count.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

#define ACT_GRAIN 16384
/* Lanes of a softmax over a dim that is not the last, handled together so that
   each step along the dim is a contiguous run of values. */
#define SOFTMAX_LANES 256

/* ---- relu, sigmoid, tanh, gelu --------------------------------------------- */

/* One activation's chunk [begin, end): x is the input (forward) or grad_out
   (backward), y the saved tensor (backward only). */
typedef void (*ActChunk)(const float *restrict x, const float *restrict y, float *restrict out,
                         int64_t begin, int64_t end);

typedef struct {
    ActChunk chunk;
    const float *x, *y;
    float *out;
} ActJob;

static void act_task(void *ctx, int64_t begin, int64_t end)
{
    const ActJob *job = ctx;
    job->chunk(job->x, job->y, job->out, begin, end);
}

static int act_run(ActChunk chunk, const float *x, const float *y, float *out, int64_t n)
{
    ActJob job;
    job.chunk = chunk;
    job.x = x;
    job.y = y;
    job.out = out;
    parallel_for(n, ACT_GRAIN, act_task, &job);
    return AC_OK;
}

static void relu_chunk(const float *restrict x, const float *restrict y, float *restrict out,
                       int64_t begin, int64_t end)
{
    int64_t i;
    (void)y;
    for (i = begin; i < end; i++) out[i] = x[i] < 0.0f ? 0.0f : x[i];   /* NaN passes through */
}

static void sigmoid_chunk(const float *restrict x, const float *restrict y, float *restrict out,
                          int64_t begin, int64_t end)
{
    (void)y;
    vec_sigmoid(x + begin, out + begin, end - begin);
}

static void tanh_chunk(const float *restrict x, const float *restrict y, float *restrict out,
                       int64_t begin, int64_t end)
{
    (void)y;
    vec_tanh(x + begin, out + begin, end - begin);
}

static void gelu_chunk(const float *restrict x, const float *restrict y, float *restrict out,
                       int64_t begin, int64_t end)
{
    (void)y;
    vec_gelu(x + begin, out + begin, end - begin);
}

/* backward: g is grad_out, y the output (relu, sigmoid, tanh) or the input (gelu) */
static void relu_backward_chunk(const float *restrict g, const float *restrict y,
                                float *restrict out, int64_t begin, int64_t end)
{
    int64_t i;
    for (i = begin; i < end; i++) {
        const float u = g[i], v = y[i];   /* both loaded, so the loop vectorises */
        out[i] = v <= 0.0f ? 0.0f : u;
    }
}

static void sigmoid_backward_chunk(const float *restrict g, const float *restrict y,
                                   float *restrict out, int64_t begin, int64_t end)
{
    int64_t i;
    for (i = begin; i < end; i++) out[i] = g[i] * (1.0f - y[i]) * y[i];
}

static void tanh_backward_chunk(const float *restrict g, const float *restrict y,
                                float *restrict out, int64_t begin, int64_t end)
{
    int64_t i;
    for (i = begin; i < end; i++) out[i] = g[i] * (1.0f - y[i] * y[i]);
}

static void gelu_backward_chunk(const float *restrict g, const float *restrict x,
                                float *restrict out, int64_t begin, int64_t end)
{
    vec_gelu_grad(g + begin, x + begin, out + begin, end - begin);
}

int cpu_relu(const float *x, float *out, int64_t n) { return act_run(relu_chunk, x, NULL, out, n); }
int cpu_sigmoid(const float *x, float *out, int64_t n) { return act_run(sigmoid_chunk, x, NULL, out, n); }
int cpu_tanh(const float *x, float *out, int64_t n) { return act_run(tanh_chunk, x, NULL, out, n); }
int cpu_gelu(const float *x, float *out, int64_t n) { return act_run(gelu_chunk, x, NULL, out, n); }

int cpu_relu_backward(const float *g, const float *y, float *out, int64_t n)
{
    return act_run(relu_backward_chunk, g, y, out, n);
}

int cpu_sigmoid_backward(const float *g, const float *y, float *out, int64_t n)
{
    return act_run(sigmoid_backward_chunk, g, y, out, n);
}

int cpu_tanh_backward(const float *g, const float *y, float *out, int64_t n)
{
    return act_run(tanh_backward_chunk, g, y, out, n);
}

int cpu_gelu_backward(const float *g, const float *x, float *out, int64_t n)
{
    return act_run(gelu_backward_chunk, g, x, out, n);
}

/* ---- softmax and log_softmax ----------------------------------------------- */

/* rows of n steps along the softmax dim, each step `inner` lanes apart. */
typedef struct {
    int64_t n, inner;
    int is_log;
    const float *x, *g;    /* forward: x is the input; backward: x is the output, g grad_out */
    float *out;
} SoftmaxJob;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* One contiguous row of n values (the softmax dim is the last). */
static void softmax_row(const float *x, float *out, int64_t n, int is_log)
{
    float max = vec_max(x, n), log_sum, scale;
    int64_t k;
    if (is_log) {
        log_sum = logf(vec_exp_sum(x, max, NULL, n));
        /* (x - max) - log_sum: adding log_sum to a large max first would round it away */
        for (k = 0; k < n; k++) out[k] = (x[k] - max) - log_sum;
    } else {
        scale = 1.0f / vec_exp_sum(x, max, out, n);
        for (k = 0; k < n; k++) out[k] *= scale;
    }
}

/* One row of n steps along the softmax dim, each step `inner` lanes apart;
   every lane sums its exps in step order. */
static void softmax_lanes(const float *x, float *out, int64_t n, int64_t inner, int is_log)
{
    float max[SOFTMAX_LANES], sum[SOFTMAX_LANES];
    int64_t first, width, k, l;
    for (first = 0; first < inner; first += width) {
        width = min64(SOFTMAX_LANES, inner - first);
        for (l = 0; l < width; l++) {
            max[l] = x[first + l];
            sum[l] = 0.0f;
        }
        for (k = 1; k < n; k++) {
            const float *xk = x + k * inner + first;
            for (l = 0; l < width; l++) max[l] = xk[l] > max[l] ? xk[l] : max[l];
        }
        for (k = 0; k < n; k++) {
            const float *xk = x + k * inner + first;
            float *ok = out + k * inner + first;
            for (l = 0; l < width; l++) ok[l] = xk[l] - max[l];
            vec_exp(ok, ok, width);
            for (l = 0; l < width; l++) sum[l] += ok[l];
        }
        for (l = 0; l < width; l++) sum[l] = is_log ? logf(sum[l]) : 1.0f / sum[l];
        for (k = 0; k < n; k++) {
            const float *xk = x + k * inner + first;
            float *ok = out + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) ok[l] = (xk[l] - max[l]) - sum[l];
            else
                for (l = 0; l < width; l++) ok[l] *= sum[l];
        }
    }
}

static void softmax_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->n, inner = job->inner;
    int64_t row;
    for (row = begin; row < end; row++) {
        const float *x = job->x + row * n * inner;
        float *out = job->out + row * n * inner;
        if (inner == 1)
            softmax_row(x, out, n, job->is_log);
        else
            softmax_lanes(x, out, n, inner, job->is_log);
    }
}

/* softmax: gin = y (g - sum(g y)); log_softmax: gin = g - exp(y) sum(g), over
   one contiguous row; y is the forward's output. */
static void softmax_grad_row(const float *y, const float *g, float *out, int64_t n, int is_log)
{
    float sum = 0.0f;
    int64_t k;
    if (is_log) {
        for (k = 0; k < n; k++) sum += g[k];
        vec_exp(y, out, n);
        for (k = 0; k < n; k++) out[k] = g[k] - out[k] * sum;
    } else {
        for (k = 0; k < n; k++) sum += g[k] * y[k];
        for (k = 0; k < n; k++) out[k] = y[k] * (g[k] - sum);
    }
}

/* As softmax_grad_row, for a row whose steps are `inner` lanes apart; each
   lane sums in step order. */
static void softmax_grad_lanes(const float *y, const float *g, float *out, int64_t n,
                               int64_t inner, int is_log)
{
    float sum[SOFTMAX_LANES];
    int64_t first, width, k, l;
    if (is_log) vec_exp(y, out, n * inner);
    for (first = 0; first < inner; first += width) {
        width = min64(SOFTMAX_LANES, inner - first);
        for (l = 0; l < width; l++) sum[l] = 0.0f;
        for (k = 0; k < n; k++) {
            const float *yk = y + k * inner + first, *gk = g + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) sum[l] += gk[l];
            else
                for (l = 0; l < width; l++) sum[l] += gk[l] * yk[l];
        }
        for (k = 0; k < n; k++) {
            const float *yk = y + k * inner + first, *gk = g + k * inner + first;
            float *ok = out + k * inner + first;
            if (is_log)
                for (l = 0; l < width; l++) ok[l] = gk[l] - ok[l] * sum[l];
            else
                for (l = 0; l < width; l++) ok[l] = yk[l] * (gk[l] - sum[l]);
        }
    }
}

static void softmax_grad_rows(void *ctx, int64_t begin, int64_t end)
{
    const SoftmaxJob *job = ctx;
    const int64_t n = job->n, inner = job->inner;
    int64_t row;
    for (row = begin; row < end; row++) {
        const int64_t at = row * n * inner;
        if (inner == 1)
            softmax_grad_row(job->x + at, job->g + at, job->out + at, n, job->is_log);
        else
            softmax_grad_lanes(job->x + at, job->g + at, job->out + at, n, inner, job->is_log);
    }
}

static int softmax_run(ParallelFn fn, int is_log, const float *x, const float *g, float *out,
                       int64_t rows, int64_t n, int64_t inner)
{
    SoftmaxJob job;
    int64_t row_size = n * inner;
    job.n = n;
    job.inner = inner;
    job.is_log = is_log;
    job.x = x;
    job.g = g;
    job.out = out;
    parallel_for(rows, row_size >= ACT_GRAIN ? 1 : ACT_GRAIN / row_size, fn, &job);
    return AC_OK;
}

int cpu_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner)
{
    return softmax_run(softmax_rows, 0, x, NULL, out, rows, n, inner);
}

int cpu_log_softmax(const float *x, float *out, int64_t rows, int64_t n, int64_t inner)
{
    return softmax_run(softmax_rows, 1, x, NULL, out, rows, n, inner);
}

int cpu_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                         int64_t inner)
{
    return softmax_run(softmax_grad_rows, 0, y, g, out, rows, n, inner);
}

int cpu_log_softmax_backward(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                             int64_t inner)
{
    return softmax_run(softmax_grad_rows, 1, y, g, out, rows, n, inner);
}
