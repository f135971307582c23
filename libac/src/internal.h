/*
 * internal.h - what libac's source files share and callers never see, in the
 * order of the layers below, bottom up.
 *
 * Layers, bottom up. A file calls only into its own layer and the ones below
 * it, and no files call each other round a cycle; tests/test_layers_c.py
 * reads this table and the objects' symbols, and checks both (and that no file
 * includes a header of a layer above its own). A folder holds every file under
 * it that the table does not name itself.
 *
 *   memory    error.c counters.c kernels/cuda/runtime.cu kernels/cuda/runtime.h cuda.c
 *             device_arena.c arena.c internal.h
 *   tensors   tensor.c creation.c random_draws.c profiler.c graph.c graph.h dlpack.c
 *             dlpack.h shared_mem.c
 *   kernels   threads.c kernels/
 *   ops       ops/ optim/ op_table.h io/
 *   autograd  autograd.c
 *   graphs    replay.c program.c native.c
 *
 * memory: the arenas and scopes, device memory and its CUDA runtime, the
 * counters, errors. tensors: the headers, dtypes, making and freeing, the
 * factories and random draws, and the two observers every layer above calls at
 * an op's entry, the profiler and the graph recorder (graph.c: recording ops
 * into a graph; running one again is replay.c's, above). kernels: pure math on
 * buffers, one table per device, and the thread pool they run on; they know no
 * graph. ops: checks, outputs and their graph nodes (ops/output.c), the
 * optimizers, io (files of tensors, copied with ac_tensor_keep). autograd: the
 * backward walk, setting grad mode. graphs: replay, programs, native code.
 *
 * Where a lower file must act on something above it, the upper file registers
 * a callback when libac loads (a constructor): tensor.c's ac_tensor_free for
 * the scopes' holds (scope_on_release), graph.c's note of each tensor made
 * (tensor_on_create), native.c's freeing of a graph's native code
 * (graph_on_free).
 */
#ifndef AC_INTERNAL_H
#define AC_INTERNAL_H

#include "ac.h"

#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>

#define AC_THREAD_LOCAL __thread
#define AC_ALIGN 64

/* Memory libac keeps for reuse is marked unusable under AddressSanitizer
   (MARK_UNUSED) until it is handed out again (MARK_IN_USE), so the sanitizer
   still reports a use after free of it. No-ops in other builds. */
#if defined(__SANITIZE_ADDRESS__)   /* gcc */
#define AC_ASAN 1
#elif defined(__has_feature)        /* clang */
#if __has_feature(address_sanitizer)
#define AC_ASAN 1
#endif
#endif
#ifdef AC_ASAN
#include <sanitizer/asan_interface.h>
#define MARK_UNUSED(p, bytes) ASAN_POISON_MEMORY_REGION((p), (bytes))
#define MARK_IN_USE(p, bytes) ASAN_UNPOISON_MEMORY_REGION((p), (bytes))
#else
#define MARK_UNUSED(p, bytes) ((void)(p), (void)(bytes))
#define MARK_IN_USE(p, bytes) ((void)(p), (void)(bytes))
#endif

/* ======== memory ======================================================== */

/* ---- error.c ------------------------------------------------------------- */

/* Set the calling thread's error; return code (error_set) or NULL (error_null). */
int error_set(int code, const char *fmt, ...);
void *error_null(int code, const char *fmt, ...);
/* "(3, 4)": valid until the 8th later call on this thread (rotating buffers). */
const char *shape_str(const int64_t *shape, int ndim);
const char *tensor_shape_str(const AcTensor *t);

/* ---- counters.c ---------------------------------------------------------- */

