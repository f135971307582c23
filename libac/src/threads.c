/*
 * threads.c - the one thread pool, parallel_for, and ac_set_num_threads.
 *
 * Workers are persistent pthreads, started on first use and sized by
 * AC_NUM_THREADS or the usable cores. The calling thread works too: it posts a
 * job, claims chunks alongside the workers, then waits for the chunks they
 * hold. Idle threads poll only briefly, then sleep on a condition variable,
 * so a core taken by another process costs a wake-up, never a spinning
 * thread that steals it; and when other processes keep the cores busy, the
 * pool notices and runs jobs serially for a while (see note_job_timing).
 * Work that is small, nested inside a parallel region, or arrives while
 * another thread owns the pool runs serially on its caller.
 * A forked child starts with no workers and makes new ones when it needs them;
 * workers are joined when the library is unloaded or the process exits.
 */
#define _POSIX_C_SOURCE 200809L
#ifdef __linux__
#define _GNU_SOURCE  /* sched_getaffinity, CPU_COUNT */
#endif

#include "internal.h"

#include <pthread.h>
#ifdef __linux__
#include <sched.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
/* How long an idle thread polls for work before it sleeps. */
#define SPIN_NANOSECONDS 200000
/* How long a worker out of chunks polls for the caller to finish the job's
   last ones (a chunk of a mid-sized job takes longer than SPIN_NANOSECONDS). */
#define CLOSE_SPIN_NANOSECONDS 2000000
/* Chunks per thread: a few, so a thread that is slowed down holds back little. */
#define CHUNKS_PER_THREAD 4
/* After a job that threads made slower, run serially for this long, doubled
   for each such job not yet outweighed by a good one, up to
   2^RETREAT_MAX_DOUBLINGS times. */
#define RETREAT_NANOSECONDS 500000
#define RETREAT_MAX_DOUBLINGS 8

/*
 * The job word, read and written atomically: the job's generation in the high
 * 32 bits, a closed flag, and how many workers have joined the job. A closed
 * job takes no new workers; the caller closes it once every chunk is claimed
 * and returns when no worker is left in it.
 */
#define JOB_CLOSED ((uint64_t)1 << 31)
#define JOB_ACTIVE ((uint64_t)JOB_CLOSED - 1)
#define JOB_GENERATION(word) ((uint32_t)((word) >> 32))

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_posted = PTHREAD_COND_INITIALIZER;  /* workers sleep here */
static pthread_cond_t job_left = PTHREAD_COND_INITIALIZER;     /* the caller sleeps here */
static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;

static pthread_t workers[MAX_THREADS - 1];
static uint32_t worker_first_generation[MAX_THREADS - 1];  /* the generation at its start */
static int worker_count;      /* changed only by the pool's owner */
static int sleeping_workers;  /* under pool_lock */
static int stopping;          /* atomic: workers exit */
static int pool_owned;        /* atomic: a caller is using the pool */
static uint64_t job_word;     /* atomic: see JOB_CLOSED */

/* The current job: written by the owner before it publishes job_word. */
static ParallelFn job_fn;
static void *job_ctx;
static int64_t job_n, job_chunk, job_chunks;
static int job_workers;         /* atomic: workers [0, job_workers) may join */
static int64_t job_next_chunk;  /* atomic */

/* The retreat (changed only by the pool's owner): see RETREAT_NANOSECONDS. */
static int64_t serial_until;
static int late_jobs;  /* slow jobs not yet outweighed by good ones */
static int last_job_woke;  /* the last parallel job had to wake sleeping workers */

static int thread_count;  /* atomic: 0 until first asked */
static AC_THREAD_LOCAL int in_parallel_region;

/* ---- thread count -------------------------------------------------------- */

/* The cores this process may run on: its CPU affinity where the system tells
   it (mpiexec --bind-to core, taskset), else the cores online. So ranks pinned
   to one core each run one thread each and do not oversubscribe. */
