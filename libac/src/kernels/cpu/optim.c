/*
 * cpu/optim.c - the CPU's kernels for optim/: SGD and Adam steps, each one
 * fused pass over every parameter, exactly as torch.optim computes them
 * (single-tensor form), down to the order of the floating-point operations;
 * and the sums behind a gradient norm and the clipping's scale
 * (optim/grad_norm.c), one pass each.
 */
#include "kernels/cpu/cpu_kernels.h"

#include <float.h>
#include <math.h>

/* Elements per task: below this, handing work to the pool costs more than it saves. */
#define SGD_GRAIN 16384
#define ADAM_GRAIN 16384

/* ---- SGD ----------------------------------------------------------------- */

typedef struct {
    float *param;
    const float *grad;
    float *buf;            /* the momentum buffer; NULL when momentum is 0 */
    float lr, momentum, weight_decay;
    float grad_scale;      /* 1 - dampening */
    int nesterov, first_step;
} SgdJob;

/* One fused pass: every element is read and written once. The branches test
   values fixed for the whole call, so the compiler lifts them out of the loop. */
static void sgd_chunk(void *ctx, int64_t begin, int64_t end)
{
    const SgdJob *job = ctx;
    float *p = job->param, *buf = job->buf;
    const float *g = job->grad;
    const float lr = job->lr, mu = job->momentum, wd = job->weight_decay, scale = job->grad_scale;
    const int nesterov = job->nesterov, first_step = job->first_step;
    int64_t i;
    for (i = begin; i < end; i++) {
        float d = g[i];
        if (wd != 0.0f) d += wd * p[i];
        if (buf) {
            /* PyTorch starts the buffer as a plain copy of the first gradient, undamped. */
            float b = first_step ? d : mu * buf[i] + scale * d;
            buf[i] = b;
            d = nesterov ? d + mu * b : b;
        }
        p[i] -= lr * d;
    }
}

int cpu_sgd_step(const SgdArgs *args, int count, float *const *params, const float *const *grads,
                 float *const *momentum, const int64_t *sizes)
{
    SgdJob job;
    int i;
    job.lr = args->lr;
    job.momentum = args->momentum;
    job.weight_decay = args->weight_decay;
    job.grad_scale = 1.0f - args->dampening;
    job.nesterov = args->nesterov;
    job.first_step = args->first_step;
    for (i = 0; i < count; i++) {
        job.param = params[i];
        job.grad = grads[i];
        job.buf = args->momentum != 0.0f ? momentum[i] : NULL;
        parallel_for(sizes[i], SGD_GRAIN, sgd_chunk, &job);
    }
    return AC_OK;
}

/* ---- Adam ---------------------------------------------------------------- */

typedef struct {
    float *param, *exp_avg, *exp_avg_sq;
    const float *grad;
    float avg_weight;        /* 1 - beta1: exp_avg moves this far towards the gradient */
    float beta2, sq_weight;  /* sq_weight = 1 - beta2 */
    float neg_step_size;     /* -lr / (1 - beta1^step) */
    float bc2_sqrt;          /* sqrt(1 - beta2^step) */
    float eps, weight_decay;
    float decay_factor;      /* AdamW: param *= 1 - lr * weight_decay */
    int decoupled;
} AdamJob;

/* PyTorch's lerp: exp_avg.lerp_(grad, 1 - beta1), whose formula depends on the weight. */
static float lerp(float start, float end, float weight)
{
    return weight < 0.5f ? start + weight * (end - start)
                         : end - (end - start) * (1.0f - weight);
}

/* One fused pass over the tensor; the branches test values fixed for the call. */
static void adam_chunk(void *ctx, int64_t begin, int64_t end)
{
    const AdamJob *job = ctx;
    float *param = job->param, *m = job->exp_avg, *v = job->exp_avg_sq;
    const float *grad = job->grad;
    const float w1 = job->avg_weight, beta2 = job->beta2, w2 = job->sq_weight;
    const float neg_step_size = job->neg_step_size, bc2_sqrt = job->bc2_sqrt, eps = job->eps;
    const float wd = job->weight_decay, decay_factor = job->decay_factor;
    const int decoupled = job->decoupled;
    int64_t i;
    for (i = begin; i < end; i++) {
        float p = param[i], g = grad[i], mi, vi, denom;
        if (wd != 0.0f) {
            if (decoupled) p *= decay_factor;
            else g += wd * p;
        }
        mi = lerp(m[i], g, w1);
        vi = v[i] * beta2 + w2 * g * g;
        /* A unit whose gradient stays zero decays its moments into subnormals, and
           x86 arithmetic on those is ~100x slower: flush them. This departs from
           PyTorch only below FLT_MIN (1.2e-38), where the update is zero anyway. */
        if (fabsf(mi) < FLT_MIN) mi = 0.0f;
        if (vi < FLT_MIN) vi = 0.0f;
        m[i] = mi;
        v[i] = vi;
        denom = sqrtf(vi) / bc2_sqrt + eps;
        param[i] = p + neg_step_size * mi / denom;
    }
}