/* *value += delta, atomically, raising *peak to the new value when it is higher. */
static inline void counter_add(int64_t *value, int64_t *peak, int64_t delta)
{
    int64_t now = __atomic_add_fetch(value, delta, __ATOMIC_RELAXED);
    int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > seen &&
           !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* Count one malloc, calloc, realloc or posix_memalign that succeeded, for
   AcMemStats.heap_allocations. Every heap allocation libac makes calls it,
   kernels included. */
void count_heap_allocation(void);
/* The count so far. */
int64_t heap_allocations(void);

/* ---- arena.c ------------------------------------------------------------- */

/* Allocate bytes (64-byte aligned) in the current scope's arena; NULL and
   AC_ERR_MEMORY on failure. Only valid while a scope is open. */
void *arena_alloc(size_t bytes);
/* A cap on the bytes the calling thread allocates from now on (frees do not
   give any back), scoped and root: allocations past it fail with AC_ERR_MEMORY.
   The program reader's check run is bounded by it. alloc_budget_end lifts it and
   returns 1 if an allocation was refused by it. */
int alloc_budget_begin(int64_t bytes);
int alloc_budget_end(void);
/* Root allocations, counted against the memory limit. */
void *root_alloc(size_t bytes);
void root_free(void *p, size_t bytes);
/* A root allocation kept for reuse (a parameter's spare grad): its bytes move
   from bytes_in_use to spare_grad_bytes (set_aside) and back (take_back, which
   fails like an allocation past the memory limit). root_free_set_aside frees
   one that is still set aside. */
void root_set_aside(size_t bytes);
int root_take_back(size_t bytes);
void root_free_set_aside(void *p, size_t bytes);
/* Scratch an op uses and gives back before it returns: from the innermost
   scope's arena when a scope is open (so a step inside a checkpoint makes no
   malloc; scratch_free pops it off again), else from the heap. */
void *scratch_alloc(size_t bytes);
void scratch_free(void *p, size_t bytes);
/* Give back [p, p + bytes), an arena_alloc of the scope with this serial, before
   the scope ends, and uncount the tensors and nodes it held. Only a scope of
   the calling thread takes it back, and only when it is the newest allocation
   or at least a page; returns 1 if it did. The bytes are then reused by the
   innermost scope's later allocations (lent to it until it ends, when the
   scope is an outer one). */
int arena_release(void *p, size_t bytes, uint32_t serial, int tensors, int nodes);
/* Hand one reference of t, which the caller has taken, to the innermost scope
   when t is a root tensor: the scope drops it as it ends. Nothing for a scoped
   t (kept until its own scope ends) or at root; AC_ERR_MEMORY, the reference
   still the caller's, when the hold cannot be made. */
int scope_hold(AcTensor *t);
/* How the scopes drop the references they hold: ac_tensor_free, registered by
   tensor.c when libac loads. */
void scope_on_release(int (*release)(AcTensor *t));
/* Hand the caller's reference of root tensor t to the scope at depth: it is
   dropped when that scope ends. */
int scope_hold_at(AcTensor *t, int depth);
/* Count tensors and nodes made (+1) or freed (-1); scoped ones are uncounted
   in bulk when their scope ends, so only their creation is reported. */
void counters_tensor(int delta, int scoped);
void counters_node(int delta, int scoped);
int current_depth(void);
/* Bytes this thread has allocated so far, scoped and root (the profiler's counter;
   root allocations count once the thread has its arena, which this makes). */
int64_t bytes_allocated(void);
/* The serial of the calling thread's innermost scope; 0 at root. */
uint32_t current_serial(void);
/* The depth of the calling thread's innermost scope (0 at root) and, when one
   is open, its serial in *serial: one look at the thread's arena for both. */
int current_scope(uint32_t *serial);
/* A tensor's box: arena_alloc'd in the innermost scope, counting the tensor and
   nodes (0 or 1) as counters_tensor and counters_node do for a scoped one, with
   the scope's depth and serial in *depth and *serial; or root_alloc'd, uncounted,
   with *depth 0, when no scope is open. One look at the thread's arena for all. */
void *arena_alloc_tensor(size_t bytes, int nodes, int *depth, uint32_t *serial);

/* ---- device_arena.c ------------------------------------------------------ */

/* Device memory for a CUDA tensor's data: in the thread's device arena for the
   scope at depth (its caller's innermost), else (depth 0) from the root
   size-class cache; device becomes the calling thread's current CUDA device.
   NULL and the error (naming op) on failure. */
void *device_alloc(const char *op, int device, size_t bytes, int depth);
/* Give back a root device_alloc of bytes (to the cache). */
void device_free_root(int device, void *p, size_t bytes);
/* arena.c's hooks: note the device arenas' positions as the scope at depth opens;
   move them back when it ends. */
int device_arena_mark(int depth);
void device_arena_pop(int depth);
/* Fill the device fields of out. */
void device_memory_stats(AcMemStats *out);

/* ======== tensors ======================================================= */

/* ---- tensor.c ------------------------------------------------------------ */

/* A graph node's hold on its input t: a root t gets a reference (scope_hold);
   a scoped t counts one more node use, so it is not given back early. */
int node_hold(AcTensor *t);
/* Free node's graph once backward has run it: drop its holds on its inputs (a
   root node's references, a scoped node's uses) and mark it freed (backward
   NULL). Scoped inputs this leaves unreferenced and already freed by their
   owner are chained on *dead, to be given back. */
void node_free_graph(AcGradNode *node, AcTensor **dead);
/* Backward's walk has run node: free its graph, and give back to their scope
   its scoped output and the scoped inputs whose nodes have run, when nothing
   refers to them any more and their owner freed them. */
void node_free_graph_walked(AcGradNode *node);
/* Check ndim and shape; on error name op. Writes the element count to *size. */
int shape_check(const char *op, const int64_t *shape, int ndim, int64_t *size);
/* A new uninitialised float32 tensor in the current home (scope or root), no graph. */
AcTensor *tensor_alloc(const char *op, const int64_t *shape, int ndim);
/* The one allocator behind every tensor: at root when at_root, else in the
   current home. share != NULL: no data of its own, a view of share's data
   (and share's dtype). node_bytes > 0: a zeroed node followed by its context,
   at t->node. */
AcTensor *tensor_create(const char *op, const int64_t *shape, int ndim, int dtype,
                        const AcTensor *share, size_t node_bytes, int at_root);
/* Bytes per element of t; and the int64 / one-byte (bool, uint8) views of its data. */
size_t elem_size(const AcTensor *t);
static inline int64_t *data_i64(const AcTensor *t) { return (int64_t *)(void *)t->data; }
static inline uint8_t *data_u8(const AcTensor *t) { return (uint8_t *)(void *)t->data; }
/* Element i of t as a double, whatever its dtype (exact for int64 below 2^53,
   which covers every index a tensor can have). */
double elem_get(const AcTensor *t, int64_t i);
/* Store v as element i of out, an array of dtype: float32 rounds, int64 and uint8
   truncate toward zero (uint8 then wraps modulo 256; NaN gives 0, values past
   int64's range clamp), bool is v != 0. */
void elem_set(void *out, int dtype, int64_t i, double v);
/* As tensor_create, with the data on device (AcDevice) number device_index;
   a view (share) is on share's device. AC_ERR_DEVICE for a device this build
   cannot allocate on. */
AcTensor *tensor_create_on(const char *op, const int64_t *shape, int ndim, int dtype,
                           const AcTensor *share, size_t node_bytes, int at_root, int device,
                           int device_index);
/* "cpu", "cuda:0": the name of a device, written into buf, which it returns. */
const char *device_name(int device, int index, char *buf, size_t n);
/* The same shape as t, on t's device; uninitialised float32. */
AcTensor *tensor_alloc_like(const char *op, const AcTensor *t);
/* A new grad for leaf, uninitialised, at root: the leaf's spare (a grad that
   zero_grad dropped) when it has one, else a fresh tensor of its shape. */
AcTensor *grad_new(AcTensor *leaf);
/* An error if t is NULL or not float32 (names op and which argument). */
int tensor_check(const char *op, const AcTensor *t, const char *what);
/* The same for ops that take any dtype: an error only if t is NULL. */
int tensor_check_any(const char *op, const AcTensor *t, const char *what);
/* An error unless t (NULL is fine) is int64 or float32, as an index tensor must be. */
int index_check(const char *op, const AcTensor *t, const char *what);
/* Normalise dim against ndim (negative counts from the end); -1 and an error if out of range. */
int dim_normalize(const char *op, int dim, int ndim);
/* Whether a's and b's elements share any byte of memory. */
int tensors_overlap(const AcTensor *a, const AcTensor *b);
/* NumPy broadcasting of a and b into out_shape / *out_ndim; AC_ERR_SHAPE if they do not fit. */
int broadcast_shapes(const char *op, const AcTensor *a, const AcTensor *b,
                     int64_t *out_shape, int *out_ndim);
/* Write src broadcast to shape (src may have extra leading size-1 dims) into out,
   converted to dtype; AC_ERR_SHAPE, naming op, when it does not broadcast. */
int broadcast_into(const char *op, const AcTensor *src, const int64_t *shape, int ndim, int dtype,
                   void *out);
/* Element strides of t as seen from a tensor of out_shape (0 along broadcast dims). */
void broadcast_strides(const AcTensor *t, const int64_t *out_shape, int out_ndim,
                       int64_t *strides);
int same_shape(const AcTensor *a, const AcTensor *b);
/* Grad mode, this thread's: 1 while ops record no graph nodes. Read by
   ac_is_grad_enabled and op outputs (ops/output.c); set by ac_set_grad_enabled
   (autograd.c, which records itself into a graph). */
extern AC_THREAD_LOCAL int grad_disabled;
/* A graph being recorded is told of each tensor made (graph.c registers note
   when libac loads) while tensor_watch's count, of graphs open on all threads,
   is above 0. */
void tensor_on_create(void (*note)(const char *op, const AcTensor *t));
void tensor_watch(int delta);
/* zero_grad's and set_grad's bookkeeping (ops/tensor.c records the calls):
   drop t's grad, kept as a spare when nothing else refers to it; give root
   leaf a grad's home (NULL: none). */
int grad_drop(AcTensor *t);
int grad_set_home(AcTensor *leaf, AcTensor *grad);
/* AC_ERR_DEVICE: "op: no kernel for cuda:0"; returns the error code. */
int kernel_missing(const char *op, const AcTensor *t);
/* For an op with no table entries, which reads its tensors' data on the host:
   AC_OK when each of the n tensors is on the CPU (or NULL), else
   kernel_missing for the first that is not. Called once per op, before it
   touches data:  if (cpu_only(op, (const AcTensor *[]){x, h0}, 2)) ... */
int cpu_only(const char *op, const AcTensor *const *tensors, int n);
/* For a tensor an op reads or writes beside its inputs (running statistics,
   optimizer state): AC_OK when b is NULL or on a's device, else the error of
   inputs on two devices. */
int same_device(const char *op, const AcTensor *a, const AcTensor *b);

/* ---- creation.c ---------------------------------------------------------- */

/* This thread's generator (creation.c): uniform in [0, 1) and standard normal. */
float rng_uniform(void);
float rng_normal(void);
/* 64 bits of this thread's generator: a key for streams derived from it. */
uint64_t rng_next64(void);

/* The generator behind them (and dropout's per-chunk streams): xoshiro128+,
   seeded by splitmix64. */
static inline void xoshiro_seed(uint32_t s[4], uint64_t seed)
{
    int i;
    for (i = 0; i < 2; i++) {
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        s[2 * i] = (uint32_t)z;
        s[2 * i + 1] = (uint32_t)(z >> 32) | 1u;
    }
}

static inline uint32_t xoshiro_next(uint32_t s[4])
{
    const uint32_t result = s[0] + s[3], t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 11) | (s[3] >> 21);
    return result;
}

