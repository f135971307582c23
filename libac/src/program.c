/*
 * program.c - programs: a recorded forward graph saved with its parameters and
 * state in one file, which a C program loads and runs with libac alone.
 *
 * The file, every number little-endian:
 *   "ACPROG1\n"
 *   u32 n_buffers, n_nodes, n_inputs, n_outputs
 *   each buffer: u32 kind, dtype, ndim, then ndim i64 dims
 *   each node:   u32 name length, the name, u32 n_in, n_out, n_attr, then
 *                n_in + n_out i32 buffer ids (-1: none) and n_attr f64 arguments
 *   n_inputs u32 buffer ids, n_outputs u32 buffer ids
 *   the elements of each parameter and state buffer, in buffer order; nothing after
 *
 * The reader trusts nothing in the file. Each count is checked against the
 * bytes left before anything is allocated for it; each op is looked up by name
 * in the table of recorded ops (op_table.h), which also gives its tensor counts
 * and the range of each scalar argument; a buffer is read only after an input,
 * the file's data or an earlier node gives it. What one run would cost, in bytes
 * and element operations, must fit the file's size (check_run_cost). Then the
 * program runs once on zeros, and each op must give the dtype and shape its
 * output buffer records.
 * A loaded program is an AcGraph, run by the replay backend (replay.c).
 *
 * Not here: recording (graph.c); the program's Python face (aicraft/compile.py).
 */
#define _POSIX_C_SOURCE 200809L
#include "graph.h"
#include "op_table.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "ACPROG1\n"
#define NAME_MAX_BYTES 32
/* What one run may cost, by the file's own size: its tensors' bytes and a count
   of element operations (multiply-adds for the ops that contract), each at most
   the floor or so many times the file's bytes, whichever is larger. The check
   run at load does that run: a flipped bit that makes a (20000, 1) input is
   refused here rather than allocated (a 154-byte file asking for 1.6 GB), and
   the check run allocates at most those bytes and RUN_SCRATCH_BYTES more. */
#define RUN_BYTES_FLOOR ((double)(512u << 20))
#define RUN_BYTES_PER_FILE_BYTE 256.0
#define RUN_WORK_FLOOR 4294967296.0
#define RUN_WORK_PER_FILE_BYTE 16384.0
#define RUN_SCRATCH_BYTES ((double)(128u << 20))

struct AcProgram {
    AcGraph *graph;
};

typedef struct {
    const char *name;
    GraphReplayFn fn;
    int n_in, n_out;
    const char *attrs;   /* op_table.h's letters */
} OpEntry;

#define OP_TABLE_ENTRY(name, fn, n_in, n_out, attrs) {name, fn, n_in, n_out, attrs},
static const OpEntry op_table[] = {RECORDED_OPS(OP_TABLE_ENTRY)};
#undef OP_TABLE_ENTRY
#define N_OPS ((int)(sizeof op_table / sizeof op_table[0]))

static const OpEntry *op_find(const char *name)
{
    int i;
    for (i = 0; i < N_OPS; i++)
        if (strcmp(op_table[i].name, name) == 0) return &op_table[i];
    return NULL;
}

/* NULL when n scalar arguments fit the op's letters; else why not (a message
   of this thread's, good until the next call). */
static const char *attrs_misfit(const OpEntry *op, const double *attr, int n)
{
    static AC_THREAD_LOCAL char why[128];
    int n_letters = (int)strlen(op->attrs), expected = n_letters, i;
    char last = n_letters > 0 ? op->attrs[n_letters - 1] : 0;
    if ((last == 'n' || last == 's') && n >= n_letters) {
        double count = attr[n_letters - 1];
        if (count >= 1 && count <= AC_MAX_DIMS && count == (int)count)
            expected += (last == 's' ? 4 : 1) * (int)count;
    }
    if (n != expected) {
        snprintf(why, sizeof why, "%d scalar arguments, where the op takes \"%s\"", n, op->attrs);
        return why;
    }
    for (i = 0; i < n; i++) {
        char c = i < n_letters ? op->attrs[i] : 'i';   /* past 'n' or 's': the integers they count */
        double v = attr[i];
        if (c == 'f') {
            if (fabs(v) > FLT_MAX && fabs(v) != HUGE_VAL)
                snprintf(why, sizeof why, "argument %d (%g) is past float's range", i, v);
            else continue;
        } else if (!(v >= INT_MIN && v <= INT_MAX) || v != (double)(int)v) {
            snprintf(why, sizeof why, "argument %d (%g) is not an integer in int's range", i, v);
        } else if (c >= '0' && c <= '9' && v != c - '0') {
            snprintf(why, sizeof why, "argument %d is %g, where a program takes only %c", i, v, c);
        } else if (c == 'n' && (v < -1 || v > AC_MAX_DIMS)) {
            snprintf(why, sizeof why, "argument %d, a count of dims, is %g", i, v);
        } else if (c == 's' && (v < 0 || v > AC_MAX_DIMS)) {
            snprintf(why, sizeof why, "argument %d, a count of slices, is %g", i, v);
        } else {
            continue;
        }
        return why;
    }
    return NULL;
}

