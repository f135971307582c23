/*
 * packed_linear.c - a float32 Linear layer for inference with its weight packed
 * once (ac_packed_linear_*): the GEMM's panels of W^T are made when the layer is
 * made, not on each forward as ac_linear makes them. A layer followed by ReLU
 * has the GEMM apply it as it stores the output (gemm_packed_bias), with no
 * pass of its own over the output.
 *
 * The block is the data of one root uint8 tensor: this header, the panels of
 * W^T (gemm_pack_b) and the bias; no row-major weight, so a batch of any size
 * reads the panels, each output summed in the same order, and a row's output
 * has the same bits whatever rows come with it (ac_linear reads a few rows'
 * weight in place, summing in another order). It is a copy, so nothing can
 * change the weight under its panels. Being a tensor, the block is what a graph
 * holds of the layer: the forward records itself with the block as its second
 * input, which the graph keeps as state, so the layer lives while a graph that
 * ran it does (its header holds pointers: a program file cannot hold it, and
 * op_table.h does not list it).
 *
 * Not here: the GEMM and its packing (kernels/gemm.c), the layer that packs per
 * call (linear.c).
 */
#include "graph.h"
#include "kernels/gemm.h"

#include <string.h>

struct AcPackedLinear {
    AcTensor *block;       /* the root tensor whose data this header begins: its size is the block's */
    int64_t in, out;
    int relu;              /* activation AC_ACTIVATION_RELU */
    float *bias;           /* (out), or NULL */
    GemmPackedB packed;    /* W^T's panels; its b is NULL */
};

static size_t round_up64(size_t n) { return (n + 63) & ~(size_t)63; }

static int packed_check(const char *op, const AcPackedLinear *p)
{
    if (!p) return error_set(AC_ERR_ARG, "%s: layer is NULL", op);
    return AC_OK;
}

AcPackedLinear *ac_packed_linear_new(const AcTensor *weight, const AcTensor *bias, int activation)
{
    const char *op = "packed_linear_new";
    size_t head = round_up64(sizeof(AcPackedLinear)), panel_bytes, bias_bytes, bytes;
    int64_t in, out;
    AcPackedLinear *p;
    AcTensor *t;
    char *block;
    if (tensor_check(op, weight, "weight") || cpu_only(op, (const AcTensor *[]){weight, bias}, 2))
        return NULL;
    if (weight->ndim != 2)
        return error_null(AC_ERR_SHAPE, "%s: weight %s must be (out_features, in_features)", op,
                          tensor_shape_str(weight));
    out = weight->shape[0];
    in = weight->shape[1];
    if (bias && tensor_check(op, bias, "bias")) return NULL;
    if (bias && (bias->ndim != 1 || bias->shape[0] != out))
        return error_null(AC_ERR_SHAPE, "%s: bias %s does not fit weight %s (expected (%lld,))", op,
                          tensor_shape_str(bias), tensor_shape_str(weight), (long long)out);
    if (activation != AC_ACTIVATION_NONE && activation != AC_ACTIVATION_RELU)
        return error_null(AC_ERR_ARG,
                          "%s: activation must be AC_ACTIVATION_NONE (0) or AC_ACTIVATION_RELU (1), "
                          "got %d", op, activation);
    panel_bytes = round_up64(gemm_packed_b_floats(in, out) * sizeof(float));
    bias_bytes = bias ? round_up64((size_t)out * sizeof(float)) : 0;
    bytes = head + panel_bytes + bias_bytes;
    t = tensor_create(op, (const int64_t[]){(int64_t)bytes}, 1, AC_UINT8, NULL, 0, 1);
    if (!t) return NULL;
    block = (char *)t->data;
    p = (AcPackedLinear *)(void *)block;
    p->block = t;
    p->in = in;
    p->out = out;
    p->relu = activation == AC_ACTIVATION_RELU;
    p->bias = bias ? (float *)(void *)(block + head + panel_bytes) : NULL;
    if (bias) memcpy(p->bias, bias->data, (size_t)out * sizeof(float));
    p->packed = gemm_pack_b(1, in, out, weight->data, in, (float *)(void *)(block + head));
    p->packed.b = NULL;    /* the panels alone: gemm_packed never reads the weight */
    return p;
}

int ac_packed_linear_free(AcPackedLinear *p)
{
    /* a graph that ran the layer holds its block until the graph is freed */
    return p ? ac_tensor_free(p->block) : AC_OK;
}

int64_t ac_packed_linear_in_features(const AcPackedLinear *p)
{
    return packed_check("packed_linear_in_features", p) ? ac_last_error_code() : p->in;
}

int64_t ac_packed_linear_out_features(const AcPackedLinear *p)
{
    return packed_check("packed_linear_out_features", p) ? ac_last_error_code() : p->out;
}

int ac_packed_linear_has_bias(const AcPackedLinear *p)
{
    return packed_check("packed_linear_has_bias", p) ? ac_last_error_code() : p->bias != NULL;
}

int64_t ac_packed_linear_nbytes(const AcPackedLinear *p)
{
    return packed_check("packed_linear_nbytes", p) ? ac_last_error_code() : p->block->size;
}

static AcTensor *packed_forward(const AcPackedLinear *p, const AcTensor *x)
{
    int64_t rows;
    AcTensor *y = inference_output("packed_linear_forward", x, p->in, p->out, "a packed layer", &rows);
    if (y) gemm_packed_bias(rows, x->data, p->in, &p->packed, p->bias, p->relu, y->data, p->out);
    return y;
}

/* t[1] is the layer's block, its data the layer. */
static int packed_linear_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[2] = packed_forward((const AcPackedLinear *)(const void *)t[1]->data, t[0]));
}

AcTensor *ac_packed_linear_forward(const AcPackedLinear *p, const AcTensor *x)
{
    if (packed_check("packed_linear_forward", p)) return NULL;
    if (ops_observed)
        return graph_op("packed_linear", packed_linear_replay, 2, (const AcTensor *[]){x, p->block}, NULL, 0);
    return packed_forward(p, x);
}
