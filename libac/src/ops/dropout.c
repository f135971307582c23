/*
 * dropout.c - inverted dropout (PyTorch's F.dropout) and feature dropout
 * (F.dropout2d's whole channels), and their backward.
 *
 * Dropout draws per element, feature dropout per block: x (N, C, ...) has
 * N * C blocks, each the rest of the dims, kept or zeroed as a whole. A block
 * is kept when a draw from the calling thread's generator is >= p, and scaled
 * by 1/(1-p) so the expected value is unchanged (the math: the device's
 * kernel table, kernels/cpu/dropout.c for the CPU). The mask is saved, one
 * byte per block, in the node context for backward. When not training, or
 * for p == 0, the output is a view of the input with an identity gradient.
 *
 * Not here: Dropout and Dropout2d as modules (Python).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

typedef struct {
    float scale;
    int64_t block;    /* elements per draw */
    uint8_t keep[];   /* per block: 1 kept, 0 dropped */
} DropoutCtx;

static int dropout_identity_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    gin[0] = (AcTensor *)gout;
    return AC_OK;
}

static int dropout_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

static AcTensor *dropout_blocks(const char *op, const AcTensor *x, float p, int training,
                                int64_t block)
{
    const int64_t blocks = block > 0 ? x->size / block : 0;
    const AcKernels *k = kernels_for(x);
    DropoutCtx *ctx;
    AcTensor *out;
    float scale;
    int status;
    if (!(p >= 0.0f && p <= 1.0f))
        return error_null(AC_ERR_ARG, "%s: probability has to be between 0 and 1, but got %g", op,
                          (double)p);
    if (!training || p == 0.0f)
        return op_view(op, x, x->shape, x->ndim, dropout_identity_backward, 0);
    out = op_output(op, x->shape, x->ndim, &x, 1, dropout_backward,
                    sizeof(DropoutCtx) + (size_t)blocks);
    if (!out) return NULL;
    ctx = op_context(out);
    scale = p == 1.0f ? 0.0f : 1.0f / (1.0f - p);
    if (ctx) {
        ctx->scale = scale;
        ctx->block = block;
    }
    status = k->dropout ? k->dropout(x->data, out->data, ctx ? ctx->keep : NULL, blocks, block, p, scale)
                        : kernel_missing(op, out);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

int dropout_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_dropout(t[0], (float)attr[0], (int)attr[1]));
}

AcTensor *ac_dropout(const AcTensor *x, float p, int training)
{
    if (ops_observed) return graph_op("dropout", dropout_replay, 1, (const AcTensor *[]){x}, (double[]){p, training}, 2);
    if (tensor_check("dropout", x, "input")) return NULL;
    return dropout_blocks("dropout", x, p, training, 1);
}

int feature_dropout_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_feature_dropout(t[0], (float)attr[0], (int)attr[1]));
}

AcTensor *ac_feature_dropout(const AcTensor *x, float p, int training)
{
    if (ops_observed) return graph_op("feature_dropout", feature_dropout_replay, 1, (const AcTensor *[]){x}, (double[]){p, training}, 2);
    const char *op = "feature_dropout";
    int64_t block = 1;
    int d;
    if (tensor_check(op, x, "input")) return NULL;
    if (x->ndim < 2)
        return error_null(AC_ERR_SHAPE, "%s: input %s must be (N, C, ...)", op, tensor_shape_str(x));
    for (d = 2; d < x->ndim; d++) block *= x->shape[d];
    return dropout_blocks(op, x, p, training, block);
}

static int dropout_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const DropoutCtx *ctx = node->context;
    const int64_t block = ctx->block, blocks = block > 0 ? gout->size / block : 0;
    const AcKernels *k = kernels_for(gout);
    if (!k->dropout_backward) return kernel_missing(node->op, gout);
    gin[0] = tensor_alloc_like(node->op, node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    return k->dropout_backward(gout->data, gin[0]->data, ctx->keep, blocks, block, ctx->scale);
}
