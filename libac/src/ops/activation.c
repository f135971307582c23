/*
 * activation.c - relu, sigmoid, tanh, gelu (exact, erf form), softmax and
 * log_softmax along one dim, with their backward.
 *
 * Here is each op's graph logic; the math is in the device's kernel table
 * (kernels/kernels.h; the CPU's in kernels/cpu/activation.c). softmax and
 * log_softmax subtract the row's max before exp, so logits of any finite size
 * give finite results.
 *
 * Not here: the arithmetic ops (elementwise.c), the losses (loss.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

typedef int (*ActFn)(const float *x, float *out, int64_t n);
typedef int (*ActGradFn)(const float *g, const float *saved, float *out, int64_t n);

/* fn (the op's entry in a's table, or NULL) over a into a new output. */
static AcTensor *activation(const char *op, ActFn fn, const AcTensor *a, AcBackwardFn backward)
{
    AcTensor *out = op_output(op, a->shape, a->ndim, &a, 1, backward, 0);
    int status = AC_OK;
    if (!out) return NULL;
    if (!fn) status = kernel_missing(op, out);
    else if (a->size > 0) status = fn(a->data, out->data, a->size);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* gin[0] = fn(grad_out, saved), saved being the op's output or input. */
static int activation_grad(ActGradFn fn, const AcTensor *gout, const AcTensor *saved,
                           AcTensor **gin)
{
    if (!fn) return kernel_missing("backward", gout);
    gin[0] = tensor_alloc_like("backward", gout);
    if (!gin[0]) return ac_last_error_code();
    return gout->size > 0 ? fn(gout->data, saved->data, gin[0]->data, gout->size) : AC_OK;
}

static int relu_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(kernels_for(gout)->relu_backward, gout, node->output, gin);
}

int relu_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_relu(t[0]));
}

AcTensor *ac_relu(const AcTensor *a)
{
    if (ops_observed) return graph_op("relu", relu_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (tensor_check("relu", a, "a")) return NULL;
    return activation("relu", kernels_for(a)->relu, a, relu_backward);
}

static int sigmoid_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(kernels_for(gout)->sigmoid_backward, gout, node->output, gin);
}

int sigmoid_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_sigmoid(t[0]));
}

AcTensor *ac_sigmoid(const AcTensor *a)
{
    if (ops_observed) return graph_op("sigmoid", sigmoid_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (tensor_check("sigmoid", a, "a")) return NULL;
    return activation("sigmoid", kernels_for(a)->sigmoid, a, sigmoid_backward);
}

static int tanh_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(kernels_for(gout)->tanh_backward, gout, node->output, gin);
}

int tanh_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tanh(t[0]));
}

AcTensor *ac_tanh(const AcTensor *a)
{
    if (ops_observed) return graph_op("tanh", tanh_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (tensor_check("tanh", a, "a")) return NULL;
    return activation("tanh", kernels_for(a)->tanh, a, tanh_backward);
}

static int gelu_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return activation_grad(kernels_for(gout)->gelu_backward, gout, node->inputs[0], gin);
}

int gelu_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_gelu(t[0]));
}

AcTensor *ac_gelu(const AcTensor *a)
{
    if (ops_observed) return graph_op("gelu", gelu_replay, 1, (const AcTensor *[]){a}, NULL, 0);
    if (tensor_check("gelu", a, "a")) return NULL;
    return activation("gelu", kernels_for(a)->gelu, a, gelu_backward);
}

/* ---- softmax and log_softmax --------------------------------------------- */

/* The tensor seen as (rows, n, inner) around the softmax dim: each of the
   rows * inner lanes is n values, inner apart. */
typedef struct {
    int64_t n, inner;
} SoftmaxCtx;

typedef int (*SoftmaxFn)(const float *x, float *out, int64_t rows, int64_t n, int64_t inner);
typedef int (*SoftmaxGradFn)(const float *y, const float *g, float *out, int64_t rows, int64_t n,
                             int64_t inner);

static int softmax_grad(SoftmaxGradFn fn, AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const SoftmaxCtx *ctx = node->context;
    if (!fn) return kernel_missing("backward", gout);
    gin[0] = tensor_alloc_like("backward", gout);
    if (!gin[0]) return ac_last_error_code();
    if (gout->size == 0) return AC_OK;
    return fn(node->output->data, gout->data, gin[0]->data, gout->size / (ctx->n * ctx->inner),
              ctx->n, ctx->inner);
}

static int softmax_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return softmax_grad(kernels_for(gout)->softmax_backward, node, gout, gin);
}

static int log_softmax_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    return softmax_grad(kernels_for(gout)->log_softmax_backward, node, gout, gin);
}

static AcTensor *softmax_common(const char *op, const AcTensor *a, int dim, int is_log)
{
    SoftmaxCtx layout, *ctx;
    SoftmaxFn fn;
    AcTensor *out;
    int d, status = AC_OK;
    if (tensor_check(op, a, "a")) return NULL;
    if ((dim = dim_normalize(op, dim, a->ndim)) < 0) return NULL;
    layout.n = a->ndim > 0 ? a->shape[dim] : 1;
    layout.inner = 1;
    for (d = dim + 1; d < a->ndim; d++) layout.inner *= a->shape[d];
    fn = is_log ? kernels_for(a)->log_softmax : kernels_for(a)->softmax;
    out = op_output(op, a->shape, a->ndim, &a, 1,
                    is_log ? log_softmax_backward : softmax_backward, sizeof(SoftmaxCtx));
    if (!out) return NULL;
    if ((ctx = op_context(out))) *ctx = layout;
    if (!fn) status = kernel_missing(op, out);
    else if (a->size > 0)
        status = fn(a->data, out->data, a->size / (layout.n * layout.inner), layout.n, layout.inner);
    if (status) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

int softmax_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_softmax(t[0], (int)attr[0]));
}

AcTensor *ac_softmax(const AcTensor *a, int dim)
{
    if (ops_observed) return graph_op("softmax", softmax_replay, 1, (const AcTensor *[]){a}, (double[]){dim}, 1);
    return softmax_common("softmax", a, dim, 0);
}

int log_softmax_replay(AcTensor **t, const double *attr)
{
    return graph_made(t[1] = ac_log_softmax(t[0], (int)attr[0]));
}

AcTensor *ac_log_softmax(const AcTensor *a, int dim)
{
    if (ops_observed) return graph_op("log_softmax", log_softmax_replay, 1, (const AcTensor *[]){a}, (double[]){dim}, 1);
    return softmax_common("log_softmax", a, dim, 1);
}
