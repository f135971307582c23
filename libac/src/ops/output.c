/*
 * ops/output.c - an op's output and, when grad mode is on and an input
 * requires grad, its graph node: inputs held, backward set, context zeroed;
 * and what a backward asks of its node (context, the inputs' new grads).
 *
 * Not here: the backward walk (autograd.c), grad mode's flag (tensor.c).
 */
#include "internal.h"

#include <string.h>

static size_t node_head_bytes(void) { return (sizeof(AcGradNode) + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1); }

static const AcTensor cpu_placeholder;   /* device AC_CPU, index 0: for ops with no inputs */

/* The device inputs share (the CPU when there are none): the first input's,
   else AC_ERR_DEVICE naming the two devices, as PyTorch says it. */
const AcTensor *common_device(const char *op, const AcTensor *const *inputs, int n_inputs)
{
    const AcTensor *first = NULL;
    int i;
    for (i = 0; i < n_inputs; i++) {
        const AcTensor *t = inputs[i];
        char a[32], b[32];
        if (!t) continue;
        if (!first) {
            first = t;
        } else if (t->device != first->device || t->device_index != first->device_index) {
            return error_null(AC_ERR_DEVICE, "%s: expected all tensors to be on the same device, "
                              "but found at least two devices, %s and %s", op,
                              device_name(first->device, first->device_index, a, sizeof a),
                              device_name(t->device, t->device_index, b, sizeof b));
        }
    }
    return first ? first : &cpu_placeholder;
}

/* on: the device of the output; NULL for the inputs' device. */
static AcTensor *make_output(const char *op, int dtype, const int64_t *shape, int ndim,
                             const AcTensor *share, const AcTensor *const *inputs, int n_inputs,
                             AcBackwardFn backward, size_t ctx_bytes, const AcTensor *on)
{
    int record = 0, i;
    AcTensor *out;
    AcGradNode *node;
    if (n_inputs < 0 || n_inputs > AC_MAX_INPUTS)
        return error_null(AC_ERR_ARG, "%s: %d inputs, at most %d", op, n_inputs, AC_MAX_INPUTS);
    if (!on && !(on = common_device(op, inputs, n_inputs))) return NULL;
    for (i = 0; i < n_inputs && !grad_disabled; i++)
        if (inputs[i] && inputs[i]->requires_grad) record = 1;
    out = tensor_create_on(op, shape, ndim, dtype, share, record ? node_head_bytes() + ctx_bytes : 0,
                           0, on->device, on->device_index);
    if (!out || !record) return out;
    node = out->node;
    node->op = op;
    node->output = out;
    node->backward = backward;
    node->context = ctx_bytes ? (char *)node + node_head_bytes() : NULL;
    for (i = 0; i < n_inputs; i++) {
        if (!inputs[i]) continue;
        if (node_hold((AcTensor *)inputs[i])) return NULL;
        node->inputs[node->n_inputs++] = (AcTensor *)inputs[i];
    }
    out->requires_grad = 1;
    return out;
}

AcTensor *op_output(const char *op, const int64_t *shape, int ndim, const AcTensor *const *inputs,
                    int n_inputs, AcBackwardFn backward, size_t ctx_bytes)
{
    int i;
    for (i = 0; i < n_inputs; i++)
        if (inputs[i] && inputs[i]->dtype != AC_FLOAT32)
            return error_null(AC_ERR_DTYPE, "%s: input %d is %s; this op computes in float32 "
                              "(convert it first)", op, i, ac_dtype_name(inputs[i]->dtype));
    return make_output(op, AC_FLOAT32, shape, ndim, NULL, inputs, n_inputs, backward, ctx_bytes, NULL);
}

AcTensor *op_output_as(const char *op, int dtype, const int64_t *shape, int ndim,
                       const AcTensor *const *inputs, int n_inputs, AcBackwardFn backward,
                       size_t ctx_bytes)
{
    return make_output(op, dtype, shape, ndim, NULL, inputs, n_inputs, backward, ctx_bytes, NULL);
}

AcTensor *op_output_on(const char *op, const AcTensor *a, int device, int device_index,
                       AcBackwardFn backward)
{
    AcTensor on = {0};
    on.device = device;
    on.device_index = device_index;
    return make_output(op, a->dtype, a->shape, a->ndim, NULL, &a, 1, backward, 0, &on);
}

AcTensor *op_view(const char *op, const AcTensor *a, const int64_t *shape, int ndim,
                  AcBackwardFn backward, size_t ctx_bytes)
{
    return make_output(op, a->dtype, shape, ndim, a, &a, 1, backward, ctx_bytes, NULL);
}

AcTensor *inference_output(const char *op, const AcTensor *x, int64_t in, int64_t out,
                           const char *layer, int64_t *rows)
{
    int64_t shape[AC_MAX_DIMS];
    int d;
    if (tensor_check(op, x, "x") || cpu_only(op, &x, 1)) return NULL;
    if (x->ndim < 1 || x->shape[x->ndim - 1] != in)
        return error_null(AC_ERR_SHAPE, "%s: x %s must be (..., %lld)", op, tensor_shape_str(x),
                          (long long)in);
    if (x->requires_grad && ac_is_grad_enabled())
        return error_null(AC_ERR_STATE, "%s: %s does not train; x requires grad (run under "
                          "no_grad)", op, layer);
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof(int64_t));
    shape[x->ndim - 1] = out;
    for (*rows = 1, d = 0; d + 1 < x->ndim; d++) *rows *= x->shape[d];
    return tensor_alloc(op, shape, x->ndim);
}

void *op_context(const AcTensor *out) { return out->node ? out->node->context : NULL; }

AcTensor *leaf_grad_new(AcTensor *leaf)
{
    leaf->grad = grad_new(leaf);
    if (leaf->grad && leaf->scope_depth > 0 && scope_hold_at(leaf->grad, leaf->scope_depth)) {
        ac_tensor_free(leaf->grad);
        leaf->grad = NULL;
    }
    return leaf->grad;
}

AcTensor *leaf_grad_to_fill(AcGradNode *node, int i)
{
    AcTensor *leaf = input_needs_grad(node, i) ? node->inputs[i] : NULL;
    if (!leaf || leaf->node || leaf->grad) return NULL;
    return leaf_grad_new(leaf);
}

float *input_grad_data(AcGradNode *node, int i, AcTensor **gin, int *status)
{
    AcTensor *leaf_grad;
    if (*status || i < 0 || !input_needs_grad(node, i)) return NULL;
    if ((leaf_grad = leaf_grad_to_fill(node, i))) return leaf_grad->data;
    gin[i] = tensor_alloc_like(node->op, node->inputs[i]);
    if (!gin[i]) *status = ac_last_error_code();
    return gin[i] ? gin[i]->data : NULL;
}
