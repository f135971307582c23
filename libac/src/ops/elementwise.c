/*
 * elementwise.c - arithmetic and math applied element by element: add, sub,
 * mul, div and pow with NumPy broadcasting, their scalar forms, and neg, exp,
 * log, log1p, sqrt, abs, sin, cos, clamp. Each forward has its backward right under it.
 *
 * One engine runs them all (map_*). It walks the output in runs along the
 * innermost dim after dropping size-1 dims and merging dims that every operand
 * walks contiguously, so same-shape and scalar operands become one flat run
 * whose loop the compiler vectorises; exp runs in the vectorised kernel
 * (kernels/vecmath.c).
 *
 * Not here: activations (activation.c), reductions (reduce.c).
 */
#include "graph.h"
#include "kernels/vecmath.h"

#include <math.h>

#define MAP_GRAIN 16384
#define MAP_MAX_IN 4

typedef enum {
    /* binary forward: both operands may be broadcast */
    MAP_ADD, MAP_SUB, MAP_MUL, MAP_DIV, MAP_POW,
    /* binary backward: in[0] is grad_out (output's shape), the others may be broadcast */
    MAP_DIV_GRAD_B,     /* -g * out / b                        in: g, out, b    */
    MAP_POW_GRAD_BASE,  /* g * b * a^(b-1); 0 where b == 0      in: g, a, b      */
    MAP_POW_GRAD_EXP,   /* g * out * log(a); 0 where a == 0, b >= 0   in: g, out, a, b */
    /* unary forms and their backward: every operand has the output's shape */
    MAP_ADD_S, MAP_MUL_S, MAP_RSUB_S, MAP_DIV_S, MAP_RDIV_S, MAP_POW_S, MAP_CLAMP,
    MAP_NEG, MAP_EXP, MAP_LOG, MAP_LOG1P, MAP_SQRT, MAP_ABS, MAP_SIN, MAP_COS,
    MAP_RDIV_S_GRAD,    /* -g * s / a^2           in: g, a   */
    MAP_POW_S_GRAD,     /* g * p * a^(p-1)        in: g, a   */
    MAP_CLAMP_GRAD,     /* g where lo <= a <= hi  in: g, a   */
    MAP_LOG1P_GRAD,     /* g / (1 + a)            in: g, a   */
    MAP_SQRT_GRAD,      /* g / (2 out)            in: g, out */
    MAP_ABS_GRAD,       /* g * sign(a)            in: g, a   */
    MAP_SIN_GRAD,       /* g * cos(a)             in: g, a   */
    MAP_COS_GRAD        /* -g * sin(a)            in: g, a   */
} MapKind;

typedef struct {
    MapKind kind;
    float p0, p1;                       /* the kind's scalars (s, p, lo, hi) */
    int n_in;
    const float *in[MAP_MAX_IN];
    float *out;
    int ndim;                           /* the iteration space after merging dims */
    int64_t shape[AC_MAX_DIMS];
    int64_t strides[MAP_MAX_IN][AC_MAX_DIMS];
} MapJob;

static float pow_grad_base(float g, float a, float b)
{
    return g * (b == 0.0f ? 0.0f : b * powf(a, b - 1.0f));
}

/* PyTorch's rule: a zero base with a non-negative exponent has no slope in b. */
static float pow_grad_exp(float g, float out, float a, float b)
{
    return g * (a == 0.0f && b >= 0.0f ? 0.0f : out * logf(a));
}

/* min(max(u, lo), hi), written so that NaN passes through and lo > hi gives hi, as PyTorch. */
static float clamp_value(float u, float lo, float hi)
{
    float low_clamped = u < lo ? lo : u;
    return low_clamped > hi ? hi : low_clamped;
}

/* A binary op's loop, specialised for the three ways its operands can step. */
#define BINARY_RUN(EXPR)                                                         \
    do {                                                                         \
        const float *restrict xa = x[0], *restrict xb = x[1];                   \
        if (step[0] && step[1]) {                                                \
            for (i = 0; i < n; i++) { float u = xa[i], v = xb[i]; out[i] = (EXPR); } \
        } else if (step[0]) {                                                    \
            float v = xb[0];                                                     \
            for (i = 0; i < n; i++) { float u = xa[i]; out[i] = (EXPR); }        \
        } else {                                                                 \
            float u = xa[0];                                                     \
            for (i = 0; i < n; i++) { float v = xb[i]; out[i] = (EXPR); }        \
        }                                                                        \
    } while (0)

