/*
 * norm.c - batch normalisation (PyTorch's F.batch_norm) and layer
 * normalisation (F.layer_norm), each forward beside its backward.
 *
 * x (N, C, ...) is seen as (N, C, S): channel c holds N*S values. In
 * training the mean and variance are the batch's, computed in two passes
 * (mean first, then squared deviations from it) with per-plane float sums
 * gathered in double, and the running statistics, root tensors the caller
 * owns, are updated in place: running = (1 - momentum) * running +
 * momentum * batch, with the unbiased variance, as PyTorch does. In eval the
 * running statistics are used. Each channel is one task, so results do not
 * depend on the thread count. Backward is the fused formula:
 * dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat)) in training.
 *
 * Layer norm sees x as (M, D) rows, D the product of the normalized dims: each
 * row gets its own mean and biased variance (same two passes), and the
 * elementwise weight and bias have the normalized shape. Backward is the same
 * fused formula per row, with g * w in place of g; the weight and bias
 * gradients are summed over rows by tasks that each own a block of columns.
 *
 * Not here: BatchNorm1d/2d and LayerNorm as modules (Python).
 */
#include "graph.h"
#include "kernels/vecmath.h"

#include <math.h>
#include <string.h>

#define NORM_GRAIN 16384   /* elements per parallel task, at least */

typedef struct {
    int64_t n, c, s;       /* x as (n, c, s) */
    int training;
    int weight_at, bias_at;   /* their input index in the node, or -1 */
    float stats[];         /* mean[c] then invstd[c], as used by forward */
} BatchNormCtx;

typedef struct {
    int64_t n, c, s;
    const float *x, *gy, *weight, *bias;
    float *y, *dx, *dweight, *dbias;
    float *mean, *invstd;              /* per channel, written by forward */
    float *running_mean, *running_var; /* NULL when not tracked */
    int training;
    float momentum, eps;
} NormJob;

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

static int64_t channel_grain(const NormJob *job)
{
    int64_t per_channel = job->n * job->s;
    return NORM_GRAIN / (per_channel > 0 ? per_channel : 1) + 1;
}

/* ---- forward ------------------------------------------------------------- */

static void norm_forward_task(void *ctx, int64_t begin, int64_t end)
{
    const NormJob *job = ctx;
    const int64_t m = job->n * job->s;
    int64_t c, n, q;
    for (c = begin; c < end; c++) {
        float mean, invstd, scale, shift;
        if (job->training) {
            double sum = 0.0, squares = 0.0, var;
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
        } else {
            mean = job->running_mean[c];
            invstd = (float)(1.0 / sqrt((double)job->running_var[c] + (double)job->eps));
        }
        job->mean[c] = mean;
        job->invstd[c] = invstd;
        scale = invstd * (job->weight ? job->weight[c] : 1.0f);
        shift = (job->bias ? job->bias[c] : 0.0f) - mean * scale;
        for (n = 0; n < job->n; n++) {
            const float *x = job->x + (n * job->c + c) * job->s;
            float *y = job->y + (n * job->c + c) * job->s;
            for (q = 0; q < job->s; q++) y[q] = x[q] * scale + shift;
        }
    }
}

/* A (C,) tensor or NULL; what names it in errors. */
static int channel_vector_check(const AcTensor *t, int64_t c, const char *what, const AcTensor *x)
{
    if (t && (t->ndim != 1 || t->shape[0] != c))
        return error_set(AC_ERR_SHAPE, "batch_norm: %s %s does not fit input %s (expected (%lld,))",
                         what, tensor_shape_str(t), tensor_shape_str(x), (long long)c);
    return AC_OK;
}

