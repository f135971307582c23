/*
 * tensor.c - making and freeing tensors, copies, views, grads, and the shape
 * and broadcasting helpers.
 *
 * A tensor is one allocation: a box holding the AcTensor, its graph node and
 * the node's context when an op records one, then the data (64-byte aligned).
 * Root tensors are reference counted; the last ac_tensor_free frees the box and
 * drops what it held (node inputs, view base, grad) without recursion, so a
 * chain of 100,000 ops is freed in constant stack. Scoped tensors live in the
 * arena until their scope ends; one that nothing else refers to (no node
 * input, view or retain) gives its box back to the scope when freed earlier.
 * Graph nodes count their uses of scoped inputs, so one freed while a node
 * used it goes back too once backward has freed that node's graph.
 *
 * A root parameter whose grad is dropped (zero_grad) while nothing else refers
 * to the grad keeps it as a spare, counted in spare_grad_bytes instead of
 * bytes_in_use; its next backward fills the spare instead of allocating, so
 * a training loop that drops grads each step makes no malloc once warm.
 *
 * A root leaf given a grad by ac_tensor_set_grad (a data-parallel bucket's
 * view) keeps it as its grad's home: zero_grad drops the grad, and the next
 * backward writes into the home again instead of into a grad of its own.
 *
 * An external tensor (ac_tensor_from_external) is a root box alone: its data
 * belongs to someone else, handed back through its release callback when the
 * box is freed.
 *
 * Not here: the ops (ops/), the graph walk (autograd.c), the factories and the
 * per-thread random generator (creation.c).
 */
#include "graph.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    AcTensor tensor;       /* first: an AcTensor* is a TensorBox* */
    size_t alloc_bytes;    /* what root_free or arena_release must give back */
    uint32_t scope_serial; /* scoped: the scope it was made in */
    int32_t referenced;    /* scoped: a view or a retain refers to it: it lives to its scope's end */
    int32_t node_uses;     /* scoped: graph nodes that hold it as an input */
    int32_t dropped;       /* scoped: its owner called ac_tensor_free */
    AcTensor *next_dead;   /* scoped: the next on a chain of tensors to give back */
    AcTensor *spare_grad;  /* root: a dropped grad kept for the next backward, or NULL */
    AcTensor *grad_home;   /* root leaf: the grad ac_tensor_set_grad gave it, or NULL */
    AcReleaseFn release;   /* root, external data: hands the data back to its owner */
    void *release_ctx;
} TensorBox;

static size_t round_up(size_t n) { return (n + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1); }

/* ---- checks -------------------------------------------------------------- */

int shape_check(const char *op, const int64_t *shape, int ndim, int64_t *size)
{
    int64_t n = 1;
    int i, empty = 0;
    if (ndim < 0 || ndim > AC_MAX_DIMS)
        return error_set(AC_ERR_ARG, "%s: ndim %d is out of range [0, %d]", op, ndim, AC_MAX_DIMS);
    if (ndim > 0 && !shape) return error_set(AC_ERR_ARG, "%s: shape is NULL", op);
    for (i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return error_set(AC_ERR_ARG, "%s: negative dimension %lld in shape %s", op,
                             (long long)shape[i], shape_str(shape, ndim));
        if (shape[i] == 0) {   /* no elements, but the other dims' product must fit all the same: */
            empty = 1;         /* (0, 2^32, 2^32) would flatten to (0, 0) */
            continue;
        }
        /* divide only when the product might overflow: this runs for every op */
        if ((n >= ((int64_t)1 << 31) || shape[i] >= ((int64_t)1 << 31)) && n > (INT64_MAX / 8) / shape[i])
            return error_set(AC_ERR_MEMORY, "%s: shape %s has too many elements", op,
                             shape_str(shape, ndim));
        n *= shape[i];
    }
    if (n > INT64_MAX / 8)
        return error_set(AC_ERR_MEMORY, "%s: shape %s has too many elements", op, shape_str(shape, ndim));
    if (size) *size = empty ? 0 : n;
    return AC_OK;
}

