/*
 * graph.c - the graph IR: recording ops into an AcGraph while they run.
 *
 * Between ac_graph_begin and ac_graph_end, each recorded op (graph.h) calls
 * graph_call at its entry, which runs the op with recording paused and appends
 * a node: the op's replay function, its input and output buffers, its scalar
 * arguments. Buffers are found by the tensor's address; tensor_create tells the
 * graph of every tensor made meanwhile (graph_note_tensor), so a reused address
 * never aliases an old buffer, and a tensor made inside an op (a gradient) or
 * by an op the graph cannot replay fails the graph instead of being read as a
 * constant. A failed graph still lets every op run eagerly.
 *
 * The recorder sits low, in the tensors layer (internal.h), as the profiler
 * does: creation, ops and autograd call it at their entry. What runs a graph
 * again sits on top, and what of it a graph owns is freed through a callback
 * (graph_on_free: native.c's segments).
 *
 * Not here: running a graph again (replay.c).
 */
#include "graph.h"

#include <stdio.h>
#include <string.h>

AC_THREAD_LOCAL AcGraph *graph_recording;
AC_THREAD_LOCAL AcGraph *graph_open;

/* Frees a graph's native segments: native.c, a layer above, registers it when
   libac loads (graph_on_free). */
static void (*natives_free)(AcGraph *g);

void graph_on_free(void (*free_natives)(AcGraph *g)) { natives_free = free_natives; }

__attribute__((constructor)) static void graph_callbacks_register(void) { tensor_on_create(graph_note_tensor); }

/* The creation functions whose root tensors a graph may read as state. */
static const char *const creation_ops[] = {
    "full", "tensor_from_data", "tensor_new", "tensor_from_typed", "keep", "arange", "eye", NULL
};

static void graph_fail(AcGraph *g, const char *fmt, ...)
{
    va_list args;
    if (g->state == GRAPH_FAILED) return;   /* the first failure is the one to report */
    g->state = GRAPH_FAILED;
    va_start(args, fmt);
    vsnprintf(g->failure, sizeof g->failure, fmt, args);
    va_end(args);
}

/* array (cap elements of elem bytes, n in use) with room for one more: the same
   array, or a larger copy (the old one freed); NULL when out of memory. */
static void *grow(void *array, int32_t *cap, int32_t n, size_t elem)
{
    int32_t new_cap;
    void *grown;
    if (n < *cap) return array;
    new_cap = *cap ? *cap * 2 : 16;
    grown = root_alloc((size_t)new_cap * elem);
    if (!grown) return NULL;
    if (n) memcpy(grown, array, (size_t)n * elem);
    if (array) root_free(array, (size_t)*cap * elem);
    *cap = new_cap;
    return grown;
}

static int32_t buffer_new(AcGraph *g, const AcTensor *t, int kind, AcTensor *held)
{
    GraphBuffer *bufs = grow(g->bufs, &g->cap_bufs, g->n_bufs, sizeof *bufs), *b;
    if (!bufs) {
        graph_fail(g, "out of memory while recording");
        return -1;
    }
    g->bufs = bufs;
    b = &bufs[g->n_bufs];
    memset(b, 0, sizeof *b);
    b->traced = t;
    b->held = held;
    b->kind = kind;
    b->dtype = t->dtype;
    b->ndim = t->ndim;
    memcpy(b->shape, t->shape, sizeof b->shape);
    return g->n_bufs++;
}

static int32_t buffer_find(const AcGraph *g, const AcTensor *t)
{
    int32_t i;
    for (i = g->n_bufs - 1; i >= 0; i--)
        if (g->bufs[i].traced == t) return i;
    return -1;
}

static const GraphBorn *born_find(const AcGraph *g, const AcTensor *t)
{
    int32_t i;
    for (i = g->n_born - 1; i >= 0; i--)
        if (g->born[i].t == t) return &g->born[i];
    return NULL;
}

/* The buffer op reads as t: a known one, or t itself held as a parameter or
   state; -1 (the graph failed) for a tensor the graph cannot read again. */
static int32_t buffer_of(AcGraph *g, const char *op, const AcTensor *t)
{
    int32_t id = buffer_find(g, t);
    const GraphBorn *born;
    if (id >= 0) return id;
    born = born_find(g, t);
    if (born && born->inside_op) {
        graph_fail(g, "%s reads a tensor %s made inside an earlier op (a gradient or a saved value), "
                   "which a graph cannot replay", op, tensor_shape_str(t));
        return -1;
    }
    if (t->scope_depth > 0) {
        graph_fail(g, "%s reads a tensor %s made in a scope the graph does not own; pass it as an "
                   "input, or make it at root", op, tensor_shape_str(t));
        return -1;
    }
    if (ac_tensor_retain((AcTensor *)t)) {
        graph_fail(g, "%s: %s", op, ac_last_error());
        return -1;
    }
    id = buffer_new(g, t, t->requires_grad && !t->node ? AC_BUFFER_PARAMETER : AC_BUFFER_STATE,
                    (AcTensor *)t);
    if (id < 0) ac_tensor_free((AcTensor *)t);
    return id;
}

