/*
 * autograd.c - the backward walk, setting grad mode, graph dumps and the
 * gradient check.
 *
 * An op records a node next to its output (op_output, ops/output.c).
 * ac_backward sorts the nodes behind the output with an explicit stack (no
 * recursion), then walks them in reverse: each node's backward turns its
 * pending output gradient into gradients for its inputs, which are summed into
 * the inputs' pending gradients or, for leaves, into their .grad; a leaf's grad
 * hook runs once the last node that uses the leaf has run. Everything backward
 * allocates besides leaf grads lives in a scope of its own, restored before
 * returning.
 *
 * Unless asked to retain it, the walk frees the graph as it goes, as PyTorch
 * does: once a node has run, it drops its inputs (tensor.c's node_free_graph),
 * so activations nothing else holds are freed then (root) or, once their own
 * node has run, given back to their scope (scoped). A freed node keeps its
 * output's values; backward through it again is an error.
 *
 * Not here: the ops' own backward functions (ops/), the nodes' making
 * (ops/output.c), grad mode's flag (tensor.c), tensor memory (tensor.c).
 */
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static AC_THREAD_LOCAL uint32_t visit_epoch;

int set_grad_enabled_replay(AcTensor **t, const double *attr)
{
    (void)t;
    ac_set_grad_enabled((int)attr[0]);
    return AC_OK;
}

int ac_set_grad_enabled(int enabled)
{
    int previous = !grad_disabled;
    if (graph_recording) {   /* recorded, and run by the replay function */
        graph_call("set_grad_enabled", set_grad_enabled_replay, 0, 0, NULL, (double[]){enabled}, 1);
        return previous;
    }
    grad_disabled = !enabled;
    return previous;
}

/* ---- topological order --------------------------------------------------- */

/* Nodes a sort keeps on the stack before it takes arena memory: a training
   step's tape is a handful of nodes, walked once per step. */
#define SMALL_TAPE 32

typedef struct {
    AcGradNode **nodes;
    int64_t n, cap;
} NodeList;

static int node_list_push(NodeList *list, AcGradNode *node)
{
    if (list->n == list->cap) {
        int64_t cap = list->cap * 2;
        AcGradNode **grown = arena_alloc((size_t)cap * sizeof *grown);
        if (!grown) return AC_ERR_MEMORY;
        if (list->n) memcpy(grown, list->nodes, (size_t)list->n * sizeof *grown);
        list->nodes = grown;
        list->cap = cap;
    }
    list->nodes[list->n++] = node;
    return AC_OK;
}

typedef struct {
    AcGradNode *node;
    int next_input;
} DfsEntry;

/* Post-order of the nodes behind root (inputs before users), into order.
   An explicit stack instead of recursion; runs inside a scope, so the lists
   grow from SMALL_TAPE entries on the stack into arena memory. */
static int topo_sort(AcGradNode *root, NodeList *order)
{
    DfsEntry small[SMALL_TAPE], *stack = small;
    int64_t depth = 0, cap = SMALL_TAPE;
    if (++visit_epoch == 0) visit_epoch = 1;
    root->visit = visit_epoch;
    for (;;) {
        if (depth == cap) {
            int64_t grown_cap = cap * 2;
            DfsEntry *grown = arena_alloc((size_t)grown_cap * sizeof *grown);
            if (!grown) return AC_ERR_MEMORY;
            if (depth) memcpy(grown, stack, (size_t)depth * sizeof *grown);
            stack = grown;
            cap = grown_cap;
        }
        if (root) {
            stack[depth].node = root;
            stack[depth++].next_input = 0;
            root = NULL;
        }
        if (depth == 0) return AC_OK;
        {
            DfsEntry *top = &stack[depth - 1];
            if (top->next_input < top->node->n_inputs) {
                AcTensor *in = top->node->inputs[top->next_input++];
                if (in->node && in->node->visit != visit_epoch) {
                    in->node->visit = visit_epoch;
                    root = in->node;   /* pushed on the next turn, after the capacity check */
                }
            } else {
                depth--;
                if (node_list_push(order, top->node)) return AC_ERR_MEMORY;
            }
        }
    }
}

/* ---- the backward walk --------------------------------------------------- */