/* A unary form's loop over u = in[0]. */
#define UNARY_RUN(EXPR)                                                          \
    do {                                                                         \
        const float *restrict xa = x[0];                                         \
        for (i = 0; i < n; i++) { float u = xa[i]; out[i] = (EXPR); }            \
    } while (0)
/* A unary backward's loop: u is grad_out, v the saved input or output. */
#define GRAD_RUN(EXPR)                                                           \
    do {                                                                         \
        const float *restrict xa = x[0], *restrict xb = x[1];                   \
        for (i = 0; i < n; i++) { float u = xa[i], v = xb[i]; out[i] = (EXPR); } \
    } while (0)

/* One run of n outputs; x[k] steps by step[k] (0 or 1). */
static void map_run(const MapJob *job, const float *const *x, const int64_t *step,
                    float *restrict out, int64_t n)
{
    const float p0 = job->p0, p1 = job->p1;
    int64_t i;
    switch (job->kind) {
    case MAP_ADD: BINARY_RUN(u + v); break;
    case MAP_SUB: BINARY_RUN(u - v); break;
    case MAP_MUL: BINARY_RUN(u * v); break;
    case MAP_DIV: BINARY_RUN(u / v); break;
    case MAP_POW: BINARY_RUN(powf(u, v)); break;
    case MAP_DIV_GRAD_B:
        for (i = 0; i < n; i++)
            out[i] = -(x[0][i] * x[1][i]) / x[2][i * step[2]];
        break;
    case MAP_POW_GRAD_BASE:
        for (i = 0; i < n; i++)
            out[i] = pow_grad_base(x[0][i], x[1][i * step[1]], x[2][i * step[2]]);
        break;
    case MAP_POW_GRAD_EXP:
        for (i = 0; i < n; i++)
            out[i] = pow_grad_exp(x[0][i], x[1][i], x[2][i * step[2]], x[3][i * step[3]]);
        break;
    case MAP_ADD_S: UNARY_RUN(u + p0); break;
    case MAP_MUL_S: UNARY_RUN(u * p0); break;
    case MAP_RSUB_S: UNARY_RUN(p0 - u); break;
    case MAP_DIV_S: UNARY_RUN(u / p0); break;
    case MAP_RDIV_S: UNARY_RUN(p0 / u); break;
    case MAP_POW_S: UNARY_RUN(powf(u, p0)); break;
    case MAP_CLAMP: UNARY_RUN(clamp_value(u, p0, p1)); break;
    case MAP_NEG: UNARY_RUN(-u); break;
    case MAP_EXP: vec_exp(x[0], out, n); break;   /* unary forms run flat: step is 1 */
    case MAP_LOG: UNARY_RUN(logf(u)); break;
    case MAP_LOG1P: UNARY_RUN(log1pf(u)); break;
    case MAP_SQRT: UNARY_RUN(sqrtf(u)); break;
    case MAP_ABS: UNARY_RUN(fabsf(u)); break;
    case MAP_SIN: UNARY_RUN(sinf(u)); break;
    case MAP_COS: UNARY_RUN(cosf(u)); break;
    case MAP_RDIV_S_GRAD: GRAD_RUN(-u * p0 / (v * v)); break;
    case MAP_POW_S_GRAD: GRAD_RUN(u * (p0 * powf(v, p0 - 1.0f))); break;
    case MAP_CLAMP_GRAD: GRAD_RUN(v >= p0 && v <= p1 ? u : 0.0f); break;
    case MAP_LOG1P_GRAD: GRAD_RUN(u / (1.0f + v)); break;
    case MAP_SQRT_GRAD: GRAD_RUN(u / (2.0f * v)); break;
    case MAP_ABS_GRAD: GRAD_RUN(u * (v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f))); break;
    case MAP_SIN_GRAD: GRAD_RUN(u * cosf(v)); break;
    case MAP_COS_GRAD: GRAD_RUN(-u * sinf(v)); break;
    }
}

