/*
 * Fibers: three of them count at their own pace, each written as a plain loop with sleeps, while
 * one event loop runs them all. Prints 9 lines over about half a second, then exits.
 */
#include <stdio.h>
#include <sxe/sxe.h>

static void counter(void *arg)
{
    const char *name = arg;

    for (int i = 1; i <= 3; i++) {
        printf("%s %d\n", name, i);
        fflush(stdout);
        (void)sxe_fiber_sleep((uint64_t)(name[0] - 'a' + 1) * 50 * SXE_NS_PER_MSEC);
    }
}

int main(void)
{
    static char names[][2] = {"a", "b", "c"};
    sxe_loop_t *loop;
    sxe_fibers_t *fibers;

    if (sxe_loop_create(&loop, NULL) < 0 || sxe_fibers_create(&fibers, loop, NULL) < 0) {
        return 1;
    }
    for (int i = 0; i < 3; i++) {
        if (sxe_fiber_start(fibers, counter, names[i], NULL) < 0) {
            return 1;
        }
    }
    struct sxe_fibers_stats stats;
    do { /* the loop runs until every fiber has returned */
        if (sxe_loop_run_once(loop, 10 * SXE_NS_PER_MSEC) < 0) {
            return 1;
        }
        sxe_fibers_stats(fibers, &stats);
    } while (stats.live > 0);
    sxe_fibers_destroy(fibers);
    sxe_loop_destroy(loop);
    return 0;
}