int tensor_check_any(const char *op, const AcTensor *t, const char *what)
{
    if (!t) return error_set(AC_ERR_ARG, "%s: %s is NULL", op, what);
    return AC_OK;
}

int tensor_check(const char *op, const AcTensor *t, const char *what)
{
    if (!t) return error_set(AC_ERR_ARG, "%s: %s is NULL", op, what);
    if (t->dtype != AC_FLOAT32)
        return error_set(AC_ERR_DTYPE, "%s: %s is %s; this op computes in float32 (convert it first)",
                         op, what, ac_dtype_name(t->dtype));
    return AC_OK;
}

int index_check(const char *op, const AcTensor *t, const char *what)
{
    if (t && t->dtype != AC_INT64 && t->dtype != AC_FLOAT32)
        return error_set(AC_ERR_DTYPE, "%s: %s is %s; indices must be int64", op, what,
                         ac_dtype_name(t->dtype));
    return AC_OK;
}

/* ---- dtypes -------------------------------------------------------------- */

int64_t ac_dtype_size(int dtype)
{
    switch (dtype) {
    case AC_FLOAT32: return 4;
    case AC_INT64: return 8;
    case AC_BOOL: return 1;
    case AC_UINT8: return 1;
    case AC_INT8: return 1;
    default: return error_set(AC_ERR_DTYPE, "dtype_size: unknown dtype %d", dtype);
    }
}

const char *ac_dtype_name(int dtype)
{
    switch (dtype) {
    case AC_FLOAT32: return "float32";
    case AC_INT64: return "int64";
    case AC_BOOL: return "bool";
    case AC_UINT8: return "uint8";
    case AC_INT8: return "int8";
    default: return "unknown";
    }
}

size_t elem_size(const AcTensor *t) { return (size_t)ac_dtype_size(t->dtype); }

double elem_get(const AcTensor *t, int64_t i)
{
    switch (t->dtype) {
    case AC_INT64: return (double)data_i64(t)[i];
    case AC_BOOL:
    case AC_UINT8: return (double)data_u8(t)[i];
    case AC_INT8: return (double)(int8_t)data_u8(t)[i];
    default: return (double)t->data[i];
    }
}

/* Truncated toward zero; NaN gives 0 and values past int64's range clamp, never trap. */
static int64_t to_int64(double v)
{
    return v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
}

void elem_set(void *out, int dtype, int64_t i, double v)
{
    switch (dtype) {
    case AC_FLOAT32: ((float *)out)[i] = (float)v; break;
    case AC_INT64: ((int64_t *)out)[i] = to_int64(v); break;
    case AC_BOOL: ((uint8_t *)out)[i] = v != 0.0; break;
    default: ((uint8_t *)out)[i] = (uint8_t)to_int64(v); break;   /* uint8; int8 as its two's complement */
    }
}

int dim_normalize(const char *op, int dim, int ndim)
{
    int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
    if (dim < lo || dim > hi) {
        error_set(AC_ERR_INDEX, "%s: dim %d is out of range [%d, %d] for a %d-d tensor", op, dim,
                  lo, hi, ndim);
        return -1;
    }
    return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}

