/*
 * tensor.c - making and freeing tensors, views, grads' spares and homes,
 * this thread's grad mode, and the shape, device and broadcasting helpers.
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
 * Callbacks set when libac loads keep the calls one way: graph.c, above, is
 * told of each tensor made while a graph records (tensor_on_create); the
 * arena, below, drops its scopes' holds with ac_tensor_free, which this file
 * registers (scope_on_release).
 *
 * Not here: the ops (ops/; clone, copy_, fill_, zero_grad in ops/tensor.c),
 * the graph walk (autograd.c), the factories and the per-thread random
 * generator (creation.c).
 */
#include "internal.h"

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

/* ---- callbacks, and grad mode -------------------------------------------- */

/* graph.c's note of each tensor made while a graph is open on some thread: the
   count of those is one shared int, as a thread-local costs a call per read in
   a shared library. */
static void (*created_note)(const char *op, const AcTensor *t);
static int created_watchers;

void tensor_on_create(void (*note)(const char *op, const AcTensor *t)) { created_note = note; }

void tensor_watch(int delta) { __atomic_add_fetch(&created_watchers, delta, __ATOMIC_RELAXED); }

__attribute__((constructor)) static void tensor_callbacks_register(void) { scope_on_release(ac_tensor_free); }

AC_THREAD_LOCAL int grad_disabled;

int ac_is_grad_enabled(void) { return !grad_disabled; }

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

int kernel_missing(const char *op, const AcTensor *t)
{
    char name[32];
    return error_set(AC_ERR_DEVICE, "%s: no kernel for %s", op, device_name(t->device, t->device_index, name, sizeof name));
}

int cpu_only(const char *op, const AcTensor *const *tensors, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (tensors[i] && tensors[i]->device != AC_CPU) return kernel_missing(op, tensors[i]);
    return AC_OK;
}

int same_device(const char *op, const AcTensor *a, const AcTensor *b)
{
    char one[32], two[32];
    if (!b || (a->device == b->device && a->device_index == b->device_index)) return AC_OK;
    return error_set(AC_ERR_DEVICE, "%s: expected all tensors to be on the same device, but found "
                     "at least two devices, %s and %s", op,
                     device_name(a->device, a->device_index, one, sizeof one),
                     device_name(b->device, b->device_index, two, sizeof two));
}

/* One more reference of t, held by the innermost scope when t is a root tensor. */
static int hold(AcTensor *t)
{
    ac_tensor_retain(t);
    if (scope_hold(t)) {
        ac_tensor_free(t);
        return AC_ERR_MEMORY;
    }
    return AC_OK;
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
                                   at_root ? 0 : current_scope(&serial));
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
        if (hold(owner)) {
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
    if (__atomic_load_n(&created_watchers, __ATOMIC_RELAXED)) created_note(op, t);
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
    if (t->scope_depth == 0) return hold(t);
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

int grad_drop(AcTensor *t)
{
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

int grad_set_home(AcTensor *leaf, AcTensor *grad)
{
    TensorBox *box = (TensorBox *)leaf;
    AcTensor *old_grad, *old_home;
    char a[32], b[32];
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

/* Element `at` of src converted to dtype, stored at out[i]. */
static void store(void *out, int dtype, int64_t i, const AcTensor *src, int64_t at)
{
    if (src->dtype == dtype) {
        size_t esize = elem_size(src);
        memcpy((char *)out + (size_t)i * esize, (const char *)src->data + (size_t)at * esize, esize);
        return;
    }
    elem_set(out, dtype, i, elem_get(src, at));
}

/* broadcast_into's copy for one dtype, a row of the last dim at a time: a memcpy
   when the last dim is src's own, copies of one element doubling when it is broadcast. */
static void broadcast_rows(const AcTensor *src, const int64_t *shape, int ndim, const int64_t *strides,
                           void *out)
{
    int64_t index[AC_MAX_DIMS] = {0}, at = 0, inner = shape[ndim - 1], rows = 1, row;
    size_t esize = elem_size(src), row_bytes = (size_t)inner * esize, done;
    int d;
    for (d = 0; d < ndim - 1; d++) rows *= shape[d];
    for (row = 0; row < rows; row++) {
        char *dst = (char *)out + (size_t)row * row_bytes;
        const char *from = (const char *)src->data + (size_t)at * esize;
        if (strides[ndim - 1]) {
            memcpy(dst, from, row_bytes);
        } else {
            memcpy(dst, from, esize);
            for (done = esize; done < row_bytes; done *= 2)
                memcpy(dst + done, dst, done < row_bytes - done ? done : row_bytes - done);
        }
        for (d = ndim - 2; d >= 0; d--) {
            at += strides[d];
            if (++index[d] < shape[d]) break;
            at -= strides[d] * shape[d];
            index[d] = 0;
        }
    }
}

int broadcast_into(const char *op, const AcTensor *src, const int64_t *shape, int ndim, int dtype,
                   void *out)
{
    int64_t strides[AC_MAX_DIMS], index[AC_MAX_DIMS] = {0}, stride = 1, at = 0, size = 1, i;
    int d, extra = src->ndim - ndim;
    for (d = 0; d < extra; d++)
        if (src->shape[d] != 1) goto mismatch;
    for (d = ndim - 1; d >= 0; d--) {
        int s = d + extra;
        size *= shape[d];
        strides[d] = 0;
        if (s < 0) continue;
        if (src->shape[s] == shape[d])
            strides[d] = stride;
        else if (src->shape[s] != 1)
            goto mismatch;
        stride *= src->shape[s];
    }
    if (src->size == size && src->dtype == dtype) {
        memcpy(out, src->data, (size_t)size * elem_size(src));
        return AC_OK;
    }
    if (src->dtype == dtype && ndim > 0 && size > 0) {
        broadcast_rows(src, shape, ndim, strides, out);
        return AC_OK;
    }
    for (i = 0; i < size; i++) {
        store(out, dtype, i, src, at);
        for (d = ndim - 1; d >= 0; d--) {
            at += strides[d];
            if (++index[d] < shape[d]) break;
            at -= strides[d] * shape[d];
            index[d] = 0;
        }
    }
    return AC_OK;
mismatch:
    return error_set(AC_ERR_SHAPE, "%s: values of shape %s cannot be broadcast to %s", op,
                     tensor_shape_str(src), shape_str(shape, ndim));
}