static int leaf_accumulate(AcTensor *leaf, const AcTensor *g)
{
    const AcKernels *k = kernels_for(leaf);
    char a[32], b[32];
    if (g->device != leaf->device || g->device_index != leaf->device_index)
        return error_set(AC_ERR_DEVICE, "backward: a gradient on %s for a tensor on %s",
                         device_name(g->device, g->device_index, a, sizeof a),
                         device_name(leaf->device, leaf->device_index, b, sizeof b));
    if (!k->add_into || !k->copy) return kernel_missing("backward", leaf);
    if (leaf->grad) return k->add_into(leaf->grad->data, g->data, g->size);
    if (!leaf_grad_new(leaf)) return ac_last_error_code();
    if (k->copy(leaf->grad->data, g->data, (size_t)g->size * sizeof(float))) {
        int rc = ac_last_error_code();
        ac_tensor_free(leaf->grad);
        leaf->grad = NULL;
        return rc;
    }
    return AC_OK;
}

/* Add g to t's pending gradient (or its leaf grad). A pending gradient that a
   sum replaces is put in *replaced. */
static int accumulate(AcTensor *t, AcTensor *g, AcTensor **replaced)
{
    AcGradNode *node = t->node;
    AcTensor *sum;
    if (!node) return leaf_accumulate(t, g);
    if (!node->pending_grad) {
        node->pending_grad = g;
        return AC_OK;
    }
    sum = ac_add(node->pending_grad, g);
    if (!sum) return AC_ERR_MEMORY;
    *replaced = node->pending_grad;
    node->pending_grad = sum;
    return AC_OK;
}

/* Does the pending slot of one of node's first n inputs hold g? */
static int held_by_earlier_input(const AcGradNode *node, int n, const AcTensor *g)
{
    int i;
    for (i = 0; i < n; i++)
        if (node->inputs[i]->node && node->inputs[i]->node->pending_grad == g) return 1;
    return 0;
}

/* The gradients node's backward read or made (spent, repeats allowed): those
   backward made in its own scope that no pending slot holds any more go back
   at once, so the walk holds the gradients of its frontier, not all it made.
   Only the slots of node's inputs can have taken one, and a slot holds a
   tensor no other slot does. */
static void spent_grads_release(const AcGradNode *node, AcTensor *const *spent, int n_spent)
{
    const int depth = current_depth();
    int i, j;
    for (i = 0; i < n_spent; i++) {
        for (j = 0; j < i && spent[j] != spent[i]; j++) {
        }
        if (j == i && spent[i]->scope_depth == depth &&   /* not seen, backward's own */
            !held_by_earlier_input(node, node->n_inputs, spent[i]))
            ac_tensor_free(spent[i]);
    }
}

/* A backward that fails drops the grads it made for leaves that had none
   (leaf_grad_to_fill): they may be half written. */
static void new_leaf_grads_drop(AcGradNode *node, const int *had_grad)
{
    int i;
    for (i = 0; i < node->n_inputs; i++)
        if (node->inputs[i] && !node->inputs[i]->node && !had_grad[i]) ac_tensor_zero_grad(node->inputs[i]);
}

static int backward_node(AcGradNode *node)
{
    AcTensor *gin[AC_MAX_INPUTS] = {NULL};
    AcTensor *spent[1 + 3 * AC_MAX_INPUTS];   /* g; per input its gradient, a copy, a replaced sum */
    int had_grad[AC_MAX_INPUTS], i, n_spent = 0, rc;
    for (i = 0; i < node->n_inputs; i++) had_grad[i] = node->inputs[i] && node->inputs[i]->grad;
    rc = node->backward(node, node->pending_grad, gin);
    if (rc) {
        new_leaf_grads_drop(node, had_grad);
        return rc;
    }
    spent[n_spent++] = node->pending_grad;
    node->pending_grad = NULL;
    for (i = 0; i < node->n_inputs; i++) {
        AcTensor *replaced = NULL;
        if (!gin[i]) continue;
        spent[n_spent++] = gin[i];
        if (!input_needs_grad(node, i)) continue;
        if (!same_shape(gin[i], node->inputs[i]))
            return error_set(AC_ERR_STATE, "backward: %s gave a gradient of shape %s for input %d of shape %s",
                             node->op, tensor_shape_str(gin[i]), i, tensor_shape_str(node->inputs[i]));
        /* the same tensor for two inputs (add): the second slot gets its own copy */
        if (node->inputs[i]->node && !node->inputs[i]->node->pending_grad &&
            held_by_earlier_input(node, i, gin[i])) {
            gin[i] = ac_tensor_clone(gin[i]);
            if (!gin[i]) return AC_ERR_MEMORY;
            spent[n_spent++] = gin[i];
        }
        rc = accumulate(node->inputs[i], gin[i], &replaced);
        if (replaced) spent[n_spent++] = replaced;
        if (rc) return rc;
    }
    spent_grads_release(node, spent, n_spent);
    return AC_OK;
}

