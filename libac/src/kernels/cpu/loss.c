/*
 * cpu/loss.c - the CPU's kernels for loss.c: the elementwise losses (mse, l1,
 * smooth l1, bce, bce with logits) and cross_entropy, forward and backward.
 *
 * A reduced loss is summed in double over chunks whose boundaries depend on
 * the element count alone, then the chunk sums are added in order: the result
 * is the same for any number of threads. cross_entropy is fused: forward
 * saves each row's max and 1 / the sum of its exps, and backward is one pass
 * that makes the exps again from the logits, scales them (the softmax) and
 * writes the gradient: saving the exps instead (a vocabulary of 10,000 at
 * 700 rows: 28 MB) cost forward more in memory traffic than the exps cost
 * backward to compute.
 */
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/vecmath.h"

#include <math.h>

#define LOSS_GRAIN 16384
#define LOSS_MAX_CHUNKS 1024
#define CE_PIECE 512    /* classes per exp-and-sum call, while the next row is prefetched */

/* ---- shared plumbing ----------------------------------------------------- */

/* Writes the terms for items [begin, end) (when it has somewhere to put
   them) and returns their sum. */
typedef double (*TermsFn)(const void *ctx, int64_t begin, int64_t end);

typedef struct {
    TermsFn terms;
    const void *ctx;
    int64_t n, chunk;
    double partial[LOSS_MAX_CHUNKS];
} SumJob;

static void sum_chunks(void *ctx, int64_t begin, int64_t end)
{
    SumJob *job = ctx;
    int64_t c;
    for (c = begin; c < end; c++) {
        int64_t lo = c * job->chunk, hi = lo + job->chunk < job->n ? lo + job->chunk : job->n;
        job->partial[c] = job->terms(job->ctx, lo, hi);
    }
}

/* The sum of terms over n items, in chunks of at least min_chunk items. */
static double chunked_sum(TermsFn terms, const void *ctx, int64_t n, int64_t min_chunk)
{
    SumJob job;
    int64_t n_chunks, c;
    double total = 0.0;
    if (n == 0) return 0.0;
    job.terms = terms;
    job.ctx = ctx;
    job.n = n;
    job.chunk = (n + LOSS_MAX_CHUNKS - 1) / LOSS_MAX_CHUNKS;
    if (job.chunk < min_chunk) job.chunk = min_chunk;
    n_chunks = (n + job.chunk - 1) / job.chunk;
    parallel_for(n_chunks, 1, sum_chunks, &job);
    for (c = 0; c < n_chunks; c++) total += job.partial[c];
    return total;
}

/* Store the reduced loss from the sum of its n terms. */
static void loss_store(AcTensor *out, int reduction, double sum, int64_t n)
{
    if (reduction == AC_REDUCTION_MEAN) out->data[0] = (float)(sum / (double)n);
    else if (reduction == AC_REDUCTION_SUM) out->data[0] = (float)sum;
}

/* ---- mse, bce and bce with logits: elementwise terms --------------------- */

typedef enum { LOSS_MSE, LOSS_L1, LOSS_SMOOTH_L1, LOSS_BCE, LOSS_BCE_LOGITS } LossKind;

typedef struct {
    LossKind kind;
    float beta;
    const float *x, *t;
    float *out;     /* the terms, for reduction none; else NULL */
} TermsJob;

static float bce_term(float p, float t)
{
    /* PyTorch clamps each log at -100 so that p of 0 or 1 gives a finite loss */
    float log_p = logf(p), log_q = log1pf(-p);
    if (log_p < -100.0f) log_p = -100.0f;
    if (log_q < -100.0f) log_q = -100.0f;
    return (t - 1.0f) * log_q - t * log_p;
}

/* max(x, 0) - x t + log(1 + exp(-|x|)): never overflows. */
static float bce_logits_term(float x, float t)
{
    return (x > 0.0f ? x : 0.0f) - x * t + log1pf(expf(-fabsf(x)));
}

