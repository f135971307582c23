/*
 * conv.c - 2-D convolution on NCHW tensors (PyTorch's F.conv2d) and its
 * backward: any kernel size, stride, padding, dilation and groups.
 *
 * Here: the checks, the output shape and the graph wiring. The math (im2col
 * and GEMM, Winograd for 3x3 kernels, the threads) runs in the device's
 * kernels: kernels/cpu/conv.c on the CPU.
 *
 * Not here: pooling (pool.c), Conv2d as a module (Python).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

typedef struct {
    int stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups;
} ConvCtx;

/* ---- checks and shape --------------------------------------------------- */

static int conv_check(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                      const ConvCtx *p)
{
    const char *op = "conv2d";
    int64_t c, f, span_h, span_w, in_h, in_w;
    if (tensor_check(op, x, "input") || tensor_check(op, weight, "weight")) return -1;
    if (x->ndim != 4 && x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                         tensor_shape_str(x));
    if (weight->ndim != 4)
        return error_set(AC_ERR_SHAPE,
                         "%s: weight %s must be (out_channels, in_channels/groups, kH, kW)", op,
                         tensor_shape_str(weight));
    if (p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1)
        return error_set(AC_ERR_ARG, "%s: stride (%d, %d) and dilation (%d, %d) must be >= 1", op,
                         p->stride_h, p->stride_w, p->dil_h, p->dil_w);
    if (p->pad_h < 0 || p->pad_w < 0)
        return error_set(AC_ERR_ARG, "%s: padding (%d, %d) must be >= 0", op, p->pad_h, p->pad_w);
    if (p->groups < 1)
        return error_set(AC_ERR_ARG, "%s: groups must be >= 1, got %d", op, p->groups);
    c = x->shape[x->ndim - 3];
    f = weight->shape[0];
    if (c % p->groups != 0)
        return error_set(AC_ERR_SHAPE, "%s: input %s has %lld channels, not divisible by groups %d",
                         op, tensor_shape_str(x), (long long)c, p->groups);
    if (f % p->groups != 0)
        return error_set(AC_ERR_SHAPE, "%s: weight %s has %lld filters, not divisible by groups %d",
                         op, tensor_shape_str(weight), (long long)f, p->groups);
    if (weight->shape[1] * p->groups != c)
        return error_set(AC_ERR_SHAPE, "%s: input has %lld channels, weight expects %lld", op,
                         (long long)c, (long long)(weight->shape[1] * p->groups));
    if (weight->shape[2] < 1 || weight->shape[3] < 1)
        return error_set(AC_ERR_SHAPE, "%s: weight %s has an empty kernel", op,
                         tensor_shape_str(weight));
    span_h = (int64_t)p->dil_h * (weight->shape[2] - 1) + 1;
    span_w = (int64_t)p->dil_w * (weight->shape[3] - 1) + 1;
    in_h = x->shape[x->ndim - 2] + 2 * (int64_t)p->pad_h;
    in_w = x->shape[x->ndim - 1] + 2 * (int64_t)p->pad_w;
    if (span_h > in_h || span_w > in_w)
        return error_set(AC_ERR_SHAPE, "%s: kernel %lldx%lld (spanning %lldx%lld with dilation) "
                         "is larger than the padded input %lldx%lld of %s", op,
                         (long long)weight->shape[2], (long long)weight->shape[3],
                         (long long)span_h, (long long)span_w, (long long)in_h, (long long)in_w,
                         tensor_shape_str(x));
    if (bias && (bias->ndim != 1 || bias->shape[0] != f))
        return error_set(AC_ERR_SHAPE, "%s: bias %s does not fit weight %s (expected (%lld,))", op,
                         tensor_shape_str(bias), tensor_shape_str(weight), (long long)f);
    return AC_OK;
}

static ConvShape conv_shape(const AcTensor *x, const AcTensor *weight, const ConvCtx *p)
{
    ConvShape s;
    int batched = x->ndim == 4;
    s.n = batched ? x->shape[0] : 1;
    s.c = x->shape[batched];
    s.h = x->shape[batched + 1];
    s.w = x->shape[batched + 2];
    s.f = weight->shape[0];
    s.kh = weight->shape[2];
    s.kw = weight->shape[3];
    s.sh = p->stride_h;
    s.sw = p->stride_w;
    s.ph = p->pad_h;
    s.pw = p->pad_w;
    s.dh = p->dil_h;
    s.dw = p->dil_w;
    s.oh = (s.h + 2 * s.ph - s.dh * (s.kh - 1) - 1) / s.sh + 1;
    s.ow = (s.w + 2 * s.pw - s.dw * (s.kw - 1) - 1) / s.sw + 1;
    s.groups = p->groups;
    return s;
}

/* ---- forward ------------------------------------------------------------- */

static int conv_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int conv2d_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[3] = ac_conv2d(t[0], t[1], t[2], (int)attr[0], (int)attr[1], (int)attr[2], (int)attr[3], (int)attr[4],
                                   (int)attr[5], (int)attr[6]));
}

AcTensor *ac_conv2d(const AcTensor *x, const AcTensor *weight, const AcTensor *bias,
                    int stride_h, int stride_w, int pad_h, int pad_w, int dil_h, int dil_w,
                    int groups)
{
    if (ops_observed) return graph_op("conv2d", conv2d_replay, 3, (const AcTensor *[]){x, weight, bias}, (double[]){stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups}, 7);
    ConvCtx params, *ctx;
    const AcKernels *k;
    const AcTensor *inputs[3];
    ConvShape s;
    int64_t shape[4];
    int batched;
    AcTensor *out;
    params.stride_h = stride_h;
    params.stride_w = stride_w;
    params.pad_h = pad_h;
    params.pad_w = pad_w;
    params.dil_h = dil_h;
    params.dil_w = dil_w;
    params.groups = groups;
    if (conv_check(x, weight, bias, &params)) return NULL;
    k = kernels_for(x);
    if (!k->conv2d) {
        kernel_missing("conv2d", x);
        return NULL;
    }
    s = conv_shape(x, weight, &params);
    batched = x->ndim == 4;
    shape[0] = s.n;
    shape[batched] = s.f;
    shape[batched + 1] = s.oh;
    shape[batched + 2] = s.ow;
    inputs[0] = x;
    inputs[1] = weight;
    inputs[2] = bias;
    out = op_output("conv2d", shape, x->ndim, inputs, bias ? 3 : 2, conv_backward, sizeof(ConvCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) *ctx = params;
    if (k->conv2d(&s, x->data, weight->data, bias ? bias->data : NULL, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

static int conv_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *x = node->inputs[0], *weight = node->inputs[1];
    const ConvShape s = conv_shape(x, weight, node->context);
    const AcKernels *k = kernels_for(gout);
    int status = k->conv2d_backward ? AC_OK : kernel_missing("conv2d", gout);
    float *dx = input_grad_data(node, 0, gin, &status), *dw = input_grad_data(node, 1, gin, &status);
    float *db = input_grad_data(node, 2, gin, &status);
    if (status) return status;
    return k->conv2d_backward(&s, x->data, weight->data, gout->data, dx, dw, db);
}