/* ---- gradient hooks ------------------------------------------------------- */

int ac_tensor_set_grad_hook(AcTensor *leaf, AcGradHook hook, void *user)
{
    if (!leaf) return error_set(AC_ERR_ARG, "set_grad_hook: tensor is NULL");
    if (hook && leaf->node)
        return error_set(AC_ERR_STATE, "set_grad_hook: tensor of shape %s is not a leaf (made by %s); "
                         "hooks run when a leaf's grad is final", tensor_shape_str(leaf), leaf->node->op);
    if (hook && !leaf->requires_grad)
        return error_set(AC_ERR_STATE, "set_grad_hook: tensor of shape %s does not require grad",
                         tensor_shape_str(leaf));
    leaf->grad_hook = hook;
    leaf->grad_hook_user = hook ? user : NULL;
    return AC_OK;
}

/* Count, for each hooked leaf, the edges into it from the nodes about to run: the
   leaf's gradient is final when the last of them has run. */
static void hook_uses_count(const NodeList *order)
{
    int64_t k;
    int i, pass;
    for (pass = 0; pass < 2; pass++)
        for (k = 0; k < order->n; k++)
            for (i = 0; i < order->nodes[k]->n_inputs; i++) {
                AcTensor *in = order->nodes[k]->inputs[i];
                if (in->node || !in->grad_hook) continue;
                in->grad_hook_uses = pass ? in->grad_hook_uses + 1 : 0;
            }
}

static int hook_run(AcTensor *leaf)
{
    int rc = leaf->grad_hook(leaf, leaf->grad_hook_user);
    if (rc >= 0) return AC_OK;
    return error_set(rc, "backward: the grad hook of leaf %s failed (%d)", tensor_shape_str(leaf), rc);
}

/* After node has run (or had no gradient to pass on): the hooks of the leaves it
   was the last user of. */
static int hooks_after_node(AcGradNode *node)
{
    int i, rc;
    for (i = 0; i < node->n_inputs; i++) {
        AcTensor *in = node->inputs[i];
        if (in->node || !in->grad_hook || --in->grad_hook_uses > 0) continue;
        rc = hook_run(in);
        if (rc) return rc;
    }
    return AC_OK;
}

/* Run the nodes, users before their inputs. When free_graph, each root output
   was retained by the caller so that no node is freed before it has run: drop
   that reference after freeing the node's graph. A scoped activation nothing
   else holds goes back once its own node has run, into backward's scope until
   that ends, so its memory holds the gradients that follow. After an error,
   the nodes not run yet keep their graph. */
static int backward_nodes(const NodeList *order, int free_graph)
{
    const int profiled = profiler_active;
    int64_t k;
    int rc = AC_OK;
    for (k = order->n - 1; k >= 0; k--) {
        AcGradNode *node = order->nodes[k];
        AcTensor *output = node->output;
        int at_root = output->scope_depth == 0;   /* a scoped output may be given back below */
        if (rc == AC_OK && node->pending_grad)
            rc = profiled ? profile_backward(node, backward_node) : backward_node(node);
        if (rc == AC_OK) rc = hooks_after_node(node);
        node->pending_grad = NULL;
        if (!free_graph) continue;
        if (rc == AC_OK) node_free_graph_walked(node);
        if (at_root) ac_tensor_free(output);
    }
    return rc;
}

static const char graph_freed[] =
    "backward: Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward through "
    "the graph a second time or if you need to access saved tensors after calling backward.";

