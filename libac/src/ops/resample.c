/*
 * resample.c - one dim of a tensor rebuilt from a few taps of it: each output
 * position j along dim is sum_t weight[j, t] * x[.., index[j, t], ..], or a
 * fill value where the index is -1; and its backward, which scatters the
 * gradient along the same taps.
 *
 * It is the engine under F.pad (every mode: the index of the source element,
 * or -1 for a constant) and F.interpolate (nearest: one tap; linear: two;
 * cubic: four, applied one dim at a time). The caller computes the taps, a
 * few numbers per output position; the math runs in the device's kernels
 * (kernels/cpu/resample.c on the CPU). A copy (one tap, no weights) takes
 * any dtype; weighted sums and gradients are float32.
 *
 * Not here: the pad modes' and the interpolation modes' taps (Python:
 * aicraft/nn/padding.py, upsampling.py).
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <string.h>

typedef struct {
    ResampleArgs args;    /* index and weight point into the arrays below */
    int64_t data[];       /* index (out * taps), then the weights (floats) if any */
} ResampleCtx;

static int resample_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

/* x's dims before dim, and after it, as products. */
static void resample_split(const AcTensor *x, int dim, int64_t *outer, int64_t *inner)
{
    int i;
    *outer = *inner = 1;
    for (i = 0; i < dim; i++) *outer *= x->shape[i];
    for (i = dim + 1; i < x->ndim; i++) *inner *= x->shape[i];
}

static int resample_check(const char *op, const AcTensor *x, int dim, int64_t out_size, int taps,
                          const int64_t *index, const float *weight)
{
    int64_t n, i;
    if (tensor_check_any(op, x, "input")) return -1;
    if (x->ndim == 0) return error_set(AC_ERR_SHAPE, "%s: input is 0-d", op);
    if (dim < -x->ndim || dim >= x->ndim)
        return error_set(AC_ERR_ARG, "%s: dim %d is out of range for input %s", op, dim,
                         tensor_shape_str(x));
    if (taps < 1 || out_size < 0 || (out_size > 0 && !index))
        return error_set(AC_ERR_ARG, "%s: %d taps for %lld outputs (with %s index)", op, taps,
                         (long long)out_size, index ? "an" : "no");
    if ((taps > 1 || weight) && x->dtype != AC_FLOAT32)
        return error_set(AC_ERR_DTYPE, "%s: a weighted resample needs float32 input, got %s", op,
                         ac_dtype_name(x->dtype));
    n = x->shape[dim < 0 ? dim + x->ndim : dim];
    for (i = 0; i < out_size * taps; i++)
        if (index[i] < -1 || index[i] >= n)
            return error_set(AC_ERR_INDEX, "%s: index %lld at tap %lld is out of range for size "
                             "%lld of input %s", op, (long long)index[i], (long long)i,
                             (long long)n, tensor_shape_str(x));
    return AC_OK;
}

AcTensor *ac_resample(const AcTensor *x, int dim, int64_t out_size, int taps, const int64_t *index,
                      const float *weight, double fill)
{
    const char *op = "resample";
    const AcKernels *k;
    ResampleArgs a;
    ResampleCtx *ctx;
    int64_t shape[AC_MAX_DIMS], fill_buf[2];
    size_t index_bytes, weight_bytes;
    AcTensor *out;
    if (graph_recording) graph_unsupported(op);   /* its taps are arrays, not scalars */
    if (resample_check(op, x, dim, out_size, taps, index, weight)) return NULL;
    if (dim < 0) dim += x->ndim;
    k = kernels_for(x);
    if (!k->resample) {
        kernel_missing(op, x);
        return NULL;
    }
    memset(&a, 0, sizeof a);
    resample_split(x, dim, &a.outer, &a.inner);
    a.in = x->shape[dim];
    a.out = out_size;
    a.taps = taps;
    a.elem_size = elem_size(x);
    a.index = index;
    a.weight = weight;
    a.fill = (float)fill;
    memset(fill_buf, 0, sizeof fill_buf);
    elem_set(fill_buf, x->dtype, 0, fill);
    a.fill_bytes = fill_buf;
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    shape[dim] = out_size;
    index_bytes = (size_t)(out_size * taps) * sizeof(int64_t);
    weight_bytes = weight ? (size_t)(out_size * taps) * sizeof(float) : 0;
    out = op_output_as(op, x->dtype, shape, x->ndim, &x, 1, resample_backward,
                       sizeof(ResampleCtx) + index_bytes + weight_bytes);
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) {
        ctx->args = a;
        memcpy(ctx->data, index, index_bytes);
        if (weight) memcpy(ctx->data + out_size * taps, weight, weight_bytes);
        ctx->args.fill_bytes = NULL;
    }
    if (out->size > 0 && k->resample(&a, x->data, out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

static int resample_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    ResampleCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    ResampleArgs a = ctx->args;
    if (!k->resample_backward) return kernel_missing("resample", gout);
    a.index = ctx->data;
    a.weight = a.weight ? (const float *)(ctx->data + a.out * a.taps) : NULL;
    gin[0] = tensor_alloc_like("resample", node->inputs[0]);
    if (!gin[0]) return ac_last_error_code();
    if (gin[0]->size == 0) return AC_OK;
    return k->resample_backward(&a, gout->data, gin[0]->data);
}