static int held_kind(int kind) { return kind == AC_BUFFER_PARAMETER || kind == AC_BUFFER_STATE; }

/* ---- writing ------------------------------------------------------------- */

/* A file being written; the first failed write sticks, and later puts do nothing. */
typedef struct {
    FILE *f;
    int failed;
} Writer;

static void put(Writer *w, const void *bytes, size_t n)
{
    if (!w->failed && n && fwrite(bytes, 1, n, w->f) != n) w->failed = 1;
}

static void put_u64(Writer *w, uint64_t v, int n_bytes)
{
    unsigned char b[8];
    int i;
    for (i = 0; i < n_bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
    put(w, b, (size_t)n_bytes);
}

static void put_u32(Writer *w, uint32_t v) { put_u64(w, v, 4); }

static void put_f64(Writer *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put_u64(w, bits, 8);
}

/* t's elements as little-endian bytes. */
static void put_elements(Writer *w, const AcTensor *t)
{
    size_t esize = elem_size(t);
    int64_t i;
    if (esize == 1) {
        put(w, t->data, (size_t)t->size);
        return;
    }
    for (i = 0; i < t->size; i++) {
        uint64_t bits = 0;
        uint32_t bits32;
        if (esize == 8) {
            memcpy(&bits, (const char *)t->data + 8 * i, 8);
        } else {
            memcpy(&bits32, (const char *)t->data + 4 * i, 4);
            bits = bits32;
        }
        put_u64(w, bits, (int)esize);
    }
}

/* What to change where a recorded argument does not fit a program. */
static const char *save_hint(const char *op)
{
    if (strcmp(op, "set_grad_enabled") == 0) return " (a program runs with grad mode off)";
    if (strcmp(op, "dropout") == 0 || strcmp(op, "feature_dropout") == 0 || strcmp(op, "batch_norm") == 0)
        return " (record it in eval mode)";
    return "";
}

/* g holds only ops a program may hold, with arguments in range. */
static int save_check(const AcGraph *g)
{
    int32_t k;
    if (g->state != GRAPH_READY)
        return error_set(AC_ERR_STATE, "program_save: the graph is %s", g->state == GRAPH_FAILED ? "failed"
                         : g->state == GRAPH_RUNNING ? "running" : "still recording");
    for (k = 0; k < g->n_nodes; k++) {
        const GraphNode *node = &g->nodes[k];
        const OpEntry *op = op_find(node->op);
        const char *why;
        if (!op || op->fn != node->replay)
            return error_set(AC_ERR_ARG, "program_save: node %d is %s, which a program cannot hold (%s)", k,
                             node->op, strcmp(node->op, "packed_linear") == 0
                             ? "its block holds pointers: export the model before packing it"
                             : "a program is a forward pass for inference: no backward, zero_grad or "
                               "optimizer step");
        if ((why = attrs_misfit(op, node->attr, node->n_attr)))
            return error_set(AC_ERR_ARG, "program_save: node %d (%s): %s%s", k, node->op, why, save_hint(node->op));
    }
    for (k = 0; k < g->n_bufs; k++)
        if (held_kind(g->bufs[k].kind) && cpu_only("program_save", (const AcTensor *[]){g->bufs[k].held}, 1))
            return AC_ERR_DEVICE;
    return AC_OK;
}

static void write_program(Writer *w, const AcGraph *g)
{
    int32_t i, k;
    put(w, MAGIC, 8);
    put_u32(w, (uint32_t)g->n_bufs);
    put_u32(w, (uint32_t)g->n_nodes);
    put_u32(w, (uint32_t)g->n_inputs);
    put_u32(w, (uint32_t)g->n_outputs);
    for (i = 0; i < g->n_bufs; i++) {
        const GraphBuffer *b = &g->bufs[i];
        put_u32(w, (uint32_t)b->kind);
        put_u32(w, (uint32_t)b->dtype);
        put_u32(w, (uint32_t)b->ndim);
        for (k = 0; k < b->ndim; k++) put_u64(w, (uint64_t)b->shape[k], 8);
    }
    for (k = 0; k < g->n_nodes; k++) {
        const GraphNode *node = &g->nodes[k];
        put_u32(w, (uint32_t)strlen(node->op));
        put(w, node->op, strlen(node->op));
        put_u32(w, (uint32_t)node->n_in);
        put_u32(w, (uint32_t)node->n_out);
        put_u32(w, (uint32_t)node->n_attr);
        for (i = 0; i < node->n_in + node->n_out; i++) put_u32(w, (uint32_t)node->buf[i]);
        for (i = 0; i < node->n_attr; i++) put_f64(w, node->attr[i]);
    }
    for (i = 0; i < g->n_inputs; i++) put_u32(w, (uint32_t)g->inputs[i]);
    for (i = 0; i < g->n_outputs; i++) put_u32(w, (uint32_t)g->outputs[i]);
    for (i = 0; i < g->n_bufs; i++)
        if (held_kind(g->bufs[i].kind)) put_elements(w, g->bufs[i].held);
}

int ac_program_save(const AcGraph *g, const char *path)
{
    Writer w;
    int closed;
    if (!g) return error_set(AC_ERR_ARG, "program_save: graph is NULL");
    if (!path) return error_set(AC_ERR_ARG, "program_save: path is NULL");
    if (save_check(g)) return ac_last_error_code();
    w.f = fopen(path, "wb");
    if (!w.f) return error_set(AC_ERR_IO, "program_save: cannot open '%s': %s", path, strerror(errno));
    w.failed = 0;
    write_program(&w, g);
    closed = fclose(w.f);
    if (w.failed || closed != 0) {
        remove(path);   /* a half-written program would only fail to load */
        return error_set(AC_ERR_IO, "program_save: cannot write '%s'", path);
    }
    return AC_OK;
}

/* ---- reading ------------------------------------------------------------- */

/* A file being read, with the bytes it has left; the first error sticks, and
   later gets give zeros. */
typedef struct {
    FILE *f;
    const char *path;
    uint64_t left, size;
    double run_bytes;   /* what the check run may allocate (check_run_cost) */
    int rc;
} Reader;

static int read_error(Reader *r, int code, const char *fmt, ...)
{
    char why[256];
    va_list args;
    if (r->rc) return r->rc;
    va_start(args, fmt);
    vsnprintf(why, sizeof why, fmt, args);
    va_end(args);
    r->rc = code;
    return error_set(code, "program_load: '%s': %s", r->path, why);
}

static void get(Reader *r, void *buf, uint64_t n)
{
    if (!r->rc && n > r->left)
        read_error(r, AC_ERR_FORMAT, "the file ends early (%llu bytes wanted, %llu left)",
                   (unsigned long long)n, (unsigned long long)r->left);
    if (!r->rc && n && fread(buf, 1, (size_t)n, r->f) != n)
        read_error(r, ferror(r->f) ? AC_ERR_IO : AC_ERR_FORMAT, "cannot read (did it change?)");
    if (r->rc) {
        if (n) memset(buf, 0, (size_t)n);
        return;
    }
    r->left -= n;
}

static uint64_t get_u64(Reader *r, int n_bytes)
{
    unsigned char b[8];
    uint64_t v = 0;
    int i;
    get(r, b, (uint64_t)n_bytes);
    for (i = 0; i < n_bytes; i++) v |= (uint64_t)b[i] << (8 * i);
    return v;
}

static uint32_t get_u32(Reader *r) { return (uint32_t)get_u64(r, 4); }

static double get_f64(Reader *r)
{
    uint64_t bits = get_u64(r, 8);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

/* A count of records of at least min_bytes each that the bytes left can hold. */
static int32_t get_count(Reader *r, const char *what, uint64_t min_bytes)
{
    uint32_t n = get_u32(r);
    if (n > (uint32_t)INT32_MAX || n > r->left / min_bytes) {
        read_error(r, AC_ERR_FORMAT, "%lu %s need more than the %llu bytes left", (unsigned long)n, what,
                   (unsigned long long)r->left);
        return 0;
    }
    return (int32_t)n;
}

/* A buffer id in [-1, n) when none_ok, else in [0, n); -2 after an error. */
static int32_t get_id(Reader *r, const AcGraph *g, int none_ok, const char *what)
{
    int32_t id = (int32_t)get_u32(r);
    if (r->rc) return -2;
    if (id < (none_ok ? -1 : 0) || id >= g->n_bufs) {
        read_error(r, AC_ERR_FORMAT, "%s names buffer %ld, outside [%d, %d)", what, (long)id,
                   none_ok ? -1 : 0, g->n_bufs);
        return -2;
    }
    return id;
}

static void *zeroed(size_t bytes)
{
    void *p = bytes ? root_alloc(bytes) : NULL;
    if (p) memset(p, 0, bytes);
    return p;
}

/* The arrays for the counts in the file, sized exactly (ac_graph_free frees them). */
static int graph_arrays(AcGraph *g, int32_t n_bufs, int32_t n_nodes, int32_t n_inputs, int32_t n_outputs)
{
    g->bufs = zeroed((size_t)n_bufs * sizeof *g->bufs);
    g->run = zeroed((size_t)n_bufs * sizeof *g->run);
    g->nodes = zeroed((size_t)n_nodes * sizeof *g->nodes);
    g->inputs = zeroed((size_t)n_inputs * sizeof *g->inputs);
    g->outputs = zeroed((size_t)n_outputs * sizeof *g->outputs);
    g->cap_bufs = g->bufs ? n_bufs : 0;
    g->cap_nodes = g->nodes ? n_nodes : 0;
    g->cap_inputs = g->inputs ? n_inputs : 0;
    if ((n_bufs && (!g->bufs || !g->run)) || (n_nodes && !g->nodes) || (n_inputs && !g->inputs) ||
        (n_outputs && !g->outputs)) {
        if (g->run) root_free(g->run, (size_t)n_bufs * sizeof *g->run);
        if (g->outputs) root_free(g->outputs, (size_t)n_outputs * sizeof *g->outputs);
        g->run = NULL;
        g->outputs = NULL;
        return AC_ERR_MEMORY;
    }
    g->n_bufs = n_bufs;
    g->n_nodes = n_nodes;
    g->n_inputs = n_inputs;
    g->n_outputs = n_outputs;
    return AC_OK;
}

static void read_buffer(Reader *r, GraphBuffer *b, int32_t id)
{
    uint32_t kind = get_u32(r), dtype = get_u32(r), ndim = get_u32(r);
    int64_t count = 1;   /* of the dims other than 0: (0, 2^40, 2^40) is refused too */
    uint32_t d;
    if (r->rc) return;
    if (kind > AC_BUFFER_OUTPUT || dtype > AC_UINT8 || ndim > AC_MAX_DIMS) {
        read_error(r, AC_ERR_FORMAT, "buffer %ld has kind %lu, dtype %lu, ndim %lu", (long)id,
                   (unsigned long)kind, (unsigned long)dtype, (unsigned long)ndim);
        return;
    }
    b->kind = (int32_t)kind;
    b->dtype = (int32_t)dtype;
    b->ndim = (int32_t)ndim;
    for (d = 0; d < ndim; d++) {
        b->shape[d] = (int64_t)get_u64(r, 8);
        if (b->shape[d] < 0 || (b->shape[d] > 0 && count > (INT64_MAX / 8) / b->shape[d])) {
            read_error(r, AC_ERR_FORMAT, "buffer %ld has a dim of %lld, or too many elements", (long)id,
                       (long long)b->shape[d]);
            return;
        }
        if (b->shape[d] > 0) count *= b->shape[d];
    }
}

/* Node k: a known op with its counts, its inputs already given, its outputs
   temporaries or outputs given nowhere else (given[] tracks which are). */
static void read_node(Reader *r, AcGraph *g, int32_t k, uint8_t *given)
{
    GraphNode *node = &g->nodes[k];
    char name[NAME_MAX_BYTES + 1];
    uint32_t length = get_u32(r), n_in, n_out, n_attr;
    const OpEntry *op;
    const char *why;
    int32_t i;
    if (!r->rc && (length == 0 || length > NAME_MAX_BYTES)) {
        read_error(r, AC_ERR_FORMAT, "node %ld has a name of %lu bytes", (long)k, (unsigned long)length);
        return;
    }
    get(r, name, length);
    name[r->rc ? 0 : length] = '\0';
    n_in = get_u32(r);
    n_out = get_u32(r);
    n_attr = get_u32(r);
    if (r->rc) return;
    if (!(op = op_find(name)) || strlen(name) != length)
        read_error(r, AC_ERR_FORMAT, "node %ld is an op '%.*s' that programs do not know", (long)k,
                   (int)strlen(name), name);
    else if (n_in != (uint32_t)op->n_in || n_out != (uint32_t)op->n_out || n_attr > GRAPH_MAX_ATTRS)
        read_error(r, AC_ERR_FORMAT, "node %ld (%s) has %lu inputs, %lu outputs and %lu scalar arguments; "
                   "the op has %d and %d", (long)k, name, (unsigned long)n_in, (unsigned long)n_out,
                   (unsigned long)n_attr, op->n_in, op->n_out);
    if (r->rc) return;
    node->op = op->name;
    node->replay = op->fn;
    node->n_in = op->n_in;
    node->n_out = op->n_out;
    node->n_attr = (int32_t)n_attr;
    for (i = 0; i < node->n_in + node->n_out; i++) {
        int32_t id = node->buf[i] = get_id(r, g, i < node->n_in, name);
        if (r->rc) return;
        if (i < node->n_in ? id >= 0 && !given[id]
            : given[id] || (g->bufs[id].kind != AC_BUFFER_TEMPORARY && g->bufs[id].kind != AC_BUFFER_OUTPUT)) {
            read_error(r, AC_ERR_FORMAT, "node %ld (%s) %s buffer %ld, which %s", (long)k, name,
                       i < node->n_in ? "reads" : "writes", (long)id,
                       i < node->n_in ? "nothing gave before" : "is given elsewhere or is no temporary");
            return;
        }
        if (i >= node->n_in) given[id] = 1;
    }
    for (i = 0; i < node->n_attr; i++) node->attr[i] = get_f64(r);
    if (!r->rc && (why = attrs_misfit(op, node->attr, node->n_attr)))
        read_error(r, AC_ERR_FORMAT, "node %ld (%s): %s", (long)k, name, why);
}

/* The input and output lists: each input buffer listed once, in the order the
   program takes them; outputs any given buffer, every output buffer among them. */
static void read_inputs_outputs(Reader *r, AcGraph *g, uint8_t *given)
{
    int32_t i, n = 0;
    for (i = 0; i < g->n_bufs; i++) {
        n += g->bufs[i].kind == AC_BUFFER_INPUT;
        given[i] = 0;
    }
    if (n != g->n_inputs) read_error(r, AC_ERR_FORMAT, "%d input buffers, but %d inputs", n, g->n_inputs);
    for (i = 0; i < g->n_inputs && !r->rc; i++) {
        int32_t id = g->inputs[i] = get_id(r, g, 0, "an input");
        if (!r->rc && (g->bufs[id].kind != AC_BUFFER_INPUT || given[id]))
            read_error(r, AC_ERR_FORMAT, "input %ld is buffer %ld, not an input buffer listed once", (long)i, (long)id);
        if (!r->rc) given[id] = 1;
    }
    for (i = 0; i < g->n_outputs && !r->rc; i++) {
        int32_t id = g->outputs[i] = get_id(r, g, 0, "an output");
        if (!r->rc && g->bufs[id].kind == AC_BUFFER_TEMPORARY)
            read_error(r, AC_ERR_FORMAT, "output %ld is buffer %ld, a temporary", (long)i, (long)id);
        if (!r->rc) given[id] = 2;
    }
    for (i = 0; i < g->n_bufs && !r->rc; i++)
        if (g->bufs[i].kind == AC_BUFFER_OUTPUT && given[i] != 2)
            read_error(r, AC_ERR_FORMAT, "output buffer %ld is not among the outputs", (long)i);
}

/* The data of each parameter and state buffer, as a root tensor it holds. */
static void read_data(Reader *r, AcGraph *g)
{
    int32_t i;
    int64_t e;
    for (i = 0; i < g->n_bufs && !r->rc; i++) {
        GraphBuffer *b = &g->bufs[i];
        AcTensor *t;
        unsigned char *bytes;
        uint64_t count = 1, esize = (uint64_t)ac_dtype_size(b->dtype);
        int d;
        if (!held_kind(b->kind)) continue;
        for (d = 0; d < b->ndim; d++) count *= (uint64_t)b->shape[d];
        if (count * esize > r->left) {
            read_error(r, AC_ERR_FORMAT, "the file ends early: buffer %ld needs %llu bytes, %llu are left",
                       (long)i, (unsigned long long)(count * esize), (unsigned long long)r->left);
            return;
        }
        if (!(t = b->held = tensor_create("program_load", b->shape, b->ndim, b->dtype, NULL, 0, 1))) {
            r->rc = ac_last_error_code();
            return;
        }
        bytes = (unsigned char *)t->data;
        get(r, bytes, count * esize);
        for (e = 0; e < t->size && !r->rc; e++) {   /* little-endian to the host's order */
            unsigned char *at = bytes + esize * (uint64_t)e;
            uint64_t bits = 0;
            uint32_t bits32;
            unsigned k;
            if (b->dtype == AC_BOOL && at[0] > 1)
                read_error(r, AC_ERR_FORMAT, "buffer %ld: bool element %lld is %u", (long)i, (long long)e, at[0]);
            if (esize == 1) continue;
            for (k = 0; k < esize; k++) bits |= (uint64_t)at[k] << (8 * k);
            bits32 = (uint32_t)bits;
            if (esize == 8) memcpy(at, &bits, 8);
            else memcpy(at, &bits32, 4);
        }
    }
    if (!r->rc && r->left)
        read_error(r, AC_ERR_FORMAT, "%llu bytes follow the data", (unsigned long long)r->left);
}

static double buffer_elements(const AcGraph *g, int32_t id)
{
    double n = 1;
    int d;
    if (id < 0) return 0;
    for (d = 0; d < g->bufs[id].ndim; d++) n *= (double)g->bufs[id].shape[d];
    return n;
}

static double dim_of(const AcGraph *g, int32_t id, int from_end)
{
    const GraphBuffer *b = id >= 0 ? &g->bufs[id] : NULL;
    return b && b->ndim >= from_end ? (double)b->shape[b->ndim - from_end] : 1;
}

/* The elements of a and b broadcast together (NumPy's rule; a dim of 1 gives way). */
static double broadcast_elements(const AcGraph *g, int32_t a, int32_t b)
{
    double n = 1;
    int d, nd = (int)fmax(a >= 0 ? g->bufs[a].ndim : 0, b >= 0 ? g->bufs[b].ndim : 0);
    for (d = 1; d <= nd; d++) n *= fmax(dim_of(g, a, d), dim_of(g, b, d));
    return n;
}

/* The output of a pooling window (kernel k, stride s, padding p) over n. */
static double pooled(double n, double k, double s, double p)
{
    double out = s >= 1 ? floor((n + 2 * p - k) / s) + 1 : 0;
    return out > 0 ? out : 0;
}

/* A node's element operations, from its inputs' recorded shapes (which the check
   run gives it) and its arguments, whatever its output's recorded shape says:
   what it reads and writes, and a multiply-add per output element and contracted
   element for the ops that contract, as the op would do them. */
static double node_work(const AcGraph *g, const GraphNode *node, double *out_elements)
{
    const char *op = node->op;
    const double *at = node->attr;
    int32_t i, a = node->buf[0], b = node->n_in > 1 ? node->buf[1] : -1, o = node->buf[node->n_in];
    double in = 0, out = buffer_elements(g, o), per_out = 0, k;
    for (i = 0; i < node->n_in; i++) in += buffer_elements(g, node->buf[i]);
    if (strcmp(op, "matmul") == 0) {   /* (..., m, k) @ (..., k, n); a 1-D side has no m (n) */
        double batch = 1;
        int d, na = a >= 0 ? g->bufs[a].ndim : 0, nb = b >= 0 ? g->bufs[b].ndim : 0;
        for (d = 3; d <= (int)fmax(na, nb); d++)
            batch *= fmax(na >= d ? dim_of(g, a, d) : 1, nb >= d ? dim_of(g, b, d) : 1);
        k = dim_of(g, a, 1);
        out = fmax(out, batch * (na >= 2 ? dim_of(g, a, 2) : 1) * (nb >= 2 ? dim_of(g, b, 1) : 1));
        per_out = k;
    } else if (strcmp(op, "linear") == 0) {   /* x (..., k), weight (n, k) */
        k = dim_of(g, a, 1);
        out = fmax(out, (k > 0 ? buffer_elements(g, a) / k : 0) * dim_of(g, b, 2));
        per_out = k;
    } else if (strcmp(op, "conv2d") == 0) {   /* stride, padding, dilation (h, w), groups */
        double kh = dim_of(g, b, 2), kw = dim_of(g, b, 1);
        out = fmax(out, dim_of(g, a, 4) * dim_of(g, b, 4) *
                        pooled(dim_of(g, a, 2), fabs(at[4]) * (kh - 1) + 1, at[0], at[2]) *
                        pooled(dim_of(g, a, 1), fabs(at[5]) * (kw - 1) + 1, at[1], at[3]));
        per_out = dim_of(g, b, 3) * kh * kw;
    } else if (strcmp(op, "max_pool2d") == 0 || strcmp(op, "avg_pool2d") == 0) {   /* kernel, stride, pad */
        out = fmax(out, dim_of(g, a, 4) * dim_of(g, a, 3) * pooled(dim_of(g, a, 2), at[0], at[2], at[4]) *
                        pooled(dim_of(g, a, 1), at[1], at[3], at[5]));
        per_out = fabs(at[0]) * fabs(at[1]);
    } else if (strcmp(op, "adaptive_avg_pool2d") == 0) {   /* each output reads about (h/oh + 2)(w/ow + 2) */
        double oh = fabs(at[0]), ow = fabs(at[1]);
        out = fmax(out, dim_of(g, a, 4) * dim_of(g, a, 3) * oh * ow);
        per_out = (oh > 0 ? dim_of(g, a, 2) / oh + 2 : 0) * (ow > 0 ? dim_of(g, a, 1) / ow + 2 : 0);
    } else if (strcmp(op, "lstm") == 0) {   /* per row of x (a step of a sequence): the gate GEMMs, and the step */
        double rows = dim_of(g, a, 1) > 0 ? buffer_elements(g, a) / dim_of(g, a, 1) : 0;
        *out_elements = fmax(out, rows * dim_of(g, node->buf[4], 1) * 2);
        return in + out + rows * (buffer_elements(g, node->buf[3]) + buffer_elements(g, node->buf[4]) + 1024);
    } else if (node->n_in == 2) {   /* elementwise ops broadcast */
        out = fmax(out, broadcast_elements(g, a, b));
    }
    *out_elements = out;
    return in + out + out * per_out;
}

/* One run's bytes and work, as the recorded shapes say, within what a file of
   this size may ask (RUN_BYTES_FLOOR above): refused before the check run. */
static int check_run_cost(Reader *r, const AcGraph *g)
{
    const double file = (double)r->size;
    const double max_bytes = fmax(RUN_BYTES_FLOOR, RUN_BYTES_PER_FILE_BYTE * file);
    const double max_work = fmax(RUN_WORK_FLOOR, RUN_WORK_PER_FILE_BYTE * file);
    double bytes = 0, work = 0;
    int32_t i;
    for (i = 0; i < g->n_bufs; i++)
        if (!held_kind(g->bufs[i].kind)) bytes += buffer_elements(g, i) * (double)ac_dtype_size(g->bufs[i].dtype);
    for (i = 0; i < g->n_nodes; i++) {   /* an output larger than its record: the difference too */
        const GraphNode *node = &g->nodes[i];
        double out;
        work += node_work(g, node, &out);
        bytes += fmax(0, out - buffer_elements(g, node->buf[node->n_in])) * 8;
    }
    r->run_bytes = max_bytes + RUN_SCRATCH_BYTES;   /* the run's tensors and the ops' scratch */
    if (bytes > max_bytes)
        return read_error(r, AC_ERR_FORMAT, "its recorded shapes need %.0f bytes of tensors a run, more than "
                          "a program of %llu bytes may (%.0f; export it for smaller batches)", bytes,
                          (unsigned long long)r->size, max_bytes);
    if (work > max_work)
        return read_error(r, AC_ERR_FORMAT, "its recorded shapes need %.3g element operations a run, more "
                          "than a program of %llu bytes may (%.3g; export it for smaller batches)", work,
                          (unsigned long long)r->size, max_work);
    return AC_OK;
}

/* The bytes one run's inputs, temporaries and outputs take, as the file records
   them, are refused past the memory limit, or past the machine's memory when no
   limit is set, before the check run allocates them. */
static int check_run_bytes(Reader *r, const AcGraph *g)
{
    AcMemStats s;
    uint64_t need = 0, room;
    int32_t i;
    int d;
    for (i = 0; i < g->n_bufs; i++) {
        const GraphBuffer *b = &g->bufs[i];
        uint64_t bytes = (uint64_t)ac_dtype_size(b->dtype);
        if (held_kind(b->kind)) continue;
        for (d = 0; d < b->ndim; d++) bytes *= (uint64_t)b->shape[d];   /* < 2^63: read_buffer checked */
        need = need + bytes < need ? UINT64_MAX : need + bytes;
    }
    ac_memory_stats(&s);
    room = s.memory_limit > 0 ? (uint64_t)(s.memory_limit > s.bytes_in_use ? s.memory_limit - s.bytes_in_use : 0)
                              : (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE);
    if (need > room)
        return read_error(r, AC_ERR_MEMORY, "a run needs %llu bytes for its tensors, more than the %llu %s",
                          (unsigned long long)need, (unsigned long long)room,
                          s.memory_limit > 0 ? "the memory limit leaves" : "this machine has");
    return AC_OK;
}

/* Run g once on zero inputs in a scope of its own: each op must give the
   dtype and shape its output buffer records. */
static int check_run(Reader *r, AcGraph *g)
{
    AcCheckpoint cp = ac_mem_checkpoint();
    AcTensor *t[GRAPH_MAX_TENSORS];
    int32_t i, k;
    int previous_grad;
    if (cp.depth < 0) return ac_last_error_code();
    if (alloc_budget_begin((int64_t)r->run_bytes)) {
        ac_mem_restore(cp);
        return r->rc = ac_last_error_code();
    }
    previous_grad = ac_set_grad_enabled(0);
    for (i = 0; i < g->n_bufs && !r->rc; i++) {
        const GraphBuffer *b = &g->bufs[i];
        g->run[i] = b->held;
        if (b->kind == AC_BUFFER_INPUT) {
            g->run[i] = tensor_create("program_load", b->shape, b->ndim, b->dtype, NULL, 0, 0);
            if (!g->run[i]) r->rc = ac_last_error_code();
            else memset(g->run[i]->data, 0, (size_t)g->run[i]->size * elem_size(g->run[i]));
        }
    }
    for (k = 0; k < g->n_nodes && !r->rc; k++) {
        const GraphNode *node = &g->nodes[k];
        for (i = 0; i < node->n_in; i++) t[i] = node->buf[i] < 0 ? NULL : g->run[node->buf[i]];
        for (; i < node->n_in + node->n_out; i++) t[i] = NULL;
        if (node->replay(t, node->attr)) {
            int code = ac_last_error_code();
            if (code == AC_ERR_MEMORY && alloc_budget_end())   /* an output its recorded shapes do not say */
                read_error(r, AC_ERR_FORMAT, "node %ld (%s) allocates more than the file's shapes allow: %s",
                           (long)k, node->op, ac_last_error());
            else
                read_error(r, code == AC_ERR_MEMORY ? code : AC_ERR_FORMAT, "node %ld (%s) fails: %s", (long)k,
                           node->op, ac_last_error());
        }
        for (i = node->n_in; i < node->n_in + node->n_out && !r->rc; i++) {
            const GraphBuffer *b = &g->bufs[node->buf[i]];
            const AcTensor *out = t[i];
            if (out->dtype != b->dtype || out->ndim != b->ndim ||
                memcmp(out->shape, b->shape, (size_t)b->ndim * sizeof *b->shape) != 0)
                read_error(r, AC_ERR_FORMAT, "node %ld (%s) gives %s %s where its buffer records %s %s",
                           (long)k, node->op, ac_dtype_name(out->dtype), tensor_shape_str(out),
                           ac_dtype_name(b->dtype), shape_str(b->shape, b->ndim));
            g->run[node->buf[i]] = t[i];
        }
    }
    alloc_budget_end();
    ac_set_grad_enabled(previous_grad);
    ac_mem_restore(cp);
    return r->rc;
}

static int read_program(Reader *r, AcGraph *g)
{
    char magic[8];
    int32_t n_bufs, n_nodes, n_inputs, n_outputs, i;
    uint8_t *given = NULL;
    get(r, magic, 8);
    if (!r->rc && memcmp(magic, MAGIC, 8) != 0)
        return read_error(r, AC_ERR_FORMAT, "not a program file (no \"ACPROG1\" at its start)");
    n_bufs = get_count(r, "buffers", 12);
    n_nodes = get_count(r, "nodes", 16);
    n_inputs = get_count(r, "inputs", 4);
    n_outputs = get_count(r, "outputs", 4);
    if (r->rc) return r->rc;
    if (graph_arrays(g, n_bufs, n_nodes, n_inputs, n_outputs)) return r->rc = AC_ERR_MEMORY;
    for (i = 0; i < n_bufs && !r->rc; i++) read_buffer(r, &g->bufs[i], i);
    if (r->rc) return r->rc;
    if (n_bufs && !(given = zeroed((size_t)n_bufs))) return r->rc = AC_ERR_MEMORY;
    for (i = 0; i < n_bufs; i++) given[i] = g->bufs[i].kind < AC_BUFFER_TEMPORARY;
    for (i = 0; i < n_nodes && !r->rc; i++) read_node(r, g, i, given);
    for (i = 0; i < n_bufs && !r->rc; i++)
        if (!given[i]) read_error(r, AC_ERR_FORMAT, "no node writes buffer %ld", (long)i);
    if (!r->rc) read_inputs_outputs(r, g, given);
    if (n_bufs) root_free(given, (size_t)n_bufs);
    read_data(r, g);
    return r->rc || check_run_cost(r, g) || check_run_bytes(r, g) ? r->rc : check_run(r, g);
}

AcProgram *ac_program_load(const char *path)
{
    Reader r;
    struct stat st;
    AcProgram *p;
    AcGraph *g;
    if (!path) return error_null(AC_ERR_ARG, "program_load: path is NULL");
    if (graph_open)   /* its check run would be recorded */
        return error_null(AC_ERR_STATE, "program_load: a graph is recording on this thread");
    memset(&r, 0, sizeof r);
    r.path = path;
    if (!(r.f = fopen(path, "rb"))) {
        error_set(AC_ERR_IO, "program_load: cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(r.f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(r.f);
        return error_null(AC_ERR_IO, "program_load: '%s' is not a regular file", path);
    }
    r.left = r.size = (uint64_t)st.st_size;
    p = root_alloc(sizeof *p);
    g = p ? zeroed(sizeof *g) : NULL;
    if (g) read_program(&r, g);
    fclose(r.f);
    if (!g || r.rc) {
        if (g) ac_graph_free(g);
        if (p) root_free(p, sizeof *p);
        return NULL;   /* the error is the reader's, or the allocation's */
    }
    g->state = GRAPH_READY;
    p->graph = g;
    return p;
}

/* ---- running ------------------------------------------------------------- */

int ac_program_run(AcProgram *p, AcTensor *const *inputs, int n_inputs, AcTensor **outputs, int n_outputs)
{
    if (!p) return error_set(AC_ERR_ARG, "program_run: program is NULL");
    /* a count the program does not take is replay's error to name */
    if (inputs && n_inputs == p->graph->n_inputs &&
        cpu_only("program_run", (const AcTensor *const *)inputs, n_inputs))
        return AC_ERR_DEVICE;
    return ac_graph_replay(p->graph, inputs, n_inputs, outputs, n_outputs);
}

int ac_program_free(AcProgram *p)
{
    if (!p) return error_set(AC_ERR_ARG, "program_free: program is NULL");
    if (ac_graph_free(p->graph)) return ac_last_error_code();
    root_free(p, sizeof *p);
    return AC_OK;
}

int ac_program_num_inputs(const AcProgram *p)
{
    return p ? p->graph->n_inputs : error_set(AC_ERR_ARG, "program_num_inputs: program is NULL");
}

int ac_program_num_outputs(const AcProgram *p)
{
    return p ? p->graph->n_outputs : error_set(AC_ERR_ARG, "program_num_outputs: program is NULL");
}

/* Buffer ids[i]'s dtype and shape; returns its ndim. */
static int buffer_info(const char *op, const AcProgram *p, int i, int output, int *dtype, int64_t *shape)
{
    const GraphBuffer *b;
    int n;
    if (!p) return error_set(AC_ERR_ARG, "%s: program is NULL", op);
    if (!dtype || !shape) return error_set(AC_ERR_ARG, "%s: %s is NULL", op, dtype ? "shape" : "dtype");
    n = output ? p->graph->n_outputs : p->graph->n_inputs;
    if (i < 0 || i >= n) return error_set(AC_ERR_INDEX, "%s: %d is out of range [0, %d)", op, i, n);
    b = &p->graph->bufs[output ? p->graph->outputs[i] : p->graph->inputs[i]];
    *dtype = b->dtype;
    memcpy(shape, b->shape, (size_t)b->ndim * sizeof *shape);
    return b->ndim;
}

int ac_program_input_info(const AcProgram *p, int i, int *dtype, int64_t *shape)
{
    return buffer_info("program_input_info", p, i, 0, dtype, shape);
}

int ac_program_output_info(const AcProgram *p, int i, int *dtype, int64_t *shape)
{
    return buffer_info("program_output_info", p, i, 1, dtype, shape);
}