/* Outputs [begin, end): find where begin sits, then go run by run. */
static void map_chunk(void *ctx, int64_t begin, int64_t end)
{
    const MapJob *job = ctx;
    const int last = job->ndim - 1;
    int64_t index[AC_MAX_DIMS], offset[MAP_MAX_IN], step[MAP_MAX_IN], rest = begin, pos = begin;
    const float *x[MAP_MAX_IN];
    int d, k;
    for (k = 0; k < job->n_in; k++) {
        offset[k] = 0;
        step[k] = job->strides[k][last];
    }
    for (d = last; d >= 0; d--) {
        index[d] = rest % job->shape[d];
        rest /= job->shape[d];
        for (k = 0; k < job->n_in; k++) offset[k] += index[d] * job->strides[k][d];
    }
    while (pos < end) {
        int64_t run = job->shape[last] - index[last];
        if (run > end - pos) run = end - pos;
        for (k = 0; k < job->n_in; k++) x[k] = job->in[k] + offset[k];
        map_run(job, x, step, job->out + pos, run);
        pos += run;
        index[last] += run;
        for (k = 0; k < job->n_in; k++) offset[k] += run * step[k];
        for (d = last; d > 0 && index[d] == job->shape[d]; d--) {
            index[d] = 0;
            index[d - 1]++;
            for (k = 0; k < job->n_in; k++)
                offset[k] += job->strides[k][d - 1] - job->shape[d] * job->strides[k][d];
        }
    }
}

/* Lay the inputs out over out's shape: one flat run when each input is either
   the whole output or a single element, else size-1 dims dropped and dims
   merged where every input walks them contiguously. */
static void map_layout(MapJob *job, const AcTensor *const *in, const AcTensor *out)
{
    int64_t strides[MAP_MAX_IN][AC_MAX_DIMS];
    int d, k, flat = 1;
    for (k = 0; k < job->n_in; k++) flat = flat && (in[k]->size == out->size || in[k]->size == 1);
    job->ndim = 1;
    job->shape[0] = out->size;
    for (k = 0; k < job->n_in; k++) job->strides[k][0] = in[k]->size == out->size ? 1 : 0;
    if (flat) return;
    for (k = 0; k < job->n_in; k++) broadcast_strides(in[k], out->shape, out->ndim, strides[k]);
    job->ndim = 0;
    for (d = 0; d < out->ndim; d++) {
        int j = job->ndim, merge = j > 0;
        if (out->shape[d] == 1) continue;
        for (k = 0; k < job->n_in && merge; k++)
            merge = job->strides[k][j - 1] == strides[k][d] * out->shape[d];
        if (merge) {
            job->shape[j - 1] *= out->shape[d];
            for (k = 0; k < job->n_in; k++) job->strides[k][j - 1] = strides[k][d];
            continue;
        }
        job->shape[j] = out->shape[d];
        for (k = 0; k < job->n_in; k++) job->strides[k][j] = strides[k][d];
        job->ndim++;
    }
}

/* out = kind(in...), the inputs broadcast to out's shape. */
static void map_into(MapKind kind, AcTensor *out, const AcTensor *const *in, int n_in, float p0,
                     float p1)
{
    MapJob job;
    int k;
    if (out->size == 0) return;
    job.kind = kind;
    job.p0 = p0;
    job.p1 = p1;
    job.n_in = n_in;
    for (k = 0; k < n_in; k++) job.in[k] = in[k]->data;
    job.out = out->data;
    map_layout(&job, in, out);
    parallel_for(out->size, MAP_GRAIN, map_chunk, &job);
}

/* A new tensor of shape like's holding kind(in...): for building gradients. */
static AcTensor *map_new(MapKind kind, const AcTensor *like, const AcTensor *const *in, int n_in,
                         float p0, float p1)
{
    AcTensor *out = tensor_alloc_like("backward", like);
    if (out) map_into(kind, out, in, n_in, p0, p1);
    return out;
}

/* Give input i the gradient full (output's shape) summed down to its own shape. */
static int set_input_grad(AcGradNode *node, int i, const AcTensor *full, AcTensor **gin)
{
    if (!full) return ac_last_error_code();
    gin[i] = reduce_to_shape(full, node->inputs[i]);
    return gin[i] ? AC_OK : ac_last_error_code();
}

/* ---- binary ops ---------------------------------------------------------- */

static AcTensor *binary_op(const char *op, MapKind kind, const AcTensor *a, const AcTensor *b,
                           AcBackwardFn backward)
{
    const AcTensor *in[2];
    int64_t shape[AC_MAX_DIMS];
    int ndim;
    AcTensor *out;
    if (tensor_check(op, a, "a") || tensor_check(op, b, "b")) return NULL;
    if (broadcast_shapes(op, a, b, shape, &ndim)) return NULL;
    in[0] = a;
    in[1] = b;
    out = op_output(op, shape, ndim, in, 2, backward, 0);
    if (out) map_into(kind, out, in, 2, 0.0f, 0.0f);
    return out;
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
    return binary_op("add", MAP_ADD, a, b, add_backward);
}

