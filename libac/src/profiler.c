/*
 * profiler.c - per-op timing: events, ranges, Chrome traces, AC_PROFILE.
 *
 * While the profiler runs, the thread that started it observes its ops
 * (ops_observed, graph.h): each covered op's one entry branch sends it through
 * graph_call to observed_run, which times it as an event. The backward walk
 * times each node's backward (profile_backward), parallel_for times each
 * chunk the pool runs, on whichever thread runs it (profile_task_wrap), and
 * ac_profiler_push/pop open named ranges (scopes) around them. An event keeps
 * its start, duration, the time of the events nested in it on its thread
 * (self time is the rest), the bytes its thread allocated meanwhile, FLOPs
 * for matmul/linear/conv2d, and optionally its inputs' shapes.
 *
 * Each thread appends to a buffer of its own, so recording takes no lock;
 * buffers are registered once and reused by later sessions. Events are read
 * (ac_profiler_event, ac_profiler_dump) after ac_profiler_stop, until the
 * next start. AC_PROFILE=path profiles the thread that loads the library
 * from load to exit and writes the trace there.
 *
 * Not here: what an op computes; the entry branch itself (graph.c, ops/).
 */
#define _POSIX_C_SOURCE 200809L

#include "graph.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 64        /* events open at once on a thread */
#define MAX_RANGE_DEPTH 56  /* ranges leave room for an op, its backward and a task */

typedef struct {
    const char *name;    /* an op's literal or an interned name */
    const char *scope;   /* the innermost enclosing range's name; NULL at top level */
    int64_t start_ns, duration_ns, child_ns;
    int64_t bytes, child_bytes, flops;
    int32_t kind, depth;
    int64_t shapes;      /* offset in its thread's text, or -1 */
} Event;

typedef struct ThreadEvents {
    struct ThreadEvents *next;   /* the registry, under registry_lock */
    int free;                    /* its thread has ended: a new thread may take it (registry_lock) */
    uint32_t session;            /* the session its events belong to */
    int32_t thread;              /* the session's number for this thread */
    Event *events;
    int64_t n, cap;
    char *text;                  /* input shapes, NUL-terminated strings */
    int64_t text_len, text_cap;
    int32_t open[MAX_DEPTH];     /* indices of the open events, innermost last */
    int32_t depth, ranges;
    const char *scope;           /* name of the innermost open range */
} ThreadEvents;

typedef struct {
    const void *key;     /* the base name (pointer), or NULL for a range (matched by text) */
    int32_t kind;
    char *text;
} Name;

AC_THREAD_LOCAL int ops_observed;
AC_THREAD_LOCAL int profiler_active;
static AC_THREAD_LOCAL ThreadEvents *mine;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;  /* set to a thread's buffer: thread_ended runs at its exit */
static ThreadEvents *registry;
static int32_t session_threads;   /* threads with events this session, under registry_lock */
static uint32_t session;          /* changed by start only */
static int running;               /* atomic */
static int record_shapes;
static int64_t session_start_ns;
static Name *names;               /* interned on the profiling thread only */
static int32_t n_names, cap_names;
static char profile_path[4096];   /* AC_PROFILE */

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* a grown to hold n + more elements of elem bytes (cap updated); NULL when out of memory. */
static void *grow(void *a, int64_t *cap, int64_t n, int64_t more, size_t elem)
{
    int64_t new_cap = *cap ? *cap : 256;
    void *grown;
    if (n + more <= *cap) return a;
    while (new_cap < n + more) new_cap *= 2;
    grown = realloc(a, (size_t)new_cap * elem);
    if (!grown) return NULL;
    count_heap_allocation();
    *cap = new_cap;
    return grown;
}

static void profiler_finish(void);

/* At the exit of a thread that had a buffer: a profiler it started and never
   stopped stops (its events stay readable), and the buffer, once its events are
   of an older session, goes to the next thread that needs one. */
static void thread_ended(void *buffer)
{
    ThreadEvents *te = buffer;
    if (profiler_active) profiler_finish();
    pthread_mutex_lock(&registry_lock);
    te->free = 1;
    pthread_mutex_unlock(&registry_lock);
    mine = NULL;
}

static void thread_key_create(void) { pthread_key_create(&thread_key, thread_ended); }

