/*
 * The only file that reads time. Both clocks go through the system call seam, which is what lets
 * a test stop and move time (sxe__sys_clock_fake) instead of sleeping.
 */
#include <time.h>

#include "sxe/clock.h"
#include "sys.h"

static uint64_t read_clock(clockid_t clock)
{
    struct timespec now;

    /*
     * clock_gettime fails only for an unknown clock id or a bad pointer, neither possible here.
     * Only an injected fault can make it fail, and then time reads 0. No assertion: the log reads
     * this clock to stamp an assertion's report, so asserting here would recurse.
     */
    if (sxe__sys.clock_gettime(clock, &now) != 0) {
        return 0;
    }
    return (uint64_t)now.tv_sec * SXE_NS_PER_SEC + (uint64_t)now.tv_nsec;
}

uint64_t sxe_clock_mono_ns(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

uint64_t sxe_clock_wall_ns(void)
{
    return read_clock(CLOCK_REALTIME);
}