/* Uniform in [0, 1) from a 32-bit draw's top 24 bits. */
static inline float uniform_from_bits(uint32_t bits) { return (float)(bits >> 8) * (1.0f / 16777216.0f); }

/* ---- profiler.c ---------------------------------------------------------- */

/* The profiler records this thread's events (profiler.c). */
extern AC_THREAD_LOCAL int profiler_active;
/* A chunk of a parallel_for (threads.c): fn(ctx, begin, end). */
typedef void (*ParallelFn)(void *ctx, int64_t begin, int64_t end);
/* A parallel_for job as the profiler runs it: profile_task_run(&task, ...)
   runs task.fn on the chunk as an event of the thread that runs it, named
   after the event open on the posting thread ("linear [task]"). */
typedef struct {
    ParallelFn fn;
    void *ctx;
    const char *name, *scope;
} ProfiledTask;
void profile_task_wrap(ProfiledTask *task, ParallelFn fn, void *ctx);
void profile_task_run(void *ctx, int64_t begin, int64_t end);

/* ======== kernels ======================================================= */

/* ---- threads.c, kernels/ ------------------------------------------------- */

/* fn(ctx, begin, end) over [0, n) in chunks of at least grain; serial when small
   or when called from inside a parallel region. */
void parallel_for(int64_t n, int64_t grain, ParallelFn fn, void *ctx);

