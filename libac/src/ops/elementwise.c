/*
 * elementwise.c - arithmetic and math applied element by element: add, sub,
 * mul, div and pow with NumPy broadcasting, their scalar forms, and neg, exp,
 * log, log1p, sqrt, abs, sin, cos, clamp, with their backward.
 *
 * Here is each op's graph logic: shapes, the node, the backward wiring, and
 * the layout of its operands over the output (map_layout: size-1 dims dropped,
 * dims every operand walks contiguously merged, so same-shape and scalar
 * operands become one flat run). The math is one kernel per op in the
 * device's table (kernels/kernels.h; the CPU's in kernels/cpu/elementwise.c),
 * picked by its entry's offset in AcKernels.
 *
 * Dtypes: float32 operands take the float ops above (their speed is the
 * point: one dtype test per call). Any other dtype goes through ac_binary at
 * the end of this file: torch's type promotion (ac_result_type), float32
 * results by the float ops on converted operands (with their graph), integer
 * and bool results by the typed kernel (kernels/cpu/integer.c), exact and
 * wrapping. Float math of integers (exp, log, ...) converts to float32.
 *
 * Not here: activations (activation.c), reductions (reduce.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#define ENTRY(name) offsetof(AcKernels, name)

/* The elementwise kernel at offset entry of t's device table; NULL when that
   device has none. */
static AcMapFn map_kernel(const AcTensor *t, size_t entry)
{
    AcMapFn fn;
    memcpy(&fn, (const char *)kernels_for(t) + entry, sizeof fn);
    return fn;
}

/* Lay the inputs out over out's shape: one flat run when each input is either
   the whole output or a single element, else size-1 dims dropped and dims
   merged where every input walks them contiguously. */
static void map_layout(AcMap *map, const AcTensor *const *in, const AcTensor *out)
{
    int64_t strides[AC_MAP_MAX_IN][AC_MAX_DIMS];
    int d, k, flat = 1;
    for (k = 0; k < map->n_in; k++) flat = flat && (in[k]->size == out->size || in[k]->size == 1);
    map->ndim = 1;
    map->shape[0] = out->size;
    for (k = 0; k < map->n_in; k++) map->strides[k][0] = in[k]->size == out->size ? 1 : 0;
    if (flat) return;
    for (k = 0; k < map->n_in; k++) broadcast_strides(in[k], out->shape, out->ndim, strides[k]);
    map->ndim = 0;
    for (d = 0; d < out->ndim; d++) {
        int j = map->ndim, merge = j > 0;
        if (out->shape[d] == 1) continue;
        for (k = 0; k < map->n_in && merge; k++)
            merge = map->strides[k][j - 1] == strides[k][d] * out->shape[d];
        if (merge) {
            map->shape[j - 1] *= out->shape[d];
            for (k = 0; k < map->n_in; k++) map->strides[k][j - 1] = strides[k][d];
            continue;
        }
        map->shape[j] = out->shape[d];
        for (k = 0; k < map->n_in; k++) map->strides[k][j] = strides[k][d];
        map->ndim++;
    }
}

/* out = the kernel at entry (in...), the inputs broadcast to out's shape;
   AC_ERR_DEVICE when out's device has no such kernel. */
static int map_into(size_t entry, const char *op, AcTensor *out, const AcTensor *const *in,
                    int n_in, float p0, float p1)
{
    AcMapFn fn = map_kernel(out, entry);
    AcMap map;
    int k;
    if (!fn) return kernel_missing(op, out);
    if (out->size == 0) return AC_OK;
    map.p0 = p0;
    map.p1 = p1;
    map.n_in = n_in;
    for (k = 0; k < n_in; k++) map.in[k] = in[k]->data;
    map.out = out->data;
    map.size = out->size;
    map_layout(&map, in, out);
    return fn(&map);
}

/* out (just made, or NULL) filled with entry(in...); on an error, out is
   freed and NULL returned. */