int graph_call(const char *op, GraphReplayFn fn, int n_in, int n_out, AcTensor **t,
               const double *attr, int n_attr)
{
    AcGraph *g = graph_recording;
    int32_t ids[GRAPH_MAX_TENSORS];
    GraphNode *nodes, *node;
    int i, rc;
    if (!g) return observed_run(op, fn, n_in, n_out, t, attr);   /* profiled, not recorded */
    for (i = 0; i < n_in && g->state == GRAPH_RECORDING; i++)
        ids[i] = t[i] ? buffer_of(g, op, t[i]) : -1;
    graph_recording = NULL;   /* the op's inner calls are part of it, not nodes */
    rc = observed_run(op, fn, n_in, n_out, t, attr);
    graph_recording = g;
    if (rc) {
        graph_fail(g, "%s failed while recording: %s", op, ac_last_error());
        return rc;
    }
    if (g->state != GRAPH_RECORDING) return AC_OK;
    for (i = n_in; i < n_in + n_out; i++)
        ids[i] = t[i] ? buffer_new(g, t[i], AC_BUFFER_TEMPORARY, NULL) : -1;
    nodes = grow(g->nodes, &g->cap_nodes, g->n_nodes, sizeof *nodes);
    if (!nodes) {
        graph_fail(g, "out of memory while recording %s", op);
        return AC_OK;
    }
    g->nodes = nodes;
    node = &nodes[g->n_nodes++];
    memset(node, 0, sizeof *node);
    node->op = op;
    node->replay = fn;
    node->n_in = n_in;
    node->n_out = n_out;
    node->n_attr = n_attr;
    memcpy(node->buf, ids, (size_t)(n_in + n_out) * sizeof *ids);
    if (n_attr) memcpy(node->attr, attr, (size_t)n_attr * sizeof *attr);
    return AC_OK;
}

AcTensor *graph_op(const char *op, GraphReplayFn fn, int n_in, const AcTensor *const *in,
                   const double *attr, int n_attr)
{
    AcTensor *t[GRAPH_MAX_TENSORS];
    memcpy(t, in, (size_t)n_in * sizeof *t);
    t[n_in] = NULL;
    return graph_call(op, fn, n_in, 1, t, attr, n_attr) ? NULL : t[n_in];
}

static int is_creation(const char *op)
{
    int i;
    for (i = 0; creation_ops[i]; i++)
        if (strcmp(op, creation_ops[i]) == 0) return 1;
    return 0;
}

void graph_note_tensor(const char *op, const AcTensor *t)
{
    AcGraph *g = graph_open;
    GraphBorn *born;
    int32_t i;
    if (!g || g->state != GRAPH_RECORDING) return;   /* the graph open is another thread's */
    for (i = 0; i < g->n_bufs; i++)
        if (g->bufs[i].traced == t) g->bufs[i].traced = NULL;   /* a new tensor at an old address */
    if (graph_recording && !is_creation(op)) {
        graph_fail(g, "%s cannot be recorded into a graph", op);
        return;
    }
    born = grow(g->born, &g->cap_born, g->n_born, sizeof *born);
    if (!born) {
        graph_fail(g, "out of memory while recording");
        return;
    }
    g->born = born;
    born[g->n_born].t = t;
    born[g->n_born++].inside_op = graph_recording == NULL;
}

void graph_note_write(const char *op, const AcTensor *t)
{
    AcGraph *g = graph_recording;
    const GraphBorn *born = born_find(g, t);
    if (buffer_find(g, t) >= 0 || !born || born->inside_op)
        graph_fail(g, "%s writes in place into a tensor %s the graph reads or did not make, which "
                   "a graph cannot replay", op, tensor_shape_str(t));
}

void graph_unsupported(const char *op)
{
    graph_fail(graph_recording, "%s cannot be recorded into a graph", op);
}

/* ---- the public API ------------------------------------------------------ */

AcGraph *ac_graph_begin(void)
{
    AcGraph *g;
    if (graph_open) return error_null(AC_ERR_STATE, "graph_begin: a graph is already recording on this thread");
    g = root_alloc(sizeof *g);
    if (!g) return NULL;
    memset(g, 0, sizeof *g);
    g->state = GRAPH_RECORDING;
    g->grad_enabled = ac_is_grad_enabled();
    graph_open = graph_recording = g;
    tensor_watch(1);
    ops_observed |= OBSERVE_GRAPH;
    return g;
}

static int graph_check(const char *op, const AcGraph *g)
{
    if (!g) return error_set(AC_ERR_ARG, "%s: graph is NULL", op);
    return AC_OK;
}