/* Row-major SGEMM without argument checks (ac_sgemm checks, then calls this). */
void gemm(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
          float beta, float *c, int64_t ldc);
/* C = alpha op(A) op(B) + bias, bias[j] added to every row's C(i, j) (NULL: nothing). */
void gemm_bias(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
               float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
               const float *bias, float *c, int64_t ldc);
/* gemm with C stored transposed: C(i, j) is c[j*ldc + i], ldc >= m; and
   b_sums (NULL, or n floats) set to sum_p op(B)(p, j), from the packing pass. */
void gemm_transposed_c(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                       float alpha, const float *a, int64_t lda, const float *b, int64_t ldb,
                       float beta, float *c, int64_t ldc, float *b_sums);

/* Offset of the index-th element of a row-major walk over n dims. */
static inline int64_t index_offset(int64_t index, const int64_t *size, const int64_t *stride, int n)
{
    int64_t offset = 0;
    int d;
    for (d = n - 1; d >= 0; d--) {
        offset += (index % size[d]) * stride[d];
        index /= size[d];
    }
    return offset;
}

/* ======== ops =========================================================== */

/* ---- ops/output.c -------------------------------------------------------- */

/* A tensor on the device that inputs (NULLs skipped) share, to read ->device
   and ->device_index from; NULL and AC_ERR_DEVICE naming two devices when they
   differ. For ops whose output op_output does not make (ops/output.c). */