/* A buffer for this thread: an ended thread's whose events are not of the
   current session, else a new one, registered. */
static ThreadEvents *buffer_take(uint32_t current)
{
    ThreadEvents *te;
    pthread_once(&thread_key_once, thread_key_create);
    pthread_mutex_lock(&registry_lock);
    for (te = registry; te && !(te->free && te->session != current); te = te->next) {
    }
    if (te) te->free = 0;
    pthread_mutex_unlock(&registry_lock);
    if (!te) {
        te = calloc(1, sizeof *te);
        if (!te) return NULL;
        count_heap_allocation();
        pthread_mutex_lock(&registry_lock);
        te->next = registry;
        registry = te;
        pthread_mutex_unlock(&registry_lock);
    }
    pthread_setspecific(thread_key, te);
    return te;
}

/* This thread's buffer, registered and emptied for the current session. */
static ThreadEvents *thread_events(void)
{
    uint32_t current = __atomic_load_n(&session, __ATOMIC_ACQUIRE);
    if (mine && mine->session == current) return mine;
    if (!mine && !(mine = buffer_take(current))) return NULL;
    pthread_mutex_lock(&registry_lock);
    mine->session = current;
    mine->thread = session_threads++;
    pthread_mutex_unlock(&registry_lock);
    mine->n = mine->text_len = 0;
    mine->depth = mine->ranges = 0;
    mine->scope = NULL;
    return mine;
}

/* The name of kind for base: "linear_backward", "linear [task]"; ranges by text. */
static const char *intern(const char *base, int kind)
{
    static const char *const suffix[] = {"", "_backward", " [task]", ""};
    Name *grown;
    size_t len;
    int32_t i;
    for (i = 0; i < n_names; i++)
        if (names[i].kind == kind && (kind == AC_EVENT_RANGE ? strcmp(names[i].text, base) == 0
                                                             : names[i].key == base))
            return names[i].text;
    if (n_names == cap_names) {
        int64_t cap = cap_names;
        grown = grow(names, &cap, n_names, 1, sizeof *names);
        if (!grown) return NULL;
        names = grown;
        cap_names = (int32_t)cap;
    }
    len = strlen(base) + strlen(suffix[kind]);
    names[n_names].text = malloc(len + 1);
    if (!names[n_names].text) return NULL;
    count_heap_allocation();
    strcpy(names[n_names].text, base);
    strcat(names[n_names].text, suffix[kind]);
    names[n_names].key = kind == AC_EVENT_RANGE ? NULL : base;
    names[n_names].kind = kind;
    return names[n_names++].text;
}

static void names_free(void)
{
    int32_t i;
    for (i = 0; i < n_names; i++) free(names[i].text);
    n_names = 0;
}

