/**
 * @file sxe/timer.h
 * @brief Timers: one-shot or periodic, in a binary heap of fixed capacity
 * (sxe_loop_options.timers).
 */
#ifndef SXE_TIMER_H
#define SXE_TIMER_H

#include <stdint.h>

#include "sxe/error.h"
#include "sxe/loop.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*sxe_timer_cb_t)(sxe_timer_t *timer, void *arg);

/** A timer. The caller owns the memory; it must stay put while the timer runs. */
struct sxe_timer {
    sxe_timer_cb_t callback;
    void *arg;
    uint64_t deadline; /**< CLOCK_MONOTONIC ns of the next expiry. */
    uint64_t period;   /**< ns between expiries; 0 for one-shot. */
    uint32_t slot;     /**< Its place in the heap, or UINT32_MAX when stopped. */
};

/** Prepares a timer; it starts stopped. */
void sxe_timer_init(sxe_timer_t *timer, sxe_timer_cb_t callback, void *arg);

/**
 * Starts (or restarts) a timer to fire after delay_ns from the loop's now, then every period_ns
 * if that is not 0. The callback may restart or stop this or any timer. A delay past the end of
 * the clock (UINT64_MAX, say) never fires.
 * @return 0, or -ENOBUFS when options.timers timers already run.
 */
SXE_MUST_CHECK int sxe_timer_start(sxe_loop_t *loop, sxe_timer_t *timer, uint64_t delay_ns,
                                   uint64_t period_ns);

/** Stops a timer. Stopping a stopped timer does nothing. */
void sxe_timer_stop(sxe_loop_t *loop, sxe_timer_t *timer);

/** True while the timer is started. */
int sxe_timer_active(const sxe_timer_t *timer);

#ifdef __cplusplus
}
#endif

#endif
