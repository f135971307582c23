/*
 * pointwise.c - the unary math and activations named by AcPointwise (rsqrt,
 * erf, floor, tan, lgamma, silu, softplus, elu, hardswish, ...) and the
 * binary ops named by AcPointwise2 (atan2, hypot, maximum, fmax, clamp with
 * a tensor bound, logaddexp, ...), with their backward.
 *
 * One op code picks the math, so each family is one forward, one backward and
 * one replay function here, and one kernel entry per device (the CPU's in
 * kernels/cpu/pointwise.c). float32 inputs compute in float32 and are
 * differentiable; the tests (isnan, ...) give bool with no graph; integer
 * inputs are taken only by the ops that keep integers in PyTorch (sign,
 * square, floor, ceil, round, trunc; maximum, minimum, fmax, fmin, clamp's
 * bounds, fmod, heaviside), computed exactly in int64. Any other op refuses
 * them with AC_ERR_DTYPE: the caller converts to float32, as PyTorch
 * promotes.
 *
 * Not here: the arithmetic of elementwise.c, relu/sigmoid/tanh/gelu/softmax
 * (activation.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>
#include <string.h>

static const char *const unary_names[AC_PW_COUNT] = {
    "rsqrt", "square", "reciprocal", "erf", "erfc", "erfinv", "expm1", "exp2", "log2", "log10",
    "sign", "floor", "ceil", "round", "trunc", "frac", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "asinh", "acosh", "atanh", "logit", "sinc", "lgamma", "digamma", "nan_to_num",
    "silu", "leaky_relu", "softplus", "elu", "gelu_tanh", "hardtanh", "mish", "hardswish",
    "hardsigmoid", "hardshrink", "softshrink", "tanhshrink", "softsign", "logsigmoid",
    "threshold", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "signbit", "angle",
    "special.entr", "special.erfcx", "special.ndtri", "special.log_ndtr", "i0", "special.i0e",
    "special.i1", "special.i1e", "polygamma"
};

static const char *const binary_names[AC_PW2_COUNT] = {
    "atan2", "hypot", "fmod", "copysign", "xlogy", "logaddexp", "logaddexp2", "maximum",
    "minimum", "fmax", "fmin", "clamp_min", "clamp_max", "heaviside", "nextafter",
    "special.xlog1py", "special.zeta", "gcd", "lcm"
};

typedef struct {
    int op;
    float p[3];
} UnaryCtx;

static int is_test(int op) { return op >= AC_PW_ISNAN && op <= AC_PW_SIGNBIT; }

/* Check the op's scalars: AC_OK or the error. */
static int unary_args(const char *name, int op, float p0)
{
    if (op == AC_PW_SOFTPLUS && p0 == 0.0f)
        return error_set(AC_ERR_ARG, "softplus: beta must not be 0");
    if (op == AC_PW_POLYGAMMA && !(p0 >= 0.0f && p0 == floorf(p0) && p0 <= 1000.0f))
        return error_set(AC_ERR_ARG, "%s: n must be an integer in [0, 1000], got %g", name, (double)p0);
    return AC_OK;
}

/* The ops that keep an integer input's dtype; bool only where PyTorch takes it. */
static int keeps_integers(int op, const AcTensor *a, float decimals)
{
    if (op == AC_PW_SIGN || op == AC_PW_SQUARE) return 1;
    if (a->dtype == AC_BOOL) return 0;
    return op == AC_PW_FLOOR || op == AC_PW_CEIL || op == AC_PW_TRUNC || op == AC_PW_HARDTANH ||
           op == AC_PW_THRESHOLD || (op == AC_PW_ROUND && decimals == 0.0f);
}

static int unary_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const UnaryCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    if (!k->pointwise_backward) return kernel_missing("backward", gout);
    gin[0] = tensor_alloc_like("backward", gout);
    if (!gin[0]) return ac_last_error_code();
    if (gout->size == 0) return AC_OK;
    return k->pointwise_backward(ctx->op, gout->data, node->inputs[0]->data, node->output->data,
                                 gin[0]->data, gout->size, ctx->p);
}