int same_shape(const AcTensor *a, const AcTensor *b)
{
    int i;
    if (a->ndim != b->ndim) return 0;
    for (i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* ---- making and freeing -------------------------------------------------- */

/* The tensor in a new, zeroed box: its shape, size and dtype, on the CPU. */
static AcTensor *box_header(TensorBox *box, const int64_t *shape, int ndim, int64_t size, int dtype)
{
    AcTensor *t = &box->tensor;
    if (ndim > 0) memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
    t->ndim = ndim;
    t->size = size;
    t->dtype = dtype;
    return t;
}

const char *device_name(int device, int index, char *buf, size_t n)
{
    if (device == AC_CPU)
        snprintf(buf, n, "cpu");
    else if (device == AC_CUDA)
        snprintf(buf, n, "cuda:%d", index);
    else
        snprintf(buf, n, "device %d", device);
    return buf;
}

AcTensor *tensor_create(const char *op, const int64_t *shape, int ndim, int dtype,
                        const AcTensor *share, size_t node_bytes, int at_root)
{
    return tensor_create_on(op, shape, ndim, dtype, share, node_bytes, at_root, AC_CPU, 0);
}

AcTensor *tensor_create_on(const char *op, const int64_t *shape, int ndim, int dtype,
                           const AcTensor *share, size_t node_bytes, int at_root, int device,
                           int device_index)
{
    int64_t size, item;
    size_t head, data_bytes, total;
    uint32_t serial = 0;
    int depth = 0, scoped;
    void *device_data = NULL;   /* a CUDA tensor's data, in device memory */
    TensorBox *box;
    AcTensor *t;
    if (shape_check(op, shape, ndim, &size)) return NULL;
    if (share) {
        dtype = share->dtype;
        device = share->device;
        device_index = share->device_index;
    }
    if ((item = ac_dtype_size(dtype)) < 0) return NULL;
    if (device != AC_CPU && !share) {
        char name[32];
        if (device != AC_CUDA)
            return error_null(AC_ERR_DEVICE, "%s: %s is not a device", op,
                              device_name(device, device_index, name, sizeof name));
        device_data = device_alloc(op, device_index, (size_t)size * (size_t)item,
                                   at_root || current_scope(&serial) == 0);
        if (!device_data) return NULL;
    }
    head = round_up(sizeof(TensorBox));
    node_bytes = round_up(node_bytes);
    data_bytes = share || device_data ? 0 : round_up((size_t)size * (size_t)item);
    total = head + node_bytes + data_bytes;
    box = at_root ? root_alloc(total) : arena_alloc_tensor(total, node_bytes != 0, &depth, &serial);
    scoped = depth > 0;
    if (!box) {
        if (device_data && !scoped)
            device_free_root(device_index, device_data, (size_t)size * (size_t)item);
        return NULL;
    }
    memset(box, 0, head + node_bytes);
    box->alloc_bytes = total;
    t = box_header(box, shape, ndim, size, dtype);
    t->device = device;
    t->device_index = device_index;
    t->scope_depth = depth;
    t->refcount = scoped ? 0 : 1;
    box->scope_serial = serial;
    if (node_bytes) t->node = (AcGradNode *)((char *)box + head);
    if (share) {
        AcTensor *owner = share->base ? share->base : (AcTensor *)share;
        t->data = share->data;
        t->base = owner;
        if (scope_hold(owner)) {
            if (!scoped) root_free(box, total);
            return NULL;
        }
    } else if (device_data) {
        t->data = device_data;
    } else {
        t->data = (float *)((char *)box + head + node_bytes);
    }
    if (!scoped) {   /* arena_alloc_tensor counted a scoped one */
        counters_tensor(1, 0);
        if (node_bytes) counters_node(1, 0);
    }
    if (__atomic_load_n(&graphs_open, __ATOMIC_RELAXED) && graph_open) graph_note_tensor(op, t);
    return t;
}

AcTensor *tensor_alloc(const char *op, const int64_t *shape, int ndim)
{
    return tensor_create(op, shape, ndim, AC_FLOAT32, NULL, 0, 0);
}

AcTensor *tensor_alloc_like(const char *op, const AcTensor *t)
{
    return tensor_create_on(op, t->shape, t->ndim, AC_FLOAT32, NULL, 0, 0, t->device, t->device_index);
}

int ac_tensor_retain(AcTensor *t)
{
    if (!t) return error_set(AC_ERR_ARG, "tensor_retain: tensor is NULL");
    if (t->scope_depth == 0)
        __atomic_add_fetch(&t->refcount, 1, __ATOMIC_RELAXED);
    else
        __atomic_store_n(&((TensorBox *)t)->referenced, 1, __ATOMIC_RELAXED);
    return AC_OK;
}

/* Chain scoped t on *dead when nothing refers to it any more. */
static void chain_if_dead(AcTensor *t, AcTensor **dead)
{
    TensorBox *box = (TensorBox *)t;
    if (box->dropped && box->node_uses == 0 && !__atomic_load_n(&box->referenced, __ATOMIC_RELAXED)) {
        box->next_dead = *dead;
        *dead = t;
    }
}

int node_hold(AcTensor *t)
{
    if (t->scope_depth == 0) return scope_hold(t);
    ((TensorBox *)t)->node_uses++;
    return AC_OK;
}

void node_free_graph(AcGradNode *node, AcTensor **dead)
{
    int i;
    for (i = 0; i < node->n_inputs; i++) {
        AcTensor *in = node->inputs[i];
        node->inputs[i] = NULL;
        if (node->output->scope_depth == 0) {
            ac_tensor_free(in);   /* a root node owns a reference of each input */
        } else if (in->scope_depth != 0) {
            ((TensorBox *)in)->node_uses--;
            chain_if_dead(in, dead);
        }   /* a scoped node's root input is held by its scope, which drops it */
    }
    node->n_inputs = 0;
    node->backward = NULL;
}

/* Give back the chained tensors. In backward's walk, one whose node has not
   run yet is left to the walk, which gives it back after running the node
   (the node lives in its box); elsewhere nothing can reach its graph any more,
   so that goes too. A box stays to its scope's end when the scope is not the
   calling thread's or the box is small and not on top. */
static void dead_tensors_release(AcTensor *dead, int walking)
{
    while (dead) {
        AcTensor *t = dead;
        TensorBox *box = (TensorBox *)t;
        dead = box->next_dead;
        if (t->node && t->node->backward && walking) continue;
        if (t->node) node_free_graph(t->node, &dead);
        arena_release(box, box->alloc_bytes, box->scope_serial, 1, t->node != NULL);
    }
}

void node_free_graph_walked(AcGradNode *node)
{
    AcTensor *dead = NULL, *out = node->output;
    node_free_graph(node, &dead);
    if (out->scope_depth != 0) chain_if_dead(out, &dead);
    dead_tensors_release(dead, 1);
}

static void scoped_free(AcTensor *t)
{
    AcTensor *dead = NULL;
    ((TensorBox *)t)->dropped = 1;
    chain_if_dead(t, &dead);
    dead_tensors_release(dead, 0);
}

/* Drop one reference; report whether it was the last. */
static int drop_reference(AcTensor *t)
{
    return t && t->scope_depth == 0 &&
           __atomic_sub_fetch(&t->refcount, 1, __ATOMIC_ACQ_REL) == 0;
}

typedef struct {
    AcTensor *local[64];
    AcTensor **items;
    size_t n, cap;
} FreeStack;

static int free_stack_push(FreeStack *s, AcTensor *t)
{
    if (s->n == s->cap) {
        size_t cap = s->cap * 2;
        AcTensor **grown = s->items == s->local ? malloc(cap * sizeof *grown)
                                                : realloc(s->items, cap * sizeof *grown);
        if (!grown) return AC_ERR_MEMORY;   /* the tensor leaks; nothing is corrupted */
        count_heap_allocation();
        if (s->items == s->local) memcpy(grown, s->local, sizeof s->local);
        s->items = grown;
        s->cap = cap;
    }
    s->items[s->n++] = t;
    return AC_OK;
}

int ac_tensor_free(AcTensor *t)
{
    FreeStack s;
    if (t && t->scope_depth != 0) {
        scoped_free(t);
        return AC_OK;
    }
    if (!drop_reference(t)) return AC_OK;
    s.items = s.local;
    s.n = 0;
    s.cap = sizeof s.local / sizeof s.local[0];
    free_stack_push(&s, t);
    while (s.n > 0) {
        AcTensor *dead = s.items[--s.n];
        AcTensor *held[AC_MAX_INPUTS + 3];
        int n_held = 0, i;
        TensorBox *box = (TensorBox *)dead;
        if (dead->node) {
            for (i = 0; i < dead->node->n_inputs; i++) held[n_held++] = dead->node->inputs[i];
            counters_node(-1, 0);
        }
        held[n_held++] = dead->base;
        held[n_held++] = dead->grad;
        held[n_held++] = box->grad_home;
        counters_tensor(-1, 0);
        if (box->spare_grad)
            root_free_set_aside(box->spare_grad, ((TensorBox *)box->spare_grad)->alloc_bytes);
        if (box->release) box->release(box->release_ctx);
        else if (dead->device == AC_CUDA && !dead->base)
            device_free_root(dead->device_index, dead->data, (size_t)dead->size * elem_size(dead));
        root_free(box, box->alloc_bytes);
        for (i = 0; i < n_held; i++)
            if (drop_reference(held[i])) free_stack_push(&s, held[i]);
    }
    if (s.items != s.local) free(s.items);
    return AC_OK;
}

/* ---- creation ------------------------------------------------------------ */

AcTensor *ac_tensor_from_external(void *data, const int64_t *shape, int ndim, int dtype,
                                  AcReleaseFn release, void *ctx)
{
    const char *op = "tensor_from_external";
    size_t head = round_up(sizeof(TensorBox));
    int64_t size, item;
    TensorBox *box;
    AcTensor *t;
    if (shape_check(op, shape, ndim, &size)) return NULL;
    item = ac_dtype_size(dtype);
    if (item < 0) return error_null(AC_ERR_DTYPE, "%s: unknown dtype %d", op, dtype);
    if (!data && size > 0) return error_null(AC_ERR_ARG, "%s: data is NULL", op);
    if ((uintptr_t)data % (uintptr_t)item)
        return error_null(AC_ERR_ARG, "%s: data %p is not aligned to its %lld-byte %s elements", op,
                          data, (long long)item, ac_dtype_name(dtype));
    /* AC_ALIGN spare bytes: a valid data pointer when an empty tensor came without one */
    box = root_alloc(head + AC_ALIGN);
    if (!box) return NULL;
    memset(box, 0, head);
    box->alloc_bytes = head + AC_ALIGN;
    box->release = release;
    box->release_ctx = ctx;
    t = box_header(box, shape, ndim, size, dtype);
    t->refcount = 1;
    t->data = data ? data : (float *)(void *)((char *)box + head);
    counters_tensor(1, 0);
    return t;
}

/* ---- copies, views, grads ------------------------------------------------ */

static int clone_backward(AcGradNode *node, const AcTensor *gout, AcTensor **gin)
{
    (void)node;
    gin[0] = (AcTensor *)gout;
    return AC_OK;
}

int clone_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tensor_clone(t[0]));
}