static int norm_check(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                      const AcTensor *running_mean, const AcTensor *running_var, int training,
                      float momentum, float eps)
{
    const char *op = "batch_norm";
    int64_t c, per_channel;
    int i;
    if (tensor_check(op, x, "input")) return -1;
    if (x->ndim < 2)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be (N, C) or (N, C, ...)", op,
                         tensor_shape_str(x));
    c = x->shape[1];
    if (channel_vector_check(weight, c, "weight", x) || channel_vector_check(bias, c, "bias", x) ||
        channel_vector_check(running_mean, c, "running_mean", x) ||
        channel_vector_check(running_var, c, "running_var", x))
        return -1;
    if (!running_mean != !running_var)
        return error_set(AC_ERR_ARG,
                         "%s: running_mean and running_var must both be given or both be NULL", op);
    if (!training && !running_mean)
        return error_set(AC_ERR_ARG, "%s: eval mode needs running_mean and running_var", op);
    if (running_mean && (running_mean == running_var || running_mean == x || running_var == x))
        return error_set(AC_ERR_ARG,
                         "%s: running_mean, running_var and input must be distinct tensors", op);
    if (!(eps >= 0.0f) || isinf(eps) || !isfinite(momentum))
        return error_set(AC_ERR_ARG, "%s: eps (%g) must be finite and >= 0, momentum (%g) finite",
                         op,
                         (double)eps, (double)momentum);
    per_channel = x->shape[0];
    for (i = 2; i < x->ndim; i++) per_channel *= x->shape[i];
    if (training && per_channel < 2 && c > 0)
        return error_set(AC_ERR_SHAPE, "%s: expected more than 1 value per channel when training, "
                         "got input %s", op, tensor_shape_str(x));
    return AC_OK;
}

static int norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int batch_norm_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[5] = ac_batch_norm(t[0], t[1], t[2], t[3], t[4], (int)attr[0], (float)attr[1], (float)attr[2]));
}

AcTensor *ac_batch_norm(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                        AcTensor *running_mean, AcTensor *running_var, int training,
                        float momentum, float eps)
{
    if (ops_observed) return graph_op("batch_norm", batch_norm_replay, 5, (const AcTensor *[]){x, weight, bias, running_mean, running_var}, (double[]){training, momentum, eps}, 3);
    const AcTensor *inputs[3];
    int n_inputs = 1, i;
    BatchNormCtx *ctx;
    NormJob job;
    AcTensor *out;
    AcCheckpoint cp;
    if (norm_check(x, weight, bias, running_mean, running_var, training, momentum, eps))
        return NULL;
    memset(&job, 0, sizeof job);
    job.n = x->shape[0];
    job.c = x->shape[1];
    job.s = 1;
    for (i = 2; i < x->ndim; i++) job.s *= x->shape[i];
    inputs[0] = x;
    if (weight) inputs[n_inputs++] = weight;
    if (bias) inputs[n_inputs++] = bias;
    out = op_output("batch_norm", x->shape, x->ndim, inputs, n_inputs, norm_backward,
                    sizeof(BatchNormCtx) + 2 * (size_t)job.c * sizeof(float));
    if (!out) return NULL;
    ctx = op_context(out);
    job.x = x->data;
    job.y = out->data;
    job.weight = weight ? weight->data : NULL;
    job.bias = bias ? bias->data : NULL;
    job.running_mean = running_mean ? running_mean->data : NULL;
    job.running_var = running_var ? running_var->data : NULL;
    job.training = training != 0;
    job.momentum = momentum;
    job.eps = eps;
    if (out->size == 0) return out;
    if (ctx) {
        ctx->n = job.n;
        ctx->c = job.c;
        ctx->s = job.s;
        ctx->training = job.training;
        ctx->weight_at = weight ? 1 : -1;
        ctx->bias_at = bias ? (weight ? 2 : 1) : -1;
        job.mean = ctx->stats;
        job.invstd = ctx->stats + job.c;
        parallel_for(job.c, channel_grain(&job), norm_forward_task, &job);
        return out;
    }
    /* No graph: the statistics are only needed while forward runs. */
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return NULL;
    job.mean = arena_alloc(2 * (size_t)job.c * sizeof(float));
    if (job.mean) {
        job.invstd = job.mean + job.c;
        parallel_for(job.c, channel_grain(&job), norm_forward_task, &job);
    }
    ac_mem_restore(cp);
    return job.mean ? out : NULL;
}

/* ---- backward ------------------------------------------------------------ */

