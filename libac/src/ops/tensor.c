/*
 * ops/tensor.c - the tensor methods that are ops: they run a kernel or record
 * into a graph (clone, detach, to_dtype, keep, copy_, fill_), or are recorded
 * around tensor.c's grad bookkeeping (zero_grad, set_grad).
 *
 * Not here: making and freeing tensors, and grads' spares and homes (tensor.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <string.h>

static int clone_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    gin[0] = (AcTensor *)gout;
    return AC_OK;
}

int clone_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tensor_clone(t[0]));
}

AcTensor *ac_tensor_clone(const AcTensor *t)
{
    if (ops_observed) return graph_op("clone", clone_replay, 1, (const AcTensor *[]){t}, NULL, 0);
    const AcKernels *k;
    AcTensor *out;
    if (tensor_check_any("clone", t, "tensor")) return NULL;
    k = kernels_for(t);
    if (!k->copy) {
        kernel_missing("clone", t);
        return NULL;
    }
    out = op_output_as("clone", t->dtype, t->shape, t->ndim, &t, 1, clone_backward, 0);
    if (out && k->copy(out->data, t->data, (size_t)t->size * elem_size(t))) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Convert n elements from src's dtype to dst's. The conversions to float32 that
   every input pipeline makes (uint8 pixels, int64 and bool) are plain loops the
   compiler vectorises; the rest go through elem_set one element at a time. */
static void convert(const AcTensor *src, AcTensor *dst, int64_t n)
{
    float *restrict out = dst->data;
    int64_t i;
    if (src->dtype == dst->dtype) {
        if (dst->data != src->data) memmove(dst->data, src->data, (size_t)n * elem_size(src));
    } else if (dst->dtype == AC_FLOAT32 && src->dtype == AC_INT64) {
        const int64_t *restrict in = data_i64(src);
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else if (dst->dtype == AC_FLOAT32 && src->dtype == AC_INT8) {
        const int8_t *restrict in = (const int8_t *)src->data;
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else if (dst->dtype == AC_FLOAT32) {   /* bool or uint8 */
        const uint8_t *restrict in = data_u8(src);
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else {
        for (i = 0; i < n; i++) elem_set(dst->data, dst->dtype, i, elem_get(src, i));
    }
}

AcTensor *ac_to_dtype(const AcTensor *a, int dtype)
{
    AcTensor *out;
    if (tensor_check_any("to_dtype", a, "tensor") || ac_dtype_size(dtype) < 0 ||
        cpu_only("to_dtype", &a, 1))
        return NULL;
    if (a->dtype == AC_FLOAT32 && dtype == AC_FLOAT32) return ac_tensor_clone(a);
    out = tensor_create("to_dtype", a->shape, a->ndim, dtype, NULL, 0, 0);
    if (out) convert(a, out, a->size);
    return out;
}

int detach_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tensor_detach(t[0]));
}

AcTensor *ac_tensor_detach(const AcTensor *t)
{
    if (ops_observed) return graph_op("detach", detach_replay, 1, (const AcTensor *[]){t}, NULL, 0);
    if (tensor_check_any("detach", t, "tensor")) return NULL;
    return tensor_create("detach", t->shape, t->ndim, t->dtype, t, 0, 0);
}

AcTensor *ac_tensor_keep(const AcTensor *t)
{
    AcTensor *out;
    if (tensor_check_any("keep", t, "tensor")) return NULL;
    if (!kernels_for(t)->copy) {
        kernel_missing("keep", t);
        return NULL;
    }
    out = tensor_create_on("keep", t->shape, t->ndim, t->dtype, NULL, 0, 1, t->device, t->device_index);
    if (out && tensor_copy_across(out, t)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

static int zero_grad_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return ac_tensor_zero_grad(t[0]);
}

int ac_tensor_zero_grad(AcTensor *t)
{
    if (ops_observed) return graph_call("zero_grad", zero_grad_replay, 1, 0, (AcTensor *[]){t}, NULL, 0);
    return grad_drop(t);
}

int ac_tensor_set_grad(AcTensor *leaf, AcTensor *grad)
{
    if (graph_recording) graph_unsupported("set_grad");
    return grad_set_home(leaf, grad);
}

int ac_tensor_copy_(AcTensor *dst, const AcTensor *src)
{
    if (!dst || !src) return error_set(AC_ERR_ARG, "copy_: %s is NULL", dst ? "src" : "dst");
    if (graph_recording) graph_note_write("copy_", dst);
    if (dst->size != src->size)
        return error_set(AC_ERR_SHAPE, "copy_: source %s has %lld elements, destination %s has %lld",
                         tensor_shape_str(src), (long long)src->size, tensor_shape_str(dst),
                         (long long)dst->size);
    if (dst->device != AC_CPU || src->device != AC_CPU) {
        if (!kernels_for(dst)->copy || !kernels_for(src)->copy)
            return kernel_missing("copy_", kernels_for(dst)->copy ? src : dst);
        if (dst->dtype != src->dtype)
            return error_set(AC_ERR_DTYPE, "copy_: %s to %s between devices; convert the dtype on the CPU",
                             ac_dtype_name(src->dtype), ac_dtype_name(dst->dtype));
        return tensor_copy_across(dst, src);
    }
    convert(src, dst, src->size);
    return AC_OK;
}

int ac_tensor_fill_(AcTensor *t, double value)
{
    const AcKernels *k;
    if (!t) return error_set(AC_ERR_ARG, "fill_: tensor is NULL");
    if (graph_recording) graph_note_write("fill_", t);
    if (t->size == 0) return AC_OK;
    k = kernels_for(t);
    if (!k->fill) return kernel_missing("fill_", t);
    return k->fill(t, value);
}
