/*
 * counters.c - the process-wide count of heap allocations
 * (AcMemStats.heap_allocations), which every layer adds to.
 *
 * Below arena.c and device_arena.c, so that neither calls the other for it
 * (nor for counter_add, an inline in internal.h).
 */
#include "internal.h"

static int64_t g_heap_allocations;

void count_heap_allocation(void) { __atomic_add_fetch(&g_heap_allocations, 1, __ATOMIC_RELAXED); }

int64_t heap_allocations(void) { return __atomic_load_n(&g_heap_allocations, __ATOMIC_RELAXED); }