static int run_backward(AcTensor *out, const AcTensor *grad, int retain_graph)
{
    AcGradNode *small[SMALL_TAPE];
    NodeList order = {small, 0, SMALL_TAPE};
    AcCheckpoint cp = ac_mem_checkpoint();
    int previous, rc = AC_OK;
    int64_t k;
    if (cp.depth < 0) return ac_last_error_code();
    previous = ac_set_grad_enabled(0);
    if (!grad) {
        grad = ac_full(out->shape, out->ndim, 1.0f);
        if (grad && out->device != AC_CPU) grad = ac_tensor_to(grad, out->device, out->device_index);
        if (!grad) rc = ac_last_error_code();
    }
    if (rc == AC_OK && !out->node) {
        rc = leaf_accumulate(out, grad);
        if (rc == AC_OK && out->grad_hook) rc = hook_run(out);
    } else if (rc == AC_OK) {
        rc = topo_sort(out->node, &order);
        for (k = 0; k < order.n && rc == AC_OK; k++)
            if (!order.nodes[k]->backward) rc = error_set(AC_ERR_STATE, "%s", graph_freed);
        if (rc == AC_OK) {
            if (!retain_graph)
                for (k = 0; k < order.n; k++)
                    if (order.nodes[k]->output->scope_depth == 0) ac_tensor_retain(order.nodes[k]->output);
            hook_uses_count(&order);
            out->node->pending_grad = (AcTensor *)grad;
            rc = backward_nodes(&order, !retain_graph);
        }
    }
    ac_set_grad_enabled(previous);
    ac_mem_restore(cp);
    return rc;
}

static int backward_check(const char *op, const AcTensor *out)
{
    if (!out) return error_set(AC_ERR_ARG, "%s: tensor is NULL", op);
    if (!out->requires_grad)
        return error_set(AC_ERR_STATE, "%s: tensor of shape %s does not require grad and has no graph",
                         op, tensor_shape_str(out));
    return AC_OK;
}

int ac_backward(AcTensor *loss) { return ac_backward_ex(loss, NULL, 0); }

int ac_backward_with(AcTensor *out, const AcTensor *grad)
{
    if (backward_check("backward", out)) return ac_last_error_code();
    if (!grad) return error_set(AC_ERR_ARG, "backward: gradient is NULL");
    return ac_backward_ex(out, grad, 0);
}

static int backward_replay(AcTensor **t, const double *attr)
{
    return ac_backward_ex(t[0], t[1], (int)attr[0]);
}

int ac_backward_ex(AcTensor *out, const AcTensor *grad, int retain_graph)
{
    if (ops_observed) return graph_call("backward", backward_replay, 2, 0, (AcTensor *[]){out, (AcTensor *)grad}, (double[]){retain_graph}, 1);
    if (backward_check("backward", out)) return ac_last_error_code();
    if (retain_graph != 0 && retain_graph != 1)
        return error_set(AC_ERR_ARG, "backward: retain_graph %d must be 0 or 1", retain_graph);
    if (!grad && out->size != 1)
        return error_set(AC_ERR_SHAPE, "backward: loss has shape %s; a non-scalar output needs an "
                         "explicit gradient (backward_with)", tensor_shape_str(out));
    if (grad && !same_shape(out, grad))
        return error_set(AC_ERR_SHAPE, "backward: gradient of shape %s does not match output %s",
                         tensor_shape_str(grad), tensor_shape_str(out));
    return run_backward(out, grad, retain_graph);
}

/* ---- graph dumps --------------------------------------------------------- */

typedef struct {
    char *buf;
    int64_t cap, len;
} Writer;

static void write_text(Writer *w, const char *fmt, ...)
{
    va_list args;
    int64_t room = w->len < w->cap ? w->cap - w->len : 0;
    int n;
    va_start(args, fmt);
    n = vsnprintf(room ? w->buf + w->len : NULL, (size_t)room, fmt, args);
    va_end(args);
    if (n > 0) w->len += n;
}

/* Sort the graph behind t into order (arena memory: call inside a scope) and
   number its nodes by their position in node->visit. Return 0 when t is a leaf. */
static int graph_order(const AcTensor *t, NodeList *order)
{
    int64_t k;
    if (!t->node) return 0;
    if (topo_sort(t->node, order)) return -1;
    for (k = 0; k < order->n; k++) order->nodes[k]->visit = (uint32_t)k;
    return 1;
}

/* Node ids were written over visit marks; clear them so no later epoch collides. */
static void graph_order_done(NodeList *order)
{
    int64_t k;
    for (k = 0; k < order->n; k++) order->nodes[k]->visit = 0;
}

