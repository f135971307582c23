/*
 * norm.c - batch normalisation (PyTorch's F.batch_norm) and layer
 * normalisation (F.layer_norm), each forward beside its backward.
 *
 * x (N, C, ...) is seen as (N, C, S): channel c holds N*S values. In
 * training the batch's statistics are used and the running statistics, root
 * tensors the caller owns on x's device, are updated in place; in eval the
 * running statistics are used. Layer norm sees x as (M, D) rows, D the
 * product of the normalized dims, and the elementwise weight and bias have
 * the normalized shape. Forward saves the mean and invstd it used (per
 * channel, per row) in the node context for backward. The math runs in the
 * device's kernels: kernels/cpu/norm.c on the CPU.
 *
 * Not here: BatchNorm1d/2d and LayerNorm as modules (Python).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

typedef struct {
    int64_t n, c, s;       /* x as (n, c, s) */
    int training;
    int weight_at, bias_at;   /* their input index in the node, or -1 */
    float stats[];         /* mean[c] then invstd[c], as used by forward */
} BatchNormCtx;

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
    if (same_device(op, x, running_mean) || same_device(op, x, running_var)) return -1;
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
    const AcKernels *k;
    int n_inputs = 1, i, status;
    BatchNormCtx *ctx;
    BatchNormArgs args;
    AcTensor *out;
    AcCheckpoint cp;
    if (norm_check(x, weight, bias, running_mean, running_var, training, momentum, eps))
        return NULL;
    k = kernels_for(x);
    if (!k->batch_norm) {
        kernel_missing("batch_norm", x);
        return NULL;
    }
    memset(&args, 0, sizeof args);
    args.n = x->shape[0];
    args.c = x->shape[1];
    args.s = 1;
    for (i = 2; i < x->ndim; i++) args.s *= x->shape[i];
    inputs[0] = x;
    if (weight) inputs[n_inputs++] = weight;
    if (bias) inputs[n_inputs++] = bias;
    out = op_output("batch_norm", x->shape, x->ndim, inputs, n_inputs, norm_backward,
                    sizeof(BatchNormCtx) + 2 * (size_t)args.c * sizeof(float));
    if (!out) return NULL;
    ctx = op_context(out);
    args.x = x->data;
    args.y = out->data;
    args.weight = weight ? weight->data : NULL;
    args.bias = bias ? bias->data : NULL;
    args.running_mean = running_mean ? running_mean->data : NULL;
    args.running_var = running_var ? running_var->data : NULL;
    args.training = training != 0;
    args.momentum = momentum;
    args.eps = eps;
    if (out->size == 0) return out;
    if (ctx) {
        ctx->n = args.n;
        ctx->c = args.c;
        ctx->s = args.s;
        ctx->training = args.training;
        ctx->weight_at = weight ? 1 : -1;
        ctx->bias_at = bias ? (weight ? 2 : 1) : -1;
        args.mean = ctx->stats;
        args.invstd = ctx->stats + args.c;
        status = k->batch_norm(&args);
    } else {
        /* No graph: the statistics are only needed while forward runs. */
        cp = ac_mem_checkpoint();
        if (cp.depth < 0) status = ac_last_error_code();
        else if (!(args.mean = arena_alloc(2 * (size_t)args.c * sizeof(float)))) status = AC_ERR_MEMORY;
        else {
            args.invstd = args.mean + args.c;
            status = k->batch_norm(&args);
        }
        if (cp.depth >= 0) ac_mem_restore(cp);
    }
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

static int norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    BatchNormCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    int status = k->batch_norm_backward ? AC_OK : kernel_missing("batch_norm", gout);
    BatchNormArgs args;
    memset(&args, 0, sizeof args);
    args.n = ctx->n;
    args.c = ctx->c;
    args.s = ctx->s;
    args.training = ctx->training;
    args.mean = ctx->stats;
    args.invstd = ctx->stats + ctx->c;
    args.x = node->inputs[0]->data;
    args.gy = gout->data;
    args.weight = ctx->weight_at >= 0 ? node->inputs[ctx->weight_at]->data : NULL;
    args.dx = input_grad_data(node, 0, gin, &status);
    args.dweight = input_grad_data(node, ctx->weight_at, gin, &status);
    args.dbias = input_grad_data(node, ctx->bias_at, gin, &status);
    return status ? status : k->batch_norm_backward(&args);
}

/* ---- layer norm ---------------------------------------------------------- */

typedef struct {
    int64_t rows, cols;
    int weight_at, bias_at;   /* their input index in the node, or -1 */
    float stats[];            /* mean[rows] then invstd[rows] */
} LayerNormCtx;

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
    const AcKernels *k;
    int n_inputs = 1, i, status;
    LayerNormCtx *ctx;
    LayerNormArgs args;
    AcTensor *out;
    size_t stats_bytes;
    if (layer_norm_check(x, normalized_shape, normalized_ndim, weight, bias, eps)) return NULL;
    k = kernels_for(x);
    if (!k->layer_norm) {
        kernel_missing("layer_norm", x);
        return NULL;
    }
    memset(&args, 0, sizeof args);
    args.cols = 1;
    for (i = x->ndim - normalized_ndim; i < x->ndim; i++) args.cols *= x->shape[i];
    args.rows = args.cols > 0 ? x->size / args.cols : 0;
    stats_bytes = 2 * (size_t)args.rows * sizeof(float);
    inputs[0] = x;
    if (weight) inputs[n_inputs++] = weight;
    if (bias) inputs[n_inputs++] = bias;
    out = op_output("layer_norm", x->shape, x->ndim, inputs, n_inputs, layer_norm_backward,
                    sizeof(LayerNormCtx) + stats_bytes);
    if (!out) return NULL;
    args.x = x->data;
    args.y = out->data;
    args.weight = weight ? weight->data : NULL;
    args.bias = bias ? bias->data : NULL;
    args.eps = eps;
    ctx = op_context(out);
    if (ctx) {
        ctx->rows = args.rows;
        ctx->cols = args.cols;
        ctx->weight_at = weight ? 1 : -1;
        ctx->bias_at = bias ? (weight ? 2 : 1) : -1;
        args.mean = ctx->stats;
    }
    if (out->size == 0) return out;
    if (!ctx && !(args.mean = scratch_alloc(stats_bytes))) {   /* only needed while forward runs */
        ac_tensor_free(out);
        return NULL;
    }
    args.invstd = args.mean + args.rows;
    status = k->layer_norm(&args);
    if (!ctx) scratch_free(args.mean, stats_bytes);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

static int layer_norm_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const LayerNormCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    int status = k->layer_norm_backward ? AC_OK : kernel_missing("layer_norm", gout);
    LayerNormArgs args;
    memset(&args, 0, sizeof args);
    args.rows = ctx->rows;
    args.cols = ctx->cols;
    args.mean = (float *)ctx->stats;
    args.invstd = args.mean + ctx->rows;
    args.x = node->inputs[0]->data;
    args.gy = gout->data;
    args.weight = ctx->weight_at >= 0 ? node->inputs[ctx->weight_at]->data : NULL;
    args.dx = input_grad_data(node, 0, gin, &status);
    args.dweight = input_grad_data(node, ctx->weight_at, gin, &status);
    args.dbias = input_grad_data(node, ctx->bias_at, gin, &status);
    return status ? status : k->layer_norm_backward(&args);
}
