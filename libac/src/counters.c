/*
 * counters.c - the counters both arenas keep: a value with its peak, and the
 * process-wide count of heap allocations (AcMemStats.heap_allocations).
 *
 * Below arena.c and device_arena.c, so that neither calls the other for them.
 */
#include "internal.h"

static int64_t g_heap_allocations;

void counter_add(int64_t *value, int64_t *peak, int64_t delta)
{
    int64_t now = __atomic_add_fetch(value, delta, __ATOMIC_RELAXED);
    int64_t seen = __atomic_load_n(peak, __ATOMIC_RELAXED);
    while (now > seen &&
           !__atomic_compare_exchange_n(peak, &seen, now, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

void count_heap_allocation(void) { __atomic_add_fetch(&g_heap_allocations, 1, __ATOMIC_RELAXED); }

int64_t heap_allocations(void) { return __atomic_load_n(&g_heap_allocations, __ATOMIC_RELAXED); }