/* PyTorch's: 0.5 d^2 / beta below beta, |d| - 0.5 beta above; beta 0 is l1. */
static float smooth_l1_term(float d, float beta)
{
    float a = fabsf(d);
    return a < beta ? 0.5f * d * d / beta : a - 0.5f * beta;
}

static float loss_term(LossKind kind, float beta, float x, float t)
{
    switch (kind) {
    case LOSS_MSE: return (x - t) * (x - t);
    case LOSS_L1: return fabsf(x - t);
    case LOSS_SMOOTH_L1: return smooth_l1_term(x - t, beta);
    case LOSS_BCE: return bce_term(x, t);
    case LOSS_BCE_LOGITS: return bce_logits_term(x, t);
    }
    return 0.0f;
}

/* Term i of job, also stored when job keeps the terms. */
static inline float term_at(LossKind kind, const TermsJob *job, int64_t i)
{
    float term = loss_term(kind, job->beta, job->x[i], job->t[i]);
    if (job->out) job->out[i] = term;
    return term;
}

/* The loop for one kind; called with the kind as a constant (below), so each
   copy compiles without the switch inside. Four accumulators in a fixed order
   (as reduce's) let the additions overlap. */
static inline double terms_loop(LossKind kind, const TermsJob *job, int64_t begin, int64_t end)
{
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t i = begin;
    for (; i + 4 <= end; i += 4) {
        s0 += term_at(kind, job, i);
        s1 += term_at(kind, job, i + 1);
        s2 += term_at(kind, job, i + 2);
        s3 += term_at(kind, job, i + 3);
    }
    for (; i < end; i++) s0 += term_at(kind, job, i);
    return (s0 + s1) + (s2 + s3);
}

static double elementwise_terms(const void *ctx, int64_t begin, int64_t end)
{
    const TermsJob *job = ctx;
    switch (job->kind) {
    case LOSS_MSE: return terms_loop(LOSS_MSE, job, begin, end);
    case LOSS_L1: return terms_loop(LOSS_L1, job, begin, end);
    case LOSS_SMOOTH_L1: return terms_loop(LOSS_SMOOTH_L1, job, begin, end);
    case LOSS_BCE: return terms_loop(LOSS_BCE, job, begin, end);
    case LOSS_BCE_LOGITS: return terms_loop(LOSS_BCE_LOGITS, job, begin, end);
    }
    return 0.0;
}

static int elementwise_loss(LossKind kind, float beta, const AcTensor *input,
                            const AcTensor *target, AcTensor *out, int reduction)
{
    TermsJob job;
    double sum;
    job.kind = kind;
    job.beta = beta;
    job.x = input->data;
    job.t = target->data;
    job.out = reduction == AC_REDUCTION_NONE ? out->data : NULL;
    sum = chunked_sum(elementwise_terms, &job, input->size, LOSS_GRAIN);
    loss_store(out, reduction, sum, input->size);
    return AC_OK;
}

typedef struct {
    LossKind kind;
    float beta;
    const float *x, *t, *g;   /* g: grad_out, one per element or one for all */
    int64_t g_step;           /* 1 for reduction none, else 0 */
    float scale;              /* 1/N for mean, else 1 */
    float *gx, *gt;           /* NULL where no gradient is wanted */
} GradJob;

/* Writes d loss / d x and d loss / d t for one element, as PyTorch defines them. */
static void loss_grad(LossKind kind, float beta, float x, float t, float g, float *gx, float *gt)
{
    float d = x - t;
    switch (kind) {
    case LOSS_MSE:
        *gx = 2.0f * d * g;
        *gt = -*gx;
        break;
    case LOSS_L1:
        *gx = d > 0.0f ? g : d < 0.0f ? -g : 0.0f;
        *gt = -*gx;
        break;
    case LOSS_SMOOTH_L1:
        *gx = fabsf(d) < beta ? g * d / beta : d > 0.0f ? g : d < 0.0f ? -g : 0.0f;
        *gt = -*gx;
        break;
    case LOSS_BCE: {
        float denom = (1.0f - x) * x;
        *gx = g * (x - t) / (denom > 1e-12f ? denom : 1e-12f);
        *gt = -g * (logf(x) - log1pf(-x));
        break;
    }
    case LOSS_BCE_LOGITS: {
        float e = expf(-fabsf(x)), sig = (x >= 0.0f ? 1.0f : e) / (1.0f + e);
        *gx = g * (sig - t);
        *gt = -g * x;
        break;
    }
    }
}