/* "[[64, 784], [128, 784], []]" into te's text; -1 when out of memory. */
static int64_t shapes_text(ThreadEvents *te, const AcTensor *const *in, int n)
{
    char buf[1024];
    size_t len = 1;
    int i, d;
    char *text;
    buf[0] = '[';
    for (i = 0; i < n && len < sizeof buf - 64; i++) {
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s[", i ? ", " : "");
        for (d = 0; in[i] && d < in[i]->ndim; d++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%lld", d ? ", " : "",
                                    (long long)in[i]->shape[d]);
        buf[len++] = ']';
    }
    buf[len++] = ']';
    buf[len++] = '\0';
    text = grow(te->text, &te->text_cap, te->text_len, (int64_t)len, 1);
    if (!text) return -1;
    te->text = text;
    memcpy(text + te->text_len, buf, len);
    te->text_len += (int64_t)len;
    return te->text_len - (int64_t)len;
}

/* Open an event on this thread; its index, or -1 when it cannot be recorded. */
static int32_t event_open(ThreadEvents *te, const char *name, int kind,
                          const AcTensor *const *inputs, int n_inputs)
{
    Event *events, *e;
    if (!te || !name || te->depth == MAX_DEPTH) return -1;
    events = grow(te->events, &te->cap, te->n, 1, sizeof *events);
    if (!events) return -1;
    te->events = events;
    e = &events[te->n];
    memset(e, 0, sizeof *e);
    e->name = name;
    e->scope = te->scope;
    e->kind = kind;
    e->depth = te->depth;
    e->shapes = record_shapes && n_inputs > 0 ? shapes_text(te, inputs, n_inputs) : -1;
    e->bytes = bytes_allocated();
    te->open[te->depth++] = (int32_t)te->n;
    e->start_ns = now_ns();
    return (int32_t)te->n++;
}

static void event_close(ThreadEvents *te, int32_t i, int64_t flops)
{
    Event *e;
    if (i < 0) return;
    e = &te->events[i];
    e->duration_ns = now_ns() - e->start_ns;
    e->bytes = bytes_allocated() - e->bytes;
    e->flops = flops;
    te->depth--;
    if (te->depth > 0) {
        Event *parent = &te->events[te->open[te->depth - 1]];
        parent->child_ns += e->duration_ns;
        parent->child_bytes += e->bytes;
    }
}

/* Multiply-adds count two FLOPs: out's elements each sum k products. */
static int64_t op_flops(const char *op, const AcTensor *const *in, const AcTensor *out)
{
    if (!out || !in[0] || !in[1]) return 0;
    if (strcmp(op, "matmul") == 0 || strcmp(op, "linear") == 0)
        return 2 * out->size * in[0]->shape[in[0]->ndim - 1];
    if (strcmp(op, "conv2d") == 0 && in[1]->shape[0] > 0)
        return 2 * out->size * (in[1]->size / in[1]->shape[0]);
    return 0;
}

/* ---- what the rest of libac calls ------------------------------------------ */

static int profile_op(const char *op, GraphReplayFn fn, int n_in, int n_out, AcTensor **t,
                      const double *attr)
{
    ThreadEvents *te = thread_events();
    int32_t event = event_open(te, op, AC_EVENT_OP, (const AcTensor *const *)t, n_in);
    int rc = fn(t, attr);
    event_close(te, event, rc == AC_OK && n_in >= 2 && n_out >= 1
                ? op_flops(op, (const AcTensor *const *)t, t[n_in]) : 0);
    return rc;
}

int observed_run(const char *op, GraphReplayFn fn, int n_in, int n_out, AcTensor **t,
                 const double *attr)
{
    int observed = ops_observed, rc;
    ops_observed = 0;   /* the op's public function runs its body; its inner calls are part of it */
    rc = observed & OBSERVE_PROFILE ? profile_op(op, fn, n_in, n_out, t, attr) : fn(t, attr);
    ops_observed = observed;
    return rc;
}

int profile_backward(AcGradNode *node, int (*run)(AcGradNode *))
{
    ThreadEvents *te = thread_events();
    const AcTensor *const *in = (const AcTensor *const *)node->inputs;
    int32_t event = event_open(te, intern(node->op, AC_EVENT_BACKWARD), AC_EVENT_BACKWARD, in,
                               node->n_inputs);
    int64_t flops = node->n_inputs >= 2 ? op_flops(node->op, in, node->output) : 0;
    int rc = run(node);
    /* one product of the forward's size per input (not bias) that gets a gradient */
    event_close(te, event, flops * (input_needs_grad(node, 0) + input_needs_grad(node, 1)));
    return rc;
}

void profile_task_wrap(ProfiledTask *task, ParallelFn fn, void *ctx)
{
    ThreadEvents *te = thread_events();
    const char *base = te && te->depth > 0 ? te->events[te->open[te->depth - 1]].name : "parallel_for";
    task->fn = fn;
    task->ctx = ctx;
    task->name = intern(base, AC_EVENT_TASK);
    task->scope = te ? te->scope : NULL;
}

void profile_task_run(void *ctx, int64_t begin, int64_t end)
{
    const ProfiledTask *task = ctx;
    ThreadEvents *te = thread_events();
    int32_t event = event_open(te, task->name, AC_EVENT_TASK, NULL, 0);
    if (event >= 0) te->events[event].scope = task->scope;
    task->fn(task->ctx, begin, end);
    event_close(te, event, 0);
}

/* ---- the public API -------------------------------------------------------- */

int ac_profiler_start(int shapes)
{
    if (shapes != 0 && shapes != 1)
        return error_set(AC_ERR_ARG, "profiler_start: record_shapes %d must be 0 or 1", shapes);
    if (__atomic_exchange_n(&running, 1, __ATOMIC_ACQ_REL))
        return error_set(AC_ERR_STATE, "profiler_start: the profiler is already running%s",
                         profile_path[0] ? " (AC_PROFILE is set)" : "");
    names_free();
    pthread_mutex_lock(&registry_lock);
    session_threads = 0;
    pthread_mutex_unlock(&registry_lock);
    __atomic_add_fetch(&session, 1, __ATOMIC_RELEASE);
    record_shapes = shapes;
    session_start_ns = now_ns();
    thread_events();   /* the profiling thread is thread 0 */
    profiler_active = 1;
    ops_observed |= OBSERVE_PROFILE;
    return AC_OK;
}

/* Close what is still open on this thread (ranges left open), stop recording. */
static void profiler_finish(void)
{
    ThreadEvents *te = thread_events();
    while (te && te->depth > 0) event_close(te, te->open[te->depth - 1], 0);
    profiler_active = 0;
    ops_observed &= ~OBSERVE_PROFILE;
    __atomic_store_n(&running, 0, __ATOMIC_RELEASE);
}

int ac_profiler_stop(void)
{
    if (!profiler_active)
        return error_set(AC_ERR_STATE, "profiler_stop: the profiler is not running on this thread");
    profiler_finish();
    return AC_OK;
}

int ac_profiler_push(const char *name)
{
    ThreadEvents *te;
    if (!name) return error_set(AC_ERR_ARG, "profiler_push: name is NULL");
    if (!profiler_active) return 0;
    te = thread_events();
    if (te && te->ranges == MAX_RANGE_DEPTH)
        return error_set(AC_ERR_STATE, "profiler_push: ranges nest deeper than %d", MAX_RANGE_DEPTH);
    name = intern(name, AC_EVENT_RANGE);
    if (event_open(te, name, AC_EVENT_RANGE, NULL, 0) < 0)
        return error_set(AC_ERR_MEMORY, "profiler_push: out of memory");
    te->ranges++;
    te->scope = name;
    return 1;
}

int ac_profiler_pop(void)
{
    ThreadEvents *te;
    int32_t i;
    if (!profiler_active) return AC_OK;
    te = thread_events();
    if (!te || te->ranges == 0) return error_set(AC_ERR_STATE, "profiler_pop: no range is open");
    event_close(te, te->open[te->depth - 1], 0);
    te->ranges--;
    te->scope = NULL;
    for (i = te->depth - 1; i >= 0 && !te->scope; i--)
        if (te->events[te->open[i]].kind == AC_EVENT_RANGE) te->scope = te->events[te->open[i]].name;
    return AC_OK;
}

/* The buffer of thread t in the last session; NULL if none. */
static const ThreadEvents *session_thread(int32_t t)
{
    const ThreadEvents *te;
    pthread_mutex_lock(&registry_lock);
    for (te = registry; te && !(te->session == session && te->thread == t); te = te->next) {
    }
    pthread_mutex_unlock(&registry_lock);
    return te;
}

/* Event i of the last session, counting through its threads in order. */
static const Event *event_at(int64_t i, const ThreadEvents **owner)
{
    const ThreadEvents *te;
    int32_t t;
    for (t = 0; t < session_threads && (te = session_thread(t)) != NULL; t++) {
        if (i < te->n) {
            *owner = te;
            return &te->events[i];
        }
        i -= te->n;
    }
    return NULL;
}

static int read_check(const char *op)
{
    if (__atomic_load_n(&running, __ATOMIC_ACQUIRE))
        return error_set(AC_ERR_STATE, "%s: the profiler is running; stop it first", op);
    return AC_OK;
}

int64_t ac_profiler_num_events(void)
{
    const ThreadEvents *te;
    int64_t n = 0;
    int32_t t;
    if (read_check("profiler_num_events")) return AC_ERR_STATE;
    for (t = 0; t < session_threads && (te = session_thread(t)) != NULL; t++) n += te->n;
    return n;
}

int ac_profiler_event(int64_t i, AcProfileEvent *out)
{
    const ThreadEvents *te = NULL;
    const Event *e;
    if (read_check("profiler_event")) return AC_ERR_STATE;
    if (!out) return error_set(AC_ERR_ARG, "profiler_event: out is NULL");
    e = i >= 0 ? event_at(i, &te) : NULL;
    if (!e) return error_set(AC_ERR_INDEX, "profiler_event: event %lld is out of range [0, %lld)",
                             (long long)i, (long long)ac_profiler_num_events());
    out->name = e->name;
    out->scope = e->scope ? e->scope : "";
    out->shapes = e->shapes >= 0 ? te->text + e->shapes : "";
    out->kind = e->kind;
    out->thread = te->thread;
    out->depth = e->depth;
    out->start_ns = e->start_ns - session_start_ns;
    out->duration_ns = e->duration_ns;
    out->self_ns = e->duration_ns - e->child_ns;
    out->bytes = e->bytes;
    out->self_bytes = e->bytes - e->child_bytes;
    out->flops = e->flops;
    return AC_OK;
}

/* The length of the valid UTF-8 sequence at s (1 to 4), or 0 for a byte that
   starts none (a stray continuation, an overlong form, a surrogate, past U+10FFFF). */
static int utf8_length(const unsigned char *s)
{
    int n, i;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) n = 2, cp = s[0] & 0x1fu;
    else if (s[0] >= 0xe0 && s[0] <= 0xef) n = 3, cp = s[0] & 0x0fu;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) n = 4, cp = s[0] & 0x07u;
    else return 0;
    for (i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;   /* the NUL at the end stops here too */
        cp = cp << 6 | (s[i] & 0x3fu);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

/* s as a JSON string's content: valid UTF-8 whatever s holds (a C caller's range
   name in another encoding), each byte that starts no character as U+FFFD. */
static void json_text(FILE *out, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        int n = utf8_length(u);
        if (n == 0) {
            fputs("\\ufffd", out);
            u++;
        } else if (*u == '"' || *u == '\\') {
            fprintf(out, "\\%c", *u++);
        } else if (*u < 0x20) {
            fprintf(out, "\\u%04x", *u++);
        } else {
            fwrite(u, 1, (size_t)n, out);
            u += n;
        }
    }
}

