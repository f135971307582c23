/*
 * dropout.c - inverted dropout (PyTorch's F.dropout) and its backward.
 *
 * Each element is kept when a draw from the calling thread's generator is
 * >= p, and scaled by 1/(1-p) so the expected value is unchanged; the draws
 * run in element order on the calling thread, so ac_manual_seed makes the
 * mask repeatable whatever the thread count. The mask is saved, one byte per
 * element, in the node context for backward. When not training, or for
 * p == 0, the output is a view of the input with an identity gradient.
 *
 * Not here: Dropout as a module (Python).
 */
#include "internal.h"

#include <string.h>

typedef struct {
    float scale;
    uint8_t keep[];   /* per element: 1 kept, 0 dropped */
} DropoutCtx;

static int dropout_identity_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    gin[0] = (AcTensor *)gout;
    return AC_OK;
}

static int dropout_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

AcTensor *ac_dropout(const AcTensor *x, float p, int training)
{
    const char *op = "dropout";
    DropoutCtx *ctx;
    AcTensor *out;
    float scale;
    int64_t i;
    if (tensor_check(op, x, "input")) return NULL;
    if (!(p >= 0.0f && p <= 1.0f))
        return error_null(AC_ERR_ARG, "%s: probability has to be between 0 and 1, but got %g", op,
                          (double)p);
    if (!training || p == 0.0f)
        return op_view(op, x, x->shape, x->ndim, dropout_identity_backward, 0);
    out = op_output(op, x->shape, x->ndim, &x, 1, dropout_backward,
                    sizeof(DropoutCtx) + (size_t)x->size);
    if (!out) return NULL;
    ctx = op_context(out);
    scale = p == 1.0f ? 0.0f : 1.0f / (1.0f - p);
    if (ctx) ctx->scale = scale;
    for (i = 0; i < x->size; i++) {
        int keep = rng_uniform() >= p;
        out->data[i] = keep ? x->data[i] * scale : 0.0f;
        if (ctx) ctx->keep[i] = (uint8_t)keep;
    }
    return out;
}

static int dropout_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const DropoutCtx *ctx = node->context;
    const float *g = gout->data;
    float *dx;
    int64_t i;
    gin[0] = tensor_alloc_like("dropout", node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    dx = gin[0]->data;
    for (i = 0; i < gout->size; i++) dx[i] = ctx->keep[i] ? g[i] * ctx->scale : 0.0f;
    return AC_OK;
}