/* As terms_loop: one copy per kind. */
static inline void grad_loop(LossKind kind, const GradJob *job, int64_t begin, int64_t end)
{
    const float *x = job->x, *t = job->t, *g = job->g;
    float *gx_out = job->gx, *gt_out = job->gt, beta = job->beta, scale = job->scale;
    int64_t i, g_step = job->g_step;
    for (i = begin; i < end; i++) {
        float gx = 0.0f, gt = 0.0f;
        loss_grad(kind, beta, x[i], t[i], g[i * g_step] * scale, &gx, &gt);
        if (gx_out) gx_out[i] = gx;
        if (gt_out) gt_out[i] = gt;
    }
}

static void grad_chunk(void *ctx, int64_t begin, int64_t end)
{
    const GradJob *job = ctx;
    switch (job->kind) {
    case LOSS_MSE: grad_loop(LOSS_MSE, job, begin, end); break;
    case LOSS_L1: grad_loop(LOSS_L1, job, begin, end); break;
    case LOSS_SMOOTH_L1: grad_loop(LOSS_SMOOTH_L1, job, begin, end); break;
    case LOSS_BCE: grad_loop(LOSS_BCE, job, begin, end); break;
    case LOSS_BCE_LOGITS: grad_loop(LOSS_BCE_LOGITS, job, begin, end); break;
    }
}

static int elementwise_loss_backward(LossKind kind, float beta, const AcTensor *input,
                                     const AcTensor *target, const AcTensor *gout, AcTensor *gx,
                                     AcTensor *gt, int reduction)
{
    GradJob job;
    job.kind = kind;
    job.beta = beta;
    job.x = input->data;
    job.t = target->data;
    job.g = gout->data;
    job.g_step = reduction == AC_REDUCTION_NONE ? 1 : 0;
    job.scale = reduction == AC_REDUCTION_MEAN ? 1.0f / (float)input->size : 1.0f;
    job.gx = gx ? gx->data : NULL;
    job.gt = gt ? gt->data : NULL;
    if (input->size > 0) parallel_for(input->size, LOSS_GRAIN, grad_chunk, &job);
    return AC_OK;
}

int cpu_mse_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                 float beta)
{
    return elementwise_loss(LOSS_MSE, beta, input, target, out, reduction);
}

int cpu_mse_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                          AcTensor *gx, AcTensor *gt, int reduction, float beta)
{
    return elementwise_loss_backward(LOSS_MSE, beta, input, target, gout, gx, gt, reduction);
}

int cpu_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                float beta)
{
    return elementwise_loss(LOSS_L1, beta, input, target, out, reduction);
}

int cpu_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                         AcTensor *gx, AcTensor *gt, int reduction, float beta)
{
    return elementwise_loss_backward(LOSS_L1, beta, input, target, gout, gx, gt, reduction);
}

int cpu_smooth_l1_loss(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                       float beta)
{
    return elementwise_loss(LOSS_SMOOTH_L1, beta, input, target, out, reduction);
}

int cpu_smooth_l1_loss_backward(const AcTensor *input, const AcTensor *target, const AcTensor *gout,
                                AcTensor *gx, AcTensor *gt, int reduction, float beta)
{
    return elementwise_loss_backward(LOSS_SMOOTH_L1, beta, input, target, gout, gx, gt, reduction);
}

