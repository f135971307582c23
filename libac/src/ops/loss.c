/*
 * loss.c - mse_loss, l1_loss, smooth_l1_loss, cross_entropy (class indices,
 * label smoothing), binary_cross_entropy and bce_with_logits, each with
 * reductions none, mean and sum, and each forward beside its backward.
 *
 * Here are the checks of shapes and arguments, the nodes and the backward
 * wiring; the math is in the device's kernel table (kernels/kernels.h; the
 * CPU's in kernels/cpu/loss.c, whose reduced losses are the same bits for any
 * number of threads). cross_entropy is fused: forward saves the softmax
 * probabilities, and backward is one loop over them.
 *
 * Not here: softmax and log_softmax as ops (activation.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>

/* ---- shared plumbing ----------------------------------------------------- */

/* out once its kernel returned status: on an error, out is freed and NULL returned. */
static AcTensor *loss_done(AcTensor *out, int status)
{
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
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

/* ---- mse, l1, smooth l1, bce and bce with logits: elementwise terms ------ */

static AcTensor *elementwise_loss(const char *op, AcLossFn fn, float beta, const AcTensor *input,
                                  const AcTensor *target, int reduction, AcBackwardFn backward)
{
    const AcTensor *inputs[2];
    LossCtx *ctx;
    AcTensor *out;
    inputs[0] = input;
    inputs[1] = target;
    out = loss_output(op, input->shape, input->ndim, inputs, 2, reduction, backward,
                      sizeof(LossCtx));
    if (!out) return NULL;
    if ((ctx = op_context(out))) ctx->beta = beta;
    return loss_done(out, fn ? fn(input, target, out, reduction, beta) : kernel_missing(op, out));
}

static int elementwise_loss_backward(AcLossGradFn fn, AcGradNode *node, const AcTensor *gout,
                                     AcTensor **gin)
{
    const LossCtx *ctx = node->context;
    const AcTensor *x = node->inputs[0];
    int i;
    if (!fn) return kernel_missing(node->op, gout);
    for (i = 0; i < 2; i++) {
        if (!input_needs_grad(node, i)) continue;
        gin[i] = tensor_alloc_like("backward", x);
        if (!gin[i]) return ac_last_error_code();
    }
    return fn(x, node->inputs[1], gout, input_needs_grad(node, 0) ? gin[0] : NULL,
              input_needs_grad(node, 1) ? gin[1] : NULL, ctx->reduction, ctx->beta);
}

static int mse_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(kernels_for(gout)->mse_loss_backward, node, gout, gin);
}

int mse_loss_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_mse_loss(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_mse_loss(const AcTensor *input, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("mse_loss", mse_loss_replay, 2, (const AcTensor *[]){input, target}, (double[]){reduction}, 1);
    if (pair_check("mse_loss", input, target, reduction)) return NULL;
    return elementwise_loss("mse_loss", kernels_for(input)->mse_loss, 0.0f, input, target,
                            reduction, mse_backward);
}

static int l1_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(kernels_for(gout)->l1_loss_backward, node, gout, gin);
}

int l1_loss_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_l1_loss(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_l1_loss(const AcTensor *input, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("l1_loss", l1_loss_replay, 2, (const AcTensor *[]){input, target}, (double[]){reduction}, 1);
    if (pair_check("l1_loss", input, target, reduction)) return NULL;
    return elementwise_loss("l1_loss", kernels_for(input)->l1_loss, 0.0f, input, target,
                            reduction, l1_backward);
}

static int smooth_l1_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(kernels_for(gout)->smooth_l1_loss_backward, node, gout, gin);
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
    return elementwise_loss(op, kernels_for(input)->smooth_l1_loss, beta, input, target, reduction,
                            smooth_l1_backward);
}

static int bce_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(kernels_for(gout)->binary_cross_entropy_backward, node, gout,
                                     gin);
}

int binary_cross_entropy_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_binary_cross_entropy(t[0], t[1], (int)attr[0]));
}

/* The kernel checks that every input is a probability in [0, 1]. */
AcTensor *ac_binary_cross_entropy(const AcTensor *probs, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("binary_cross_entropy", binary_cross_entropy_replay, 2, (const AcTensor *[]){probs, target}, (double[]){reduction}, 1);
    const char *op = "binary_cross_entropy";
    if (pair_check(op, probs, target, reduction)) return NULL;
    return elementwise_loss(op, kernels_for(probs)->binary_cross_entropy, 0.0f, probs, target,
                            reduction, bce_backward);
}

static int bce_logits_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return elementwise_loss_backward(kernels_for(gout)->bce_with_logits_backward, node, gout, gin);
}