static AcTensor *map_fill(AcTensor *out, size_t entry, const char *op, const AcTensor *const *in,
                          int n_in, float p0, float p1)
{
    if (out && map_into(entry, op, out, in, n_in, p0, p1)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* A new tensor of shape like's holding entry(in...): for building gradients. */
static AcTensor *map_new(size_t entry, const AcTensor *like, const AcTensor *const *in, int n_in,
                         float p0, float p1)
{
    return map_fill(tensor_alloc_like("backward", like), entry, "backward", in, n_in, p0, p1);
}

/* Give input i the gradient full (output's shape) summed down to its own shape. */
static int set_input_grad(AcGradNode *node, int i, const AcTensor *full, AcTensor **gin)
{
    if (!full) return ac_last_error_code();
    gin[i] = reduce_to_shape(full, node->inputs[i]);
    return gin[i] ? AC_OK : ac_last_error_code();
}

static AcTensor *as_float(AcTensor *(*fn)(const AcTensor *), const AcTensor *a);
static AcTensor *typed_unary(const char *op, int code, const AcTensor *a);

/* ---- binary ops ---------------------------------------------------------- */

static AcTensor *binary_op(const char *op, int code, size_t entry, const AcTensor *a,
                           const AcTensor *b, AcBackwardFn backward)
{
    const AcTensor *in[2];
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *out;
    if (a && b && (a->dtype != AC_FLOAT32 || b->dtype != AC_FLOAT32)) return ac_binary(code, a, b, 0);
    if (tensor_check(op, a, "a") || tensor_check(op, b, "b")) return NULL;
    if (broadcast_shapes(op, a, b, shape, &ndim)) return NULL;
    in[0] = a;
    in[1] = b;
    out = op_output(op, shape, ndim, in, 2, backward, 0);
    return map_fill(out, entry, op, in, 2, 0.0f, 0.0f);
}

static int add_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    int i, status;
    for (i = 0; i < 2; i++)
        if (input_needs_grad(node, i) && (status = set_input_grad(node, i, gout, gin))) return status;
    return AC_OK;
}

int add_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_add(t[0], t[1]));
}

AcTensor *ac_add(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("add", add_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    return binary_op("add", AC_OP_ADD, ENTRY(add), a, b, add_backward);
}

static int sub_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    int status;
    if (input_needs_grad(node, 0) && (status = set_input_grad(node, 0, gout, gin))) return status;
    if (input_needs_grad(node, 1))
        return set_input_grad(node, 1, map_new(ENTRY(neg), gout, &gout, 1, 0.0f, 0.0f), gin);
    return AC_OK;
}

int sub_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_sub(t[0], t[1]));
}

AcTensor *ac_sub(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("sub", sub_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    return binary_op("sub", AC_OP_SUB, ENTRY(sub), a, b, sub_backward);
}

static int mul_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    int i, status;
    for (i = 0; i < 2; i++) {
        const AcTensor *in[2];
        if (!input_needs_grad(node, i)) continue;
        in[0] = gout;
        in[1] = node->inputs[1 - i];
        if ((status = set_input_grad(node, i, map_new(ENTRY(mul), gout, in, 2, 0.0f, 0.0f), gin)))
            return status;
    }
    return AC_OK;
}

int mul_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_mul(t[0], t[1]));
}

AcTensor *ac_mul(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("mul", mul_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    return binary_op("mul", AC_OP_MUL, ENTRY(mul), a, b, mul_backward);
}

static int div_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *in[3];
    int status;
    in[0] = gout;
    if (input_needs_grad(node, 0)) {
        in[1] = node->inputs[1];
        if ((status = set_input_grad(node, 0, map_new(ENTRY(div), gout, in, 2, 0.0f, 0.0f), gin)))
            return status;
    }
    if (input_needs_grad(node, 1)) {
        in[1] = node->output;
        in[2] = node->inputs[1];
        return set_input_grad(node, 1, map_new(ENTRY(div_backward_b), gout, in, 3, 0.0f, 0.0f), gin);
    }
    return AC_OK;
}

