/*
 * replay.c - the "replay" backend: run a recorded graph again from C.
 *
 * Each node's replay function calls its op on the tensors of this run, in the
 * recorded order, inside a scope opened for the call and restored before it
 * returns; the outputs are copied into tensors made in the caller's scope
 * first. The ops are the same code the recorded run used on the same kind of
 * buffers, so results are bit-identical to eager. Once the scope's arena
 * blocks are cached, a replay makes no heap allocation.
 *
 * Not here: recording (graph.c).
 */
#include "graph.h"

#include <string.h>

/* AC_OK when node has a scalar argument attr; op names the caller in errors. */
static int scalar_check(const char *op, const AcGraph *g, int node, int attr)
{
    if (!g) return error_set(AC_ERR_ARG, "%s: graph is NULL", op);
    if (node < 0 || node >= g->n_nodes)
        return error_set(AC_ERR_INDEX, "%s: node %d is out of range [0, %d)", op, node, g->n_nodes);
    if (attr < 0 || attr >= g->nodes[node].n_attr)
        return error_set(AC_ERR_INDEX, "%s: %s (node %d) has %d scalar arguments, not %d", op,
                         g->nodes[node].op, node, g->nodes[node].n_attr, attr + 1);
    return AC_OK;
}

int ac_graph_set_scalar(AcGraph *g, int node, int attr, double value)
{
    if (scalar_check("graph_set_scalar", g, node, attr)) return ac_last_error_code();
    g->nodes[node].attr[attr] = value;
    return AC_OK;
}

int ac_graph_bind_scalar(AcGraph *g, int node, int attr, const double *source)
{
    GraphBinding *b;
    int32_t i;
    if (scalar_check("graph_bind_scalar", g, node, attr)) return ac_last_error_code();
    if (!source) return error_set(AC_ERR_ARG, "graph_bind_scalar: source is NULL");
    for (i = 0; i < g->n_bindings; i++)
        if (g->bindings[i].node == node && g->bindings[i].attr == attr) break;
    if (i == g->cap_bindings) {
        int32_t cap = g->cap_bindings ? 2 * g->cap_bindings : 8;
        b = root_alloc((size_t)cap * sizeof *b);
        if (!b) return ac_last_error_code();
        if (g->n_bindings) memcpy(b, g->bindings, (size_t)g->n_bindings * sizeof *b);
        if (g->bindings) root_free(g->bindings, (size_t)g->cap_bindings * sizeof *b);
        g->bindings = b;
        g->cap_bindings = cap;
    }
    if (i == g->n_bindings) g->n_bindings++;
    b = &g->bindings[i];
    b->node = node;
    b->attr = attr;
    b->source = source;
    return AC_OK;
}

/* 1 when inputs have g's recorded dtypes and shapes, 0 when one differs (the
   error names it), < 0 for a NULL input; op names the caller in errors. */
static int inputs_match(const char *op, const AcGraph *g, AcTensor *const *inputs)
{
    int i;
    for (i = 0; i < g->n_inputs; i++) {
        const GraphBuffer *b = &g->bufs[g->inputs[i]];
        if (!inputs[i]) return error_set(AC_ERR_ARG, "%s: input %d is NULL", op, i);
        if (inputs[i]->dtype != b->dtype || inputs[i]->ndim != b->ndim ||
            memcmp(inputs[i]->shape, b->shape, (size_t)b->ndim * sizeof(int64_t)) != 0) {
            error_set(AC_ERR_SHAPE, "%s: input %d is %s %s; the graph was recorded for %s %s",
                      op, i, ac_dtype_name(inputs[i]->dtype), tensor_shape_str(inputs[i]),
                      ac_dtype_name(b->dtype), shape_str(b->shape, b->ndim));
            return 0;
        }
    }
    return 1;
}

int ac_graph_accepts(const AcGraph *g, AcTensor *const *inputs, int n_inputs)
{
    if (!g) return error_set(AC_ERR_ARG, "graph_accepts: graph is NULL");
    if (n_inputs != g->n_inputs)
        return error_set(AC_ERR_ARG, "graph_accepts: %d inputs given, the graph has %d", n_inputs, g->n_inputs);
    if (n_inputs && !inputs) return error_set(AC_ERR_ARG, "graph_accepts: inputs is NULL");
    return inputs_match("graph_accepts", g, inputs);
}

static int replay_check(const AcGraph *g, AcTensor *const *inputs, int n_inputs,
                        AcTensor **outputs, int n_outputs)
{
    int rc;
    if (!g) return error_set(AC_ERR_ARG, "graph_replay: graph is NULL");
    if (g->state != GRAPH_READY)
        return error_set(AC_ERR_STATE, "graph_replay: the graph is %s", g->state == GRAPH_RUNNING ? "running"
                         : g->state == GRAPH_FAILED ? "failed" : "still recording");
    if (graph_open) return error_set(AC_ERR_STATE, "graph_replay: a graph is recording on this thread");
    if (n_inputs != g->n_inputs || n_outputs != g->n_outputs)
        return error_set(AC_ERR_ARG, "graph_replay: %d inputs and %d outputs given, the graph has %d and %d",
                         n_inputs, n_outputs, g->n_inputs, g->n_outputs);
    if ((n_inputs && !inputs) || (n_outputs && !outputs))
        return error_set(AC_ERR_ARG, "graph_replay: %s is NULL", outputs ? "inputs" : "outputs");
    rc = inputs_match("graph_replay", g, inputs);
    return rc == 1 ? AC_OK : rc == 0 ? AC_ERR_SHAPE : rc;
}

