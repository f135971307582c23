/*
 * loss.c - mse_loss, l1_loss, smooth_l1_loss, cross_entropy (class indices,
 * label smoothing), binary_cross_entropy and bce_with_logits, each with
 * reductions none, mean and sum, and each forward beside its backward.
 *
 * A reduced loss is summed in double over chunks whose boundaries depend on
 * the element count alone, then the chunk sums are added in order: the result
 * is the same for any number of threads. cross_entropy is fused: forward
 * saves the softmax probabilities, and backward is one loop over them.
 *
 * Not here: softmax and log_softmax as ops (activation.c).
 */
#include "graph.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <string.h>

#define LOSS_GRAIN 16384
#define LOSS_MAX_CHUNKS 1024

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

static int reduction_check(const char *op, int reduction)
{
    if (reduction != AC_REDUCTION_NONE && reduction != AC_REDUCTION_MEAN &&
        reduction != AC_REDUCTION_SUM)
        return error_set(AC_ERR_ARG, "%s: reduction %d is not none (0), mean (1) or sum (2)", op,
                         reduction);
    return AC_OK;
}

/* Check input and target: present, same shape, a valid reduction. */
static int pair_check(const char *op, const AcTensor *input, const AcTensor *target, int reduction)
{
    if (tensor_check(op, input, "input") || tensor_check(op, target, "target")) return -1;
    if (!same_shape(input, target))
        return error_set(AC_ERR_SHAPE, "%s: input %s and target %s must have the same shape", op,
                         tensor_shape_str(input), tensor_shape_str(target));
    return reduction_check(op, reduction);
}

/* What every loss's backward needs besides its inputs. */
typedef struct {
    int32_t reduction;
    float beta;   /* smooth_l1_loss's; unused by the others */
} LossCtx;

/* The loss's output: shaped like shape/ndim for none, a scalar otherwise. */
static AcTensor *loss_output(const char *op, const int64_t *shape, int ndim,
                             const AcTensor *const *inputs, int n_inputs, int reduction,
                             AcBackwardFn backward, size_t ctx_bytes)
{
    AcTensor *out;
    LossCtx *ctx;
    if (reduction != AC_REDUCTION_NONE) ndim = 0;
    out = op_output(op, shape, ndim, inputs, n_inputs, backward, ctx_bytes);
    if (out && (ctx = op_context(out))) ctx->reduction = reduction;
    return out;
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
   (as reduce.c's) let the additions overlap. */
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

static AcTensor *elementwise_loss(const char *op, LossKind kind, float beta, const AcTensor *input,
                                  const AcTensor *target, int reduction, AcBackwardFn backward)
{
    const AcTensor *inputs[2];
    TermsJob job;
    LossCtx *ctx;
    AcTensor *out;
    double sum;
    inputs[0] = input;
    inputs[1] = target;
    out = loss_output(op, input->shape, input->ndim, inputs, 2, reduction, backward,
                      sizeof(LossCtx));
    if (!out) return NULL;
    if ((ctx = op_context(out))) ctx->beta = beta;
    job.kind = kind;
    job.beta = beta;
    job.x = input->data;
    job.t = target->data;
    job.out = reduction == AC_REDUCTION_NONE ? out->data : NULL;
    sum = chunked_sum(elementwise_terms, &job, input->size, LOSS_GRAIN);
    loss_store(out, reduction, sum, input->size);
    return out;
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

static int elementwise_loss_backward(LossKind kind, AcGradNode *node, const AcTensor *gout,
                                     AcTensor **gin)
{
    const LossCtx *ctx = node->context;
    const AcTensor *x = node->inputs[0];
    GradJob job;
    int i;
    for (i = 0; i < 2; i++) {
        if (!input_needs_grad(node, i)) continue;
        gin[i] = tensor_alloc_like("backward", x);
        if (!gin[i]) return ac_last_error_code();
    }
    job.kind = kind;
    job.beta = ctx->beta;
    job.x = x->data;
    job.t = node->inputs[1]->data;
    job.g = gout->data;
    job.g_step = ctx->reduction == AC_REDUCTION_NONE ? 1 : 0;
    job.scale = ctx->reduction == AC_REDUCTION_MEAN ? 1.0f / (float)x->size : 1.0f;
    job.gx = input_needs_grad(node, 0) ? gin[0]->data : NULL;
    job.gt = input_needs_grad(node, 1) ? gin[1]->data : NULL;
    if (x->size > 0) parallel_for(x->size, LOSS_GRAIN, grad_chunk, &job);
    return AC_OK;
}

static int mse_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(LOSS_MSE, node, gout, gin);
}

int mse_loss_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_mse_loss(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_mse_loss(const AcTensor *input, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("mse_loss", mse_loss_replay, 2, (const AcTensor *[]){input, target}, (double[]){reduction}, 1);
    if (pair_check("mse_loss", input, target, reduction)) return NULL;
    return elementwise_loss("mse_loss", LOSS_MSE, 0.0f, input, target, reduction, mse_backward);
}

static int l1_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(LOSS_L1, node, gout, gin);
}

int l1_loss_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_l1_loss(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_l1_loss(const AcTensor *input, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("l1_loss", l1_loss_replay, 2, (const AcTensor *[]){input, target}, (double[]){reduction}, 1);
    if (pair_check("l1_loss", input, target, reduction)) return NULL;
    return elementwise_loss("l1_loss", LOSS_L1, 0.0f, input, target, reduction, l1_backward);
}

static int smooth_l1_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(LOSS_SMOOTH_L1, node, gout, gin);
}

int smooth_l1_loss_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_smooth_l1_loss(t[0], t[1], (int)attr[0], (float)attr[1]));
}

