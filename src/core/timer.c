/*
 * Timers: a binary min-heap of caller-owned timers, ordered by deadline. Start, stop and expiry
 * are O(log n); the next deadline is O(1). The heap array is allocated with the loop, so starting
 * a timer never allocates: past options.timers it fails with -ENOBUFS.
 */
#define SXE_LOG_MODULE timer_log
#include "sxe/log.h"

#include <errno.h>

#include "loop.h"

static struct sxe_log_module timer_log = SXE_LOG_MODULE_INIT(TIMER);

static void place(sxe_loop_t *loop, sxe_timer_t *timer, uint32_t slot)
{
    loop->heap[slot] = timer;
    timer->slot = slot;
}

static void sift_up(sxe_loop_t *loop, uint32_t slot)
{
    sxe_timer_t *timer = loop->heap[slot];

    while (slot > 0) {
        uint32_t parent = (slot - 1) / 2;
        if (loop->heap[parent]->deadline <= timer->deadline) {
            break;
        }
        place(loop, loop->heap[parent], slot);
        slot = parent;
    }
    place(loop, timer, slot);
}

static void sift_down(sxe_loop_t *loop, uint32_t slot)
{
    sxe_timer_t *timer = loop->heap[slot];

    for (;;) {
        uint32_t child = 2 * slot + 1;
        if (child >= loop->heap_len) {
            break;
        }
        if (child + 1 < loop->heap_len &&
            loop->heap[child + 1]->deadline < loop->heap[child]->deadline) {
            child++;
        }
        if (timer->deadline <= loop->heap[child]->deadline) {
            break;
        }
        place(loop, loop->heap[child], slot);
        slot = child;
    }
    place(loop, timer, slot);
}

static void heap_remove(sxe_loop_t *loop, sxe_timer_t *timer)
{
    uint32_t slot = timer->slot;
    sxe_timer_t *last = loop->heap[--loop->heap_len];

    timer->slot = SXE_NONE;
    if (last == timer) {
        return;
    }
    place(loop, last, slot);
    sift_down(loop, slot);
    sift_up(loop, last->slot);
}

void sxe_timer_init(sxe_timer_t *timer, sxe_timer_cb_t callback, void *arg)
{
    *timer = (sxe_timer_t){.callback = callback, .arg = arg, .slot = SXE_NONE};
}

/* when + ns, or the end of time (UINT64_MAX) if that is past it: a delay of "never" must not wrap
 * around to a deadline already due. */
static uint64_t later(uint64_t when, uint64_t ns)
{
    return ns > UINT64_MAX - when ? UINT64_MAX : when + ns;
}

int sxe_timer_start(sxe_loop_t *loop, sxe_timer_t *timer, uint64_t delay_ns, uint64_t period_ns)
{
    if (!SXE_CHECK(timer->callback != NULL)) {
        return -EINVAL;
    }
    if (timer->slot != SXE_NONE) {
        heap_remove(loop, timer);
    }
    if (loop->heap_len == loop->options.timers) {
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "all %u timers are running; raise %s",
                     loop->options.timers, sxe_log_setting("options.timers"));
        return -ENOBUFS;
    }
    timer->deadline = later(loop->now, delay_ns);
    timer->period = period_ns;
    place(loop, timer, loop->heap_len++);
    sift_up(loop, timer->slot);
    return 0;
}

void sxe_timer_stop(sxe_loop_t *loop, sxe_timer_t *timer)
{
    if (timer->slot != SXE_NONE) {
        heap_remove(loop, timer);
    }
}

int sxe_timer_active(const sxe_timer_t *timer)
{
    return timer->slot != SXE_NONE;
}

uint64_t sxe__timer_next(const sxe_loop_t *loop)
{
    return loop->heap_len > 0 ? loop->heap[0]->deadline : UINT64_MAX;
}

/*
 * Fires every timer due at the loop's now, earliest first. A periodic timer is put back before
 * its callback runs, so the callback may stop or restart it. A period shorter than the time the
 * loop fell behind fires once, not once per missed period.
 */
void sxe__timer_run(sxe_loop_t *loop)
{
    while (loop->heap_len > 0 && loop->heap[0]->deadline <= loop->now) {
        sxe_timer_t *timer = loop->heap[0];

        heap_remove(loop, timer);
        if (timer->period != 0) {
            uint64_t next = later(timer->deadline, timer->period);
            timer->deadline = next > loop->now ? next : later(loop->now, timer->period);
            place(loop, timer, loop->heap_len++);
            sift_up(loop, timer->slot);
        }
        timer->callback(timer, timer->arg);
    }
}

int sxe__timer_validate(const sxe_loop_t *loop)
{
    for (uint32_t slot = 0; slot < loop->heap_len; slot++) {
        const sxe_timer_t *timer = loop->heap[slot];
        if (timer->slot != slot) {
            SXE_LOG_ERROR("timer heap invalid: slot %u holds a timer that says slot %u", slot,
                          timer->slot);
            return -EUCLEAN;
        }
        if (slot > 0 && loop->heap[(slot - 1) / 2]->deadline > timer->deadline) {
            SXE_LOG_ERROR("timer heap invalid: slot %u fires before its parent", slot);
            return -EUCLEAN;
        }
    }
    return 0;
}
