/*
 * device_arena.c - device memory for CUDA tensors' data, under the same scopes
 * as host memory.
 *
 * Scoped: each thread has, per device, a chain of cudaMalloc'd blocks with a
 * bump pointer. arena.c calls device_arena_mark when a scope opens and
 * device_arena_pop when it ends; the pop moves each chain back to its mark and
 * keeps the blocks above it for the next scope, so a warm training step makes
 * no cudaMalloc. Reusing the bytes at once is safe without waiting for the
 * device: all work on a device runs on its one stream in issue order, so the
 * kernels that read the old tensors finish before any kernel issued later
 * writes the new ones. A scoped tensor freed early keeps its device bytes until
 * its scope ends (its host box goes back as usual).
 *
 * Root (parameters, optimizer state, a kept tensor): a process-wide cache by
 * size class (four per power of two), so a freed parameter's bytes serve the
 * next root tensor of its class without cudaMalloc or cudaFree.
 *
 * Device bytes are counted apart from host bytes (device_bytes_in_use) and are
 * not held to ac_set_memory_limit. Nothing here runs until a CUDA tensor is
 * made: a thread that never uses CUDA has no device arena.
 *
 * Not here: cudart (kernels/cuda/runtime.cu), host arenas (arena.c).
 */
#define _POSIX_C_SOURCE 200112L
#include "internal.h"
#include "kernels/cuda/runtime.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DEVICE_ALIGN ((size_t)256)          /* coalesced loads; cudaMalloc's own alignment */
#define DEVICE_BLOCK_BYTES ((size_t)32 << 20)
#define ROOT_MIN_BYTES ((size_t)512)

typedef struct DeviceBlock {
    struct DeviceBlock *prev;   /* older block in the chain, or the next cached one */
    char *base;                 /* device memory */
    size_t size, used;
} DeviceBlock;

typedef struct {
    DeviceBlock *block;
    size_t used;
} DevicePosition;

typedef struct {
    DevicePosition at[CUDA_MAX_DEVICES];
    int64_t bytes;              /* the thread's scoped device bytes when the scope opened */
} DeviceMark;

typedef struct {
    DeviceBlock *top[CUDA_MAX_DEVICES], *cache[CUDA_MAX_DEVICES];
    DeviceMark *marks;          /* marks[d - 1]: taken when the scope at depth d opened */
    int capacity;
    int64_t bytes;              /* scoped device bytes this thread holds */
} DeviceArena;

typedef struct {
    void *p;
    size_t size;
    int device;
} CachedBlock;

static int64_t g_in_use, g_peak, g_reserved;
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static CachedBlock *g_cache;
static int g_cached, g_cache_capacity;

static pthread_key_t device_key;
static pthread_once_t device_key_once = PTHREAD_ONCE_INIT;
static AC_THREAD_LOCAL DeviceArena *tls_device;

static void add_in_use(int64_t delta) { counter_add(&g_in_use, &g_peak, delta); }

void device_memory_stats(AcMemStats *out)
{
    out->cuda_mallocs = cuda_malloc_count();
    out->device_bytes_in_use = __atomic_load_n(&g_in_use, __ATOMIC_RELAXED);
    out->device_peak_bytes = __atomic_load_n(&g_peak, __ATOMIC_RELAXED);
    out->device_reserved = __atomic_load_n(&g_reserved, __ATOMIC_RELAXED);
}

static void *reserve(int device, size_t bytes)
{
    void *p = cuda_malloc(device, bytes);
    if (p) __atomic_add_fetch(&g_reserved, (int64_t)bytes, __ATOMIC_RELAXED);
    return p;
}

/* ---- root: the size-class cache ---------------------------------------------- */

/* bytes rounded up to its class: a multiple of a quarter of its power of two. */
static size_t size_class(size_t bytes)
{
    size_t step = 1;
    if (bytes <= ROOT_MIN_BYTES) return ROOT_MIN_BYTES;
    while (step <= (bytes - 1) >> 3) step <<= 1;   /* a quarter of the power of two below bytes */
    return (bytes + step - 1) & ~(step - 1);
}