AcTensor *ac_smooth_l1_loss(const AcTensor *input, const AcTensor *target, int reduction,
                            float beta)
{
    if (ops_observed) return graph_op("smooth_l1_loss", smooth_l1_loss_replay, 2, (const AcTensor *[]){input, target}, (double[]){reduction, beta}, 2);
    const char *op = "smooth_l1_loss";
    if (pair_check(op, input, target, reduction)) return NULL;
    if (!(beta >= 0.0f) || isinf(beta))
        return error_null(AC_ERR_ARG, "%s: beta must be finite and >= 0, got %g", op, (double)beta);
    return elementwise_loss(op, LOSS_SMOOTH_L1, beta, input, target, reduction, smooth_l1_backward);
}

static int bce_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(LOSS_BCE, node, gout, gin);
}

int binary_cross_entropy_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_binary_cross_entropy(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_binary_cross_entropy(const AcTensor *probs, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("binary_cross_entropy", binary_cross_entropy_replay, 2, (const AcTensor *[]){probs, target}, (double[]){reduction}, 1);
    const char *op = "binary_cross_entropy";
    int64_t i;
    if (pair_check(op, probs, target, reduction)) return NULL;
    for (i = 0; i < probs->size; i++)
        if (!(probs->data[i] >= 0.0f && probs->data[i] <= 1.0f))
            return error_null(AC_ERR_ARG,
                              "%s: input %g at position %lld of %s is not a probability in [0, 1]",
                              op, (double)probs->data[i], (long long)i, tensor_shape_str(probs));
    return elementwise_loss(op, LOSS_BCE, 0.0f, probs, target, reduction, bce_backward);
}

static int bce_logits_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(LOSS_BCE_LOGITS, node, gout, gin);
}