static const char *const kind_names[] = {"op", "backward", "task", "range"};

int ac_profiler_dump(FILE *out)
{
    int64_t i, n;
    int32_t t;
    AcProfileEvent e;
    const long pid = (long)getpid();
    if (!out) return error_set(AC_ERR_ARG, "profiler_dump: out is NULL");
    n = ac_profiler_num_events();
    if (n < 0) return (int)n;
    fprintf(out, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    for (t = 0; t < session_threads; t++)
        fprintf(out, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %ld, \"tid\": %d, "
                "\"args\": {\"name\": \"%s\"}},\n", pid, t, t ? "aicraft pool" : "aicraft ops");
    for (i = 0; i < n; i++) {
        ac_profiler_event(i, &e);
        fprintf(out, "{\"name\": \"");
        json_text(out, e.name);
        fprintf(out, "\", \"cat\": \"%s\", \"ph\": \"X\", \"ts\": %.3f, \"dur\": %.3f, \"pid\": %ld, "
                "\"tid\": %d, \"args\": {\"scope\": \"", kind_names[e.kind], e.start_ns / 1e3,
                e.duration_ns / 1e3, pid, e.thread);
        json_text(out, e.scope);
        fprintf(out, "\", \"input_shapes\": \"%s\", \"bytes\": %lld, \"flops\": %lld}}%s\n", e.shapes,
                (long long)e.bytes, (long long)e.flops, i + 1 < n ? "," : "");
    }
    fprintf(out, "]}\n");
    if (ferror(out)) return error_set(AC_ERR_IO, "profiler_dump: write failed");
    return AC_OK;
}

/* ---- AC_PROFILE ------------------------------------------------------------ */

__attribute__((constructor)) static void profile_from_env(void)
{
    const char *path = getenv("AC_PROFILE");
    if (!path || !path[0] || strlen(path) >= sizeof profile_path) return;
    strcpy(profile_path, path);
    ac_profiler_start(0);
}

/* At exit, on whatever thread runs it: the trace of the whole run. */
__attribute__((destructor)) static void profile_write(void)
{
    FILE *out;
    if (!profile_path[0]) return;
    if (__atomic_load_n(&running, __ATOMIC_ACQUIRE)) profiler_finish();
    out = fopen(profile_path, "w");
    if (!out) return;
    ac_profiler_dump(out);
    fclose(out);
}
