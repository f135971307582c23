/*
 * conv_transpose.c - the transposed 2-D convolution (PyTorch's
 * F.conv_transpose2d, without its bias, which Python adds) and its backward.
 *
 * A transposed convolution is conv2d's gradient with respect to its input:
 * x (N, C_in, H, W) plays conv2d's output gradient, the weight (C_in,
 * C_out/groups, kH, kW) is conv2d's weight read as (filters, channels/groups,
 * kH, kW), and the output (N, C_out, H_out, W_out) is conv2d's input
 * gradient. So the device's conv2d kernels do all the work: forward is
 * conv2d_backward's dx; backward's dx is conv2d of the output gradient, and
 * its dweight is conv2d_backward's dw with the roles of x and gy swapped.
 *
 * Not here: conv2d (conv.c), ConvTranspose1d/2d as modules (Python).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

typedef struct {
    int stride_h, stride_w, pad_h, pad_w, out_pad_h, out_pad_w, dil_h, dil_w, groups;
} ConvTransposeCtx;

/* The conv2d whose input gradient this transposed convolution is. */
static ConvShape transposed_shape(const AcTensor *x, const AcTensor *weight,
                                  const ConvTransposeCtx *p)
{
    ConvShape s;
    const int batched = x->ndim == 4;
    s.n = batched ? x->shape[0] : 1;
    s.f = x->shape[batched];
    s.oh = x->shape[batched + 1];
    s.ow = x->shape[batched + 2];
    s.groups = p->groups;
    s.c = weight->shape[1] * p->groups;
    s.kh = weight->shape[2];
    s.kw = weight->shape[3];
    s.sh = p->stride_h;
    s.sw = p->stride_w;
    s.ph = p->pad_h;
    s.pw = p->pad_w;
    s.dh = p->dil_h;
    s.dw = p->dil_w;
    s.h = (s.oh - 1) * s.sh - 2 * s.ph + s.dh * (s.kh - 1) + p->out_pad_h + 1;
    s.w = (s.ow - 1) * s.sw - 2 * s.pw + s.dw * (s.kw - 1) + p->out_pad_w + 1;
    return s;
}

static int conv_transpose_check(const AcTensor *x, const AcTensor *weight,
                                const ConvTransposeCtx *p)
{
    const char *op = "conv_transpose2d";
    ConvShape s;
    if (tensor_check(op, x, "input") || tensor_check(op, weight, "weight")) return -1;
    if (x->ndim != 4 && x->ndim != 3)
        return error_set(AC_ERR_SHAPE, "%s: input %s must be (N, C, H, W) or (C, H, W)", op,
                         tensor_shape_str(x));
    if (weight->ndim != 4)
        return error_set(AC_ERR_SHAPE,
                         "%s: weight %s must be (in_channels, out_channels/groups, kH, kW)", op,
                         tensor_shape_str(weight));
    if (p->stride_h < 1 || p->stride_w < 1 || p->dil_h < 1 || p->dil_w < 1)
        return error_set(AC_ERR_ARG, "%s: stride (%d, %d) and dilation (%d, %d) must be >= 1", op,
                         p->stride_h, p->stride_w, p->dil_h, p->dil_w);
    if (p->pad_h < 0 || p->pad_w < 0 || p->out_pad_h < 0 || p->out_pad_w < 0)
        return error_set(AC_ERR_ARG, "%s: padding (%d, %d) and output_padding (%d, %d) must be "
                         ">= 0", op, p->pad_h, p->pad_w, p->out_pad_h, p->out_pad_w);
    if ((p->out_pad_h >= p->stride_h && p->out_pad_h >= p->dil_h) ||
        (p->out_pad_w >= p->stride_w && p->out_pad_w >= p->dil_w))
        return error_set(AC_ERR_ARG, "%s: output_padding (%d, %d) must be smaller than either "
                         "stride (%d, %d) or dilation (%d, %d)", op, p->out_pad_h, p->out_pad_w,
                         p->stride_h, p->stride_w, p->dil_h, p->dil_w);
    if (p->groups < 1)
        return error_set(AC_ERR_ARG, "%s: groups must be >= 1, got %d", op, p->groups);
    if (weight->shape[0] != x->shape[x->ndim - 3])
        return error_set(AC_ERR_SHAPE, "%s: input %s has %lld channels, weight %s expects %lld", op,
                         tensor_shape_str(x), (long long)x->shape[x->ndim - 3],
                         tensor_shape_str(weight), (long long)weight->shape[0]);
    if (weight->shape[0] % p->groups != 0)
        return error_set(AC_ERR_SHAPE, "%s: weight %s has %lld input channels, not divisible by "
                         "groups %d", op, tensor_shape_str(weight), (long long)weight->shape[0],
                         p->groups);
    if (weight->shape[1] < 1 || weight->shape[2] < 1 || weight->shape[3] < 1)
        return error_set(AC_ERR_SHAPE, "%s: weight %s is empty", op, tensor_shape_str(weight));
    s = transposed_shape(x, weight, p);
    if (s.h < 1 || s.w < 1)
        return error_set(AC_ERR_SHAPE, "%s: input %s with this kernel, stride and padding gives an "
                         "output of %lldx%lld", op, tensor_shape_str(x), (long long)s.h,
                         (long long)s.w);
    return AC_OK;
}