AcTensor *ac_tensor_clone(const AcTensor *t)
{
    if (ops_observed) return graph_op("clone", clone_replay, 1, (const AcTensor *[]){t}, NULL, 0);
    const AcKernels *k;
    AcTensor *out;
    if (tensor_check_any("clone", t, "tensor")) return NULL;
    k = kernels_for(t);
    if (!k->copy) {
        kernel_missing("clone", t);
        return NULL;
    }
    out = op_output_as("clone", t->dtype, t->shape, t->ndim, &t, 1, clone_backward, 0);
    if (out && k->copy(out->data, t->data, (size_t)t->size * elem_size(t))) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

/* Convert n elements from src's dtype to dst's. The conversions to float32 that
   every input pipeline makes (uint8 pixels, int64 and bool) are plain loops the
   compiler vectorises; the rest go through elem_set one element at a time. */
static void convert(const AcTensor *src, AcTensor *dst, int64_t n)
{
    float *restrict out = dst->data;
    int64_t i;
    if (src->dtype == dst->dtype) {
        if (dst->data != src->data) memmove(dst->data, src->data, (size_t)n * elem_size(src));
    } else if (dst->dtype == AC_FLOAT32 && src->dtype == AC_INT64) {
        const int64_t *restrict in = data_i64(src);
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else if (dst->dtype == AC_FLOAT32 && src->dtype == AC_INT8) {
        const int8_t *restrict in = (const int8_t *)src->data;
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else if (dst->dtype == AC_FLOAT32) {   /* bool or uint8 */
        const uint8_t *restrict in = data_u8(src);
        for (i = 0; i < n; i++) out[i] = (float)in[i];
    } else {
        for (i = 0; i < n; i++) elem_set(dst->data, dst->dtype, i, elem_get(src, i));
    }
}

AcTensor *ac_to_dtype(const AcTensor *a, int dtype)
{
    AcTensor *out;
    if (tensor_check_any("to_dtype", a, "tensor") || ac_dtype_size(dtype) < 0 ||
        cpu_only("to_dtype", &a, 1))
        return NULL;
    if (a->dtype == AC_FLOAT32 && dtype == AC_FLOAT32) return ac_tensor_clone(a);
    out = tensor_create("to_dtype", a->shape, a->ndim, dtype, NULL, 0, 0);
    if (out) convert(a, out, a->size);
    return out;
}

int detach_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return graph_made(t[1] = ac_tensor_detach(t[0]));
}

AcTensor *ac_tensor_detach(const AcTensor *t)
{
    if (ops_observed) return graph_op("detach", detach_replay, 1, (const AcTensor *[]){t}, NULL, 0);
    if (tensor_check_any("detach", t, "tensor")) return NULL;
    return tensor_create("detach", t->shape, t->ndim, t->dtype, t, 0, 0);
}

AcTensor *ac_tensor_keep(const AcTensor *t)
{
    AcTensor *out;
    if (tensor_check_any("keep", t, "tensor")) return NULL;
    if (!kernels_for(t)->copy) {
        kernel_missing("keep", t);
        return NULL;
    }
    out = tensor_create_on("keep", t->shape, t->ndim, t->dtype, NULL, 0, 1, t->device, t->device_index);
    if (out && tensor_copy_across(out, t)) {
        ac_tensor_free(out);
        return NULL;
    }
    return out;
}

int ac_tensor_set_requires_grad(AcTensor *t, int requires_grad)
{
    if (!t) return error_set(AC_ERR_ARG, "requires_grad: tensor is NULL");
    if (requires_grad && t->dtype != AC_FLOAT32)
        return error_set(AC_ERR_DTYPE, "requires_grad: only float32 tensors can require gradients, "
                         "not %s", ac_dtype_name(t->dtype));
    if (t->node && !requires_grad)
        return error_set(AC_ERR_STATE,
                         "requires_grad: only leaf tensors can stop requiring grad; use detach()");
    if (!t->node) t->requires_grad = requires_grad ? 1 : 0;
    return AC_OK;
}

/* The bytes of a spare grad's allocation from its data to its end. */
static size_t spare_data_bytes(const AcTensor *g)
{
    return ((TensorBox *)g)->alloc_bytes - (size_t)((const char *)g->data - (const char *)g);
}

/* Keep root leaf t's dropped grad g as its spare when only t referred to g
   (no wrapper, view or node: refcount 1) and g is a plain tensor; report
   whether it did. */
static int spare_grad_keep(AcTensor *t, AcTensor *g)
{
    TensorBox *box = (TensorBox *)t;
    /* A CUDA grad goes back to the device cache instead (its data is not in its box). */
    if (box->spare_grad || g->device != AC_CPU || g->node || g->base || g->grad || g->requires_grad ||
        __atomic_load_n(&g->refcount, __ATOMIC_ACQUIRE) != 1)
        return 0;
    root_set_aside(((TensorBox *)g)->alloc_bytes);
    counters_tensor(-1, 0);
    box->spare_grad = g;
    MARK_UNUSED(g->data, spare_data_bytes(g));   /* its header stays readable */
    return 1;
}

AcTensor *grad_new(AcTensor *leaf)
{
    TensorBox *box = (TensorBox *)leaf;
    AcTensor *g = box->spare_grad;
    if (box->grad_home) {
        ac_tensor_retain(box->grad_home);
        return box->grad_home;
    }
    if (!g)
        return tensor_create_on("backward", leaf->shape, leaf->ndim, AC_FLOAT32, NULL, 0, 1, leaf->device,
                                leaf->device_index);
    if (root_take_back(((TensorBox *)g)->alloc_bytes)) return NULL;
    MARK_IN_USE(g->data, spare_data_bytes(g));
    box->spare_grad = NULL;
    counters_tensor(1, 0);
    return g;
}

static int zero_grad_replay(AcTensor **t, const double *attr)
{
    (void)attr;
    return ac_tensor_zero_grad(t[0]);
}

int ac_tensor_zero_grad(AcTensor *t)
{
    if (ops_observed) return graph_call("zero_grad", zero_grad_replay, 1, 0, (AcTensor *[]){t}, NULL, 0);
    AcTensor *g;
    if (!t) return error_set(AC_ERR_ARG, "zero_grad: tensor is NULL");
    g = t->grad;
    t->grad = NULL;
    /* A scoped leaf's grad belongs to its scope, which frees it; a grad's home
       (ac_tensor_set_grad) stays the leaf's. */
    if (g && t->scope_depth == 0 && (g == ((TensorBox *)t)->grad_home || !spare_grad_keep(t, g)))
        ac_tensor_free(g);
    return AC_OK;
}

int ac_tensor_set_grad(AcTensor *leaf, AcTensor *grad)
{
    TensorBox *box = (TensorBox *)leaf;
    AcTensor *old_grad, *old_home;
    char a[32], b[32];
    if (graph_recording) graph_unsupported("set_grad");
    if (!leaf) return error_set(AC_ERR_ARG, "set_grad: leaf is NULL");
    if (leaf->node)
        return error_set(AC_ERR_STATE, "set_grad: tensor of shape %s is not a leaf (made by %s)",
                         tensor_shape_str(leaf), leaf->node->op);
    if (!leaf->requires_grad)
        return error_set(AC_ERR_STATE, "set_grad: tensor of shape %s does not require grad",
                         tensor_shape_str(leaf));
    if (leaf->scope_depth)
        return error_set(AC_ERR_STATE, "set_grad: leaf of shape %s was made in a scope; only a root "
                         "leaf (a parameter) keeps a grad's home", tensor_shape_str(leaf));
    if (grad) {
        if (tensor_check("set_grad", grad, "grad")) return ac_last_error_code();
        if (!same_shape(grad, leaf))
            return error_set(AC_ERR_SHAPE, "set_grad: grad of shape %s for a leaf of shape %s",
                             tensor_shape_str(grad), tensor_shape_str(leaf));
        if (grad->device != leaf->device || grad->device_index != leaf->device_index)
            return error_set(AC_ERR_DEVICE, "set_grad: grad on %s for a leaf on %s",
                             device_name(grad->device, grad->device_index, a, sizeof a),
                             device_name(leaf->device, leaf->device_index, b, sizeof b));
        if (grad->scope_depth)
            return error_set(AC_ERR_STATE, "set_grad: grad of shape %s was made in a scope, which ends "
                             "before the leaf; make it at root", tensor_shape_str(grad));
        if (grad->node || grad->requires_grad)
            return error_set(AC_ERR_ARG, "set_grad: grad of shape %s requires grad; give a plain tensor",
                             tensor_shape_str(grad));
        if (tensors_overlap(grad, leaf))
            return error_set(AC_ERR_ARG, "set_grad: grad of shape %s shares memory with its leaf",
                             tensor_shape_str(grad));
        ac_tensor_retain(grad);   /* one reference as the grad, one as its home */
        ac_tensor_retain(grad);
    }
    old_grad = leaf->grad;
    old_home = box->grad_home;
    leaf->grad = box->grad_home = grad;
    ac_tensor_free(old_grad);
    ac_tensor_free(old_home);
    if (box->spare_grad) {   /* backward fills the home (or a new grad) from now on */
        root_free_set_aside(box->spare_grad, ((TensorBox *)box->spare_grad)->alloc_bytes);
        box->spare_grad = NULL;
    }
    return AC_OK;
}

AcTensor *ac_tensor_view_flat(AcTensor *flat, int64_t offset, const int64_t *shape, int ndim)
{
    int64_t size;
    AcTensor *view;
    if (tensor_check("view_flat", flat, "flat") || cpu_only("view_flat", (const AcTensor *[]){flat}, 1) ||
        shape_check("view_flat", shape, ndim, &size))
        return NULL;
    if (flat->scope_depth)
        return error_null(AC_ERR_STATE, "view_flat: flat of shape %s was made in a scope; make it at root",
                          tensor_shape_str(flat));
    if (offset < 0 || offset > flat->size || size > flat->size - offset)
        return error_null(AC_ERR_SHAPE, "view_flat: %lld elements from offset %lld do not fit in flat of "
                          "shape %s", (long long)size, (long long)offset, tensor_shape_str(flat));
    view = tensor_create("view_flat", shape, ndim, AC_FLOAT32, flat, 0, 1);
    if (view) view->data = flat->data + offset;
    return view;
}

int ac_tensor_copy_(AcTensor *dst, const AcTensor *src)
{
    if (!dst || !src) return error_set(AC_ERR_ARG, "copy_: %s is NULL", dst ? "src" : "dst");
    if (graph_recording) graph_note_write("copy_", dst);
    if (dst->size != src->size)
        return error_set(AC_ERR_SHAPE, "copy_: source %s has %lld elements, destination %s has %lld",
                         tensor_shape_str(src), (long long)src->size, tensor_shape_str(dst),
                         (long long)dst->size);
    if (dst->device != AC_CPU || src->device != AC_CPU) {
        if (!kernels_for(dst)->copy || !kernels_for(src)->copy)
            return kernel_missing("copy_", kernels_for(dst)->copy ? src : dst);
        if (dst->dtype != src->dtype)
            return error_set(AC_ERR_DTYPE, "copy_: %s to %s between devices; convert the dtype on the CPU",
                             ac_dtype_name(src->dtype), ac_dtype_name(dst->dtype));
        return tensor_copy_across(dst, src);
    }
    convert(src, dst, src->size);
    return AC_OK;
}

int ac_tensor_fill_(AcTensor *t, double value)
{
    const AcKernels *k;
    if (!t) return error_set(AC_ERR_ARG, "fill_: tensor is NULL");
    if (graph_recording) graph_note_write("fill_", t);
    if (t->size == 0) return AC_OK;
    k = kernels_for(t);
    if (!k->fill) return kernel_missing("fill_", t);
    return k->fill(t, value);
}

/* ---- broadcasting -------------------------------------------------------- */

int tensors_overlap(const AcTensor *a, const AcTensor *b)
{
    const char *a0 = (const char *)a->data, *b0 = (const char *)b->data;
    return a0 < b0 + b->size * ac_dtype_size(b->dtype) && b0 < a0 + a->size * ac_dtype_size(a->dtype);
}

int broadcast_shapes(const char *op, const AcTensor *a, const AcTensor *b, int64_t *out_shape,
                     int *out_ndim)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim, i;
    for (i = 0; i < nd; i++) {
        int ia = i - (nd - a->ndim), ib = i - (nd - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return error_set(AC_ERR_SHAPE,
                             "%s: shapes %s and %s cannot be broadcast (dim %d: %lld vs %lld)", op,
                             tensor_shape_str(a), tensor_shape_str(b), i, (long long)da,
                             (long long)db);
        out_shape[i] = da == 1 ? db : da;
    }
    *out_ndim = nd;
    return AC_OK;
}

void broadcast_strides(const AcTensor *t, const int64_t *out_shape, int out_ndim, int64_t *strides)
{
    int64_t stride = 1;
    int i;
    for (i = out_ndim - 1; i >= 0; i--) {
        int it = i - (out_ndim - t->ndim);
        int64_t d = it >= 0 ? t->shape[it] : 1;
        strides[i] = (d == 1 && out_shape[i] != 1) || it < 0 ? 0 : stride;
        stride *= d;
    }
}