static int sub_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    int status;
    if (input_needs_grad(node, 0) && (status = set_input_grad(node, 0, gout, gin))) return status;
    if (input_needs_grad(node, 1))
        return set_input_grad(node, 1, map_new(MAP_NEG, gout, &gout, 1, 0.0f, 0.0f), gin);
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
    return binary_op("sub", MAP_SUB, a, b, sub_backward);
}

static int mul_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    int i, status;
    for (i = 0; i < 2; i++) {
        const AcTensor *in[2];
        if (!input_needs_grad(node, i)) continue;
        in[0] = gout;
        in[1] = node->inputs[1 - i];
        if ((status = set_input_grad(node, i, map_new(MAP_MUL, gout, in, 2, 0.0f, 0.0f), gin)))
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
    return binary_op("mul", MAP_MUL, a, b, mul_backward);
}

static int div_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *in[3];
    int status;
    in[0] = gout;
    if (input_needs_grad(node, 0)) {
        in[1] = node->inputs[1];
        if ((status = set_input_grad(node, 0, map_new(MAP_DIV, gout, in, 2, 0.0f, 0.0f), gin)))
            return status;
    }
    if (input_needs_grad(node, 1)) {
        in[1] = node->output;
        in[2] = node->inputs[1];
        return set_input_grad(node, 1, map_new(MAP_DIV_GRAD_B, gout, in, 3, 0.0f, 0.0f), gin);
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
    return binary_op("div", MAP_DIV, a, b, div_backward);
}

static int pow_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const AcTensor *in[4];
    int status;
    in[0] = gout;
    if (input_needs_grad(node, 0)) {
        in[1] = node->inputs[0];
        in[2] = node->inputs[1];
        if ((status = set_input_grad(node, 0, map_new(MAP_POW_GRAD_BASE, gout, in, 3, 0.0f, 0.0f),
                                     gin)))
            return status;
    }
    if (input_needs_grad(node, 1)) {
        in[1] = node->output;
        in[2] = node->inputs[0];
        in[3] = node->inputs[1];
        return set_input_grad(node, 1, map_new(MAP_POW_GRAD_EXP, gout, in, 4, 0.0f, 0.0f), gin);
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
    return binary_op("pow", MAP_POW, a, b, pow_backward);
}

/* ---- unary ops and scalar forms ------------------------------------------ */

/* What backward needs of a scalar form: s, p, or the clamp bounds. */
typedef struct {
    float p0, p1;
} ScalarCtx;

static AcTensor *unary_op(const char *op, MapKind kind, const AcTensor *a, float p0, float p1,
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
    map_into(kind, out, &a, 1, p0, p1);
    return out;
}

/* The gradient of input 0 as kind(gout, second): second is the input, the output
   or NULL; ctx holds the kind's scalars, or is NULL when it has none. */
static int unary_grad(const AcTensor *gout, AcTensor **gin, MapKind kind, const AcTensor *second,
                      const ScalarCtx *ctx)
{
    const AcTensor *in[2];
    in[0] = gout;
    in[1] = second;
    gin[0] = map_new(kind, gout, in, second ? 2 : 1, ctx ? ctx->p0 : 0.0f, ctx ? ctx->p1 : 0.0f);
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
    return unary_op("add_scalar", MAP_ADD_S, a, s, 0.0f, add_scalar_backward, 0);
}

static int mul_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_MUL_S, NULL, node->context);
}

int mul_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_mul_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_mul_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("mul_scalar", mul_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("mul_scalar", MAP_MUL_S, a, s, 0.0f, mul_scalar_backward, sizeof(ScalarCtx));
}

static int neg_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    return unary_grad(gout, gin, MAP_NEG, NULL, NULL);
}

int rsub_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_rsub_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_rsub_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("rsub_scalar", rsub_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("rsub_scalar", MAP_RSUB_S, a, s, 0.0f, neg_backward, 0);
}

static int div_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_DIV_S, NULL, node->context);
}

int div_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_div_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_div_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("div_scalar", div_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("div_scalar", MAP_DIV_S, a, s, 0.0f, div_scalar_backward, sizeof(ScalarCtx));
}