int cpu_adam_step(const AdamArgs *args, int count, float *const *params, const float *const *grads,
                  float *const *exp_avg, float *const *exp_avg_sq, const int64_t *sizes)
{
    AdamJob job;
    int i;
    job.avg_weight = (float)(1.0 - (double)args->beta1);
    job.beta2 = args->beta2;
    job.sq_weight = (float)(1.0 - (double)args->beta2);
    job.neg_step_size = (float)(-(double)args->lr / args->bias_correction1);
    job.bc2_sqrt = (float)sqrt(args->bias_correction2);
    job.eps = args->eps;
    job.weight_decay = args->weight_decay;
    job.decay_factor = (float)(1.0 - (double)args->lr * (double)args->weight_decay);
    job.decoupled = args->decoupled;
    for (i = 0; i < count; i++) {
        job.param = params[i];
        job.exp_avg = exp_avg[i];
        job.exp_avg_sq = exp_avg_sq[i];
        job.grad = grads[i];
        parallel_for(sizes[i], ADAM_GRAIN, adam_chunk, &job);
    }
    return AC_OK;
}

/* ---- gradient norms ------------------------------------------------------- */

#define NORM_CHUNK 16384       /* elements per partial result, at least */
#define NORM_MAX_CHUNKS 1024

enum { NORM_SQUARES, NORM_ABS, NORM_POWER, NORM_MAX_ABS };

typedef struct {
    const float *x;
    int64_t n, chunk;
    int kind;
    double p;
    double partial[NORM_MAX_CHUNKS];
} NormJob;

/* One chunk in eight lanes (x[i] goes to lane i % 8) added as a tree: a fixed
   order the compiler vectorises. Called with kind a constant, so each copy
   compiles without the branches. */
static inline double chunk_power_sum(int kind, const float *x, int64_t n, double p)
{
    double lane[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    int l;
    for (; i + 8 <= n; i += 8)
        for (l = 0; l < 8; l++) {
            const double v = x[i + l];
            lane[l] += kind == NORM_SQUARES ? v * v : kind == NORM_ABS ? fabs(v) : pow(fabs(v), p);
        }
    for (l = 0; i < n; i++, l++) {
        const double v = x[i];
        lane[l] += kind == NORM_SQUARES ? v * v : kind == NORM_ABS ? fabs(v) : pow(fabs(v), p);
    }
    return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

/* The largest |x[i]|; NaN never wins a compare, so it is looked for on the side. */
static double chunk_max_abs(const float *x, int64_t n)
{
    float lane[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}, best = 0.0f;
    int nan_seen = 0;
    int64_t i = 0;
    int l;
    for (; i + 8 <= n; i += 8)
        for (l = 0; l < 8; l++) {
            const float a = fabsf(x[i + l]);
            lane[l] = a > lane[l] ? a : lane[l];
            nan_seen |= a != a;
        }
    for (; i < n; i++) {
        const float a = fabsf(x[i]);
        best = a > best ? a : best;
        nan_seen |= a != a;
    }
    for (l = 0; l < 8; l++) best = lane[l] > best ? lane[l] : best;
    return nan_seen ? NAN : best;
}

static void norm_chunks(void *ctx, int64_t begin, int64_t end)
{
    NormJob *job = ctx;
    int64_t c;
    for (c = begin; c < end; c++) {
        const float *x = job->x + c * job->chunk;
        const int64_t n = job->n - c * job->chunk < job->chunk ? job->n - c * job->chunk : job->chunk;
        switch (job->kind) {
        case NORM_SQUARES: job->partial[c] = chunk_power_sum(NORM_SQUARES, x, n, 2.0); break;
        case NORM_ABS: job->partial[c] = chunk_power_sum(NORM_ABS, x, n, 1.0); break;
        case NORM_POWER: job->partial[c] = chunk_power_sum(NORM_POWER, x, n, job->p); break;
        default: job->partial[c] = chunk_max_abs(x, n); break;
        }
    }
}

/* Chunks whose bounds depend on n alone, their results combined in order. */
int cpu_norm_power_sum(const float *x, int64_t n, double p, double *out)
{
    NormJob job;
    int64_t chunks, c;
    double total = 0.0;
    job.x = x;
    job.n = n;
    job.p = p;
    job.kind = isinf(p) ? NORM_MAX_ABS : p == 2.0 ? NORM_SQUARES : p == 1.0 ? NORM_ABS : NORM_POWER;
    job.chunk = (n + NORM_MAX_CHUNKS - 1) / NORM_MAX_CHUNKS;
    if (job.chunk < NORM_CHUNK) job.chunk = NORM_CHUNK;
    chunks = (n + job.chunk - 1) / job.chunk;
    parallel_for(chunks, 1, norm_chunks, &job);
    for (c = 0; c < chunks; c++) {
        if (job.kind != NORM_MAX_ABS) total += job.partial[c];
        else if (job.partial[c] != job.partial[c] || job.partial[c] > total) total = job.partial[c];
    }
    *out = total;
    return AC_OK;
}

typedef struct {
    float *x;
    float s;
} ScaleJob;

static void scale_chunk(void *ctx, int64_t begin, int64_t end)
{
    const ScaleJob *job = ctx;
    float *x = job->x;
    const float s = job->s;
    int64_t i;
    for (i = begin; i < end; i++) x[i] *= s;
}

int cpu_scale(float *x, int64_t n, float s)
{
    ScaleJob job;
    job.x = x;
    job.s = s;
    parallel_for(n, NORM_CHUNK, scale_chunk, &job);
    return AC_OK;
}