static void *root_take(int device, size_t size)
{
    void *p = NULL;
    int i;
    pthread_mutex_lock(&cache_lock);
    for (i = g_cached - 1; i >= 0; i--) {
        if (g_cache[i].device == device && g_cache[i].size == size) {
            p = g_cache[i].p;
            g_cache[i] = g_cache[--g_cached];
            break;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    return p ? p : reserve(device, size);
}

void device_free_root(int device, void *p, size_t bytes)
{
    size_t size = size_class(bytes);
    if (!p) return;
    add_in_use(-(int64_t)size);
    pthread_mutex_lock(&cache_lock);
    if (g_cached == g_cache_capacity) {
        int capacity = g_cache_capacity ? 2 * g_cache_capacity : 64;
        CachedBlock *grown = realloc(g_cache, (size_t)capacity * sizeof *grown);
        if (!grown) {   /* keep nothing rather than fail: give the bytes back to the device */
            pthread_mutex_unlock(&cache_lock);
            cuda_free(device, p);
            __atomic_add_fetch(&g_reserved, -(int64_t)size, __ATOMIC_RELAXED);
            return;
        }
        count_heap_allocation();
        g_cache = grown;
        g_cache_capacity = capacity;
    }
    g_cache[g_cached].p = p;
    g_cache[g_cached].size = size;
    g_cache[g_cached].device = device;
    g_cached++;
    pthread_mutex_unlock(&cache_lock);
}

/* ---- scoped: the per-thread device arena --------------------------------------- */

static void device_arena_destroy(void *arg)
{
    DeviceArena *da = arg;
    int d;
    for (d = 0; d < CUDA_MAX_DEVICES; d++) {
        DeviceBlock *chains[2];
        int c;
        chains[0] = da->top[d];
        chains[1] = da->cache[d];
        for (c = 0; c < 2; c++) {
            while (chains[c]) {
                DeviceBlock *b = chains[c];
                chains[c] = b->prev;
                cuda_free(d, b->base);
                __atomic_add_fetch(&g_reserved, -(int64_t)b->size, __ATOMIC_RELAXED);
                free(b);
            }
        }
    }
    add_in_use(-da->bytes);
    free(da->marks);
    free(da);
    tls_device = NULL;   /* arena.c's destructor may still pop this thread's scopes */
}

static void device_key_create(void) { pthread_key_create(&device_key, device_arena_destroy); }

/* Room for the marks of depths 1..depth; new ones are zero (empty chains). */
static int marks_reserve(DeviceArena *da, int depth)
{
    DeviceMark *grown;
    int capacity = da->capacity ? da->capacity : 16;
    if (depth <= da->capacity) return AC_OK;
    while (capacity < depth) capacity *= 2;
    grown = realloc(da->marks, (size_t)capacity * sizeof *grown);
    if (!grown) return error_set(AC_ERR_MEMORY, "mem_checkpoint: out of memory");
    count_heap_allocation();
    memset(grown + da->capacity, 0, (size_t)(capacity - da->capacity) * sizeof *grown);
    da->marks = grown;
    da->capacity = capacity;
    return AC_OK;
}

/* Made on the thread's first scoped device allocation, at depth: the marks of
   the scopes already open are empty, as nothing was on the device before. */
static DeviceArena *device_arena(int depth)
{
    DeviceArena *da;
    if (tls_device) return tls_device;
    pthread_once(&device_key_once, device_key_create);
    da = calloc(1, sizeof *da);
    if (!da) return error_null(AC_ERR_MEMORY, "alloc: out of memory");
    count_heap_allocation();
    if (marks_reserve(da, depth)) {
        free(da);
        return NULL;
    }
    pthread_setspecific(device_key, da);
    tls_device = da;
    return da;
}

int device_arena_mark(int depth)
{
    DeviceArena *da = tls_device;
    DeviceMark *m;
    int d;
    if (!da) return AC_OK;
    if (marks_reserve(da, depth)) return AC_ERR_MEMORY;
    m = &da->marks[depth - 1];
    for (d = 0; d < CUDA_MAX_DEVICES; d++) {
        m->at[d].block = da->top[d];
        m->at[d].used = da->top[d] ? da->top[d]->used : 0;
    }
    m->bytes = da->bytes;
    return AC_OK;
}

void device_arena_pop(int depth)
{
    DeviceArena *da = tls_device;
    const DeviceMark *m;
    int d;
    if (!da) return;
    m = &da->marks[depth - 1];
    for (d = 0; d < CUDA_MAX_DEVICES; d++) {
        while (da->top[d] != m->at[d].block) {
            DeviceBlock *b = da->top[d];
            da->top[d] = b->prev;
            b->prev = da->cache[d];
            da->cache[d] = b;
        }
        if (da->top[d]) da->top[d]->used = m->at[d].used;
    }
    add_in_use(m->bytes - da->bytes);
    da->bytes = m->bytes;
}

/* A block with room for bytes on device: a cached one, else a new one. */
static DeviceBlock *block_take(DeviceArena *da, int device, size_t bytes)
{
    DeviceBlock **link = &da->cache[device], *b;
    size_t size;
    for (; *link; link = &(*link)->prev) {
        if ((*link)->size >= bytes) {
            b = *link;
            *link = b->prev;
            return b;
        }
    }
    b = malloc(sizeof *b);
    if (!b) return error_null(AC_ERR_MEMORY, "alloc: out of memory");
    count_heap_allocation();
    size = bytes > DEVICE_BLOCK_BYTES ? bytes : DEVICE_BLOCK_BYTES;
    b->base = reserve(device, size);
    if (!b->base) {
        free(b);
        return NULL;
    }
    b->size = size;
    return b;
}

static void *scoped_alloc(int depth, int device, size_t bytes)
{
    DeviceArena *da = device_arena(depth);
    DeviceBlock *b;
    if (!da) return NULL;
    b = da->top[device];
    if (!b || b->size - b->used < bytes) {
        b = block_take(da, device, bytes);
        if (!b) return NULL;
        b->used = 0;
        b->prev = da->top[device];
        da->top[device] = b;
    }
    b->used += bytes;
    da->bytes += (int64_t)bytes;
    add_in_use((int64_t)bytes);
    return b->base + b->used - bytes;
}

void *device_alloc(const char *op, int device, size_t bytes, int depth)
{
    void *p;
    /* also makes device current, so the op's kernels launch there (runtime.h) */
    if (!cuda_stream_of(op, device)) return NULL;
    if (bytes > SIZE_MAX / 2)
        return error_null(AC_ERR_MEMORY, "%s: %zu bytes is more than can be allocated", op, bytes);
    if (depth > 0)
        return scoped_alloc(depth, device, (bytes + DEVICE_ALIGN - 1) & ~(DEVICE_ALIGN - 1));
    p = root_take(device, size_class(bytes));
    if (p) add_in_use((int64_t)size_class(bytes));
    return p;
}
