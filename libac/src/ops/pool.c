/*
 * pool.c - pooling on NCHW tensors: max_pool2d, avg_pool2d and
 * adaptive_avg_pool2d, each with its backward.
 *
 * Here: the checks, the windows' geometry (PoolGeom) and the wiring; the
 * math runs in the device's kernels (kernels/cpu/pool.c on the CPU).
 * max_pool2d saves, when a graph is recorded, the position of each window's
 * first maximum in its node context; backward scatters the gradient there.
 * As in PyTorch, padding is at most half the kernel, so every window holds
 * at least one input element.
 *
 * Not here: convolution (conv.c), pooling layers as modules (Python).
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <string.h>

/* Check x and the window; fill g and the output shape. */
static int pool_check(const char *op, const AcTensor *x, int kh, int kw, int sh, int sw, int ph,
                      int pw, PoolGeom *g, int64_t *shape)
{
    int i;
    if (tensor_check(op, x, "input")) return -1;
    if (x->ndim != 4 && x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                         tensor_shape_str(x));
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1)
        return error_set(AC_ERR_ARG, "%s: kernel (%d, %d) and stride (%d, %d) must be >= 1", op,
                         kh, kw, sh, sw);
    if (ph < 0 || pw < 0 || ph > kh / 2 || pw > kw / 2)
        return error_set(AC_ERR_ARG, "%s: padding (%d, %d) must be >= 0 and at most half the "
                         "kernel (%d, %d)", op, ph, pw, kh, kw);
    g->h = x->shape[x->ndim - 2];
    g->w = x->shape[x->ndim - 1];
    if (g->h == 0 || g->w == 0)
        return error_set(AC_ERR_SHAPE, "%s: input %s has an empty plane", op, tensor_shape_str(x));
    if (kh > g->h + 2 * (int64_t)ph || kw > g->w + 2 * (int64_t)pw)
        return error_set(AC_ERR_SHAPE, "%s: kernel (%d, %d) is larger than the padded input "
                         "%lldx%lld of %s", op, kh, kw, (long long)(g->h + 2 * (int64_t)ph),
                         (long long)(g->w + 2 * (int64_t)pw), tensor_shape_str(x));
    if (g->h * g->w > INT32_MAX)
        return error_set(AC_ERR_SHAPE, "%s: input %s has planes of more than 2^31 elements", op,
                         tensor_shape_str(x));
    g->kh = kh;
    g->kw = kw;
    g->sh = sh;
    g->sw = sw;
    g->ph = ph;
    g->pw = pw;
    g->oh = (g->h + 2 * g->ph - g->kh) / g->sh + 1;
    g->ow = (g->w + 2 * g->pw - g->kw) / g->sw + 1;
    g->planes = 1;
    for (i = 0; i < x->ndim - 2; i++) {
        g->planes *= x->shape[i];
        shape[i] = x->shape[i];
    }
    shape[x->ndim - 2] = g->oh;
    shape[x->ndim - 1] = g->ow;
    return AC_OK;
}

typedef struct {
    PoolGeom g;
    int32_t argmax[];   /* per output element: its window's first maximum in the plane */
} MaxPoolCtx;

/* ---- max_pool2d ---------------------------------------------------------- */

static int max_pool_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int max_pool2d_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_max_pool2d(t[0], (int)attr[0], (int)attr[1], (int)attr[2], (int)attr[3], (int)attr[4],
                                   (int)attr[5]));
}