/* ---- forward ------------------------------------------------------------- */

static int conv_transpose_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

int conv_transpose2d_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_conv_transpose2d(t[0], t[1], (int)attr[0], (int)attr[1],
                                                 (int)attr[2], (int)attr[3], (int)attr[4],
                                                 (int)attr[5], (int)attr[6], (int)attr[7],
                                                 (int)attr[8]));
}

AcTensor *ac_conv_transpose2d(const AcTensor *x, const AcTensor *weight, int stride_h, int stride_w,
                              int pad_h, int pad_w, int out_pad_h, int out_pad_w, int dil_h,
                              int dil_w, int groups)
{
    if (ops_observed)
        return graph_op("conv_transpose2d", conv_transpose2d_replay, 2,
                        (const AcTensor *[]){x, weight},
                        (double[]){stride_h, stride_w, pad_h, pad_w, out_pad_h, out_pad_w, dil_h,
                                   dil_w, groups}, 9);
    ConvTransposeCtx params, *ctx;
    const AcKernels *k;
    const AcTensor *inputs[2];
    ConvShape s;
    int64_t shape[4];
    int batched;
    AcTensor *out;
    params.stride_h = stride_h;
    params.stride_w = stride_w;
    params.pad_h = pad_h;
    params.pad_w = pad_w;
    params.out_pad_h = out_pad_h;
    params.out_pad_w = out_pad_w;
    params.dil_h = dil_h;
    params.dil_w = dil_w;
    params.groups = groups;
    if (conv_transpose_check(x, weight, &params)) return NULL;
    k = kernels_for(x);
    if (!k->conv2d_backward) {
        kernel_missing("conv_transpose2d", x);
        return NULL;
    }
    s = transposed_shape(x, weight, &params);
    batched = x->ndim == 4;
    shape[0] = s.n;
    shape[batched] = s.c;
    shape[batched + 1] = s.h;
    shape[batched + 2] = s.w;
    inputs[0] = x;
    inputs[1] = weight;
    out = op_output("conv_transpose2d", shape, x->ndim, inputs, 2, conv_transpose_backward,
                    sizeof(ConvTransposeCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) *ctx = params;
    /* out stands in for conv2d's x, which a dx-only backward never reads */
    if (k->conv2d_backward(&s, out->data, weight->data, x->data, out->data, NULL, NULL)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- backward ------------------------------------------------------------ */

static int conv_transpose_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *x = node->inputs[0], *weight = node->inputs[1];
    const ConvShape s = transposed_shape(x, weight, node->context);
    const AcKernels *k = kernels_for(gout);
    int status = k->conv2d && k->conv2d_backward ? AC_OK
                                                 : kernel_missing("conv_transpose2d", gout);
    float *dx = input_grad_data(node, 0, gin, &status), *dw = input_grad_data(node, 1, gin, &status);
    if (status) return status;
    if (dx && (status = k->conv2d(&s, gout->data, weight->data, NULL, dx))) return status;
    if (dw) status = k->conv2d_backward(&s, gout->data, weight->data, x->data, NULL, dw, NULL);
    return status;
}
