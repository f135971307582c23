/*
 * op_table.h - the recorded ops a program file may hold (program.c), one line
 * an op: its name in a graph, its replay function (graph.h), its numbers of
 * input and output tensors, and its scalar arguments, one letter each:
 *
 *   f   a float, infinite or NaN (the op converts it to float)
 *   i   an integer in int's range (the op converts it to int)
 *   0-9 exactly that integer (the reduction kind, which picks the op; 0 for
 *       dropout's and batch_norm's training flag, as a program runs in eval
 *       mode, and for set_grad_enabled, as it runs with grad mode off)
 *   n   a count in [-1, AC_MAX_DIMS] of the integers that follow it (-1: none,
 *       for "all dims"); it ends the list
 *   s   a count in [0, AC_MAX_DIMS] of slices, four integers each (start, stop,
 *       step, flags: 1 has_start, 2 has_stop, 4 is_index), that follow it; it
 *       ends the list
 *
 * so a program's loader can refuse a node whose arguments its replay function
 * would convert out of range or read past. The ops themselves check what the
 * values mean. Each op file defines its X_replay next to its forward.
 *
 * Not here: backward, zero_grad and the optimizer steps, which a graph records
 * too (graph.h) but a program (a forward pass for inference) never holds.
 */
#ifndef AC_OP_TABLE_H
#define AC_OP_TABLE_H

#include <ac.h>

/* cat and stack record up to this many tensors, NULL after the last. */
#define GRAPH_JOIN_SLOTS (AC_GRAPH_MAX_TENSORS - 1)

#define RECORDED_OPS(X) \
    X("add", add_replay, 2, 1, "") \
    X("sub", sub_replay, 2, 1, "") \
    X("mul", mul_replay, 2, 1, "") \
    X("div", div_replay, 2, 1, "") \
    X("pow", pow_replay, 2, 1, "") \
    X("add_scalar", add_scalar_replay, 1, 1, "f") \
    X("mul_scalar", mul_scalar_replay, 1, 1, "f") \
    X("rsub_scalar", rsub_scalar_replay, 1, 1, "f") \
    X("div_scalar", div_scalar_replay, 1, 1, "f") \
    X("rdiv_scalar", rdiv_scalar_replay, 1, 1, "f") \
    X("pow_scalar", pow_scalar_replay, 1, 1, "f") \
    X("neg", neg_replay, 1, 1, "") \
    X("exp", exp_replay, 1, 1, "") \
    X("log", log_replay, 1, 1, "") \
    X("log1p", log1p_replay, 1, 1, "") \
    X("sqrt", sqrt_replay, 1, 1, "") \
    X("abs", abs_replay, 1, 1, "") \
    X("sin", sin_replay, 1, 1, "") \
    X("cos", cos_replay, 1, 1, "") \
    X("clamp", clamp_replay, 1, 1, "ff") \
    X("relu", relu_replay, 1, 1, "") \
    X("sigmoid", sigmoid_replay, 1, 1, "") \
    X("tanh", tanh_replay, 1, 1, "") \
    X("gelu", gelu_replay, 1, 1, "") \
    X("softmax", softmax_replay, 1, 1, "i") \
    X("log_softmax", log_softmax_replay, 1, 1, "i") \
    X("sum", reduce_replay, 1, 1, "0iin") \
    X("mean", reduce_replay, 1, 1, "1iin") \
    X("max", reduce_replay, 1, 1, "2iin") \
    X("min", reduce_replay, 1, 1, "3iin") \
    X("var", reduce_replay, 1, 1, "4iin") \
    X("std", reduce_replay, 1, 1, "5iin") \
    X("reshape", reshape_replay, 1, 1, "n") \
    X("flatten", flatten_replay, 1, 1, "ii") \
    X("squeeze", squeeze_replay, 1, 1, "n") \
    X("unsqueeze", unsqueeze_replay, 1, 1, "i") \
    X("permute", permute_replay, 1, 1, "n") \
    X("slice", slice_replay, 1, 1, "s") \
    X("cat", cat_replay, GRAPH_JOIN_SLOTS, 1, "i") \
    X("stack", stack_replay, GRAPH_JOIN_SLOTS, 1, "i") \
    X("transpose", transpose_replay, 1, 1, "ii") \
    X("clone", clone_replay, 1, 1, "") \
    X("detach", detach_replay, 1, 1, "") \
    X("matmul", matmul_replay, 2, 1, "") \
    X("linear", linear_replay, 3, 1, "") \
    X("conv2d", conv2d_replay, 3, 1, "iiiiiii") \
    X("max_pool2d", max_pool2d_replay, 1, 1, "iiiiii") \
    X("conv_transpose2d", conv_transpose2d_replay, 2, 1, "iiiiiiiii") \
    X("avg_pool2d", avg_pool2d_replay, 1, 1, "iiiiii") \
    X("adaptive_avg_pool2d", adaptive_avg_pool2d_replay, 1, 1, "ii") \
    X("batch_norm", batch_norm_replay, 5, 1, "0ff") \
    X("dropout", dropout_replay, 1, 1, "f0") \
    X("feature_dropout", feature_dropout_replay, 1, 1, "f0") \
    X("mse_loss", mse_loss_replay, 2, 1, "i") \
    X("l1_loss", l1_loss_replay, 2, 1, "i") \
    X("smooth_l1_loss", smooth_l1_loss_replay, 2, 1, "if") \
    X("binary_cross_entropy", binary_cross_entropy_replay, 2, 1, "i") \
    X("bce_with_logits", bce_with_logits_replay, 2, 1, "i") \
    X("cross_entropy", cross_entropy_replay, 2, 1, "if") \
    X("lstm", lstm_replay, 7, 3, "ii") \
    X("pointwise", pointwise_replay, 1, 1, "ifff") \
    X("pointwise2", pointwise2_replay, 2, 1, "i") \
    X("set_grad_enabled", set_grad_enabled_replay, 0, 0, "0") \
    /* ---- layout.c, scatter.c (shapes) ---- */ \
    X("flip", flip_replay, 1, 1, "n") \
    X("repeat", repeat_replay, 1, 1, "n") \
    X("tril", tril_replay, 1, 1, "i") \
    X("triu", triu_replay, 1, 1, "i") \
    X("diagonal", diagonal_replay, 1, 1, "iii") \
    X("diag_embed", diag_embed_replay, 1, 1, "iii") \
    X("unfold", unfold_replay, 1, 1, "iii") \
    X("scatter", scatter_replay, 3, 1, "iii")

#define OP_TABLE_DECLARE(name, fn, n_in, n_out, attrs) int fn(AcTensor **t, const double *attr);
RECORDED_OPS(OP_TABLE_DECLARE)
#undef OP_TABLE_DECLARE

#endif /* AC_OP_TABLE_H */
