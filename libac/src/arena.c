/*
 * arena.c - scopes over chained arena blocks, root allocations, and the
 * process-wide memory counters.
 *
 * Each thread has its own chain of blocks and its own stack of scopes. A scope
 * remembers the arena position when it opened; restoring it moves the position
 * back and hands the blocks above it to a per-thread cache (ARENA_CACHE_BYTES), so a training
 * step in a scope costs no malloc once the blocks exist.
 *
 * A scope also keeps a list of root tensors that its graph nodes and views
 * hold (scope_hold): restoring drops those references, so a root parameter
 * cannot be freed under a graph that still points to it.
 *
 * A scoped tensor that is freed before its scope ends, with nothing else
 * referring to it, gives its bytes back (arena_release): popped off the top
 * when it is the newest allocation, else kept in the scope's free list, which
 * later allocations of the scope take from first (best fit). An inference
 * chain under no_grad then holds about two layers' outputs at a time instead
 * of all of them. One freed while an inner scope of the same thread is open
 * (an activation that dies during backward, whose walk runs in a scope of its
 * own) is lent to the innermost scope's free list; when that scope ends, the
 * chunk passes to the next scope out, and so back to its own.
 *
 * A root allocation freed on a thread that has opened a scope is kept in that
 * thread's small root cache, and a later root allocation of exactly its size
 * takes it back: a DataLoader makes each batch at root and frees the previous
 * one just after, so a loop over it would otherwise malloc every batch.
 *
 * Memory kept for reuse (ended scopes, released chunks, cached root
 * allocations) is marked unusable under AddressSanitizer until handed out
 * again, so the C tests still catch a use after free of any of it.
 *
 * Not here: tensor layout (tensor.c), graph nodes (ops/output.c), the
 * counters both arenas keep (counters.c).
 */
#define _POSIX_C_SOURCE 200112L
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK_BYTES ((size_t)1 << 20)
/* Blocks kept for reuse after a scope ends: a CNN step at batch 64 spans tens of
   blocks, and freeing them each step made every step fault its pages back in.
   ResNet-18 at batch 32 spans 600 MB: at 64 MB kept, its page faults took 8% of
   a step. Memory kept is memory the step used at its peak anyway. */
#define ARENA_CACHE_BYTES ((size_t)1 << 30)
#define ARENA_MAX_DEPTH 65536
#define BLOCK_HEADER_BYTES AC_ALIGN
/* Freed allocations smaller than this (and not on top) stay until their scope
   ends: the free list holds only chunks worth reusing, so searching it stays
   short. */
#define FREE_MIN_BYTES ((size_t)4096)
/* Freed root allocations a thread keeps, oldest dropped first: a batch is a few
   tensors (inputs, targets, maybe a mask), and 16 MB covers them at the batch
   sizes a CPU trains with while holding back a quarter of the block cache. */
#define ROOT_CACHE_ENTRIES 8
#define ROOT_CACHE_BYTES ((size_t)16 << 20)

typedef struct ArenaBlock {
    struct ArenaBlock *prev;   /* the older block in the chain, or the next cached one */
    size_t size;               /* usable bytes after the header */
    size_t used;
} ArenaBlock;

typedef struct HoldEntry {
    AcTensor *tensor;
    struct HoldEntry *next;
    int on_heap;               /* malloc'd (scope_hold_at) rather than in the arena */
} HoldEntry;

/* A released range of a scope's arena, the header written over its start. */
typedef struct FreeChunk {
    size_t size;
    struct FreeChunk *next;    /* the nearest free chunk below it in memory */
} FreeChunk;

/* A released chunk of an outer scope, in the free list of an inner one until
   that one ends. */
typedef struct {
    char *p;
    size_t bytes;
    int owner;                 /* the depth of the scope it was allocated in */
    int depth;                 /* the depth of the scope whose free list holds it */
} LentChunk;

typedef struct {
    ArenaBlock *block;         /* arena position when the scope opened */
    size_t used;
    uint32_t serial;
    HoldEntry *holds;
    FreeChunk *free;           /* released chunks, highest address first, none adjacent */
    int64_t bytes, tensors, nodes;   /* this thread's scoped counts when it opened,
                                        less what outer scopes gave back since */
} Scope;