static int rdiv_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_RDIV_S_GRAD, node->inputs[0], node->context);
}

int rdiv_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_rdiv_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_rdiv_scalar(const AcTensor *a, float s)
{
    if (ops_observed) return graph_op("rdiv_scalar", rdiv_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){s}, 1);
    return unary_op("rdiv_scalar", MAP_RDIV_S, a, s, 0.0f, rdiv_scalar_backward,
                    sizeof(ScalarCtx));
}

static int pow_scalar_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const ScalarCtx *ctx = node->context;
    if (ctx->p0 == 0.0f) {   /* a^0 is 1 everywhere, even where a^-1 is not finite */
        int64_t i;
        gin[0] = tensor_alloc_like("backward", gout);
        if (!gin[0]) return ac_last_error_code();
        for (i = 0; i < gin[0]->size; i++) gin[0]->data[i] = 0.0f;
        return AC_OK;
    }
    return unary_grad(gout, gin, MAP_POW_S_GRAD, node->inputs[0], node->context);
}

int pow_scalar_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_pow_scalar(t[0], (float)attr[0]));
}

AcTensor *ac_pow_scalar(const AcTensor *a, float p)
{
    if (ops_observed) return graph_op("pow_scalar", pow_scalar_replay, 1, (const AcTensor *[]){a}, (double[]){p}, 1);
    return unary_op("pow_scalar", MAP_POW_S, a, p, 0.0f, pow_scalar_backward, sizeof(ScalarCtx));
}

int neg_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_neg(t[0]));
}

AcTensor *ac_neg(const AcTensor *a)
{
    if (ops_observed) return graph_op("neg", neg_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("neg", MAP_NEG, a, 0.0f, 0.0f, neg_backward, 0);
}

static int exp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_MUL, node->output, NULL);
}

int exp_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_exp(t[0]));
}

AcTensor *ac_exp(const AcTensor *a)
{
    if (ops_observed) return graph_op("exp", exp_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("exp", MAP_EXP, a, 0.0f, 0.0f, exp_backward, 0);
}

static int log_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_DIV, node->inputs[0], NULL);
}

int log_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_log(t[0]));
}

AcTensor *ac_log(const AcTensor *a)
{
    if (ops_observed) return graph_op("log", log_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("log", MAP_LOG, a, 0.0f, 0.0f, log_backward, 0);
}

static int log1p_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_LOG1P_GRAD, node->inputs[0], NULL);
}

int log1p_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_log1p(t[0]));
}

AcTensor *ac_log1p(const AcTensor *a)
{
    if (ops_observed) return graph_op("log1p", log1p_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("log1p", MAP_LOG1P, a, 0.0f, 0.0f, log1p_backward, 0);
}

static int sqrt_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_SQRT_GRAD, node->output, NULL);
}

int sqrt_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sqrt(t[0]));
}

AcTensor *ac_sqrt(const AcTensor *a)
{
    if (ops_observed) return graph_op("sqrt", sqrt_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("sqrt", MAP_SQRT, a, 0.0f, 0.0f, sqrt_backward, 0);
}

static int abs_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_ABS_GRAD, node->inputs[0], NULL);
}

int abs_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_abs(t[0]));
}

AcTensor *ac_abs(const AcTensor *a)
{
    if (ops_observed) return graph_op("abs", abs_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("abs", MAP_ABS, a, 0.0f, 0.0f, abs_backward, 0);
}

static int sin_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_SIN_GRAD, node->inputs[0], NULL);
}

int sin_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sin(t[0]));
}

AcTensor *ac_sin(const AcTensor *a)
{
    if (ops_observed) return graph_op("sin", sin_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("sin", MAP_SIN, a, 0.0f, 0.0f, sin_backward, 0);
}

static int cos_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_COS_GRAD, node->inputs[0], NULL);
}

int cos_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_cos(t[0]));
}

AcTensor *ac_cos(const AcTensor *a)
{
    if (ops_observed) return graph_op("cos", cos_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    return unary_op("cos", MAP_COS, a, 0.0f, 0.0f, cos_backward, 0);
}

static int clamp_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return unary_grad(gout, gin, MAP_CLAMP_GRAD, node->inputs[0], node->context);
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
    return unary_op("clamp", MAP_CLAMP, a, lo, hi, clamp_backward, sizeof(ScalarCtx));
}