int ac_graph_input(AcGraph *g, AcTensor *t)
{
    int32_t *inputs, id;
    if (graph_check("graph_input", g)) return AC_ERR_ARG;
    if (!t) return error_set(AC_ERR_ARG, "graph_input: tensor is NULL");
    if (g != graph_open || g->state == GRAPH_READY)
        return error_set(AC_ERR_STATE, "graph_input: the graph is not recording on this thread");
    if (g->state == GRAPH_FAILED) return AC_OK;   /* ac_graph_end reports why */
    if (buffer_find(g, t) >= 0)
        return error_set(AC_ERR_STATE, "graph_input: tensor %s is already in the graph; declare each "
                         "input once, before the ops read it", tensor_shape_str(t));
    inputs = grow(g->inputs, &g->cap_inputs, g->n_inputs, sizeof *inputs);
    if (!inputs) return AC_ERR_MEMORY;
    g->inputs = inputs;
    id = buffer_new(g, t, AC_BUFFER_INPUT, NULL);
    if (id < 0) return error_set(AC_ERR_MEMORY, "graph_input: out of memory");
    inputs[g->n_inputs++] = id;
    return AC_OK;
}

int ac_graph_end(AcGraph *g, AcTensor *const *outputs, int n_outputs)
{
    int32_t i, id;
    if (graph_check("graph_end", g)) return AC_ERR_ARG;
    if (g != graph_open) return error_set(AC_ERR_STATE, "graph_end: the graph is not recording on this thread");
    graph_open = graph_recording = NULL;
    tensor_watch(-1);
    ops_observed &= ~OBSERVE_GRAPH;
    if (g->born) root_free(g->born, (size_t)g->cap_born * sizeof *g->born);
    g->born = NULL;
    g->cap_born = g->n_born = 0;
    if (n_outputs < 0 || (n_outputs > 0 && !outputs))
        graph_fail(g, "bad outputs (%d)", n_outputs);
    if (g->state == GRAPH_RECORDING && n_outputs > 0) {
        g->outputs = root_alloc((size_t)n_outputs * sizeof *g->outputs);
        if (!g->outputs) graph_fail(g, "out of memory");
        else g->n_outputs = n_outputs;
    }
    for (i = 0; i < n_outputs && g->state == GRAPH_RECORDING; i++) {
        id = outputs[i] ? buffer_find(g, outputs[i]) : -1;
        if (id < 0) {
            graph_fail(g, "output %d is not a tensor the graph made or read", i);
            break;
        }
        if (g->bufs[id].kind == AC_BUFFER_TEMPORARY) g->bufs[id].kind = AC_BUFFER_OUTPUT;
        g->outputs[i] = id;
    }
    if (g->state == GRAPH_RECORDING && g->n_bufs > 0) {
        g->run = root_alloc((size_t)g->n_bufs * sizeof *g->run);
        if (!g->run) graph_fail(g, "out of memory");
    }
    if (g->state == GRAPH_FAILED) return error_set(AC_ERR_STATE, "graph_end: %s", g->failure);
    g->state = GRAPH_READY;
    return AC_OK;
}

int ac_graph_free(AcGraph *g)
{
    int32_t i;
    if (graph_check("graph_free", g)) return AC_ERR_ARG;
    if (g->state == GRAPH_RUNNING) return error_set(AC_ERR_STATE, "graph_free: the graph is running");
    if (g == graph_open) {
        graph_open = graph_recording = NULL;
        tensor_watch(-1);
        ops_observed &= ~OBSERVE_GRAPH;
    }
    for (i = 0; i < g->n_bufs; i++)
        if (g->bufs[i].held) ac_tensor_free(g->bufs[i].held);
    if (g->nodes) root_free(g->nodes, (size_t)g->cap_nodes * sizeof *g->nodes);
    if (g->bufs) root_free(g->bufs, (size_t)g->cap_bufs * sizeof *g->bufs);
    if (g->born) root_free(g->born, (size_t)g->cap_born * sizeof *g->born);
    if (g->inputs) root_free(g->inputs, (size_t)g->cap_inputs * sizeof *g->inputs);
    if (g->outputs) root_free(g->outputs, (size_t)g->n_outputs * sizeof *g->outputs);
    if (g->run) root_free(g->run, (size_t)g->n_bufs * sizeof *g->run);
    if (g->bindings) root_free(g->bindings, (size_t)g->cap_bindings * sizeof *g->bindings);
    if (natives_free) natives_free(g);
    root_free(g, sizeof *g);
    return AC_OK;
}

int ac_graph_num_nodes(const AcGraph *g) { return graph_check("graph_num_nodes", g) ? AC_ERR_ARG : g->n_nodes; }

int ac_graph_num_buffers(const AcGraph *g) { return graph_check("graph_num_buffers", g) ? AC_ERR_ARG : g->n_bufs; }

const char *ac_graph_node_op(const AcGraph *g, int node)
{
    if (graph_check("graph_node_op", g)) return NULL;
    if (node < 0 || node >= g->n_nodes)
        return error_null(AC_ERR_INDEX, "graph_node_op: node %d is out of range [0, %d)", node, g->n_nodes);
    return g->nodes[node].op;
}

int ac_graph_buffer_kind(const AcGraph *g, int buffer)
{
    if (graph_check("graph_buffer_kind", g)) return AC_ERR_ARG;
    if (buffer < 0 || buffer >= g->n_bufs)
        return error_set(AC_ERR_INDEX, "graph_buffer_kind: buffer %d is out of range [0, %d)", buffer, g->n_bufs);
    return g->bufs[buffer].kind;
}
