/*
 * linear_regression.c - fit y = 2x + 1 + noise with libac from C.
 *
 * The same loop as demos/linear_regression.py: parameters live at root,
 * every step runs in a scope that its restore frees in one move.
 *
 *   cc linear_regression.c $(pkg-config --cflags --libs aicraft) -o linreg
 */
#include <ac.h>

#include <stdio.h>

#define N 256
#define STEPS 300

static int fail(const char *what)
{
    fprintf(stderr, "%s: %s\n", what, ac_last_error());
    return 1;
}

int main(void)
{
    int64_t shape[2] = {N, 1}, one = 1;
    AcTensor *x, *noise, *y, *w, *b;
    AcMemStats before, after;
    float lr = 0.1f;
    int step;

    ac_manual_seed(0);
    x = ac_rand(shape, 2);                        /* x in [0, 1) */
    noise = ac_randn(shape, 2);
    y = ac_tensor_new(shape, 2);
    if (!x || !noise || !y) return fail("data");
    for (step = 0; step < N; step++)
        y->data[step] = 2.0f * x->data[step] + 1.0f + 0.1f * noise->data[step];

    w = ac_tensor_new(&one, 1);
    b = ac_tensor_new(&one, 1);
    if (!w || !b) return fail("params");
    ac_tensor_set_requires_grad(w, 1);
    ac_tensor_set_requires_grad(b, 1);

    ac_memory_stats(&before);
    for (step = 0; step < STEPS; step++) {
        AcCheckpoint cp = ac_mem_checkpoint();
        AcTensor *pred = ac_add(ac_mul(x, w), b);
        AcTensor *loss = ac_mse_loss(pred, y, AC_REDUCTION_MEAN);
        if (!loss || ac_backward(loss) != AC_OK) return fail("step");
        w->data[0] -= lr * w->grad->data[0];      /* plain SGD on the raw buffers */
        b->data[0] -= lr * b->grad->data[0];
        if (step % 100 == 0) printf("step %3d  loss %.5f\n", step, loss->data[0]);
        ac_tensor_zero_grad(w);
        ac_tensor_zero_grad(b);
        ac_mem_restore(cp);
    }
    ac_memory_stats(&after);
    printf("w = %.3f (true 2), b = %.3f (true 1)\n", w->data[0], b->data[0]);
    printf("bytes in use before the loop %lld, after %lld\n", (long long)before.bytes_in_use,
           (long long)after.bytes_in_use);

    ac_tensor_free(x);
    ac_tensor_free(noise);
    ac_tensor_free(y);
    ac_tensor_free(w);
    ac_tensor_free(b);
    return 0;
}
