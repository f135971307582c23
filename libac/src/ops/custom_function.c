/*
 * custom_function.c - a node whose backward is the caller's (Python's
 * aicraft.autograd.Function): the output holds given values, the node records
 * the inputs, and backward asks the caller's function for the inputs' grads.
 *
 * The caller's state (user) lives as long as the node: it rides on an extra
 * input, an empty external tensor whose release callback hands user back when
 * the last reference to it goes (the node's graph freed after backward, the
 * output freed, or at once when no node was made). The grads the caller gives
 * are borrowed: each is checked against its input's shape and copied into a
 * gradient of the walk's own.
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <string.h>

typedef struct {
    AcFunctionBackward backward;
    void *user;
    int32_t n_inputs;      /* the caller's inputs (the anchor comes after them) */
} FunctionCtx;

static int function_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const FunctionCtx *ctx = node->context;
    AcTensor *given[AC_MAX_INPUTS];
    int i, status;
    for (i = 0; i < AC_MAX_INPUTS; i++) given[i] = NULL;
    status = ctx->backward(ctx->user, gout, given, ctx->n_inputs);
    if (status < 0) return error_set(AC_ERR_STATE, "%s: the Function's backward failed", node->op);
    for (i = 0; i < ctx->n_inputs; i++) {
        const AcTensor *in = node->inputs[i];
        if (!given[i] || !input_needs_grad(node, i)) continue;
        if (!same_shape(given[i], in) || given[i]->dtype != AC_FLOAT32)
            return error_set(AC_ERR_SHAPE, "%s: backward gave a %s gradient of shape %s for input %d of "
                             "shape %s", node->op, ac_dtype_name(given[i]->dtype), tensor_shape_str(given[i]),
                             i, tensor_shape_str(in));
        gin[i] = tensor_alloc_like(node->op, in);
        if (!gin[i] || ac_tensor_copy_(gin[i], given[i]) < 0) return ac_last_error_code();
    }
    return AC_OK;
}

AcTensor *ac_function_apply(const char *name, const AcTensor *values, AcTensor *const *inputs, int n_inputs,
                            AcFunctionBackward backward, AcReleaseFn release, void *user)
{
    static float nothing[16];   /* the anchor's (empty) data */
    const AcTensor *all[AC_MAX_INPUTS];
    const char *op = name ? name : "function";
    int64_t zero = 0;
    AcTensor *anchor, *out;
    FunctionCtx *ctx;
    int i, bad = 0;
    if (tensor_check(op, values, "output values")) bad = 1;
    else if (!backward) bad = error_set(AC_ERR_ARG, "%s: backward is NULL", op);
    else if (n_inputs < 0 || n_inputs > AC_MAX_INPUTS - 1)
        bad = error_set(AC_ERR_ARG, "%s: %d tensor inputs; a Function takes at most %d", op, n_inputs,
                        AC_MAX_INPUTS - 1);
    if (!bad && n_inputs > 0 && !inputs) bad = error_set(AC_ERR_ARG, "%s: inputs is NULL", op);
    for (i = 0; !bad && i < n_inputs; i++) {
        if (tensor_check_any(op, inputs[i], "input")) bad = 1;
        all[i] = inputs[i];
    }
    anchor = bad ? NULL : ac_tensor_from_external(nothing, &zero, 1, AC_FLOAT32, release, user);
    if (!anchor) {
        if (release) release(user);
        return NULL;
    }
    if (graph_recording) graph_unsupported(op);
    all[n_inputs] = anchor;
    out = op_output_as(op, AC_FLOAT32, values->shape, values->ndim, all, n_inputs + 1, function_backward,
                       sizeof(FunctionCtx));
    ac_tensor_free(anchor);   /* the node (or its scope) holds it now, or nothing does */
    if (!out) return NULL;
    if (ac_tensor_copy_(out, values) < 0) {
        ac_tensor_free(out);
        return NULL;
    }
    ctx = op_context(out);
    if (ctx) {
        ctx->backward = backward;
        ctx->user = user;
        ctx->n_inputs = n_inputs;
    }
    return out;
}