static void norm_backward_task(void *ctx, int64_t begin, int64_t end)
{
    const NormJob *job = ctx;
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

static int norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    BatchNormCtx *ctx = node->context;
    NormJob job;
    memset(&job, 0, sizeof job);
    job.n = ctx->n;
    job.c = ctx->c;
    job.s = ctx->s;
    job.training = ctx->training;
    job.mean = ctx->stats;
    job.invstd = ctx->stats + ctx->c;
    job.x = node->inputs[0]->data;
    job.gy = gout->data;
    job.weight = ctx->weight_at >= 0 ? node->inputs[ctx->weight_at]->data : NULL;
    if (input_needs_grad(node, 0)) {
        gin[0] = tensor_alloc_like("batch_norm", node->inputs[0]);
        if (!gin[0]) return ac_last_error_code();
        job.dx = gin[0]->data;
    }
    if (ctx->weight_at >= 0 && input_needs_grad(node, ctx->weight_at)) {
        gin[ctx->weight_at] = tensor_alloc_like("batch_norm", node->inputs[ctx->weight_at]);
        if (!gin[ctx->weight_at]) return ac_last_error_code();
        job.dweight = gin[ctx->weight_at]->data;
    }
    if (ctx->bias_at >= 0 && input_needs_grad(node, ctx->bias_at)) {
        gin[ctx->bias_at] = tensor_alloc_like("batch_norm", node->inputs[ctx->bias_at]);
        if (!gin[ctx->bias_at]) return ac_last_error_code();
        job.dbias = gin[ctx->bias_at]->data;
    }
    parallel_for(job.c, channel_grain(&job), norm_backward_task, &job);
    return AC_OK;
}

/* ---- layer norm ---------------------------------------------------------- */

typedef struct {
    int64_t rows, cols;
    int weight_at, bias_at;   /* their input index in the node, or -1 */
    float stats[];            /* mean[rows] then invstd[rows] */
} LayerNormCtx;

typedef struct {
    int64_t rows, cols;
    const float *x, *gy, *weight, *bias;
    float *y, *dx, *dweight, *dbias, *mean, *invstd;
    float eps;
} LayerNormJob;

static int64_t row_grain(int64_t cols)
{
    return NORM_GRAIN / (cols > 0 ? cols : 1) + 1;
}