/* Checks every input is a probability before it writes anything. */
int cpu_binary_cross_entropy(const AcTensor *input, const AcTensor *target, AcTensor *out,
                             int reduction, float beta)
{
    int64_t i;
    for (i = 0; i < input->size; i++)
        if (!(input->data[i] >= 0.0f && input->data[i] <= 1.0f))
            return error_set(AC_ERR_ARG,
                             "binary_cross_entropy: input %g at position %lld of %s is not a "
                             "probability in [0, 1]",
                             (double)input->data[i], (long long)i, tensor_shape_str(input));
    return elementwise_loss(LOSS_BCE, beta, input, target, out, reduction);
}

int cpu_binary_cross_entropy_backward(const AcTensor *input, const AcTensor *target,
                                      const AcTensor *gout, AcTensor *gx, AcTensor *gt,
                                      int reduction, float beta)
{
    return elementwise_loss_backward(LOSS_BCE, beta, input, target, gout, gx, gt, reduction);
}

int cpu_bce_with_logits(const AcTensor *input, const AcTensor *target, AcTensor *out, int reduction,
                        float beta)
{
    return elementwise_loss(LOSS_BCE_LOGITS, beta, input, target, out, reduction);
}

int cpu_bce_with_logits_backward(const AcTensor *input, const AcTensor *target,
                                 const AcTensor *gout, AcTensor *gx, AcTensor *gt, int reduction,
                                 float beta)
{
    return elementwise_loss_backward(LOSS_BCE_LOGITS, beta, input, target, gout, gx, gt, reduction);
}

/* ---- cross entropy ------------------------------------------------------- */

typedef struct {
    const float *logits;
    const AcTensor *target;
    int64_t rows, classes;
    float smoothing;
    float *out;       /* per-row losses for reduction none; else NULL */
    int64_t *ids;     /* where to save the class ids; NULL without a graph */
    float *inv_sums;  /* where to save each row's 1 / sum of exp(x - max); NULL without a graph */
    float *maxes;     /* and each row's max */
} CrossEntropyJob;

/* Row row's class: an int64 target read as is, a float one converted. */
static int64_t class_at(const AcTensor *target, int64_t row)
{
    return target->dtype == AC_INT64 ? data_i64(target)[row] : (int64_t)elem_get(target, row);
}

/* Row loss: (1 - e) (lse - x_t) + e (lse - mean(x)), lse = log sum exp(x),
   kept as max + log_sum and never added up: in float, a large max would round
   log_sum away. The sum is vec_exp_sum's fixed order, piece by piece. The
   exps take long enough to compute that the next row's reads from memory,
   prefetched meanwhile, come for free: its max pass then reads the cache. */
static double cross_entropy_rows(const void *ctx, int64_t begin, int64_t end)
{
    const CrossEntropyJob *job = ctx;
    const int64_t classes = job->classes;
    double total = 0.0;
    int64_t row, c, k;
    for (row = begin; row < end; row++) {
        const float *x = job->logits + row * classes;
        const float *next = row + 1 < job->rows ? x + classes : NULL;
        const int64_t target = class_at(job->target, row);
        float max = vec_max(x, classes), sum = 0.0f, log_sum, loss, shifted_sum = 0.0f;
        for (k = 0; k < classes; k += CE_PIECE) {
            const int64_t n = classes - k < CE_PIECE ? classes - k : CE_PIECE;
            if (next)
                for (c = 0; c < n; c += 64 / (int64_t)sizeof(float)) __builtin_prefetch(next + k + c, 0, 3);
            sum += vec_exp_sum(x + k, max, NULL, n);
        }
        log_sum = logf(sum);
        loss = (max - x[target]) + log_sum;
        if (job->smoothing > 0.0f) {
            for (c = 0; c < classes; c++) shifted_sum += x[c] - max;
            loss = (1.0f - job->smoothing) * loss +
                   job->smoothing * (log_sum - shifted_sum / (float)classes);
        }
        if (job->ids) {
            job->ids[row] = target;
            job->inv_sums[row] = 1.0f / sum;
            job->maxes[row] = max;
        }
        if (job->out) job->out[row] = loss;
        total += loss;
    }
    return total;
}

