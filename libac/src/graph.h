/*
 * graph.h - how ops record themselves into an AcGraph (graph.c).
 *
 * A recorded op is a GraphReplayFn: it runs the op's public function on t[0 ..
 * n_in) and attr (its scalar arguments, as doubles), and stores the op's outputs
 * in t[n_in ..]. At the op's entry, while its calls are observed (a graph
 * records them, or the profiler times them):
 *
 *     if (ops_observed) return graph_op("relu", relu_replay, 1, (const AcTensor *[]){a}, NULL, 0);
 *
 * graph_op runs the same replay function through observed_run (observation
 * paused, so the op's own inner calls are part of it), timing it when
 * profiling, and records a node when a graph records. Replay calls it again.
 */
#ifndef AC_GRAPH_H
#define AC_GRAPH_H

#include "internal.h"

#define GRAPH_MAX_TENSORS AC_GRAPH_MAX_TENSORS
#define GRAPH_MAX_ATTRS AC_GRAPH_MAX_ATTRS

typedef int (*GraphReplayFn)(AcTensor **t, const double *attr);

/* Why this thread's top-level op calls go through graph_call: the one flag each
   op tests at its entry, 0 while an observed op runs. */
#define OBSERVE_GRAPH 1     /* graph_recording is set */
#define OBSERVE_PROFILE 2   /* the profiler times them (profiler.c) */
extern AC_THREAD_LOCAL int ops_observed;
/* Run op's replay function with observation paused; timed as an event when
   the profiler observes (profiler.c). */
int observed_run(const char *op, GraphReplayFn fn, int n_in, int n_out, AcTensor **t,
                 const double *attr);
/* The backward walk's run(node), timed as node's backward event (profiler.c). */
int profile_backward(AcGradNode *node, int (*run)(AcGradNode *));

/* The graph recording this thread's top-level op calls; NULL when none is, and
   while a recorded op runs. */
extern AC_THREAD_LOCAL AcGraph *graph_recording;
/* The graph open on this thread, recording or paused; NULL when none. */
extern AC_THREAD_LOCAL AcGraph *graph_open;

/* Run and record an op of one output; returns it (NULL on the op's error). */
AcTensor *graph_op(const char *op, GraphReplayFn fn, int n_in, const AcTensor *const *in,
                   const double *attr, int n_attr);
/* The general form: t holds n_in inputs and gets n_out outputs (NULL allowed);
   returns the op's status. */
int graph_call(const char *op, GraphReplayFn fn, int n_in, int n_out, AcTensor **t,
               const double *attr, int n_attr);
/* Ops whose arguments do not fit graph_op's form record through these, each
   defined next to its op's replay function: ac_slice's slices become scalar
   arguments, cat and stack's tensors fill GRAPH_JOIN_SLOTS inputs (NULL after
   the last), and the LSTM layer's three outputs are a node's. */
AcTensor *slice_observed(const AcTensor *a, const AcSlice *slices, int n_slices);
AcTensor *join_observed(const char *op, GraphReplayFn fn, AcTensor *const *tensors, int n, int dim);
AcTensor *lstm_observed(const AcTensor *x, const AcTensor *h0, const AcTensor *c0, const AcTensor *w_ih,
                        const AcTensor *w_hh, const AcTensor *b_ih, const AcTensor *b_hh, int batch_first,
                        int reverse, AcTensor **h_n, AcTensor **c_n);
/* A replay function's status for an op that made out (NULL on its error). */
static inline int graph_made(const AcTensor *out) { return out ? AC_OK : ac_last_error_code(); }
/* tensor_create's note of every tensor made while a graph is open on any
   thread (tensor_on_create, tensor_watch): nothing unless one is on this one. */
void graph_note_tensor(const char *op, const AcTensor *t);
/* An in-place write of t by op (fill_, copy_, index writes): fails the graph
   unless t was made by a creation function during the recording. */
void graph_note_write(const char *op, const AcTensor *t);
/* Fail the graph: op cannot be replayed (random draws, seeding). */
void graph_unsupported(const char *op);

/* ---- graph.c and replay.c only ------------------------------------------ */

typedef struct {
    const char *op;
    GraphReplayFn replay;
    int32_t n_in, n_out, n_attr;
    int32_t buf[GRAPH_MAX_TENSORS];   /* inputs then outputs: buffer ids, -1 for NULL */
    double attr[GRAPH_MAX_ATTRS];
} GraphNode;

typedef struct {
    const AcTensor *traced;  /* the tensor while recording; NULL once its address is reused */
    AcTensor *held;          /* parameters and state: the tensor itself, one reference */
    int32_t kind;            /* AcBufferKind */
    int32_t dtype, ndim;
    int64_t shape[AC_MAX_DIMS];
} GraphBuffer;

typedef struct {
    int32_t node, attr;
    const double *source;    /* read into the node's attr at each run (ac_graph_bind_scalar) */
} GraphBinding;

typedef struct {
    const AcTensor *t;
    int32_t inside_op;       /* made inside a recorded op (a grad, a saved value) */
} GraphBorn;

struct AcGraph {
    GraphNode *nodes;
    GraphBuffer *bufs;
    GraphBorn *born;         /* tensors made while recording; freed by ac_graph_end */
    int32_t *inputs, *outputs;   /* buffer ids */
    AcTensor **run;          /* replay: the tensor of each buffer */
    int32_t n_nodes, n_bufs, n_born, n_inputs, n_outputs;
    int32_t cap_nodes, cap_bufs, cap_born, cap_inputs;
    int32_t grad_enabled;    /* grad mode when recording began */
    int32_t state;           /* GRAPH_RECORDING, GRAPH_READY, GRAPH_FAILED, GRAPH_RUNNING */
    char failure[256];       /* why recording failed */
    struct GraphNative *natives;  /* native segments (native.c); NULL when none */
    int32_t n_natives, cap_natives;
    int32_t *native_at;      /* per node: 1 + the segment starting there, or 0 */
    GraphBinding *bindings;
    int32_t n_bindings, cap_bindings;
};

/* Run the native segment starting at node k (native.c); *next gets the node
   after it. Returns 0 (not a segment start: run node k), 1 (ran), or < 0. */
int native_run(AcGraph *g, int32_t k, int32_t *next);
/* ac_graph_free's call to free the native segments, set by native.c when
   libac loads (graph.c sits below it). */
void graph_on_free(void (*free_natives)(AcGraph *g));

enum { GRAPH_RECORDING, GRAPH_READY, GRAPH_FAILED, GRAPH_RUNNING };

#endif /* AC_GRAPH_H */