typedef struct {
    ArenaBlock *top;
    ArenaBlock *cache;
    size_t cached_bytes;
    void *root_cache[ROOT_CACHE_ENTRIES];          /* oldest first, as root_alloc returned them */
    size_t root_cache_sizes[ROOT_CACHE_ENTRIES];
    int root_cache_count;
    size_t root_cache_bytes;
    Scope *scopes;
    int depth, capacity;
    LentChunk *lent;           /* by depth, innermost last */
    int n_lent, lent_capacity;
    int64_t bytes, tensors, nodes;   /* scoped allocations made by this thread so far */
    int64_t allocated;               /* bytes ever allocated by this thread, root and scoped */
    int64_t budget_end;              /* alloc_budget_begin's cap on allocated; 0: none */
    int budget_spent;                /* an allocation was refused by it */
} ThreadArena;

static int64_t g_bytes_in_use, g_peak_bytes, g_live_tensors, g_live_nodes;
static int64_t g_arena_reserved, g_memory_limit;
static int64_t g_spare_grad_bytes, g_root_cached_bytes;
static uint32_t g_next_serial;   /* process-wide: a serial names one scope of one thread */

static pthread_key_t arena_key;
static pthread_once_t arena_key_once = PTHREAD_ONCE_INIT;
static AC_THREAD_LOCAL ThreadArena *tls_arena;

/* ---- counters ------------------------------------------------------------ */

static void add_bytes(int64_t delta) { counter_add(&g_bytes_in_use, &g_peak_bytes, delta); }

/* Would taking bytes more go past the limit? Sets the error if so. */
static int over_limit(const char *what, size_t bytes)
{
    int64_t limit = __atomic_load_n(&g_memory_limit, __ATOMIC_RELAXED);
    int64_t in_use = __atomic_load_n(&g_bytes_in_use, __ATOMIC_RELAXED);
    if (bytes > (size_t)INT64_MAX / 2)
        return error_set(AC_ERR_MEMORY, "%s: %zu bytes is more than can be allocated", what, bytes);
    if (limit > 0 && in_use + (int64_t)bytes > limit)
        return error_set(AC_ERR_MEMORY,
                         "%s: allocating %zu bytes would pass the memory limit "
                         "(%lld in use, limit %lld)",
                         what, bytes, (long long)in_use, (long long)limit);
    return AC_OK;
}

/* Would taking bytes more pass this thread's allocation budget? Sets the error if so. */
static int over_budget(ThreadArena *ta, size_t bytes)
{
    if (!ta || !ta->budget_end || ta->allocated + (int64_t)bytes <= ta->budget_end) return AC_OK;
    ta->budget_spent = 1;
    return error_set(AC_ERR_MEMORY, "alloc: allocating %zu bytes would pass this thread's allocation "
                     "budget", bytes);
}

void counters_tensor(int delta, int scoped)
{
    __atomic_add_fetch(&g_live_tensors, delta, __ATOMIC_RELAXED);
    if (scoped) tls_arena->tensors += delta;
}

void counters_node(int delta, int scoped)
{
    __atomic_add_fetch(&g_live_nodes, delta, __ATOMIC_RELAXED);
    if (scoped) tls_arena->nodes += delta;
}

int ac_set_memory_limit(int64_t bytes)
{
    if (bytes < 0)
        return error_set(AC_ERR_ARG, "set_memory_limit: limit %lld is negative", (long long)bytes);
    __atomic_store_n(&g_memory_limit, bytes, __ATOMIC_RELAXED);
    return AC_OK;
}

int ac_memory_stats(AcMemStats *out)
{
    if (!out) return error_set(AC_ERR_ARG, "memory_stats: out is NULL");
    out->bytes_in_use = __atomic_load_n(&g_bytes_in_use, __ATOMIC_RELAXED);
    out->peak_bytes = __atomic_load_n(&g_peak_bytes, __ATOMIC_RELAXED);
    out->live_tensors = __atomic_load_n(&g_live_tensors, __ATOMIC_RELAXED);
    out->live_nodes = __atomic_load_n(&g_live_nodes, __ATOMIC_RELAXED);
    out->arena_reserved = __atomic_load_n(&g_arena_reserved, __ATOMIC_RELAXED);
    out->memory_limit = __atomic_load_n(&g_memory_limit, __ATOMIC_RELAXED);
    out->heap_allocations = heap_allocations();
    out->spare_grad_bytes = __atomic_load_n(&g_spare_grad_bytes, __ATOMIC_RELAXED);
    out->root_cached_bytes = __atomic_load_n(&g_root_cached_bytes, __ATOMIC_RELAXED);
    device_memory_stats(out);
    return AC_OK;
}

