/*
 * native.c - native segments: runs of a graph's nodes replaced by generated code.
 *
 * A code generator (aicraft's mlir backend) reads a ready graph through the
 * accessors here, compiles some runs of nodes into native functions, and
 * registers each as a segment. Replay (replay.c) then calls a segment's
 * function with the data pointers of its buffers instead of running its nodes,
 * making first the tensors of the buffers it writes, in the call's scope.
 *
 * Not here: generating the code; recording and replaying the other nodes.
 */
#include "graph.h"
#include "kernels/cpu/cpu_kernels.h"

#include <string.h>

/* The table of kernels a segment may call (AcNativeFn's kernels). */
typedef struct {
    void (*gemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                 int64_t ldc);
    void (*uniform)(float *out, int64_t n);
} NativeKernels;

/* uniform: dropout's draws, the same numbers as the op's. */
static const NativeKernels native_kernels = {gemm, cpu_dropout_uniforms};

typedef struct GraphNative {
    AcNativeFn fn;
    int32_t first, n_nodes, n_buffers;
    int32_t *buffers;        /* buffer ids; -2 - id for the grad of buffer id */
    void **data;             /* n_buffers + 1: the buffers' data, then the scratch */
    const double **attrs;    /* the attrs of each node */
    void *scratch;           /* scratch_bytes at root, the segment's own across calls */
    int64_t scratch_bytes;
} GraphNative;

static int graph_ready(const char *op, const AcGraph *g)
{
    if (!g) return error_set(AC_ERR_ARG, "%s: graph is NULL", op);
    if (g->state != GRAPH_READY && g->state != GRAPH_RUNNING)
        return error_set(AC_ERR_STATE, "%s: the graph is not ready (recording or failed)", op);
    return AC_OK;
}

int ac_graph_node_info(const AcGraph *g, int node, int *n_in, int *n_out, int *buffers, int *n_attr,
                       double *attrs)
{
    const GraphNode *nd;
    int i;
    if (graph_ready("graph_node_info", g)) return ac_last_error_code();
    if (node < 0 || node >= g->n_nodes)
        return error_set(AC_ERR_INDEX, "graph_node_info: node %d is out of range [0, %d)", node, g->n_nodes);
    if (!n_in || !n_out || !buffers || !n_attr || !attrs)
        return error_set(AC_ERR_ARG, "graph_node_info: an output pointer is NULL");
    nd = &g->nodes[node];
    *n_in = nd->n_in;
    *n_out = nd->n_out;
    *n_attr = nd->n_attr;
    for (i = 0; i < nd->n_in + nd->n_out; i++) buffers[i] = nd->buf[i];
    for (i = 0; i < nd->n_attr; i++) attrs[i] = nd->attr[i];
    return AC_OK;
}

static int buffer_check(const char *op, const AcGraph *g, int buffer)
{
    if (graph_ready(op, g)) return ac_last_error_code();
    if (buffer < 0 || buffer >= g->n_bufs)
        return error_set(AC_ERR_INDEX, "%s: buffer %d is out of range [0, %d)", op, buffer, g->n_bufs);
    return AC_OK;
}

int ac_graph_buffer_shape(const AcGraph *g, int buffer, int64_t *shape)
{
    if (buffer_check("graph_buffer_shape", g, buffer)) return ac_last_error_code();
    if (!shape) return error_set(AC_ERR_ARG, "graph_buffer_shape: shape is NULL");
    memcpy(shape, g->bufs[buffer].shape, (size_t)g->bufs[buffer].ndim * sizeof *shape);
    return g->bufs[buffer].ndim;
}

int ac_graph_buffer_dtype(const AcGraph *g, int buffer)
{
    return buffer_check("graph_buffer_dtype", g, buffer) ? ac_last_error_code() : g->bufs[buffer].dtype;
}

int ac_graph_num_inputs(const AcGraph *g)
{
    return graph_ready("graph_num_inputs", g) ? ac_last_error_code() : g->n_inputs;
}