const AcTensor *common_device(const char *op, const AcTensor *const *inputs, int n_inputs);
/* Make op's float32 output of the given shape, uninitialised; every input must
   be float32 (else NULL and AC_ERR_DTYPE). If grad mode is on and an
   input requires grad, also make its node: inputs recorded, backward set, and
   ctx_bytes of zeroed context at out->node->context. */
AcTensor *op_output(const char *op, const int64_t *shape, int ndim,
                    const AcTensor *const *inputs, int n_inputs,
                    AcBackwardFn backward, size_t ctx_bytes);
/* As op_output, for ops that check their inputs' dtypes themselves: the output
   has dtype (shape ops keep their input's; comparisons give bool). */
AcTensor *op_output_as(const char *op, int dtype, const int64_t *shape, int ndim,
                       const AcTensor *const *inputs, int n_inputs, AcBackwardFn backward,
                       size_t ctx_bytes);
/* A copy of a's shape and dtype, uninitialised, on device (AcDevice) number
   device_index: the copies between devices. */
AcTensor *op_output_on(const char *op, const AcTensor *a, int device, int device_index,
                       AcBackwardFn backward);
/* As op_output, but the output is a view sharing a's data (reshape, squeeze),
   of a's dtype. */
AcTensor *op_view(const char *op, const AcTensor *a, const int64_t *shape, int ndim,
                  AcBackwardFn backward, size_t ctx_bytes);
/* The output (..., out) of a layer for inference only (an int8 or packed Linear)
   on x (..., in), float32 on the CPU, uninitialised, and x's rows in *rows; NULL
   and an error when x is not that, or requires grad while grad mode is on (layer
   names the kind of layer for the message). */
AcTensor *inference_output(const char *op, const AcTensor *x, int64_t in, int64_t out,
                           const char *layer, int64_t *rows);
/* The saved context of out's node, or NULL when no graph was recorded. */
void *op_context(const AcTensor *out);
/* True when backward must produce a gradient for input i of node. */
static inline int input_needs_grad(const AcGradNode *node, int i)
{
    return i < node->n_inputs && node->inputs[i] && node->inputs[i]->requires_grad;
}
/* For a backward that fills its gradients itself: a new gradient for input i
   (i < 0: none), shaped and placed like it, into gin[i], when it needs one;
   its data, else NULL with *status left AC_OK. For a leaf that has no grad
   yet, the data of its new grad instead (leaf_grad_to_fill), gin[i] left
   NULL. Once *status holds an error it does nothing; a failed allocation
   sets it. */
float *input_grad_data(AcGradNode *node, int i, AcTensor **gin, int *status);
/* When input i of node is a leaf that needs a grad and has none yet: its new
   grad, uninitialised, for the backward to fill in place of gin[i] (left
   NULL), which saves the walk copying a gradient into it; else NULL. If the
   backward then fails, the walk drops the grad again. */
AcTensor *leaf_grad_to_fill(AcGradNode *node, int i);
/* A new, uninitialised grad for a leaf without one, in the leaf's home (never
   in backward's scope); NULL with the error set when there is no memory. */
AcTensor *leaf_grad_new(AcTensor *leaf);

/* ---- ops' helpers -------------------------------------------------------- */

/* Elements a copying task (shape.c, join.c) takes at least, and the rows of
   row_elements each that make one. */
#define COPY_GRAIN 16384
static inline int64_t rows_grain(int64_t row_elements)
{
    return row_elements >= COPY_GRAIN ? 1 : COPY_GRAIN / (row_elements > 0 ? row_elements : 1);
}

/* Whether an op on these tensors will record a graph node. */
static inline int records_graph(AcTensor *const *tensors, int n)
{
    int i;
    if (!ac_is_grad_enabled()) return 0;
    for (i = 0; i < n; i++)
        if (tensors[i]->requires_grad) return 1;
    return 0;
}

/* Sum g over the dims along which `like` was broadcast, giving like's shape
   (backward; ops/reduce.c). */
AcTensor *reduce_to_shape(const AcTensor *g, const AcTensor *like);

/* ---- ops/device.c -------------------------------------------------------- */

/* dst's data = src's: the same dtype and size, on any two devices (a copy to
   the host waits for the device). */
int tensor_copy_across(AcTensor *dst, const AcTensor *src);

/* ---- io/state_dict.c ----------------------------------------------------- */

/* Append (name, tensor) without looking for an existing name (the caller has
   checked), taking over the caller's reference of root tensor `tensor`. */
int state_dict_append(AcStateDict *dict, const char *name, AcTensor *tensor);
/* True when s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or
   code points past U+10FFFF). */
int utf8_valid(const char *s, size_t n);

#endif /* AC_INTERNAL_H */