/* Run the nodes on g->run, whose inputs, parameters and state are set. */
static int replay_nodes(AcGraph *g)
{
    AcTensor *t[GRAPH_MAX_TENSORS];
    int32_t k, i, next;
    for (k = 0; k < g->n_nodes; k++) {
        const GraphNode *node = &g->nodes[k];
        int n = node->n_in + node->n_out, ran = g->native_at ? native_run(g, k, &next) : 0;
        if (ran < 0) return ran;
        if (ran) {
            k = next - 1;
            continue;
        }
        for (i = 0; i < node->n_in; i++) t[i] = node->buf[i] < 0 ? NULL : g->run[node->buf[i]];
        for (; i < n; i++) t[i] = NULL;
        if (node->replay(t, node->attr)) return ac_last_error_code();
        for (i = node->n_in; i < n; i++)
            if (node->buf[i] >= 0) {
                if (!t[i]) return error_set(AC_ERR_STATE, "graph_replay: %s (node %d) gave no output %d",
                                            node->op, k, i - node->n_in);
                g->run[node->buf[i]] = t[i];
            }
    }
    return AC_OK;
}

/* Replay checked g on inputs. */
static int replay_run(AcGraph *g, AcTensor *const *inputs, AcTensor **outputs)
{
    const int32_t n_inputs = g->n_inputs, n_outputs = g->n_outputs;
    AcCheckpoint cp;
    int32_t i;
    int rc, previous_grad;
    for (i = 0; i < n_outputs; i++) {   /* in the caller's scope, before the graph's own opens */
        const GraphBuffer *b = &g->bufs[g->outputs[i]];
        outputs[i] = tensor_create("graph_replay", b->shape, b->ndim, b->dtype, NULL, 0, 0);
        if (!outputs[i]) {
            while (i-- > 0) ac_tensor_free(outputs[i]);
            return ac_last_error_code();
        }
    }
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) rc = ac_last_error_code();
    else {
        g->state = GRAPH_RUNNING;
        previous_grad = ac_set_grad_enabled(g->grad_enabled);
        for (i = 0; i < g->n_bindings; i++)
            g->nodes[g->bindings[i].node].attr[g->bindings[i].attr] = *g->bindings[i].source;
        for (i = 0; i < g->n_bufs; i++) g->run[i] = g->bufs[i].held;
        for (i = 0; i < n_inputs; i++) g->run[g->inputs[i]] = inputs[i];
        for (i = 0; i < n_outputs && g->native_at; i++)   /* native code writes them in place */
            if (g->bufs[g->outputs[i]].kind == AC_BUFFER_OUTPUT && !g->run[g->outputs[i]])
                g->run[g->outputs[i]] = outputs[i];
        rc = replay_nodes(g);
        for (i = 0; i < n_outputs && rc == AC_OK; i++) {
            const AcTensor *src = g->run[g->outputs[i]];
            if (src != outputs[i]) memcpy(outputs[i]->data, src->data, (size_t)src->size * elem_size(src));
        }
        ac_set_grad_enabled(previous_grad);
        ac_mem_restore(cp);
        g->state = GRAPH_READY;
    }
    if (rc)
        for (i = 0; i < n_outputs; i++) ac_tensor_free(outputs[i]);
    return rc;
}

int ac_graph_replay(AcGraph *g, AcTensor *const *inputs, int n_inputs, AcTensor **outputs,
                    int n_outputs)
{
    if (replay_check(g, inputs, n_inputs, outputs, n_outputs)) return ac_last_error_code();
    return replay_run(g, inputs, outputs);
}

int ac_graph_call(AcGraph *g, AcTensor *const *inputs, int n_inputs, AcTensor **outputs, int n_outputs)
{
    int32_t i;
    if (!g) return error_set(AC_ERR_ARG, "graph_call: graph is NULL");
    if (n_inputs != g->n_inputs || n_outputs != g->n_outputs)
        return error_set(AC_ERR_ARG, "graph_call: %d inputs and %d outputs given, the graph has %d and %d",
                         n_inputs, n_outputs, g->n_inputs, g->n_outputs);
    if ((n_inputs && !inputs) || (n_outputs && !outputs))
        return error_set(AC_ERR_ARG, "graph_call: %s is NULL", inputs ? "outputs" : "inputs");
    for (i = 0; i < n_inputs; i++)
        if (!inputs[i]) return error_set(AC_ERR_ARG, "graph_call: input %d is NULL", (int)i);
    if (g->state != GRAPH_READY || graph_open || ac_is_grad_enabled() != g->grad_enabled) return 0;
    for (i = 0; i < n_inputs; i++) {
        const GraphBuffer *b = &g->bufs[g->inputs[i]];
        if (inputs[i]->dtype != b->dtype || inputs[i]->ndim != b->ndim ||
            memcmp(inputs[i]->shape, b->shape, (size_t)b->ndim * sizeof(int64_t)) != 0)
            return 0;
    }
    return replay_run(g, inputs, outputs) ? ac_last_error_code() : 1;
}