int ac_graph_num_outputs(const AcGraph *g)
{
    return graph_ready("graph_num_outputs", g) ? ac_last_error_code() : g->n_outputs;
}

int ac_graph_input_buffer(const AcGraph *g, int i)
{
    if (graph_ready("graph_input_buffer", g)) return ac_last_error_code();
    if (i < 0 || i >= g->n_inputs)
        return error_set(AC_ERR_INDEX, "graph_input_buffer: input %d is out of range [0, %d)", i, g->n_inputs);
    return g->inputs[i];
}

int ac_graph_output_buffer(const AcGraph *g, int i)
{
    if (graph_ready("graph_output_buffer", g)) return ac_last_error_code();
    if (i < 0 || i >= g->n_outputs)
        return error_set(AC_ERR_INDEX, "graph_output_buffer: output %d is out of range [0, %d)", i, g->n_outputs);
    return g->outputs[i];
}

static void native_release(GraphNative *s)
{
    if (s->buffers) root_free(s->buffers, (size_t)s->n_buffers * sizeof *s->buffers);
    if (s->data) root_free(s->data, (size_t)(s->n_buffers + 1) * sizeof *s->data);
    if (s->attrs) root_free(s->attrs, (size_t)s->n_nodes * sizeof *s->attrs);
    if (s->scratch) root_free(s->scratch, (size_t)s->scratch_bytes);
}

static void native_free(AcGraph *g)
{
    int32_t i;
    for (i = 0; i < g->n_natives; i++) native_release(&g->natives[i]);
    if (g->natives) root_free(g->natives, (size_t)g->cap_natives * sizeof *g->natives);
    if (g->native_at) root_free(g->native_at, (size_t)g->n_nodes * sizeof *g->native_at);
    g->natives = NULL;
    g->native_at = NULL;
    g->n_natives = g->cap_natives = 0;
}

__attribute__((constructor)) static void native_callbacks_register(void) { graph_on_free(native_free); }

static int native_check(const AcGraph *g, int first, int n_nodes, AcNativeFn fn, const int *buffers,
                        int n_buffers, int64_t scratch_bytes)
{
    const char *op = "graph_add_native";
    int i, id;
    if (!g) return error_set(AC_ERR_ARG, "%s: graph is NULL", op);
    if (g->state != GRAPH_READY) return error_set(AC_ERR_STATE, "%s: the graph is not ready", op);
    if (!fn) return error_set(AC_ERR_ARG, "%s: fn is NULL", op);
    if (n_nodes < 1 || first < 0 || first > g->n_nodes - n_nodes)
        return error_set(AC_ERR_INDEX, "%s: nodes [%d, %d) are not within [0, %d)", op, first,
                         first + n_nodes, g->n_nodes);
    if (n_buffers < 0 || (n_buffers && !buffers))
        return error_set(AC_ERR_ARG, "%s: %d buffers given%s", op, n_buffers, buffers ? "" : " as NULL");
    if (scratch_bytes < 0) return error_set(AC_ERR_ARG, "%s: scratch_bytes %lld is negative", op,
                                            (long long)scratch_bytes);
    for (i = 0; i < n_buffers; i++) {
        id = buffers[i] >= 0 ? buffers[i] : -2 - buffers[i];
        if (buffers[i] == -1 || id >= g->n_bufs)
            return error_set(AC_ERR_INDEX, "%s: buffer %d is out of range [0, %d)", op, buffers[i], g->n_bufs);
        if (g->bufs[id].dtype != AC_FLOAT32 && buffers[i] < 0)
            return error_set(AC_ERR_DTYPE, "%s: buffer %d is %s and has no gradient", op, id,
                             ac_dtype_name(g->bufs[id].dtype));
    }
    for (i = first; g->native_at && i < first + n_nodes; i++)
        if (g->native_at[i]) return error_set(AC_ERR_STATE, "%s: node %d is in a segment already", op, i);
    for (i = 0; i < g->n_natives; i++)
        if (g->natives[i].first < first && g->natives[i].first + g->natives[i].n_nodes > first)
            return error_set(AC_ERR_STATE, "%s: node %d is in a segment already", op, first);
    return AC_OK;
}