static int64_t graph_write(const AcTensor *t, char *buf, int64_t cap, int dot, const char *op)
{
    AcGradNode *small[SMALL_TAPE];
    NodeList order = {small, 0, SMALL_TAPE};
    Writer w;
    AcCheckpoint cp;
    int64_t k;
    int i, sorted;
    if (!t) return error_set(AC_ERR_ARG, "%s: tensor is NULL", op);
    if (cap < 0 || (cap > 0 && !buf)) return error_set(AC_ERR_ARG, "%s: bad buffer (cap %lld)", op, (long long)cap);
    w.buf = buf;
    w.cap = cap;
    w.len = 0;
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return ac_last_error_code();
    sorted = graph_order(t, &order);
    if (sorted < 0) {
        ac_mem_restore(cp);
        return AC_ERR_MEMORY;
    }
    if (dot) write_text(&w, "digraph aicraft {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n");
    if (!sorted) {
        if (dot) write_text(&w, "  leaf [label=\"leaf %s\"];\n", tensor_shape_str(t));
        else write_text(&w, "leaf %s%s\n", tensor_shape_str(t), t->requires_grad ? " requires_grad" : "");
    }
    for (k = 0; k < order.n; k++) {
        AcGradNode *node = order.nodes[k];
        if (dot) write_text(&w, "  n%lld [label=\"%s %s\"];\n", (long long)k, node->op,
                            tensor_shape_str(node->output));
        else write_text(&w, "#%lld %s(", (long long)k, node->op);
        for (i = 0; i < node->n_inputs; i++) {
            AcTensor *in = node->inputs[i];
            if (dot && in->node)
                write_text(&w, "  n%lld -> n%lld;\n", (long long)in->node->visit, (long long)k);
            else if (dot)
                write_text(&w, "  l%lld_%d [label=\"leaf %s\", style=%s];\n  l%lld_%d -> n%lld;\n",
                           (long long)k, i, tensor_shape_str(in), in->requires_grad ? "bold" : "dashed",
                           (long long)k, i, (long long)k);
            else if (in->node)
                write_text(&w, "%s#%lld", i ? ", " : "", (long long)in->node->visit);
            else
                write_text(&w, "%sleaf %s", i ? ", " : "", tensor_shape_str(in));
        }
        if (!dot) write_text(&w, ") -> %s\n", tensor_shape_str(node->output));
    }
    if (dot) write_text(&w, "}\n");
    graph_order_done(&order);
    ac_mem_restore(cp);
    if (cap > 0) buf[w.len < cap ? w.len : cap - 1] = '\0';
    return w.len;
}

int64_t ac_graph_text(const AcTensor *t, char *buf, int64_t cap) { return graph_write(t, buf, cap, 0, "graph_text"); }

int64_t ac_graph_dot(const AcTensor *t, char *buf, int64_t cap) { return graph_write(t, buf, cap, 1, "graph_dot"); }

int ac_print_graph(const AcTensor *t, FILE *out)
{
    int64_t len;
    char *text;
    if (!out) return error_set(AC_ERR_ARG, "print_graph: out is NULL");
    len = ac_graph_text(t, NULL, 0);
    if (len < 0) return (int)len;
    text = malloc((size_t)len + 1);
    if (!text) return error_set(AC_ERR_MEMORY, "print_graph: out of memory");
    count_heap_allocation();
    ac_graph_text(t, text, len + 1);
    if (fputs(text, out) < 0) {
        free(text);
        return error_set(AC_ERR_IO, "print_graph: write failed");
    }
    free(text);
    return AC_OK;
}

/* ---- gradient check ------------------------------------------------------ */

/* sum(fn(inputs) * w) in double; NAN if fn fails. Runs in a scope of its own. */
static double weighted_output(AcGradcheckFn fn, AcTensor *const *inputs, int n, void *user,
                              const float *w, int64_t w_size)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *out;
    double total = NAN;
    int64_t i;
    if (cp.depth < 0) return NAN;
    out = fn(inputs, n, user);
    if (out && out->size == w_size)
        for (total = 0.0, i = 0; i < w_size; i++) total += (double)out->data[i] * w[i];
    ac_mem_restore(cp);
    return total;
}