int div_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_div(t[0], t[1]));
}

AcTensor *ac_div(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("div", div_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    return binary_op("div", AC_OP_DIV, ENTRY(div), a, b, div_backward);
}

static int pow_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *in[4];
    int status;
    in[0] = gout;
    if (input_needs_grad(node, 0)) {
        in[1] = node->inputs[0];
        in[2] = node->inputs[1];
        if ((status = set_input_grad(node, 0, map_new(ENTRY(pow_backward_base), gout, in, 3, 0.0f, 0.0f),
                                     gin)))
            return status;
    }
    if (input_needs_grad(node, 1)) {
        in[1] = node->output;
        in[2] = node->inputs[0];
        in[3] = node->inputs[1];
        return set_input_grad(node, 1, map_new(ENTRY(pow_backward_exp), gout, in, 4, 0.0f, 0.0f), gin);
    }
    return AC_OK;
}

int pow_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = ac_pow(t[0], t[1]));
}

AcTensor *ac_pow(const AcTensor *a, const AcTensor *b)
{
    if (ops_observed) return graph_op("pow", pow_replay, 2, (const AcTensor *[]){a, b}, NULL, 0);
    return binary_op("pow", AC_OP_POW, ENTRY(pow), a, b, pow_backward);
}

/* ---- unary ops and scalar forms ------------------------------------------ */

/* What backward needs of a scalar form: s, p, or the clamp bounds. */
typedef struct {
    float p0, p1;
} ScalarCtx;

static AcTensor *unary_op(const char *op, size_t entry, const AcTensor *a, float p0, float p1,
                          AcBackwardFn backward, size_t ctx_bytes)
{
    AcTensor *out;
    ScalarCtx *ctx;
    if (tensor_check(op, a, "a")) return NULL;
    out = op_output(op, a->shape, a->ndim, &a, 1, backward, ctx_bytes);
    if (!out) return NULL;
    if (ctx_bytes && (ctx = op_context(out))) {
        ctx->p0 = p0;
        ctx->p1 = p1;
    }
    return map_fill(out, entry, op, &a, 1, p0, p1);
}

/* The gradient of input 0 as entry(gout, second): second is the input, the output
   or NULL; ctx holds the op's scalars, or is NULL when it has none. */
static int unary_grad(const AcTensor *gout, AcTensor **gin, size_t entry, const AcTensor *second,
                      const ScalarCtx *ctx)
{
    const AcTensor *in[2];
    in[0] = gout;
    in[1] = second;
    gin[0] = map_new(entry, gout, in, second ? 2 : 1, ctx ? ctx->p0 : 0.0f, ctx ? ctx->p1 : 0.0f);
    return gin[0] ? AC_OK : ac_last_error_code();
}

static int add_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    gin[0] = (AcTensor *)gout;
    return AC_OK;
}

int add_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_add_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_add_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("add_scalar", add_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("add_scalar", ENTRY(add_scalar), a, s, 0.0f, add_scalar_backward, 0);
}

static int mul_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(mul_scalar), NULL, node->context);
}

int mul_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_mul_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_mul_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("mul_scalar", mul_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("mul_scalar", ENTRY(mul_scalar), a, s, 0.0f, mul_scalar_backward, sizeof(ScalarCtx));
}

static int neg_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    return unary_grad(gout, gin, ENTRY(neg), NULL, NULL);
}

int rsub_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_rsub_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_rsub_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("rsub_scalar", rsub_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("rsub_scalar", ENTRY(rsub_scalar), a, s, 0.0f, neg_backward, 0);
}

static int div_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(div_scalar), NULL, node->context);
}

int div_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_div_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_div_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("div_scalar", div_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("div_scalar", ENTRY(div_scalar), a, s, 0.0f, div_scalar_backward, sizeof(ScalarCtx));
}

static int rdiv_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(rdiv_scalar_backward), node->inputs[0], node->context);
}