int bce_with_logits_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_bce_with_logits(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_bce_with_logits(const AcTensor *logits, const AcTensor *target, int reduction)
{
    if (ops_observed) return graph_op("bce_with_logits", bce_with_logits_replay, 2, (const AcTensor *[]){logits, target}, (double[]){reduction}, 1);
    if (pair_check("bce_with_logits", logits, target, reduction)) return NULL;
    return elementwise_loss("bce_with_logits", kernels_for(logits)->bce_with_logits, 0.0f, logits,
                            target, reduction, bce_logits_backward);
}

/* ---- cross entropy ------------------------------------------------------- */

/* The rows' target classes (int64), then what the kernel keeps for backward
   (kernels.h: rows * classes + rows floats on CUDA, 2 * rows on the CPU), sit
   in a saved tensor, the node's input 1, rather than in this context: freeing
   the graph then frees them, though the caller keeps the loss. */
typedef struct {
    LossCtx loss;
    float smoothing;
    int64_t rows;
} CrossEntropyCtx;

static int cross_entropy_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const CrossEntropyCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    const int64_t *ids = (const int64_t *)(const void *)node->inputs[1]->data;
    if (!k->cross_entropy_backward) return kernel_missing(node->op, gout);
    gin[0] = tensor_alloc_like("backward", node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    return k->cross_entropy_backward(node->inputs[0], ids, (const float *)(ids + ctx->rows), gout,
                                     gin[0], ctx->loss.reduction, ctx->smoothing);
}

/* logits (N, C) with target (N,), or logits (C,) with a scalar target; the
   kernel checks the targets are class indices. */
static int cross_entropy_check(const AcTensor *logits, const AcTensor *target, int reduction,
                               float label_smoothing)
{
    const char *op = "cross_entropy";
    int64_t rows;
    if (tensor_check(op, logits, "logits") || tensor_check_any(op, target, "target") ||
        index_check(op, target, "target"))
        return -1;
    if (logits->ndim != 1 && logits->ndim != 2)
        return error_set(AC_ERR_SHAPE, "%s: logits %s must be (N, C) or (C,)", op,
                         tensor_shape_str(logits));
    rows = logits->ndim == 2 ? logits->shape[0] : 1;
    if (target->ndim != logits->ndim - 1 || (logits->ndim == 2 && target->shape[0] != rows))
        return error_set(AC_ERR_SHAPE, "%s: target %s does not fit logits %s (expected %s)", op,
                         tensor_shape_str(target), tensor_shape_str(logits),
                         shape_str(&rows, logits->ndim - 1));
    if (reduction_check(op, reduction)) return -1;
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))
        return error_set(AC_ERR_ARG, "%s: label_smoothing %g is not in [0, 1]", op,
                         (double)label_smoothing);
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
    const AcKernels *k;
    CrossEntropyCtx *ctx;
    const AcTensor *inputs[2];
    AcTensor *out, *saved = NULL;
    int64_t rows, saved_size, *ids = NULL;
    if (cross_entropy_check(logits, target, reduction, label_smoothing)) return NULL;
    inputs[0] = logits;
    inputs[1] = target;   /* not a node input: its device is checked here */
    if (!common_device("cross_entropy", inputs, 2)) return NULL;
    k = kernels_for(logits);
    rows = logits->ndim == 2 ? logits->shape[0] : 1;
    /* int64 ids take two floats' room; then what the device's kernel keeps (kernels.h) */
    saved_size = 2 * rows + (logits->device == AC_CPU ? 2 * rows : logits->size + rows);
    if (ac_is_grad_enabled() && logits->requires_grad &&
        !(saved = tensor_create_on("cross_entropy", &saved_size, 1, AC_FLOAT32, NULL, 0, 0,
                                   logits->device, logits->device_index)))
        return NULL;
    inputs[1] = saved;
    out = loss_output("cross_entropy", logits->shape, logits->ndim - 1, inputs, 2, reduction,
                      cross_entropy_backward, sizeof(CrossEntropyCtx));
    ac_tensor_free(saved);   /* the node holds it */
    if (!out) return NULL;
    if ((ctx = op_context(out))) {
        ctx->smoothing = label_smoothing;
        ctx->rows = rows;
        ids = data_i64(saved);
    }
    if (!k->cross_entropy) return loss_done(out, kernel_missing("cross_entropy", out));
    return loss_done(out, k->cross_entropy(logits, target, out, reduction, label_smoothing, ids,
                                           ids ? (float *)(ids + rows) : NULL));
}