int bce_with_logits_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_bce_with_logits(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_bce_with_logits(const AcTensor *logits, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("bce_with_logits", bce_with_logits_replay, 2, (const AcTensor *[]){logits, target}, (double[]){reduction}, 1);
    if (pair_check("bce_with_logits", logits, target, reduction)) return NULL;
    return elementwise_loss("bce_with_logits", LOSS_BCE_LOGITS, 0.0f, logits, target, reduction,
                            bce_logits_backward);
}

/* ---- cross entropy ------------------------------------------------------- */

/* The rows' target classes (int64), then the softmax probabilities (rows *
   classes), sit in a saved tensor, the node's input 1, rather than in this
   context: freeing the graph then frees them, though the caller keeps the loss. */
typedef struct {
    LossCtx loss;
    float smoothing;
    int64_t rows, classes;
} CrossEntropyCtx;

typedef struct {
    const float *logits;
    const int64_t *target;
    int64_t classes;
    float smoothing;
    float *out;       /* per-row losses for reduction none; else NULL */
    float *probs;     /* where to save softmax probabilities; NULL without a graph */
} CrossEntropyJob;

/* Row loss: (1 - e) (lse - x_t) + e (lse - mean(x)), lse = log sum exp(x),
   kept as max + log_sum and never added up: in float, a large max would round
   log_sum away. The exps go straight into the saved probabilities when there
   are some, and the sum is the same either way (vec_exp_sum's fixed order). */
static double cross_entropy_rows(const void *ctx, int64_t begin, int64_t end)
{
    const CrossEntropyJob *job = ctx;
    const int64_t classes = job->classes;
    double total = 0.0;
    int64_t row, c;
    for (row = begin; row < end; row++) {
        const float *x = job->logits + row * classes;
        float *probs = job->probs ? job->probs + row * classes : NULL;
        float max = vec_max(x, classes), sum, log_sum, loss, shifted_sum = 0.0f;
        sum = vec_exp_sum(x, max, probs, classes);
        log_sum = logf(sum);
        loss = (max - x[job->target[row]]) + log_sum;
        if (job->smoothing > 0.0f) {
            for (c = 0; c < classes; c++) shifted_sum += x[c] - max;
            loss = (1.0f - job->smoothing) * loss +
                   job->smoothing * (log_sum - shifted_sum / (float)classes);
        }
        if (probs) {
            float scale = 1.0f / sum;
            for (c = 0; c < classes; c++) probs[c] *= scale;
        }
        if (job->out) job->out[row] = loss;
        total += loss;
    }
    return total;
}

typedef struct {
    const CrossEntropyCtx *ctx;
    const int64_t *target;
    const float *probs, *g;
    int64_t g_step;
    float scale;
    float *gin;
} CrossEntropyGradJob;

/* gin = (p - (1 - e) onehot - e / C) * g */
static void cross_entropy_grad_rows(void *ctx, int64_t begin, int64_t end)
{
    const CrossEntropyGradJob *job = ctx;
    const int64_t classes = job->ctx->classes;
    const float smoothing = job->ctx->smoothing, spread = smoothing / (float)classes;
    int64_t row, c;
    for (row = begin; row < end; row++) {
        const float *p = job->probs + row * classes;
        float *gin = job->gin + row * classes, g = job->g[row * job->g_step] * job->scale;
        for (c = 0; c < classes; c++) gin[c] = (p[c] - spread) * g;
        gin[job->target[row]] -= (1.0f - smoothing) * g;
    }
}

static int cross_entropy_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const CrossEntropyCtx *ctx = node->context;
    CrossEntropyGradJob job;
    int64_t grain;
    gin[0] = tensor_alloc_like("backward", node->inputs[0]);
    if (!gin[0] || ctx->rows == 0) return gin[0] ? AC_OK : ac_last_error_code();
    job.ctx = ctx;
    job.target = (const int64_t *)(const void *)node->inputs[1]->data;
    job.probs = (const float *)(job.target + ctx->rows);
    job.g = gout->data;
    job.g_step = ctx->loss.reduction == AC_REDUCTION_NONE ? 1 : 0;
    job.scale = ctx->loss.reduction == AC_REDUCTION_MEAN ? 1.0f / (float)ctx->rows : 1.0f;
    job.gin = gin[0]->data;
    grain = ctx->classes >= LOSS_GRAIN ? 1 : LOSS_GRAIN / ctx->classes;
    parallel_for(ctx->rows, grain, cross_entropy_grad_rows, &job);
    return AC_OK;
}