int ac_graph_add_native(AcGraph *g, int first, int n_nodes, AcNativeFn fn, const int *buffers,
                        int n_buffers, int64_t scratch_bytes)
{
    GraphNative *s;
    int i;
    if (native_check(g, first, n_nodes, fn, buffers, n_buffers, scratch_bytes)) return ac_last_error_code();
    if (!g->native_at) {
        g->native_at = root_alloc((size_t)g->n_nodes * sizeof *g->native_at);
        if (!g->native_at) return ac_last_error_code();
        memset(g->native_at, 0, (size_t)g->n_nodes * sizeof *g->native_at);
    }
    if (g->n_natives == g->cap_natives) {
        int32_t cap = g->cap_natives ? 2 * g->cap_natives : 4;
        GraphNative *grown = root_alloc((size_t)cap * sizeof *grown);
        if (!grown) return ac_last_error_code();
        if (g->n_natives) memcpy(grown, g->natives, (size_t)g->n_natives * sizeof *grown);
        if (g->natives) root_free(g->natives, (size_t)g->cap_natives * sizeof *g->natives);
        g->natives = grown;
        g->cap_natives = cap;
    }
    s = &g->natives[g->n_natives];
    memset(s, 0, sizeof *s);
    s->fn = fn;
    s->first = first;
    s->n_nodes = n_nodes;
    s->n_buffers = n_buffers;
    s->scratch_bytes = scratch_bytes;
    s->buffers = root_alloc((size_t)(n_buffers ? n_buffers : 1) * sizeof *s->buffers);
    s->data = root_alloc((size_t)(n_buffers + 1) * sizeof *s->data);
    s->attrs = root_alloc((size_t)n_nodes * sizeof *s->attrs);
    s->scratch = scratch_bytes ? root_alloc((size_t)scratch_bytes) : NULL;
    if (!s->buffers || !s->data || !s->attrs || (scratch_bytes && !s->scratch)) {
        native_release(s);
        return ac_last_error_code();
    }
    for (i = 0; i < n_buffers; i++) s->buffers[i] = buffers[i];
    for (i = 0; i < n_nodes; i++) s->attrs[i] = g->nodes[first + i].attr;
    g->native_at[first] = ++g->n_natives;
    return AC_OK;
}

/* The tensor whose data segment buffer `entry` names: made in the call's scope
   when the segment writes it first; a parameter's grad made (zero) when it has none. */
static AcTensor *native_tensor(AcGraph *g, int32_t entry)
{
    const GraphBuffer *b;
    AcTensor *t;
    if (entry < 0) {
        t = g->run[-2 - entry];
        if (!t->grad) {
            t->grad = grad_new(t);
            if (t->grad) memset(t->grad->data, 0, (size_t)t->grad->size * sizeof(float));
        }
        return t->grad;
    }
    if (g->run[entry]) return g->run[entry];
    b = &g->bufs[entry];
    return g->run[entry] = tensor_create("graph_replay", b->shape, b->ndim, b->dtype, NULL, 0, 0);
}

int native_run(AcGraph *g, int32_t k, int32_t *next)
{
    GraphNative *s;
    AcTensor *t;
    int32_t i;
    int status;
    if (!g->native_at[k]) return 0;
    s = &g->natives[g->native_at[k] - 1];
    for (i = 0; i < s->n_buffers; i++) {
        if (!(t = native_tensor(g, s->buffers[i]))) return ac_last_error_code();
        if (cpu_only(g->nodes[k].op, (const AcTensor *[]){t}, 1)) return AC_ERR_DEVICE;
        s->data[i] = t->data;
    }
    s->data[s->n_buffers] = s->scratch;
    status = s->fn(s->data, s->attrs, &native_kernels);
    if (status)
        return error_set(AC_ERR_INDEX, "%s (node %d): a target is not a class index in range",
                         g->nodes[status - 1].op, status - 1);
    *next = k + s->n_nodes;
    return 1;
}
