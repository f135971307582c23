/*
 * embedding.c - the embedding lookup (PyTorch's F.embedding): each class id
 * picks a row of the weight table; backward scatter-adds the output gradient
 * into the picked rows.
 *
 * Ids arrive as int64 (or whole float32 values); every id is checked (an
 * integer in [0, num)) by the device's kernel before the output is made. The
 * gather and scatter run in the device's kernels (kernels/cpu/embedding.c).
 *
 * Not here: nn.Embedding's initialisation and padding row (aicraft/nn/rnn.py).
 */
#include "kernels/kernels.h"

#include <string.h>

typedef struct {
    int64_t padding_idx;   /* the row that gets no gradient, or -1 */
} EmbeddingCtx;

static int embedding_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

/* Each id must be an integer in [0, num); name the first that is not. */
static int check_ids(const AcKernels *k, const AcTensor *indices, const AcTensor *weight)
{
    const int64_t num = weight->shape[0];
    int64_t at;
    double id;
    int status = k->embedding_bad_id(indices, num, &at, &id);
    if (status || at < 0) return status;
    if (!(id >= 0.0 && id < (double)num))   /* NaN fails too */
        return error_set(AC_ERR_INDEX, "embedding: index %g at position %lld is out of range "
                         "for weight %s (%lld rows)", id, (long long)at,
                         tensor_shape_str(weight), (long long)num);
    return error_set(AC_ERR_INDEX, "embedding: index %g at position %lld is not an integer", id,
                     (long long)at);
}

AcTensor *ac_embedding(const AcTensor *indices, const AcTensor *weight, int64_t padding_idx)
{
    const AcTensor *inputs[2];
    const AcKernels *k;
    int64_t shape[AC_MAX_DIMS];
    EmbeddingCtx *ctx;
    AcTensor *out;
    if (tensor_check_any("embedding", indices, "indices") ||
        index_check("embedding", indices, "indices") || tensor_check("embedding", weight, "weight"))
        return NULL;
    if (weight->ndim != 2)
        return error_null(AC_ERR_SHAPE, "embedding: weight %s must be (num_embeddings, embedding_dim)",
                          tensor_shape_str(weight));
    if (indices->ndim >= AC_MAX_DIMS)
        return error_null(AC_ERR_SHAPE, "embedding: indices %s have too many dims for an output "
                          "with one more (at most %d)", tensor_shape_str(indices), AC_MAX_DIMS);
    if (padding_idx < -1 || padding_idx >= weight->shape[0])
        return error_null(AC_ERR_INDEX, "embedding: padding_idx %lld is out of range for weight %s",
                          (long long)padding_idx, tensor_shape_str(weight));
    if (same_device("embedding", indices, weight)) return NULL;
    k = kernels_for(weight);
    if (!k->embedding_bad_id || !k->embedding) {
        kernel_missing("embedding", weight);
        return NULL;
    }
    if (check_ids(k, indices, weight)) return NULL;
    if (indices->ndim > 0) memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof(int64_t));
    shape[indices->ndim] = weight->shape[1];
    inputs[0] = indices;
    inputs[1] = weight;
    out = op_output_as("embedding", AC_FLOAT32, shape, indices->ndim + 1, inputs, 2,
                       embedding_backward, sizeof(EmbeddingCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->padding_idx = padding_idx;
    if (k->embedding(indices, weight->data, weight->shape[1], out->data)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Zeros of shape on gout's device, for a gradient. */
static AcTensor *zeros_on(const AcKernels *k, const AcTensor *gout, const int64_t *shape, int ndim)
{
    AcTensor *t = tensor_create_on("embedding", shape, ndim, AC_FLOAT32, NULL, 0, 0, gout->device,
                                   gout->device_index);
    if (t && t->size > 0 && k->fill(t, 0.0)) {
        ac_tensor_free(t);
        return NULL;
    }
    return t;
}

static int embedding_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const EmbeddingCtx *ctx = node->context;
    const AcTensor *indices = node->inputs[0], *weight = node->inputs[1];
    const AcKernels *k = kernels_for(gout);
    if (!k->embedding_backward || !k->fill) return kernel_missing("embedding", gout);
    if (input_needs_grad(node, 0)) {   /* the lookup is flat in the ids */
        gin[0] = zeros_on(k, gout, indices->shape, indices->ndim);
        if (!gin[0]) return ac_last_error_code();
    }
    if (input_needs_grad(node, 1)) {
        /* A weight leaf without a grad yet gets it filled in place: the walk
           then does not copy the table's gradient into it. */
        AcTensor *dw = leaf_grad_to_fill(node, 1);
        if (dw && dw->size > 0 && k->fill(dw, 0.0)) return ac_last_error_code();
        if (!dw && !(dw = gin[1] = zeros_on(k, gout, weight->shape, 2))) return ac_last_error_code();
        return k->embedding_backward(indices, gout->data, weight->shape[1], ctx->padding_idx,
                                     dw->data);
    }
    return AC_OK;
}