/* logits (N, C) with target (N,), or logits (C,) with a scalar target. */
static int cross_entropy_check(const AcTensor *logits, const AcTensor *target, int reduction,
                               float label_smoothing)
{
    const char *op = "cross_entropy";
    int64_t rows, classes, i;
    if (tensor_check(op, logits, "logits") || tensor_check_any(op, target, "target") ||
        index_check(op, target, "target"))
        return -1;
    if (logits->ndim != 1 && logits->ndim != 2)
        return error_set(AC_ERR_SHAPE, "%s: logits %s must be (N, C) or (C,)", op,
                         tensor_shape_str(logits));
    rows = logits->ndim == 2 ? logits->shape[0] : 1;
    classes = logits->shape[logits->ndim - 1];
    if (target->ndim != logits->ndim - 1 || (logits->ndim == 2 && target->shape[0] != rows))
        return error_set(AC_ERR_SHAPE, "%s: target %s does not fit logits %s (expected %s)", op,
                         tensor_shape_str(target), tensor_shape_str(logits),
                         shape_str(&rows, logits->ndim - 1));
    if (reduction_check(op, reduction)) return -1;
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return error_set(AC_ERR_ARG, "%s: label_smoothing %g is not in [0, 1]", op,
                         (double)label_smoothing);
    for (i = 0; i < rows; i++) {
        double t = elem_get(target, i);
        if (!(t >= 0.0 && t < (double)classes && t == floor(t)))
            return error_set(AC_ERR_INDEX,
                             "%s: target %g at position %lld is not a class index in [0, %lld)",
                             op, t, (long long)i, (long long)classes);
    }
    return AC_OK;
}

int cross_entropy_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_cross_entropy(t[0], t[1], (int)attr[0], (float)attr[1]));
}

AcTensor *ac_cross_entropy(const AcTensor *logits, const AcTensor *target, int reduction,
                           float label_smoothing)
{
    if (ops_observed) return graph_op("cross_entropy", cross_entropy_replay, 2, (const AcTensor *[]){logits, target}, (double[]){reduction, label_smoothing}, 2);
    CrossEntropyJob job;
    CrossEntropyCtx *ctx;
    const AcTensor *inputs[2];
    AcTensor *out, *saved = NULL;
    int64_t rows, classes, saved_size;
    double sum;
    int64_t *ids, i;
    if (cross_entropy_check(logits, target, reduction, label_smoothing)) return NULL;
    rows = logits->ndim == 2 ? logits->shape[0] : 1;
    classes = logits->shape[logits->ndim - 1];
    saved_size = 2 * rows + logits->size;   /* int64 ids take two floats' room */
    if (ac_is_grad_enabled() && logits->requires_grad &&
        !(saved = tensor_alloc("cross_entropy", &saved_size, 1)))
        return NULL;
    inputs[0] = logits;
    inputs[1] = saved;
    out = loss_output("cross_entropy", logits->shape, logits->ndim - 1, inputs, 2, reduction,
                      cross_entropy_backward, sizeof(CrossEntropyCtx));
    ac_tensor_free(saved);   /* the node holds it */
    if (!out) return NULL;
    ctx = op_context(out);
    /* the class ids as int64: saved for backward, else scratch */
    ids = ctx ? data_i64(saved) : target->dtype == AC_INT64 ? data_i64(target) : NULL;
    if (!ids && !(ids = scratch_alloc((size_t)(rows + 1) * sizeof(int64_t)))) return NULL;
    if (ids != data_i64(target))
        for (i = 0; i < rows; i++) ids[i] = (int64_t)elem_get(target, i);
    job.logits = logits->data;
    job.target = ids;
    job.classes = classes;
    job.smoothing = label_smoothing;
    job.out = reduction == AC_REDUCTION_NONE ? out->data : NULL;
    job.probs = NULL;
    if (ctx) {
        ctx->smoothing = label_smoothing;
        ctx->rows = rows;
        ctx->classes = classes;
        job.probs = (float *)(ids + rows);
    }
    sum = chunked_sum(cross_entropy_rows, &job, rows,
                      classes >= LOSS_GRAIN || classes == 0 ? 1 : LOSS_GRAIN / classes);
    if (!ctx && ids != data_i64(target)) scratch_free(ids, (size_t)(rows + 1) * sizeof(int64_t));
    loss_store(out, reduction, sum, rows);
    return out;
}