int rdiv_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_rdiv_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_rdiv_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("rdiv_scalar", rdiv_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("rdiv_scalar", ENTRY(rdiv_scalar), a, s, 0.0f, rdiv_scalar_backward,
                    sizeof(ScalarCtx));
}

static int pow_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScalarCtx *ctx = node->context;
    if (ctx->p0 == 0.0f) {   /* a^0 is 1 everywhere, even where a^-1 is not finite */
        const AcKernels *k = kernels_for(gout);
        if (!k->fill) return kernel_missing("backward", gout);
        gin[0] = tensor_alloc_like("backward", gout);
        return gin[0] ? k->fill(gin[0], 0.0) : ac_last_error_code();
    }
    return unary_grad(gout, gin, ENTRY(pow_scalar_backward), node->inputs[0], node->context);
}

int pow_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_pow_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_pow_scalar(const AcTensor *a, float p)
{
    if (ops_observed) return graph_op("pow_scalar", pow_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){p}, 1);
    return unary_op("pow_scalar", ENTRY(pow_scalar), a, p, 0.0f, pow_scalar_backward, sizeof(ScalarCtx));
}

int neg_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_neg(t[0]));
}

AcTensor *ac_neg(const AcTensor *a)
{
    if (ops_observed) return graph_op("neg", neg_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return typed_unary("neg", TYPED_NEG, a);
    return unary_op("neg", ENTRY(neg), a, 0.0f, 0.0f, neg_backward, 0);
}

static int exp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(mul), node->output, NULL);
}

int exp_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_exp(t[0]));
}

AcTensor *ac_exp(const AcTensor *a)
{
    if (ops_observed) return graph_op("exp", exp_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_exp, a);
    return unary_op("exp", ENTRY(exp), a, 0.0f, 0.0f, exp_backward, 0);
}

static int log_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(div), node->inputs[0], NULL);
}

int log_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_log(t[0]));
}

AcTensor *ac_log(const AcTensor *a)
{
    if (ops_observed) return graph_op("log", log_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_log, a);
    return unary_op("log", ENTRY(log), a, 0.0f, 0.0f, log_backward, 0);
}

static int log1p_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(log1p_backward), node->inputs[0], NULL);
}

int log1p_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_log1p(t[0]));
}

AcTensor *ac_log1p(const AcTensor *a)
{
    if (ops_observed) return graph_op("log1p", log1p_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_log1p, a);
    return unary_op("log1p", ENTRY(log1p), a, 0.0f, 0.0f, log1p_backward, 0);
}

static int sqrt_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(sqrt_backward), node->output, NULL);
}

int sqrt_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sqrt(t[0]));
}

AcTensor *ac_sqrt(const AcTensor *a)
{
    if (ops_observed) return graph_op("sqrt", sqrt_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_sqrt, a);
    return unary_op("sqrt", ENTRY(sqrt), a, 0.0f, 0.0f, sqrt_backward, 0);
}

static int abs_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(abs_backward), node->inputs[0], NULL);
}

int abs_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_abs(t[0]));
}

AcTensor *ac_abs(const AcTensor *a)
{
    if (ops_observed) return graph_op("abs", abs_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return typed_unary("abs", TYPED_ABS, a);
    return unary_op("abs", ENTRY(abs), a, 0.0f, 0.0f, abs_backward, 0);
}

static int sin_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(sin_backward), node->inputs[0], NULL);
}

int sin_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sin(t[0]));
}

AcTensor *ac_sin(const AcTensor *a)
{
    if (ops_observed) return graph_op("sin", sin_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_sin, a);
    return unary_op("sin", ENTRY(sin), a, 0.0f, 0.0f, sin_backward, 0);
}

static int cos_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(cos_backward), node->inputs[0], NULL);
}

int cos_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_cos(t[0]));
}

AcTensor *ac_cos(const AcTensor *a)
{
    if (ops_observed) return graph_op("cos", cos_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (a && a->dtype != AC_FLOAT32) return as_float(ac_cos, a);
    return unary_op("cos", ENTRY(cos), a, 0.0f, 0.0f, cos_backward, 0);
}

static int clamp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, ENTRY(clamp_backward), node->inputs[0], node->context);
}