static long usable_cores(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

static int default_thread_count(void)
{
    const char *env = getenv("AC_NUM_THREADS");
    long n;
    if (env) {
        char *end;
        n = strtol(env, &end, 10);
        if (end != env && *end == '\0' && n >= 1 && n <= MAX_THREADS) return (int)n;
    }
    n = usable_cores();
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

int ac_get_num_threads(void)
{
    int n = __atomic_load_n(&thread_count, __ATOMIC_RELAXED), unset = 0;
    if (n == 0) {
        n = default_thread_count();
        /* A concurrent ac_set_num_threads wins over the default. */
        if (!__atomic_compare_exchange_n(&thread_count, &unset, n, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            n = unset;
    }
    return n;
}

int ac_set_num_threads(int n)
{
    if (n < 1 || n > MAX_THREADS)
        return error_set(AC_ERR_ARG, "set_num_threads: n must be in 1..%d, got %d",
                         MAX_THREADS, n);
    __atomic_store_n(&thread_count, n, __ATOMIC_RELAXED);
    return AC_OK;
}

/* ---- waiting ------------------------------------------------------------- */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_nanoseconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Poll done(arg) for about `nanoseconds`; 1 if it came true. */
static int spin_until(int (*done)(void *), void *arg, int64_t nanoseconds)
{
    int64_t deadline = 0;
    int polls;
    for (polls = 1;; polls++) {
        if (done(arg)) return 1;
        cpu_relax();
        if (polls % 64 == 0) {
            int64_t t = now_nanoseconds();
            if (deadline == 0) deadline = t + nanoseconds;
            else if (t > deadline) return 0;
        }
    }
}

/* The job a worker took part in is closed (or a newer one is posted): the
   caller has claimed the last chunk, and the next job comes soon. */
static int job_closed(void *seen_generation)
{
    uint64_t word = __atomic_load_n(&job_word, __ATOMIC_ACQUIRE);
    return JOB_GENERATION(word) != *(uint32_t *)seen_generation || (word & JOB_CLOSED) ||
           __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

static int new_job_posted(void *seen_generation)
{
    uint64_t word = __atomic_load_n(&job_word, __ATOMIC_ACQUIRE);
    return JOB_GENERATION(word) != *(uint32_t *)seen_generation ||
           __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

static int job_empty(void *unused)
{
    (void)unused;
    return (__atomic_load_n(&job_word, __ATOMIC_ACQUIRE) & JOB_ACTIVE) == 0;
}

/* ---- running a job ------------------------------------------------------- */

static void run_chunks(void)
{
    for (;;) {
        int64_t chunk = __atomic_fetch_add(&job_next_chunk, 1, __ATOMIC_RELAXED);
        int64_t begin = chunk * job_chunk;
        if (chunk >= job_chunks) return;
        job_fn(job_ctx, begin, begin + job_chunk < job_n ? begin + job_chunk : job_n);
    }
}

/* Join job `generation` if it is still open; 1 when joined. */
static int join_job(uint32_t generation)
{
    uint64_t word = __atomic_load_n(&job_word, __ATOMIC_ACQUIRE);
    while (JOB_GENERATION(word) == generation && !(word & JOB_CLOSED)) {
        if (__atomic_compare_exchange_n(&job_word, &word, word + 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return 1;
    }
    return 0;
}

static void leave_job(void)
{
    uint64_t word = __atomic_sub_fetch(&job_word, 1, __ATOMIC_ACQ_REL);
    if ((word & JOB_CLOSED) && (word & JOB_ACTIVE) == 0) {
        pthread_mutex_lock(&pool_lock);
        pthread_cond_signal(&job_left);
        pthread_mutex_unlock(&pool_lock);
    }
}

static void *worker_main(void *arg)
{
    int index = (int)(intptr_t)arg;
    uint32_t seen = worker_first_generation[index];
    int eligible = 1;  /* this worker may take part in the jobs now posted */
    in_parallel_region = 1;
    for (;;) {
        /* Only a worker the jobs use polls; the others sleep straight away.
           The poll for the next job starts when the caller is done with this
           one, not when this worker ran out of chunks. */
        if (!eligible || !spin_until(job_closed, &seen, CLOSE_SPIN_NANOSECONDS) ||
            !spin_until(new_job_posted, &seen, SPIN_NANOSECONDS)) {
            pthread_mutex_lock(&pool_lock);
            sleeping_workers++;
            while (!new_job_posted(&seen)) pthread_cond_wait(&work_posted, &pool_lock);
            sleeping_workers--;
            pthread_mutex_unlock(&pool_lock);
        }
        if (__atomic_load_n(&stopping, __ATOMIC_ACQUIRE)) return NULL;
        seen = JOB_GENERATION(__atomic_load_n(&job_word, __ATOMIC_ACQUIRE));
        eligible = index < __atomic_load_n(&job_workers, __ATOMIC_RELAXED);
        if (eligible && join_job(seen)) {
            run_chunks();
            leave_job();
        }
    }
}

/* ---- starting and stopping workers (only the pool's owner calls these) --- */

static void stop_workers(void)
{
    int i;
    pthread_mutex_lock(&pool_lock);
    __atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&work_posted);
    pthread_mutex_unlock(&pool_lock);
    for (i = 0; i < worker_count; i++) pthread_join(workers[i], NULL);
    worker_count = 0;
}

static void fork_prepare(void) { pthread_mutex_lock(&pool_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&pool_lock); }

/* The child has only the forking thread: forget the workers, free the pool. */
static void fork_child(void)
{
    pthread_mutex_unlock(&pool_lock);
    pthread_cond_init(&work_posted, NULL);
    pthread_cond_init(&job_left, NULL);
    worker_count = 0;
    sleeping_workers = 0;
    stopping = 0;
    job_word = 0;
    pool_owned = 0;
    serial_until = 0;
    late_jobs = 0;
    last_job_woke = 0;
}

static void register_fork_handlers(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Start workers until there are `wanted`; 0 if there are none. Workers are
   never stopped when fewer are wanted: the extra ones sleep. They block all
   signals, so signals reach the application's own threads. */
static int ensure_workers(int wanted)
{
    uint32_t generation = JOB_GENERATION(__atomic_load_n(&job_word, __ATOMIC_ACQUIRE));
    sigset_t all, previous;
    if (worker_count >= wanted) return worker_count > 0;
    pthread_once(&fork_handlers_once, register_fork_handlers);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    while (worker_count < wanted) {
        worker_first_generation[worker_count] = generation;
        if (pthread_create(&workers[worker_count], NULL, worker_main,
                           (void *)(intptr_t)worker_count) != 0)
            break;
        worker_count++;
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    return worker_count > 0;
}

/* Joins the workers at exit, unless a caller still owns the pool; the pool
   stays owned, so any later call runs serially. */
__attribute__((destructor)) static void pool_shutdown(void)
{
    if (__atomic_exchange_n(&pool_owned, 1, __ATOMIC_ACQUIRE) == 0) stop_workers();
}

/* ---- parallel_for -------------------------------------------------------- */

/* CPU time the calling thread has used; 0 where the clock is missing. */
static int64_t thread_cpu_nanoseconds(void)
{
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec t;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t) == 0)
        return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
#endif
    return 0;
}

/*
 * Threads only pay when they run at the same time. When other processes
 * hold the cores, a worker descheduled while holding a chunk makes the caller
 * wait for it, and the caller itself gets only part of a core. After a job
 * where either happened (the caller waited longer than the job was worth, or
 * ran for less than 3/4 of the time it took), the pool retreats: jobs run
 * serially for a while, so a busy machine makes many threads no slower than
 * one. The first job that has to wake sleeping workers counts as neither
 * slow nor good: the wake-up is the price of the pool having been idle (and
 * the scheduler often runs the woken worker on the caller's core for a
 * while, which starves the caller), and it is paid again after every
 * retreat, so counting it would make retreats feed themselves. A second such
 * job in a row counts: workers that fall asleep between jobs either share
 * their core with another process or get jobs too far apart to pay.
 * One slow job costs the wait for a descheduled thread, a scheduler time
 * slice, while a good one saves a fraction of a short job; so a good job
 * undoes only one slow job, and a core that is busy now and then keeps the
 * pool serial most of the time.
 */
static void note_job_timing(int64_t posted, int64_t caller_done, int64_t all_done,
                            int64_t caller_cpu, int threads, int woke_workers)
{
    int64_t caller_wall = caller_done - posted;
    int late = all_done - caller_done > caller_wall * (threads - 1);
    int starved = caller_cpu > 0 && caller_cpu * 4 < caller_wall * 3;
    int first_wake = woke_workers && !last_job_woke;
    last_job_woke = woke_workers;
    if (first_wake) return;  /* neither slow nor good: see above */
    if (late || starved) {
        if (late_jobs < RETREAT_MAX_DOUBLINGS) late_jobs++;
        serial_until = all_done + ((int64_t)RETREAT_NANOSECONDS << (late_jobs - 1));
    } else if (late_jobs > 0) {
        late_jobs--;
    }
}

void parallel_for(int64_t n, int64_t grain, ParallelFn fn, void *ctx)
{
    int threads;
    int64_t chunk, posted, caller_done, caller_cpu;
    uint64_t word;
    int woke_workers;
    ProfiledTask task;
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    threads = ac_get_num_threads();
    chunk = (n + (int64_t)threads * CHUNKS_PER_THREAD - 1) / ((int64_t)threads * CHUNKS_PER_THREAD);
    if (chunk < grain) chunk = grain;
    if (threads == 1 || chunk >= n || in_parallel_region ||
        __atomic_exchange_n(&pool_owned, 1, __ATOMIC_ACQUIRE)) {
        fn(ctx, 0, n);
        return;
    }
    posted = now_nanoseconds();
    if (posted < serial_until || !ensure_workers(threads - 1)) {
        __atomic_store_n(&pool_owned, 0, __ATOMIC_RELEASE);
        fn(ctx, 0, n);
        return;
    }
    __atomic_store_n(&job_workers, threads - 1, __ATOMIC_RELAXED);
    caller_cpu = thread_cpu_nanoseconds();
    if (profiler_active) {   /* each chunk an event of the thread that runs it */
        profile_task_wrap(&task, fn, ctx);
        fn = profile_task_run;
        ctx = &task;
    }

    job_fn = fn;
    job_ctx = ctx;
    job_n = n;
    job_chunk = chunk;
    job_chunks = (n + chunk - 1) / chunk;
    job_next_chunk = 0;
    pthread_mutex_lock(&pool_lock);
    word = (uint64_t)(JOB_GENERATION(__atomic_load_n(&job_word, __ATOMIC_RELAXED)) + 1) << 32;
    __atomic_store_n(&job_word, word, __ATOMIC_RELEASE);
    woke_workers = sleeping_workers > 0;
    if (woke_workers) pthread_cond_broadcast(&work_posted);
    pthread_mutex_unlock(&pool_lock);

    in_parallel_region = 1;
    run_chunks();
    in_parallel_region = 0;
    caller_done = now_nanoseconds();
    caller_cpu = thread_cpu_nanoseconds() - caller_cpu;

    /* Every chunk is claimed; wait for the workers still running theirs. */
    __atomic_fetch_or(&job_word, JOB_CLOSED, __ATOMIC_ACQ_REL);
    if (!spin_until(job_empty, NULL, SPIN_NANOSECONDS)) {
        pthread_mutex_lock(&pool_lock);
        while (!job_empty(NULL)) pthread_cond_wait(&job_left, &pool_lock);
        pthread_mutex_unlock(&pool_lock);
    }
    note_job_timing(posted, caller_done, now_nanoseconds(), caller_cpu, threads,
                    woke_workers);
    __atomic_store_n(&pool_owned, 0, __ATOMIC_RELEASE);
}