/* ---- root allocations ---------------------------------------------------- */

/* Take entry i out of ta's root cache. */
static void *root_cache_remove(ThreadArena *ta, int i)
{
    void *p = ta->root_cache[i];
    size_t bytes = ta->root_cache_sizes[i];
    ta->root_cache_count--;
    memmove(&ta->root_cache[i], &ta->root_cache[i + 1],
            (size_t)(ta->root_cache_count - i) * sizeof ta->root_cache[0]);
    memmove(&ta->root_cache_sizes[i], &ta->root_cache_sizes[i + 1],
            (size_t)(ta->root_cache_count - i) * sizeof ta->root_cache_sizes[0]);
    ta->root_cache_bytes -= bytes;
    __atomic_add_fetch(&g_root_cached_bytes, -(int64_t)bytes, __ATOMIC_RELAXED);
    return p;
}

/* The newest cached root allocation of exactly bytes in ta's cache, or NULL. */
static void *root_cache_take(ThreadArena *ta, size_t bytes)
{
    int i;
    for (i = ta->root_cache_count - 1; i >= 0; i--) {
        if (ta->root_cache_sizes[i] == bytes) {
            void *p = root_cache_remove(ta, i);
            MARK_IN_USE(p, bytes);
            return p;
        }
    }
    return NULL;
}

/* Only a thread that already has its arena keeps a cache: making one here could
   happen while the thread exits, after its arena was destroyed. */