int clamp_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_clamp(t[0], (float)attr[0], (float)attr[1]));
}

AcTensor *ac_clamp(const AcTensor *a, float lo, float hi)
{
    if (ops_observed) return graph_op("clamp", clamp_replay, 1, (const AcTensor *[]){a}, (double[]){lo, hi}, 2);
    if (tensor_check("clamp", a, "a")) return NULL;
    if (isnan(lo) || isnan(hi))
        return error_null(AC_ERR_ARG, "clamp: bounds must not be NaN (lo %g, hi %g)", (double)lo,
                          (double)hi);
    return unary_op("clamp", ENTRY(clamp), a, lo, hi, clamp_backward, sizeof(ScalarCtx));
}

/* ---- in place, no graph --------------------------------------------------- */

/* a = entry(a, b) written into a's memory, b broadcast to a's shape. A b that
   shares a's memory other than as all of it, element for element, is read from
   a copy: a write must not reach an element still to be read. A graph cannot
   replay the write (it would bake in the values the recording saw), so a
   recording fails and its signature runs eagerly. */
static int update_(const char *op, size_t entry, AcTensor *a, const AcTensor *b)
{
    const AcTensor *in[2];
    int64_t shape[AC_MAX_DIMS];
    AcTensor *copy = NULL;
    int ndim, status;
    if (tensor_check(op, a, "a") || tensor_check(op, b, "b")) return ac_last_error_code();
    in[0] = a;
    in[1] = b;
    if (!common_device(op, in, 2) || broadcast_shapes(op, a, b, shape, &ndim)) return ac_last_error_code();
    if (ndim != a->ndim || memcmp(shape, a->shape, (size_t)ndim * sizeof *shape) != 0)
        return error_set(AC_ERR_SHAPE, "%s: b of shape %s broadcasts to %s, not to a's shape %s", op,
                         tensor_shape_str(b), shape_str(shape, ndim), tensor_shape_str(a));
    if (graph_recording) graph_unsupported(op);
    if ((b->data != a->data || b->size != a->size) && tensors_overlap(a, b)) {
        copy = tensor_alloc_like(op, b);
        if (!copy) return ac_last_error_code();
        if ((status = ac_tensor_copy_(copy, b))) {
            ac_tensor_free(copy);
            return status;
        }
        in[1] = copy;
    }
    status = map_into(entry, op, a, in, 2, 0.0f, 0.0f);
    ac_tensor_free(copy);
    return status;
}

static int update_scalar_(const char *op, size_t entry, AcTensor *a, float s)
{
    if (tensor_check(op, a, "a")) return ac_last_error_code();
    if (graph_recording) graph_unsupported(op);
    return map_into(entry, op, a, (const AcTensor *[]){a}, 1, s, 0.0f);
}

int ac_add_(AcTensor *a, const AcTensor *b) { return update_("add_", ENTRY(add), a, b); }
int ac_sub_(AcTensor *a, const AcTensor *b) { return update_("sub_", ENTRY(sub), a, b); }
int ac_mul_(AcTensor *a, const AcTensor *b) { return update_("mul_", ENTRY(mul), a, b); }
int ac_div_(AcTensor *a, const AcTensor *b) { return update_("div_", ENTRY(div), a, b); }
int ac_add_scalar_(AcTensor *a, float s) { return update_scalar_("add_", ENTRY(add_scalar), a, s); }
int ac_mul_scalar_(AcTensor *a, float s) { return update_scalar_("mul_", ENTRY(mul_scalar), a, s); }
int ac_div_scalar_(AcTensor *a, float s) { return update_scalar_("div_", ENTRY(div_scalar), a, s); }

/* ---- dtypes: type promotion and the typed path ----------------------------- */