AcTensor *ac_max_pool2d(const AcTensor *x, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w)
{
    if (ops_observed) return graph_op("max_pool2d", max_pool2d_replay, 1, (const AcTensor *[]){x}, (double[]){kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w}, 6);
    const AcKernels *k;
    PoolGeom g;
    MaxPoolCtx *ctx;
    int64_t shape[4];
    AcTensor *out;
    if (pool_check("max_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, &g,
                   shape))
        return NULL;
    k = kernels_for(x);
    if (!k->max_pool2d) {
        kernel_missing("max_pool2d", x);
        return NULL;
    }
    out = op_output("max_pool2d", shape, x->ndim, &x, 1, max_pool_backward,
                    sizeof(MaxPoolCtx) + (size_t)(g.planes * g.oh * g.ow) * sizeof(int32_t));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->g = g;
    if (k->max_pool2d(&g, x->data, out->data, ctx ? ctx->argmax : NULL)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

static int max_pool_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    MaxPoolCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    if (!k->max_pool2d_backward) return kernel_missing("max_pool2d", gout);
    gin[0] = tensor_alloc_like("max_pool2d", node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    return k->max_pool2d_backward(&ctx->g, gout->data, ctx->argmax, gin[0]->data);
}

/* ---- avg_pool2d and adaptive_avg_pool2d ---------------------------------- */

static int average_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

/* out = the average pool of x over the windows of g (op names it). */
static AcTensor *average(const char *op, const AcTensor *x, const PoolGeom *g, const int64_t *shape)
{
    const AcKernels *k = kernels_for(x);
    PoolGeom *ctx;
    AcTensor *out;
    if (!k->avg_pool2d) {
        kernel_missing(op, x);
        return NULL;
    }
    out = op_output(op, shape, x->ndim, &x, 1, average_backward, sizeof(PoolGeom));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) *ctx = *g;
    if (k->avg_pool2d(g, x->data, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

int avg_pool2d_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_avg_pool2d(t[0], (int)attr[0], (int)attr[1], (int)attr[2], (int)attr[3], (int)attr[4],
                                   (int)attr[5]));
}

AcTensor *ac_avg_pool2d(const AcTensor *x, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w)
{
    if (ops_observed) return graph_op("avg_pool2d", avg_pool2d_replay, 1, (const AcTensor *[]){x}, (double[]){kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w}, 6);
    PoolGeom g;
    int64_t shape[4];
    if (pool_check("avg_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, &g,
                   shape))
        return NULL;
    return average("avg_pool2d", x, &g, shape);
}

int adaptive_avg_pool2d_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_adaptive_avg_pool2d(t[0], (int)attr[0], (int)attr[1]));
}

AcTensor *ac_adaptive_avg_pool2d(const AcTensor *x, int out_h, int out_w)
{
    if (ops_observed) return graph_op("adaptive_avg_pool2d", adaptive_avg_pool2d_replay, 1, (const AcTensor *[]){x}, (double[]){out_h, out_w}, 2);
    const char *op = "adaptive_avg_pool2d";
    PoolGeom g;
    int64_t shape[4];
    int i;
    if (tensor_check(op, x, "input")) return NULL;
    if (x->ndim != 4 && x->ndim != 3)
        return error_null(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                          tensor_shape_str(x));
    if (out_h < 1 || out_w < 1)
        return error_null(AC_ERR_ARG, "%s: output size (%d, %d) must be >= 1", op, out_h, out_w);
    memset(&g, 0, sizeof g);   /* kh == 0: adaptive windows */
    g.h = x->shape[x->ndim - 2];
    g.w = x->shape[x->ndim - 1];
    if (g.h == 0 || g.w == 0)
        return error_null(AC_ERR_SHAPE, "%s: input %s has an empty plane", op, tensor_shape_str(x));
    g.oh = out_h;
    g.ow = out_w;
    g.planes = 1;
    for (i = 0; i < x->ndim - 2; i++) {
        g.planes *= x->shape[i];
        shape[i] = x->shape[i];
    }
    shape[x->ndim - 2] = out_h;
    shape[x->ndim - 1] = out_w;
    return average(op, x, &g, shape);
}

static int average_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const PoolGeom *ctx = node->context;
    const char *op = ctx->kh == 0 ? "adaptive_avg_pool2d" : "avg_pool2d";
    const AcKernels *k = kernels_for(gout);
    if (!k->avg_pool2d_backward) return kernel_missing(op, gout);
    gin[0] = tensor_alloc_like(op, node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    return k->avg_pool2d_backward(ctx, gout->data, gin[0]->data);
}