static void layer_norm_forward_task(void *ctx, int64_t begin, int64_t end)
{
    const LayerNormJob *job = ctx;
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

/* weight or bias: NULL, or the normalized shape. */
static int affine_check(const AcTensor *t, const char *what, const int64_t *shape, int ndim)
{
    int i;
    if (!t) return AC_OK;
    for (i = 0; i < ndim && t->ndim == ndim; i++)
        if (t->shape[i] != shape[i]) break;
    if (t->ndim != ndim || i < ndim)
        return error_set(AC_ERR_SHAPE, "layer_norm: %s %s must have the normalized shape %s", what,
                         tensor_shape_str(t), shape_str(shape, ndim));
    return AC_OK;
}

static int layer_norm_check(const AcTensor *x, const int64_t *normalized_shape, int normalized_ndim,
                            const AcTensor *weight, const AcTensor *bias, float eps)
{
    const char *op = "layer_norm";
    int i;
    if (tensor_check(op, x, "input")) return -1;
    if (!normalized_shape || normalized_ndim < 1 || normalized_ndim > AC_MAX_DIMS)
        return error_set(AC_ERR_ARG, "%s: normalized_shape must have 1 to %d dims, got %d", op,
                         AC_MAX_DIMS, normalized_ndim);
    if (normalized_ndim > x->ndim)
        return error_set(AC_ERR_SHAPE, "%s: input %s has fewer dims than normalized_shape %s", op,
                         tensor_shape_str(x), shape_str(normalized_shape, normalized_ndim));
    for (i = 0; i < normalized_ndim; i++)
        if (x->shape[x->ndim - normalized_ndim + i] != normalized_shape[i])
            return error_set(AC_ERR_SHAPE,
                             "%s: input %s does not end in normalized_shape %s", op,
                             tensor_shape_str(x), shape_str(normalized_shape, normalized_ndim));
    if (affine_check(weight, "weight", normalized_shape, normalized_ndim) ||
        affine_check(bias, "bias", normalized_shape, normalized_ndim))
        return -1;
    if (!(eps >= 0.0f) || isinf(eps))
        return error_set(AC_ERR_ARG, "%s: eps must be finite and >= 0, got %g", op, (double)eps);
    return AC_OK;
}

static int layer_norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

AcTensor *ac_layer_norm(const AcTensor *x, const int64_t *normalized_shape, int normalized_ndim,
                        const AcTensor *weight, const AcTensor *bias, float eps)
{
    const AcTensor *inputs[3];
    int n_inputs = 1, i;
    LayerNormCtx *ctx;
    LayerNormJob job;
    AcTensor *out;
    size_t stats_bytes;
    if (layer_norm_check(x, normalized_shape, normalized_ndim, weight, bias, eps)) return NULL;
    memset(&job, 0, sizeof job);
    job.cols = 1;
    for (i = x->ndim - normalized_ndim; i < x->ndim; i++) job.cols *= x->shape[i];
    job.rows = job.cols > 0 ? x->size / job.cols : 0;
    stats_bytes = 2 * (size_t)job.rows * sizeof(float);
    inputs[0] = x;
    if (weight) inputs[n_inputs++] = weight;
    if (bias) inputs[n_inputs++] = bias;
    out = op_output("layer_norm", x->shape, x->ndim, inputs, n_inputs, layer_norm_backward,
                    sizeof(LayerNormCtx) + stats_bytes);
    if (!out) return NULL;
    job.x = x->data;
    job.y = out->data;
    job.weight = weight ? weight->data : NULL;
    job.bias = bias ? bias->data : NULL;
    job.eps = eps;
    ctx = op_context(out);
    if (ctx) {
        ctx->rows = job.rows;
        ctx->cols = job.cols;
        ctx->weight_at = weight ? 1 : -1;
        ctx->bias_at = bias ? (weight ? 2 : 1) : -1;
        job.mean = ctx->stats;
    }
    if (out->size == 0) return out;
    if (!ctx && !(job.mean = scratch_alloc(stats_bytes))) {   /* only needed while forward runs */
        ac_tensor_free(out);
        return NULL;
    }
    job.invstd = job.mean + job.rows;
    parallel_for(job.rows, row_grain(job.cols), layer_norm_forward_task, &job);
    if (!ctx) scratch_free(job.mean, stats_bytes);
    return out;
}

static void layer_norm_dx_task(void *ctx, int64_t begin, int64_t end)
{
    const LayerNormJob *job = ctx;
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
    const LayerNormJob *job = ctx;
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

/* A gradient for the node's input i shaped like it, when it needs one. */
static float *grad_for(AcGradNode *node, int i, AcTensor **gin)
{
    if (i < 0 || !input_needs_grad(node, i)) return NULL;
    gin[i] = tensor_alloc_like(node->op, node->inputs[i]);
    return gin[i] ? gin[i]->data : NULL;
}

static int layer_norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const LayerNormCtx *ctx = node->context;
    LayerNormJob job;
    memset(&job, 0, sizeof job);
    job.rows = ctx->rows;
    job.cols = ctx->cols;
    job.mean = (float *)ctx->stats;
    job.invstd = job.mean + ctx->rows;
    job.x = node->inputs[0]->data;
    job.gy = gout->data;
    job.weight = ctx->weight_at >= 0 ? node->inputs[ctx->weight_at]->data : NULL;
    job.dx = grad_for(node, 0, gin);
    job.dweight = grad_for(node, ctx->weight_at, gin);
    job.dbias = grad_for(node, ctx->bias_at, gin);
    if ((input_needs_grad(node, 0) && !job.dx) ||
        (ctx->weight_at >= 0 && input_needs_grad(node, ctx->weight_at) && !job.dweight) ||
        (ctx->bias_at >= 0 && input_needs_grad(node, ctx->bias_at) && !job.dbias))
        return ac_last_error_code();
    if (job.dx) parallel_for(job.rows, row_grain(job.cols), layer_norm_dx_task, &job);
    if (job.dweight || job.dbias)
        parallel_for(job.cols, NORM_GRAIN / (job.rows > 0 ? job.rows : 1) + 1,
                     layer_norm_affine_task, &job);
    return AC_OK;
}