/* bool 0 < integers 1 < float 2; -1 for a dtype no op computes with. */
static int category(int dtype)
{
    switch (dtype) {
    case AC_BOOL: return 0;
    case AC_UINT8:
    case AC_INT8:
    case AC_INT64: return 1;
    case AC_FLOAT32: return 2;
    default: return -1;
    }
}

/* The smallest dtype holding both (torch.promote_types); -1 for none. */
static int promote_pair(int a, int b)
{
    if (a == b) return a;
    if (a == AC_FLOAT32 || b == AC_FLOAT32) return AC_FLOAT32;
    if (a == AC_BOOL) return b;
    if (b == AC_BOOL) return a;
    if (a == AC_INT64 || b == AC_INT64) return AC_INT64;
    return -1;   /* uint8 with int8: int16, which aicraft does not have */
}

int ac_result_type(int dtype_a, int kind_a, int dtype_b, int kind_b)
{
    int dtype[2], kind[2], best[3] = {-1, -1, -1}, result = -1, i, k;
    dtype[0] = dtype_a;
    dtype[1] = dtype_b;
    kind[0] = kind_a;
    kind[1] = kind_b;
    for (i = 0; i < 2; i++) {
        if (category(dtype[i]) < 0)
            return error_set(AC_ERR_DTYPE, "result_type: operand %d has dtype %s, which no op computes with",
                             i, ac_dtype_name(dtype[i]));
        if (kind[i] < AC_KIND_TENSOR || kind[i] > AC_KIND_SCALAR)
            return error_set(AC_ERR_ARG, "result_type: unknown operand kind %d", kind[i]);
        if (kind[i] == AC_KIND_SCALAR && dtype[i] != AC_BOOL && dtype[i] != AC_INT64 && dtype[i] != AC_FLOAT32)
            return error_set(AC_ERR_ARG, "result_type: a scalar is bool, int64 or float32, not %s",
                             ac_dtype_name(dtype[i]));
        k = kind[i];
        best[k] = best[k] < 0 ? dtype[i] : promote_pair(best[k], dtype[i]);
        if (best[k] < 0) break;
    }
    for (k = AC_KIND_TENSOR; k <= AC_KIND_SCALAR && i == 2; k++) {
        if (best[k] < 0) continue;
        if (result < 0) result = best[k];
        else if (category(best[k]) > category(result)) result = promote_pair(result, best[k]);
    }
    if (result < 0)
        return error_set(AC_ERR_DTYPE, "result_type: %s and %s have no common dtype in aicraft "
                         "(torch's would be int16)", ac_dtype_name(dtype_a), ac_dtype_name(dtype_b));
    return result;
}

static const char *binary_name(int op)
{
    static const char *names[] = {"add", "sub", "mul", "div", "pow", "floor_divide", "remainder",
                                  "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
                                  "bitwise_right_shift", "maximum", "minimum"};
    return op >= AC_OP_ADD && op <= AC_OP_MINIMUM ? names[op] : "binary";
}

static int operand_kind(const AcTensor *t, int is_scalar)
{
    return is_scalar ? AC_KIND_SCALAR : t->ndim == 0 ? AC_KIND_ZERO_DIM : AC_KIND_TENSOR;
}

/* Element i of t, an integer or bool tensor on the CPU, exactly. */
static int64_t elem_int(const AcTensor *t, int64_t i)
{
    switch (t->dtype) {
    case AC_INT64: return data_i64(t)[i];
    case AC_INT8: return (int8_t)data_u8(t)[i];
    case AC_FLOAT32: return (int64_t)t->data[i];
    default: return data_u8(t)[i];
    }
}

/* out = op(in...) by the typed kernel; out's dtype is the one computed in. */
static int typed_into(const char *op, int code, AcTensor *out, const AcTensor *const *in, int n_in)
{
    const AcKernels *k = kernels_for(out);
    int dtypes[AC_MAP_MAX_IN], i;
    AcMap map;
    if (!k->typed_map) return kernel_missing(op, out);
    if (out->size == 0) return AC_OK;
    memset(&map, 0, sizeof map);
    map.n_in = n_in;
    for (i = 0; i < n_in; i++) {
        map.in[i] = in[i]->data;
        dtypes[i] = in[i]->dtype;
    }
    map.out = out->data;
    map.size = out->size;
    map_layout(&map, in, out);
    return k->typed_map(&map, dtypes, out->dtype, code);
}

