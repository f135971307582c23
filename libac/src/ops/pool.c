/*
 * pool.c - pooling on NCHW tensors: max_pool2d (with dilation, ceil_mode and
 * its indices on the CPU), avg_pool2d, adaptive_avg_pool2d and
 * adaptive_max_pool2d, each with its backward.
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
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

/* torch's pooling_output_shape: windows that start inside the input or its
   left padding; with ceil_mode a last partial window counts. */
static int64_t pool_output_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad,
                                int64_t dil, int ceil_mode)
{
    int64_t span = size + 2 * pad - dil * (kernel - 1) - 1, out;
    if (ceil_mode) span += stride - 1;
    out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
    if (ceil_mode && out > 0 && (out - 1) * stride >= size + pad) out--;
    return out;
}

/* Check x and the window; fill g and the output shape. */
static int pool_check(const char *op, const AcTensor *x, int kh, int kw, int sh, int sw, int ph,
                      int pw, int dh, int dw, int ceil_mode, PoolGeom *g, int64_t *shape)
{
    int i;
    int64_t span_h, span_w;
    if (tensor_check(op, x, "input")) return -1;
    if (x->ndim != 4 && x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                         tensor_shape_str(x));
    if (kh < 1 || kw < 1 || sh < 1 || sw < 1 || dh < 1 || dw < 1)
        return error_set(AC_ERR_ARG, "%s: kernel (%d, %d), stride (%d, %d) and dilation (%d, %d) "
                         "must be >= 1", op, kh, kw, sh, sw, dh, dw);
    span_h = (int64_t)dh * (kh - 1) + 1;
    span_w = (int64_t)dw * (kw - 1) + 1;
    if (ph < 0 || pw < 0 || ph > span_h / 2 || pw > span_w / 2)
        return error_set(AC_ERR_ARG, "%s: padding (%d, %d) must be >= 0 and at most half the "
                         "kernel (%d, %d)", op, ph, pw, kh, kw);
    if ((dh != 1 || dw != 1 || ceil_mode) && x->device != AC_CPU)
        return error_set(AC_ERR_DEVICE, "%s: dilation and ceil_mode are computed on the CPU only, "
                         "not on %s", op, x->device == AC_CUDA ? "cuda" : "this device");
    g->h = x->shape[x->ndim - 2];
    g->w = x->shape[x->ndim - 1];
    if (g->h == 0 || g->w == 0)
        return error_set(AC_ERR_SHAPE, "%s: input %s has an empty plane", op, tensor_shape_str(x));
    if (span_h > g->h + 2 * (int64_t)ph || span_w > g->w + 2 * (int64_t)pw)
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
    g->dh = dh;
    g->dw = dw;
    g->oh = pool_output_size(g->h, kh, sh, ph, dh, ceil_mode);
    g->ow = pool_output_size(g->w, kw, sw, pw, dw, ceil_mode);
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

/* out = the max pool of x over the windows of g (op names it); *indices (when
   indices is not NULL) each output's argmax in its plane, as int64. */
static AcTensor *max_pool(const char *op, const AcTensor *x, const PoolGeom *g,
                          const int64_t *shape, AcTensor **indices)
{
    const AcKernels *k = kernels_for(x);
    const int64_t count = g->planes * g->oh * g->ow;
    const size_t argmax_bytes = (size_t)count * sizeof(int32_t);
    MaxPoolCtx *ctx;
    int32_t *argmax;
    AcTensor *out;
    int64_t i;
    if (indices) *indices = NULL;
    if (!k->max_pool2d) {
        kernel_missing(op, x);
        return NULL;
    }
    out = op_output(op, shape, x->ndim, &x, 1, max_pool_backward,
                    sizeof(MaxPoolCtx) + argmax_bytes);
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->g = *g;
    argmax = ctx ? ctx->argmax : indices ? scratch_alloc(argmax_bytes + 1) : NULL;
    if ((indices && !argmax) || k->max_pool2d(g, x->data, out->data, argmax)) {
        if (argmax && !ctx) scratch_free(argmax, argmax_bytes + 1);
        ac_tensor_free(out);
        return NULL;
    }
    if (indices) {   /* indices are asked for on the CPU only (pool_check) */
        *indices = ac_tensor_new_typed(shape, x->ndim, AC_INT64);
        for (i = 0; *indices && i < count; i++) ((int64_t *)(*indices)->data)[i] = argmax[i];
    }
    if (argmax && !ctx) scratch_free(argmax, argmax_bytes + 1);
    if (indices && !*indices) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

AcTensor *ac_max_pool2d(const AcTensor *x, int kernel_h, int kernel_w, int stride_h, int stride_w,
                        int pad_h, int pad_w)
{
    if (ops_observed) return graph_op("max_pool2d", max_pool2d_replay, 1, (const AcTensor *[]){x}, (double[]){kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w}, 6);
    PoolGeom g;
    int64_t shape[4];
    if (pool_check("max_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1, 0,
                   &g, shape))
        return NULL;
    return max_pool("max_pool2d", x, &g, shape, NULL);
}

AcTensor *ac_max_pool2d_ex(const AcTensor *x, int kernel_h, int kernel_w, int stride_h,
                           int stride_w, int pad_h, int pad_w, int dil_h, int dil_w, int ceil_mode,
                           AcTensor **indices)
{
    PoolGeom g;
    int64_t shape[4];
    if (graph_recording) graph_unsupported("max_pool2d_ex");
    if (indices && x && x->device != AC_CPU) {
        error_set(AC_ERR_DEVICE, "max_pool2d: return_indices is computed on the CPU only");
        return NULL;
    }
    if (pool_check("max_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, dil_h,
                   dil_w, ceil_mode, &g, shape))
        return NULL;
    if (g.oh < 1 || g.ow < 1)
        return error_null(AC_ERR_SHAPE, "max_pool2d: input %s gives an output of %lldx%lld",
                          tensor_shape_str(x), (long long)g.oh, (long long)g.ow);
    return max_pool("max_pool2d", x, &g, shape, indices);
}

AcTensor *ac_adaptive_max_pool2d(const AcTensor *x, int out_h, int out_w, AcTensor **indices)
{
    const char *op = "adaptive_max_pool2d";
    PoolGeom g;
    int64_t shape[4];
    int i;
    if (graph_recording) graph_unsupported(op);
    if (tensor_check(op, x, "input")) return NULL;
    if (x->ndim != 4 && x->ndim != 3)
        return error_null(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                          tensor_shape_str(x));
    if (x->device != AC_CPU)
        return error_null(AC_ERR_DEVICE, "%s: computed on the CPU only", op);
    if (out_h < 1 || out_w < 1)
        return error_null(AC_ERR_ARG, "%s: output size (%d, %d) must be >= 1", op, out_h, out_w);
    memset(&g, 0, sizeof g);   /* kh == 0: adaptive windows */
    g.dh = g.dw = 1;
    g.h = x->shape[x->ndim - 2];
    g.w = x->shape[x->ndim - 1];
    if (g.h == 0 || g.w == 0)
        return error_null(AC_ERR_SHAPE, "%s: input %s has an empty plane", op, tensor_shape_str(x));
    if (g.h * g.w > INT32_MAX)
        return error_null(AC_ERR_SHAPE, "%s: input %s has planes of more than 2^31 elements", op,
                          tensor_shape_str(x));
    g.oh = out_h;
    g.ow = out_w;
    g.planes = 1;
    for (i = 0; i < x->ndim - 2; i++) {
        g.planes *= x->shape[i];
        shape[i] = x->shape[i];
    }
    shape[x->ndim - 2] = out_h;
    shape[x->ndim - 1] = out_w;
    return max_pool(op, x, &g, shape, indices);
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
    if (pool_check("avg_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1, 0,
                   &g, shape))
        return NULL;
    return average("avg_pool2d", x, &g, shape);
}

/* With ceil_mode, a last partial window's sum is still divided by kh * kw here:
   the caller rescales to torch's divisor. */
AcTensor *ac_avg_pool2d_ex(const AcTensor *x, int kernel_h, int kernel_w, int stride_h,
                           int stride_w, int pad_h, int pad_w, int ceil_mode)
{
    PoolGeom g;
    int64_t shape[4];
    if (graph_recording) graph_unsupported("avg_pool2d_ex");
    if (pool_check("avg_pool2d", x, kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w, 1, 1,
                   ceil_mode, &g, shape))
        return NULL;
    if (g.oh < 1 || g.ow < 1)
        return error_null(AC_ERR_SHAPE, "avg_pool2d: input %s gives an output of %lldx%lld",
                          tensor_shape_str(x), (long long)g.oh, (long long)g.ow);
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
    g.dh = g.dw = 1;
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
