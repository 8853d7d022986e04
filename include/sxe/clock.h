/**
 * @file sxe/clock.h
 * @brief The one place sxe reads time.
 *
 * Two clocks, both in nanoseconds:
 * - monotonic time (CLOCK_MONOTONIC) for timeouts, timers and pool timestamps. It never jumps, and
 *   it is the same clock in every process on the machine, so it may be stored in shared memory;
 * - wall time (CLOCK_REALTIME) for log stamps and HTTP dates, and nothing else.
 *
 * Both go through the system call seam, so a test build can stop time, set it and move it forward
 * without sleeping (see src/sys.h). The event loop reads the monotonic clock once per turn and
 * hands the cached value to everything that runs in that turn; code that runs inside a loop should
 * ask the loop for "now" rather than call these functions.
 */
#ifndef SXE_CLOCK_H
#define SXE_CLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SXE_NS_PER_SEC  1000000000ULL
#define SXE_NS_PER_MSEC 1000000ULL
#define SXE_NS_PER_USEC 1000ULL

/** Monotonic nanoseconds since an arbitrary point before boot. Never decreases. Thread-safe. */
uint64_t sxe_clock_mono_ns(void);

/** Wall-clock nanoseconds since the Unix epoch (UTC). May jump when the clock is set. */
uint64_t sxe_clock_wall_ns(void);

#ifdef __cplusplus
}
#endif

#endif