static AcTensor *typed_fill(const char *op, int code, AcTensor *out, const AcTensor *const *in, int n_in)
{
    if (out && typed_into(op, code, out, in, n_in)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* fn(a as float32): float math on an integer or bool tensor, as torch promotes it. */
static AcTensor *as_float(AcTensor *(*fn)(const AcTensor *), const AcTensor *a)
{
    AcTensor *f = ac_to_dtype(a, AC_FLOAT32), *out;
    if (!f) return NULL;
    out = fn(f);
    ac_tensor_free(f);
    return out;
}

static AcTensor *typed_unary(const char *op, int code, const AcTensor *a)
{
    if (tensor_check_any(op, a, "a")) return NULL;
    if (category(a->dtype) < 0)
        return error_null(AC_ERR_DTYPE, "%s: a %s tensor is not supported", op, ac_dtype_name(a->dtype));
    if (a->dtype == AC_BOOL && code != TYPED_BITWISE_NOT)
        return error_null(AC_ERR_DTYPE, "%s: not supported on a bool tensor%s", op,
                          code == TYPED_NEG ? " (to invert a mask use ~ or logical_not)" : "");
    if (a->dtype == AC_FLOAT32)
        return error_null(AC_ERR_DTYPE, "%s: a float32 tensor is not supported (integers and bool only)", op);
    return typed_fill(op, code, op_output_as(op, a->dtype, a->shape, a->ndim, &a, 1, NULL, 0), &a, 1);
}

AcTensor *ac_bitwise_not(const AcTensor *a)
{
    return typed_unary("bitwise_not", TYPED_BITWISE_NOT, a);
}

/* a <op> b with a float32 result: integer and bool operands become float32 (a
   Python number's 0-d tensor a float), then the float op runs, with its graph. */
static AcTensor *float_binary(const char *name, int op, const AcTensor *a, const AcTensor *b, int flags)
{
    AcTensor *fa = NULL, *fb = NULL, *out = NULL;
    const AcTensor *x = a, *y = b;
    if (a->dtype != AC_FLOAT32 && !(x = fa = ac_to_dtype(a, AC_FLOAT32))) return NULL;
    if (b->dtype != AC_FLOAT32 && !(y = fb = ac_to_dtype(b, AC_FLOAT32))) goto done;
    if ((flags & AC_SCALAR_B) && op <= AC_OP_POW) {
        float s = y->data[0];
        switch (op) {
        case AC_OP_ADD: out = ac_add_scalar(x, s); break;
        case AC_OP_SUB: out = ac_add_scalar(x, -s); break;
        case AC_OP_MUL: out = ac_mul_scalar(x, s); break;
        case AC_OP_DIV: out = ac_div_scalar(x, s); break;
        default: out = ac_pow_scalar(x, s); break;
        }
    } else if ((flags & AC_SCALAR_A) && op != AC_OP_POW && op <= AC_OP_POW) {
        float s = x->data[0];
        switch (op) {
        case AC_OP_ADD: out = ac_add_scalar(y, s); break;
        case AC_OP_SUB: out = ac_rsub_scalar(y, s); break;
        case AC_OP_MUL: out = ac_mul_scalar(y, s); break;
        default: out = ac_rdiv_scalar(y, s); break;
        }
    } else if (op <= AC_OP_POW) {
        AcTensor *(*fn[])(const AcTensor *, const AcTensor *) = {ac_add, ac_sub, ac_mul, ac_div, ac_pow};
        out = fn[op](x, y);
    } else {   /* floor_divide, remainder, maximum, minimum: no graph */
        const AcTensor *in[2];
        int64_t shape[AC_MAX_DIMS];
        int ndim;
        in[0] = x;
        in[1] = y;
        if (!broadcast_shapes(name, x, y, shape, &ndim))
            out = typed_fill(name, op, op_output_as(name, AC_FLOAT32, shape, ndim, in, 2, NULL, 0), in, 2);
    }
done:
    ac_tensor_free(fa);
    ac_tensor_free(fb);
    return out;
}

AcTensor *ac_binary(int op, const AcTensor *a, const AcTensor *b, int flags)
{
    const char *name = binary_name(op);
    const AcTensor *in[2];
    int64_t shape[AC_MAX_DIMS], i;
    int ndim, dtype;
    AcTensor *out;
    if (tensor_check_any(name, a, "a") || tensor_check_any(name, b, "b")) return NULL;
    if (op < AC_OP_ADD || op > AC_OP_MINIMUM) return error_null(AC_ERR_ARG, "binary: unknown op %d", op);
    if (flags & ~(AC_SCALAR_A | AC_SCALAR_B)) return error_null(AC_ERR_ARG, "%s: unknown flags %d", name, flags);
    if (((flags & AC_SCALAR_A) && a->size != 1) || ((flags & AC_SCALAR_B) && b->size != 1))
        return error_null(AC_ERR_ARG, "%s: an operand marked as a scalar has %lld elements", name,
                          (long long)((flags & AC_SCALAR_A) && a->size != 1 ? a->size : b->size));
    dtype = ac_result_type(a->dtype, operand_kind(a, flags & AC_SCALAR_A), b->dtype,
                           operand_kind(b, flags & AC_SCALAR_B));
    if (dtype < 0)
        return error_null(AC_ERR_DTYPE, "%s: operands of dtypes %s and %s have no common dtype in aicraft",
                          name, ac_dtype_name(a->dtype), ac_dtype_name(b->dtype));
    if (op == AC_OP_SUB && (a->dtype == AC_BOOL || b->dtype == AC_BOOL))
        return error_null(AC_ERR_DTYPE, "sub: subtraction with a bool operand is not supported "
                          "(to invert a mask use ~ or logical_not)");
    if (op == AC_OP_DIV) dtype = AC_FLOAT32;
    if (op >= AC_OP_BITWISE_AND && op <= AC_OP_RSHIFT && dtype == AC_FLOAT32)
        return error_null(AC_ERR_DTYPE, "%s: not supported for float32 operands (integers and bool only)", name);
    if (dtype == AC_BOOL && (op == AC_OP_POW || op == AC_OP_FLOOR_DIVIDE ||
                             op == AC_OP_REMAINDER || op == AC_OP_LSHIFT || op == AC_OP_RSHIFT))
        return error_null(AC_ERR_DTYPE, "%s: not supported for two bool operands", name);
    if (dtype == AC_FLOAT32) return float_binary(name, op, a, b, flags);
    in[0] = a;
    in[1] = b;
    if (broadcast_shapes(name, a, b, shape, &ndim)) return NULL;
    out = op_output_as(name, dtype, shape, ndim, in, 2, NULL, 0);
    if (!out) return NULL;
    if (!kernels_for(out)->typed_map) {
        kernel_missing(name, out);
        ac_tensor_free(out);
        return NULL;
    }
    if (op == AC_OP_POW && (flags & AC_SCALAR_B) && elem_int(b, 0) < 0) {
        ac_tensor_free(out);
        return error_null(AC_ERR_ARG, "pow: integers to negative integer powers are not allowed");
    }
    if (op == AC_OP_FLOOR_DIVIDE || op == AC_OP_REMAINDER)
        for (i = 0; i < b->size; i++)
            if (elem_int(b, i) == 0 || (dtype != AC_INT64 && (elem_int(b, i) & 0xff) == 0)) {
                ac_tensor_free(out);
                return error_null(AC_ERR_ARG, "%s: integer division by zero", name);
            }
    return typed_fill(name, op, out, in, 2);
}