/* An output of a's shape and device that records no graph. */
static AcTensor *plain_output(const char *op, const AcTensor *a, int dtype, const int64_t *shape,
                              int ndim)
{
    return tensor_create_on(op, shape, ndim, dtype, NULL, 0, 0, a->device, a->device_index);
}

static AcTensor *unary_integer(const char *name, int op, const AcTensor *a, const float *p)
{
    const AcKernels *k = kernels_for(a);
    int dtype = (op == AC_PW_SQUARE && a->dtype == AC_BOOL) ? AC_INT64 : a->dtype;
    AcTensor *out = plain_output(name, a, dtype, a->shape, a->ndim);
    int status;
    if (!out) return NULL;
    status = k->pointwise_integer ? k->pointwise_integer(op, a, out, p) : kernel_missing(name, out);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

int pointwise_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_pointwise(t[0], (int)attr[0], (float)attr[1], (float)attr[2],
                                          (float)attr[3]));
}

AcTensor *ac_pointwise(const AcTensor *a, int op, float p0, float p1, float p2)
{
    const char *name;
    const AcKernels *k;
    UnaryCtx *ctx;
    AcTensor *out;
    int status;
    if (ops_observed)
        return graph_op("pointwise", pointwise_replay, 1, (const AcTensor *[]){a},
                        (double[]){op, p0, p1, p2}, 4);
    if (op < 0 || op >= AC_PW_COUNT)
        return error_null(AC_ERR_ARG, "pointwise: unknown op %d (AcPointwise)", op);
    name = unary_names[op];
    if (tensor_check_any(name, a, "input")) return NULL;
    k = kernels_for(a);
    if (is_test(op)) {
        out = plain_output(name, a, AC_BOOL, a->shape, a->ndim);
        if (!out) return NULL;
        status = k->pointwise_test ? k->pointwise_test(op, a, out) : kernel_missing(name, out);
        if (status) {
            ac_tensor_free(out);
            return NULL;
        }
        return out;
    }
    if (a->dtype != AC_FLOAT32) {
        if ((a->dtype == AC_INT64 || a->dtype == AC_UINT8 || a->dtype == AC_BOOL) &&
            keeps_integers(op, a, p0))
            return unary_integer(name, op, a, (float[]){p0, p1, p2});
        return error_null(AC_ERR_DTYPE, "%s: input is %s; this op computes in float32 (convert it "
                          "first)", name, ac_dtype_name(a->dtype));
    }
    if (unary_args(name, op, p0)) return NULL;
    out = op_output(name, a->shape, a->ndim, &a, 1, unary_backward, sizeof(UnaryCtx));
    if (!out) return NULL;
    if ((ctx = op_context(out))) {
        ctx->op = op;
        ctx->p[0] = p0;
        ctx->p[1] = p1;
        ctx->p[2] = p2;
    }
    if (!k->pointwise) status = kernel_missing(name, out);
    else status = a->size > 0 ? k->pointwise(op, a->data, out->data, a->size, (float[]){p0, p1, p2})
                              : AC_OK;
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* ---- binary ---------------------------------------------------------------- */

typedef struct {
    int op;
    AcBroadcast plan;
} BinaryCtx;

static int binary_plan(const char *op, const AcTensor *a, const AcTensor *b, AcBroadcast *plan)
{
    if (broadcast_shapes(op, a, b, plan->shape, &plan->ndim)) return -1;
    broadcast_strides(a, plan->shape, plan->ndim, plan->strides[0]);
    broadcast_strides(b, plan->shape, plan->ndim, plan->strides[1]);
    return AC_OK;
}

static int is_integral(const AcTensor *t)
{
    return t->dtype == AC_INT64 || t->dtype == AC_UINT8 || t->dtype == AC_BOOL;
}

static int binary_keeps_integers(int op)
{
    return op == AC_PW2_MAXIMUM || op == AC_PW2_MINIMUM || op == AC_PW2_FMAX ||
           op == AC_PW2_FMIN || op == AC_PW2_CLAMP_MIN || op == AC_PW2_CLAMP_MAX ||
           op == AC_PW2_FMOD || op == AC_PW2_HEAVISIDE || op == AC_PW2_GCD || op == AC_PW2_LCM;
}

static int integers_only(int op) { return op == AC_PW2_GCD || op == AC_PW2_LCM; }

/* PyTorch's promotion between integer dtypes: bool < uint8 < int64. */
static int integer_result(const AcTensor *a, const AcTensor *b)
{
    if (a->dtype == AC_INT64 || b->dtype == AC_INT64) return AC_INT64;
    if (a->dtype == AC_UINT8 || b->dtype == AC_UINT8) return AC_UINT8;
    return AC_BOOL;
}

static int binary_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const BinaryCtx *ctx = node->context;
    const AcKernels *k = kernels_for(gout);
    AcTensor *full[2] = {NULL, NULL};
    int i, status;
    if (!k->pointwise2_backward) return kernel_missing("backward", gout);
    for (i = 0; i < 2; i++)
        if (input_needs_grad(node, i) && !(full[i] = tensor_alloc_like("backward", gout)))
            return ac_last_error_code();
    if (gout->size > 0 &&
        (status = k->pointwise2_backward(ctx->op, node->inputs[0], node->inputs[1], node->output,
                                         gout, full[0], full[1], &ctx->plan)))
        return status;
    for (i = 0; i < 2; i++) {
        if (!full[i]) continue;
        gin[i] = reduce_to_shape(full[i], node->inputs[i]);
        if (!gin[i]) return ac_last_error_code();
    }
    return AC_OK;
}

