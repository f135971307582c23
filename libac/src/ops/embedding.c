/*
 * embedding.c - the embedding lookup (PyTorch's F.embedding): each class id
 * picks a row of the weight table; backward scatter-adds the output gradient
 * into the picked rows.
 *
 * Ids arrive as int64 (or whole float32 values); every id is checked (an
 * integer in [0, num)) before anything is allocated. Backward adds the rows in
 * the order of the ids, serially, so a weight row that is picked several times
 * gets the same sum whatever the thread count.
 *
 * Not here: nn.Embedding's initialisation and padding row (aicraft/nn/rnn.py).
 */
#include "internal.h"

#include <string.h>

#define EMBEDDING_GRAIN 16384   /* floats copied per parallel task, at least */

typedef struct {
    int64_t padding_idx;   /* the row that gets no gradient, or -1 */
} EmbeddingCtx;

typedef struct {
    const AcTensor *ids;
    const float *weight;
    float *out;
    int64_t dim;
} GatherJob;

static void gather_task(void *ctx, int64_t begin, int64_t end)
{
    const GatherJob *job = ctx;
    int64_t i;
    for (i = begin; i < end; i++)
        memcpy(job->out + i * job->dim, job->weight + (int64_t)elem_get(job->ids, i) * job->dim,
               (size_t)job->dim * sizeof(float));
}

static int embedding_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin);

/* Each id must be an integer in [0, num); name the first that is not. */
static int check_ids(const AcTensor *indices, const AcTensor *weight)
{
    const int64_t num = weight->shape[0];
    int64_t i;
    for (i = 0; i < indices->size; i++) {
        double id = elem_get(indices, i);
        if (!(id >= 0.0 && id < (double)num))   /* NaN fails too */
            return error_set(AC_ERR_INDEX, "embedding: index %g at position %lld is out of range "
                             "for weight %s (%lld rows)", id, (long long)i,
                             tensor_shape_str(weight), (long long)num);
        if (id != (double)(int64_t)id)
            return error_set(AC_ERR_INDEX, "embedding: index %g at position %lld is not an integer",
                             id, (long long)i);
    }
    return AC_OK;
}

AcTensor *ac_embedding(const AcTensor *indices, const AcTensor *weight, int64_t padding_idx)
{
    const AcTensor *inputs[2];
    int64_t shape[AC_MAX_DIMS];
    EmbeddingCtx *ctx;
    GatherJob job;
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
    if (check_ids(indices, weight)) return NULL;
    if (indices->ndim > 0) memcpy(shape, indices->shape, (size_t)indices->ndim * sizeof(int64_t));
    shape[indices->ndim] = weight->shape[1];
    inputs[0] = indices;
    inputs[1] = weight;
    out = op_output_as("embedding", AC_FLOAT32, shape, indices->ndim + 1, inputs, 2,
                       embedding_backward, sizeof(EmbeddingCtx));
    if (!out) return NULL;
    ctx = op_context(out);
    if (ctx) ctx->padding_idx = padding_idx;
    job.ids = indices;
    job.weight = weight->data;
    job.out = out->data;
    job.dim = weight->shape[1];
    if (out->size > 0)
        parallel_for(indices->size, job.dim >= EMBEDDING_GRAIN ? 1 : EMBEDDING_GRAIN / job.dim,
                     gather_task, &job);
    return out;
}

static int embedding_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    const EmbeddingCtx *ctx = node->context;
    const AcTensor *indices = node->inputs[0], *weight = node->inputs[1];
    const int64_t dim = weight->shape[1];
    int64_t i, j;
    if (input_needs_grad(node, 0)) {   /* the lookup is flat in the ids */
        gin[0] = ac_tensor_new(indices->shape, indices->ndim);
        if (!gin[0]) return ac_last_error_code();
    }
    if (input_needs_grad(node, 1)) {
        AcTensor *dw = ac_tensor_new(weight->shape, 2);
        if (!dw) return ac_last_error_code();
        for (i = 0; i < indices->size; i++) {
            const int64_t row = (int64_t)elem_get(indices, i);
            const float *g = gout->data + i * dim;
            float *d = dw->data + row * dim;
            if (row == ctx->padding_idx) continue;
            for (j = 0; j < dim; j++) d[j] += g[j];
        }
        gin[1] = dw;
    }
    return AC_OK;
}