static int gradient_check_scoped(AcGradcheckFn fn, AcTensor *const *inputs, int n, void *user,
                                 float eps, float atol, float rtol, float *max_err)
{
    AcTensor *out, *weights, *loss, *saved[64];
    float worst = 0.0f;
    int i, rc = AC_OK;
    uint32_t lcg = 12345u;
    int64_t j;
    ac_set_grad_enabled(1);
    out = fn(inputs, n, user);
    if (!out) return ac_last_error_code() ? ac_last_error_code() : error_set(AC_ERR_ARG, "gradient_check: fn returned NULL");
    if (!out->requires_grad)
        return error_set(AC_ERR_ARG, "gradient_check: the output does not depend on an input that requires grad");
    weights = tensor_alloc_like("gradient_check", out);
    if (!weights) return AC_ERR_MEMORY;
    for (j = 0; j < weights->size; j++) {   /* fixed weights in [0.5, 1.5): a private generator */
        lcg = lcg * 1664525u + 1013904223u;
        weights->data[j] = 0.5f + (float)(lcg >> 8) / 16777216.0f;
    }
    loss = ac_mul(out, weights);
    loss = loss ? ac_sum(loss, NULL, 0, 0) : NULL;
    if (!loss) return ac_last_error_code();
    for (i = 0; i < n; i++) {
        saved[i] = inputs[i]->grad;
        inputs[i]->grad = NULL;
    }
    rc = ac_backward(loss);
    ac_set_grad_enabled(0);
    for (i = 0; i < n && rc == AC_OK; i++) {
        AcTensor *x = inputs[i];
        for (j = 0; j < x->size && x->requires_grad && rc == AC_OK; j++) {
            float keep = x->data[j], analytic = x->grad ? x->grad->data[j] : 0.0f, err;
            double plus, minus, numeric;
            x->data[j] = keep + eps;
            plus = weighted_output(fn, inputs, n, user, weights->data, weights->size);
            x->data[j] = keep - eps;
            minus = weighted_output(fn, inputs, n, user, weights->data, weights->size);
            x->data[j] = keep;
            numeric = (plus - minus) / (2.0 * (double)eps);
            err = (float)fabs(numeric - analytic);
            if (!(err <= worst)) worst = err;
            if (!(err <= atol + rtol * fabs(numeric)))
                rc = error_set(AC_ERR_GRADCHECK,
                               "gradient_check: input %d %s element %lld: analytic %g, numeric %g",
                               i, tensor_shape_str(x), (long long)j, analytic, numeric);
        }
    }
    for (i = 0; i < n; i++) {
        ac_tensor_zero_grad(inputs[i]);
        inputs[i]->grad = saved[i];
    }
    if (max_err) *max_err = worst;
    return rc;
}

int ac_gradient_check(AcGradcheckFn fn, AcTensor *const *inputs, int n_inputs, void *user,
                      float eps, float atol, float rtol, float *max_err)
{
    AcCheckpoint cp;
    int i, rc, previous;
    if (!fn || !inputs) return error_set(AC_ERR_ARG, "gradient_check: %s is NULL", fn ? "inputs" : "fn");
    if (n_inputs < 1 || n_inputs > 64)
        return error_set(AC_ERR_ARG, "gradient_check: n_inputs %d is out of range [1, 64]", n_inputs);
    if (!(eps > 0.0f) || !(atol >= 0.0f) || !(rtol >= 0.0f))
        return error_set(AC_ERR_ARG, "gradient_check: eps %g must be > 0, atol %g and rtol %g >= 0", eps, atol, rtol);
    for (i = 0; i < n_inputs; i++) {
        if (!inputs[i]) return error_set(AC_ERR_ARG, "gradient_check: input %d is NULL", i);
        if (inputs[i]->node)
            return error_set(AC_ERR_ARG, "gradient_check: input %d is not a leaf", i);
    }
    if (cpu_only("gradient_check", (const AcTensor *const *)inputs, n_inputs)) return AC_ERR_DEVICE;
    previous = ac_is_grad_enabled();
    cp = ac_mem_checkpoint();
    if (cp.depth < 0) return ac_last_error_code();
    rc = gradient_check_scoped(fn, inputs, n_inputs, user, eps, atol, rtol, max_err);
    ac_mem_restore(cp);
    ac_set_grad_enabled(previous);
    return rc;
}