/* logits (rows, classes) or (classes,): the rows and the classes. */
static void logits_layout(const AcTensor *logits, int64_t *rows, int64_t *classes)
{
    *rows = logits->ndim == 2 ? logits->shape[0] : 1;
    *classes = logits->shape[logits->ndim - 1];
}

int cpu_cross_entropy(const AcTensor *logits, const AcTensor *target, AcTensor *out,
                      int reduction, float smoothing, int64_t *ids, float *saved)
{
    CrossEntropyJob job;
    int64_t rows, classes, i;
    double sum;
    logits_layout(logits, &rows, &classes);
    for (i = 0; i < rows; i++) {
        double t = elem_get(target, i);
        if (!(t >= 0.0 && t < (double)classes && t == floor(t)))
            return error_set(AC_ERR_INDEX,
                             "cross_entropy: target %g at position %lld is not a class index "
                             "in [0, %lld)",
                             t, (long long)i, (long long)classes);
    }
    job.logits = logits->data;
    job.target = target;
    job.rows = rows;
    job.classes = classes;
    job.smoothing = smoothing;
    job.out = reduction == AC_REDUCTION_NONE ? out->data : NULL;
    job.ids = ids;
    job.inv_sums = saved;
    job.maxes = saved ? saved + rows : NULL;
    sum = chunked_sum(cross_entropy_rows, &job, rows,
                      classes >= LOSS_GRAIN || classes == 0 ? 1 : LOSS_GRAIN / classes);
    loss_store(out, reduction, sum, rows);
    return AC_OK;
}

typedef struct {
    int64_t classes;
    float smoothing;
    const int64_t *ids;
    const float *logits, *inv_sums, *maxes, *g;
    int64_t g_step;
    float scale;
    float *gin;
} CrossEntropyGradJob;

/* gin = (p - (1 - e) onehot - e / C) * g, the softmax p = exp(x - max) / sum:
   the exps of a piece are written to gin and scaled there while in L1. */
static void cross_entropy_grad_rows(void *ctx, int64_t begin, int64_t end)
{
    const CrossEntropyGradJob *job = ctx;
    const int64_t classes = job->classes;
    const float smoothing = job->smoothing, spread = smoothing / (float)classes;
    int64_t row, c, k;
    for (row = begin; row < end; row++) {
        const float *x = job->logits + row * classes;
        float *gin = job->gin + row * classes, g = job->g[row * job->g_step] * job->scale;
        const float eg = job->inv_sums[row] * g, spread_g = spread * g;
        for (k = 0; k < classes; k += CE_PIECE) {
            const int64_t n = classes - k < CE_PIECE ? classes - k : CE_PIECE;
            float *piece = gin + k;
            vec_exp_sum(x + k, job->maxes[row], piece, n);
            for (c = 0; c < n; c++) piece[c] = piece[c] * eg - spread_g;
        }
        gin[job->ids[row]] -= (1.0f - smoothing) * g;
    }
}

int cpu_cross_entropy_backward(const AcTensor *logits, const int64_t *ids, const float *saved,
                               const AcTensor *gout, AcTensor *gin, int reduction, float smoothing)
{
    CrossEntropyGradJob job;
    int64_t rows;
    logits_layout(gin, &rows, &job.classes);
    if (rows == 0) return AC_OK;
    job.smoothing = smoothing;
    job.ids = ids;
    job.logits = logits->data;
    job.inv_sums = saved;
    job.maxes = saved + rows;
    job.g = gout->data;
    job.g_step = reduction == AC_REDUCTION_NONE ? 1 : 0;
    job.scale = reduction == AC_REDUCTION_MEAN ? 1.0f / (float)rows : 1.0f;
    job.gin = gin->data;
    parallel_for(rows, job.classes >= LOSS_GRAIN ? 1 : LOSS_GRAIN / job.classes,
                 cross_entropy_grad_rows, &job);
    return AC_OK;
}
