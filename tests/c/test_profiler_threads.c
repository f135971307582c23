/*
 * test_profiler_threads.c - the profiler outlives the threads that use it: a
 * thread that starts it and exits without stopping it does not lock it for the
 * process (its events stay readable, another thread starts a new session), and
 * a thread's buffer goes to later threads instead of piling up; a range name
 * that is not valid UTF-8 still makes a valid UTF-8 trace.
 */
#define _POSIX_C_SOURCE 200809L
#include "ac.h"
#include "test.h"

#include <pthread.h>
#include <string.h>

static void *start_and_exit(void *arg)
{
    const int64_t s[1] = {4};
    AcTensor *a = ac_full(s, 1, 1.0f), *r;
    int *status = arg;
    *status = ac_profiler_start(0);
    r = ac_neg(a);
    ac_tensor_free(r);
    ac_tensor_free(a);
    return NULL;   /* never stopped */
}

static int count_named(const char *name)
{
    AcProfileEvent e;
    int64_t i, n = ac_profiler_num_events();
    int count = 0;
    for (i = 0; i < n; i++)
        if (ac_profiler_event(i, &e) == AC_OK && strcmp(e.name, name) == 0) count++;
    return count;
}

static void test_thread_exiting_while_profiling_does_not_lock_the_profiler(void)
{
    int round;
    for (round = 0; round < 50; round++) {
        pthread_t t;
        int status = -1;
        CHECK(pthread_create(&t, NULL, start_and_exit, &status) == 0);
        CHECK(pthread_join(t, NULL) == 0);
        CHECK(status == AC_OK);
        CHECK(count_named("neg") == 1);             /* its session ended with it, readable */
    }
    CHECK(ac_profiler_start(0) == AC_OK);         /* this thread starts the next one */
    CHECK(ac_profiler_stop() == AC_OK);
    CHECK(ac_profiler_stop() == AC_ERR_STATE);
}

/* Whether text[0..len) is valid UTF-8 (no overlongs, surrogates, stray bytes). */
static int valid_utf8(const unsigned char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = text[i];
        size_t n, k;
        unsigned long cp;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
        else return 0;
        if (i + n > len) return 0;
        for (k = 1; k < n; k++) {
            if ((text[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (text[i + k] & 0x3f);
        }
        if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += n;
    }
    return 1;
}

static void test_range_names_that_are_not_utf8_make_a_valid_trace(void)
{
    static const char *const names[] = {
        "latin1 caf\xe9", "stray \x80\xbf", "overlong \xc0\xaf", "surrogate \xed\xa0\x80",
        "past U+10FFFF \xf4\x90\x80\x80", "cut at the end \xe2\x82", "fine: \xe2\x82\xac \xf0\x9f\x98\x80",
    };
    const int64_t s[1] = {2};
    AcTensor *a = ac_full(s, 1, 1.0f);
    FILE *f = tmpfile();
    static unsigned char text[1 << 16];
    size_t len, i;
    CHECK(ac_profiler_start(0) == AC_OK);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        AcTensor *r;
        CHECK(ac_profiler_push(names[i]) == 1);
        r = ac_neg(a);   /* the range is this event's scope too */
        ac_tensor_free(r);
        CHECK(ac_profiler_pop() == AC_OK);
    }
    CHECK(ac_profiler_stop() == AC_OK);
    CHECK(f && ac_profiler_dump(f) == AC_OK);
    rewind(f);
    len = fread(text, 1, sizeof text - 1, f);
    text[len] = '\0';
    CHECK(valid_utf8(text, len));
    CHECK(strstr((char *)text, "caf\\ufffd") != NULL);
    CHECK(strstr((char *)text, "fine: \xe2\x82\xac \xf0\x9f\x98\x80") != NULL);
    fclose(f);
    ac_tensor_free(a);
}

int main(void)
{
    RUN(test_thread_exiting_while_profiling_does_not_lock_the_profiler);
    RUN(test_range_names_that_are_not_utf8_make_a_valid_trace);
    return TEST_REPORT();
}