int pointwise2_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[2] = ac_pointwise2(t[0], t[1], (int)attr[0]));
}

AcTensor *ac_pointwise2(const AcTensor *a, const AcTensor *b, int op)
{
    const char *name;
    const AcKernels *k;
    AcBroadcast plan;
    BinaryCtx *ctx;
    AcTensor *out;
    int status;
    if (ops_observed)
        return graph_op("pointwise2", pointwise2_replay, 2, (const AcTensor *[]){a, b},
                        (double[]){op}, 1);
    if (op < 0 || op >= AC_PW2_COUNT)
        return error_null(AC_ERR_ARG, "pointwise2: unknown op %d (AcPointwise2)", op);
    name = binary_names[op];
    if (tensor_check_any(name, a, "input") || tensor_check_any(name, b, "other")) return NULL;
    if (binary_plan(name, a, b, &plan)) return NULL;
    k = kernels_for(a);
    if (a->dtype != AC_FLOAT32 || b->dtype != AC_FLOAT32 || integers_only(op)) {
        if (!is_integral(a) || !is_integral(b) || !binary_keeps_integers(op))
            return error_null(AC_ERR_DTYPE, "%s: operands are %s and %s; this op computes in "
                              "float32 here (convert them first)", name, ac_dtype_name(a->dtype),
                              ac_dtype_name(b->dtype));
        if (!common_device(name, (const AcTensor *[]){a, b}, 2)) return NULL;
        out = plain_output(name, a, integer_result(a, b), plan.shape, plan.ndim);
    } else if (op == AC_PW2_HEAVISIDE || op == AC_PW2_NEXTAFTER || op == AC_PW2_ZETA) {
        if (ac_is_grad_enabled() && (a->requires_grad || b->requires_grad))
            return error_null(AC_ERR_STATE, "%s: is not differentiable; call it on tensors that "
                              "do not require grad, or with grad mode off", name);
        if (!common_device(name, (const AcTensor *[]){a, b}, 2)) return NULL;
        out = plain_output(name, a, AC_FLOAT32, plan.shape, plan.ndim);
    } else {
        out = op_output(name, plan.shape, plan.ndim, (const AcTensor *[]){a, b}, 2,
                        binary_backward, sizeof(BinaryCtx));
        if (out && (ctx = op_context(out))) {
            ctx->op = op;
            ctx->plan = plan;
        }
    }
    if (!out) return NULL;
    if (!k->pointwise2) status = kernel_missing(name, out);
    else status = out->size > 0 ? k->pointwise2(op, a, b, out, &plan) : AC_OK;
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}