static void root_cache_put(void *p, size_t bytes)
{
    ThreadArena *ta = tls_arena;
    if (!ta || bytes > ROOT_CACHE_BYTES) {
        free(((void **)p)[-1]);
        return;
    }
    while (ta->root_cache_count == ROOT_CACHE_ENTRIES || ta->root_cache_bytes + bytes > ROOT_CACHE_BYTES)
        free(((void **)root_cache_remove(ta, 0))[-1]);
    MARK_UNUSED(p, bytes);
    ta->root_cache[ta->root_cache_count] = p;
    ta->root_cache_sizes[ta->root_cache_count] = bytes;
    ta->root_cache_count++;
    ta->root_cache_bytes += bytes;
    __atomic_add_fetch(&g_root_cached_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
}

/* malloc is several times cheaper than posix_memalign for the small tensors
   of a training step, so align by hand: the raw pointer sits just before the
   aligned block. */
void *root_alloc(size_t bytes)
{
    ThreadArena *ta = tls_arena;
    char *raw, *aligned;
    if (over_limit("alloc", bytes) || over_budget(ta, bytes)) return NULL;
    aligned = ta ? root_cache_take(ta, bytes) : NULL;
    if (!aligned) {
        raw = malloc(bytes + AC_ALIGN);
        if (!raw) return error_null(AC_ERR_MEMORY, "alloc: out of memory allocating %zu bytes", bytes);
        count_heap_allocation();
        aligned = (char *)(((uintptr_t)raw + AC_ALIGN) & ~(uintptr_t)(AC_ALIGN - 1));
        ((void **)aligned)[-1] = raw;
    }
    add_bytes((int64_t)bytes);
    if (ta) ta->allocated += (int64_t)bytes;
    return aligned;
}

void root_free(void *p, size_t bytes)
{
    if (!p) return;
    root_cache_put(p, bytes);
    add_bytes(-(int64_t)bytes);
}

void root_set_aside(size_t bytes)
{
    add_bytes(-(int64_t)bytes);
    __atomic_add_fetch(&g_spare_grad_bytes, (int64_t)bytes, __ATOMIC_RELAXED);
}

int root_take_back(size_t bytes)
{
    if (over_limit("alloc", bytes)) return AC_ERR_MEMORY;
    __atomic_add_fetch(&g_spare_grad_bytes, -(int64_t)bytes, __ATOMIC_RELAXED);
    add_bytes((int64_t)bytes);
    return AC_OK;
}

void root_free_set_aside(void *p, size_t bytes)
{
    free(((void **)p)[-1]);
    __atomic_add_fetch(&g_spare_grad_bytes, -(int64_t)bytes, __ATOMIC_RELAXED);
}

/* ---- per-thread arena ---------------------------------------------------- */

static void block_release(ArenaBlock *b)
{
    __atomic_add_fetch(&g_arena_reserved, -(int64_t)(b->size + BLOCK_HEADER_BYTES), __ATOMIC_RELAXED);
    free(b);
}

/* How a hold's reference is dropped: ac_tensor_free, which tensor.c (a layer
   above) registers when libac loads. */
static int (*tensor_release)(AcTensor *t);

void scope_on_release(int (*release)(AcTensor *t)) { tensor_release = release; }

static void scope_drop_holds(Scope *s)
{
    HoldEntry *h = s->holds;
    while (h) {
        HoldEntry *next = h->next;
        tensor_release(h->tensor);
        if (h->on_heap) free(h);
        h = next;
    }
    s->holds = NULL;
}

static void lent_return(ThreadArena *ta);

/* End the scopes above new_depth: drop holds, uncount, move the arena back,
   pass lent chunks on. */
static void arena_pop_to(ThreadArena *ta, int new_depth)
{
    while (ta->depth > new_depth) {
        Scope *s = &ta->scopes[ta->depth - 1];
        scope_drop_holds(s);
        add_bytes(-(ta->bytes - s->bytes));
        __atomic_add_fetch(&g_live_tensors, -(ta->tensors - s->tensors), __ATOMIC_RELAXED);
        __atomic_add_fetch(&g_live_nodes, -(ta->nodes - s->nodes), __ATOMIC_RELAXED);
        ta->bytes = s->bytes;
        ta->tensors = s->tensors;
        ta->nodes = s->nodes;
        device_arena_pop(ta->depth);
        while (ta->top != s->block) {
            ArenaBlock *b = ta->top;
            ta->top = b->prev;
            if (ta->cached_bytes + b->size <= ARENA_CACHE_BYTES) {
                b->prev = ta->cache;
                ta->cache = b;
                ta->cached_bytes += b->size;
                MARK_UNUSED((char *)b + BLOCK_HEADER_BYTES, b->size);
            } else {
                block_release(b);
            }
        }
        if (ta->top) {
            ta->top->used = s->used;
            MARK_UNUSED((char *)ta->top + BLOCK_HEADER_BYTES + s->used, ta->top->size - s->used);
        }
        ta->depth--;
        lent_return(ta);
    }
}

static void thread_arena_destroy(void *p)
{
    ThreadArena *ta = p;
    tls_arena = ta;   /* holds may be released through counters that read it */
    arena_pop_to(ta, 0);
    while (ta->top) {
        ArenaBlock *b = ta->top;
        ta->top = b->prev;
        block_release(b);
    }
    while (ta->cache) {
        ArenaBlock *b = ta->cache;
        ta->cache = b->prev;
        block_release(b);
    }
    while (ta->root_cache_count > 0)
        free(((void **)root_cache_remove(ta, ta->root_cache_count - 1))[-1]);
    free(ta->scopes);
    free(ta->lent);
    free(ta);
    tls_arena = NULL;
}

static void arena_key_create(void) { pthread_key_create(&arena_key, thread_arena_destroy); }

static ThreadArena *thread_arena(void)
{
    if (tls_arena) return tls_arena;
    pthread_once(&arena_key_once, arena_key_create);
    tls_arena = calloc(1, sizeof *tls_arena);
    if (!tls_arena) return error_null(AC_ERR_MEMORY, "mem_checkpoint: out of memory");
    count_heap_allocation();
    pthread_setspecific(arena_key, tls_arena);
    return tls_arena;
}

int current_depth(void) { return tls_arena ? tls_arena->depth : 0; }

int ac_mem_depth(void) { return current_depth(); }

int64_t bytes_allocated(void)
{
    ThreadArena *ta = thread_arena();   /* made now, so root allocations count from here on */
    return ta ? ta->allocated : 0;
}

uint32_t current_serial(void)
{
    return tls_arena && tls_arena->depth > 0 ? tls_arena->scopes[tls_arena->depth - 1].serial : 0;
}

int current_scope(uint32_t *serial)
{
    const ThreadArena *ta = tls_arena;
    if (!ta || ta->depth == 0) return 0;
    *serial = ta->scopes[ta->depth - 1].serial;
    return ta->depth;
}

static ArenaBlock *block_take(ThreadArena *ta, size_t bytes)
{
    ArenaBlock **link = &ta->cache;
    ArenaBlock *b;
    void *p = NULL;
    size_t size;
    while (*link) {
        if ((*link)->size >= bytes) {
            b = *link;
            *link = b->prev;
            ta->cached_bytes -= b->size;
            return b;
        }
        link = &(*link)->prev;
    }
    size = bytes > ARENA_BLOCK_BYTES ? bytes : ARENA_BLOCK_BYTES;
    if (posix_memalign(&p, AC_ALIGN, size + BLOCK_HEADER_BYTES) != 0)
        return error_null(AC_ERR_MEMORY, "alloc: out of memory for an arena block of %zu bytes", size);
    count_heap_allocation();
    b = p;
    b->size = size;
    __atomic_add_fetch(&g_arena_reserved, (int64_t)(size + BLOCK_HEADER_BYTES), __ATOMIC_RELAXED);
    return b;
}

/* ---- released chunks ----------------------------------------------------- */

/* Best fit among the scope's free chunks: the top end of the smallest one that
   holds bytes, or NULL when none does. */
static void *free_take(Scope *s, size_t bytes)
{
    FreeChunk **link, **best = NULL, *c;
    for (link = &s->free; *link; link = &(*link)->next)
        if ((*link)->size >= bytes && (!best || (*link)->size < (*best)->size)) best = link;
    if (!best) return NULL;
    c = *best;
    if (c->size - bytes >= FREE_MIN_BYTES) {
        c->size -= bytes;
        return (char *)c + c->size;
    }
    *best = c->next;   /* all of it: a smaller rest would only lengthen the list */
    return c;
}

/* Add [p, p + bytes) to the scope's free list, joined with free neighbours. */
static void free_insert(Scope *s, char *p, size_t bytes)
{
    FreeChunk **link = &s->free, **above = NULL, *c;
    while (*link && (uintptr_t)*link > (uintptr_t)p) {
        above = link;
        link = &(*link)->next;
    }
    MARK_UNUSED(p, bytes);
    if (*link && (uintptr_t)*link + (*link)->size == (uintptr_t)p) {
        c = *link;
        c->size += bytes;
    } else {
        c = (FreeChunk *)p;
        MARK_IN_USE(c, sizeof *c);   /* the header, read while the chunk is listed */
        c->size = bytes;
        c->next = *link;
        *link = c;
    }
    if (above && (uintptr_t)c + c->size == (uintptr_t)*above) {
        FreeChunk *joined = *above;
        c->size += joined->size;
        *above = c;
        MARK_UNUSED(joined, sizeof *joined);
    }
}

/* After the top moved down: a free chunk that now ends at the top goes too.
   At most one can, since neighbours are always joined. */
static void free_trim_top(Scope *s, ArenaBlock *top)
{
    FreeChunk **link;
    char *end = (char *)top + BLOCK_HEADER_BYTES + top->used;
    for (link = &s->free; *link; link = &(*link)->next) {
        if ((char *)*link + (*link)->size == end) {
            FreeChunk *c = *link;
            top->used -= c->size;
            *link = c->next;
            MARK_UNUSED(c, sizeof *c);
            return;
        }
    }
}

/* Record [p, p + bytes) of the scope at depth owner as lent to the innermost
   scope; fails only when the record cannot grow. */
static int lent_push(ThreadArena *ta, char *p, size_t bytes, int owner)
{
    LentChunk *c;
    if (ta->n_lent == ta->lent_capacity) {
        int capacity = ta->lent_capacity ? ta->lent_capacity * 2 : 64;
        LentChunk *grown = realloc(ta->lent, (size_t)capacity * sizeof *grown);
        if (!grown) return AC_ERR_MEMORY;
        count_heap_allocation();
        ta->lent = grown;
        ta->lent_capacity = capacity;
    }
    c = &ta->lent[ta->n_lent++];
    c->p = p;
    c->bytes = bytes;
    c->owner = owner;
    c->depth = ta->depth;
    return AC_OK;
}

/* The scope at depth ta->depth + 1 has ended: the chunks lent to it go to the
   free list of the now innermost scope, whose own they may be. Whatever the
   ended scope made of them died with it. */
static void lent_return(ThreadArena *ta)
{
    int first = ta->n_lent, i, kept;
    Scope *s;
    while (first > 0 && ta->lent[first - 1].depth == ta->depth + 1) first--;
    if (first == ta->n_lent) return;
    s = &ta->scopes[ta->depth - 1];
    for (i = kept = first; i < ta->n_lent; i++) {
        LentChunk c = ta->lent[i];
        free_insert(s, c.p, c.bytes);
        c.depth = ta->depth;
        if (c.owner != ta->depth) ta->lent[kept++] = c;
    }
    ta->n_lent = kept;
    if (ta->top) free_trim_top(s, ta->top);
}

/* The depth of the calling thread's scope with this serial, or 0. */
static int scope_depth_of(const ThreadArena *ta, uint32_t serial)
{
    int d;
    for (d = ta->depth; d > 0; d--)
        if (ta->scopes[d - 1].serial == serial) return d;
    return 0;
}

int arena_release(void *p, size_t bytes, uint32_t serial, int tensors, int nodes)
{
    ThreadArena *ta = tls_arena;
    Scope *s;
    ArenaBlock *top;
    int owner, on_top, d;
    if (!ta || ta->depth == 0 || !ta->top) return 0;
    owner = scope_depth_of(ta, serial);
    if (owner == 0) return 0;
    s = &ta->scopes[ta->depth - 1];
    top = ta->top;
    /* only the innermost scope's own allocations can be on top */
    on_top = owner == ta->depth && (char *)p + bytes == (char *)top + BLOCK_HEADER_BYTES + top->used;
    if (!on_top && bytes < FREE_MIN_BYTES) return 0;
    if (owner < ta->depth && lent_push(ta, p, bytes, owner)) return 0;
    if (on_top) {
        top->used -= bytes;
        MARK_UNUSED(p, bytes);
        free_trim_top(s, top);
    } else {
        free_insert(s, p, bytes);
    }
    ta->bytes -= (int64_t)bytes;
    ta->tensors -= tensors;
    ta->nodes -= nodes;
    add_bytes(-(int64_t)bytes);
    __atomic_add_fetch(&g_live_tensors, -tensors, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_live_nodes, -nodes, __ATOMIC_RELAXED);
    /* The scopes opened since it was allocated counted it when they opened;
       they must not count it again when they end. */
    for (d = owner; d < ta->depth; d++) {
        ta->scopes[d].bytes -= (int64_t)bytes;
        ta->scopes[d].tensors -= tensors;
        ta->scopes[d].nodes -= nodes;
    }
    return 1;
}

int alloc_budget_begin(int64_t bytes)
{
    ThreadArena *ta = thread_arena();
    if (!ta) return ac_last_error_code();
    ta->budget_end = ta->allocated + (bytes > 0 ? bytes : 1);
    ta->budget_spent = 0;
    return AC_OK;
}

int alloc_budget_end(void)
{
    ThreadArena *ta = tls_arena;
    int spent = ta ? ta->budget_spent : 0;
    if (ta) ta->budget_end = ta->budget_spent = 0;
    return spent;
}

/* arena_alloc on ta, the calling thread's arena. */
static void *arena_alloc_in(ThreadArena *ta, size_t bytes)
{
    ArenaBlock *b;
    void *p;
    if (!ta || ta->depth == 0)
        return error_null(AC_ERR_SCOPE, "alloc: no scope is open on this thread");
    if (bytes > SIZE_MAX - AC_ALIGN)
        return error_null(AC_ERR_MEMORY, "alloc: %zu bytes is more than can be allocated", bytes);
    bytes = (bytes + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1);
    if (over_limit("alloc", bytes) || over_budget(ta, bytes)) return NULL;
    p = ta->scopes[ta->depth - 1].free ? free_take(&ta->scopes[ta->depth - 1], bytes) : NULL;
    if (p) {
        ta->bytes += (int64_t)bytes;
        ta->allocated += (int64_t)bytes;
        add_bytes((int64_t)bytes);
        MARK_IN_USE(p, bytes);
        return p;
    }
    b = ta->top;
    if (!b || b->size - b->used < bytes) {
        b = block_take(ta, bytes);
        if (!b) return NULL;
        b->used = 0;
        b->prev = ta->top;
        ta->top = b;
    }
    b->used += bytes;
    ta->bytes += (int64_t)bytes;
    ta->allocated += (int64_t)bytes;
    add_bytes((int64_t)bytes);
    p = (char *)b + BLOCK_HEADER_BYTES + b->used - bytes;
    MARK_IN_USE(p, bytes);
    return p;
}

void *arena_alloc(size_t bytes) { return arena_alloc_in(tls_arena, bytes); }

void *arena_alloc_tensor(size_t bytes, int nodes, int *depth, uint32_t *serial)
{
    ThreadArena *ta = tls_arena;
    void *p;
    if (!ta || ta->depth == 0) {
        *depth = 0;
        return root_alloc(bytes);
    }
    *depth = ta->depth;
    *serial = ta->scopes[ta->depth - 1].serial;
    p = arena_alloc_in(ta, bytes);
    if (!p) return NULL;
    ta->tensors++;
    __atomic_add_fetch(&g_live_tensors, 1, __ATOMIC_RELAXED);
    if (nodes) {
        ta->nodes += nodes;
        __atomic_add_fetch(&g_live_nodes, nodes, __ATOMIC_RELAXED);
    }
    return p;
}

void *scratch_alloc(size_t bytes)
{
    ThreadArena *ta = tls_arena;
    return ta && ta->depth > 0 ? arena_alloc_in(ta, bytes) : root_alloc(bytes);
}

void scratch_free(void *p, size_t bytes)
{
    uint32_t serial;
    if (!p) return;
    if (current_scope(&serial) == 0)
        root_free(p, bytes);
    else   /* arena_alloc rounded the size up */
        arena_release(p, (bytes + AC_ALIGN - 1) & ~(size_t)(AC_ALIGN - 1), serial, 0, 0);
}

/* ---- scopes -------------------------------------------------------------- */

AcCheckpoint ac_mem_checkpoint(void)
{
    AcCheckpoint cp = {-1, 0};
    ThreadArena *ta = thread_arena();
    Scope *s;
    if (!ta) return cp;
    if (ta->depth == ta->capacity) {
        int capacity = ta->capacity ? ta->capacity * 2 : 16;
        Scope *grown;
        if (capacity > ARENA_MAX_DEPTH) {
            error_set(AC_ERR_SCOPE, "mem_checkpoint: more than %d nested scopes", ARENA_MAX_DEPTH);
            return cp;
        }
        grown = realloc(ta->scopes, (size_t)capacity * sizeof *grown);
        if (!grown) {
            error_set(AC_ERR_MEMORY, "mem_checkpoint: out of memory");
            return cp;
        }
        count_heap_allocation();
        ta->scopes = grown;
        ta->capacity = capacity;
    }
    s = &ta->scopes[ta->depth++];
    s->block = ta->top;
    s->used = ta->top ? ta->top->used : 0;
    s->serial = __atomic_add_fetch(&g_next_serial, 1, __ATOMIC_RELAXED);
    s->holds = NULL;
    s->free = NULL;
    s->bytes = ta->bytes;
    s->tensors = ta->tensors;
    s->nodes = ta->nodes;
    if (device_arena_mark(ta->depth)) {
        ta->depth--;
        return cp;
    }
    cp.depth = ta->depth;
    cp.serial = s->serial;
    return cp;
}

int ac_mem_restore(AcCheckpoint cp)
{
    ThreadArena *ta = tls_arena;
    if (!ta || cp.depth < 1 || cp.depth > ta->depth || ta->scopes[cp.depth - 1].serial != cp.serial)
        return error_set(AC_ERR_SCOPE,
                         "mem_restore: checkpoint (depth %d) is not open on this thread", cp.depth);
    arena_pop_to(ta, cp.depth - 1);
    return AC_OK;
}

/* Push t onto s's holds; the hold owns one reference of t from now on. */
static int hold_push(ThreadArena *ta, Scope *s, AcTensor *t, int on_heap)
{
    HoldEntry *h = on_heap ? malloc(sizeof *h) : arena_alloc_in(ta, sizeof *h);
    if (!h) return error_set(AC_ERR_MEMORY, "alloc: out of memory");
    if (on_heap) count_heap_allocation();
    h->tensor = t;
    h->on_heap = on_heap;
    h->next = s->holds;
    s->holds = h;
    return AC_OK;
}

int scope_hold(AcTensor *t)
{
    ThreadArena *ta = tls_arena;
    if (t->scope_depth != 0) return AC_OK;   /* scoped: kept until its own scope ends */
    if (!ta || ta->depth == 0) return AC_OK;
    return hold_push(ta, &ta->scopes[ta->depth - 1], t, 0);
}

int scope_hold_at(AcTensor *t, int depth)
{
    ThreadArena *ta = tls_arena;
    if (!ta || depth < 1 || depth > ta->depth)
        return error_set(AC_ERR_SCOPE, "alloc: scope at depth %d is not open on this thread", depth);
    return hold_push(ta, &ta->scopes[depth - 1], t, 1);
}
