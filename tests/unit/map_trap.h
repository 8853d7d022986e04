/*
 * A page trap for the map's unit tests (test_map_validate.c, test_map_in_place.c): a
 * deterministic stand-in for another thread that acts between two of a reader's memory accesses.
 */
#ifndef SXE_MAP_TRAP_H
#define SXE_MAP_TRAP_H

#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sxe_test.h"

/*
 * A page trap: a deterministic stand-in for another thread that acts between two of a reader's
 * memory accesses. The page of the first step is made inaccessible, so the reader's next access to
 * it faults; the SIGSEGV handler opens the page again and closes the next step's, or, after the
 * last step, runs the action (the other thread's work) before the faulting access resumes.
 */
#define TRAP_STEPS_MAX 3

static struct {
    uintptr_t pages[TRAP_STEPS_MAX];
    size_t page_size;
    unsigned steps;
    unsigned taken;
    void (*action)(void);
    struct sigaction previous;
} trap;

static inline uintptr_t page_of(const void *address)
{
    return (uintptr_t)address & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1);
}

static inline void on_trap(int signal_number, siginfo_t *info, void *context)
{
    (void)signal_number;
    (void)context;
    if (trap.taken == trap.steps ||
        (uintptr_t)info->si_addr - trap.pages[trap.taken] >= trap.page_size) {
        /* Not the trap's fault: the access faults again, with the handler that was there. */
        sigaction(SIGSEGV, &trap.previous, NULL);
        return;
    }
    mprotect((void *)trap.pages[trap.taken], trap.page_size, PROT_READ | PROT_WRITE);
    if (++trap.taken < trap.steps) {
        mprotect((void *)trap.pages[trap.taken], trap.page_size, PROT_NONE);
    } else {
        trap.action();
    }
}

static inline void trap_arm(const void *const *addresses, unsigned steps, void (*action)(void))
{
    struct sigaction on_fault = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO};

    assert_true(steps >= 1 && steps <= TRAP_STEPS_MAX);
    trap.page_size = (size_t)sysconf(_SC_PAGESIZE);
    trap.steps = steps;
    trap.taken = 0;
    trap.action = action;
    for (unsigned i = 0; i < steps; i++) {
        trap.pages[i] = page_of(addresses[i]);
    }
    sigemptyset(&on_fault.sa_mask);
    assert_int_equal(sigaction(SIGSEGV, &on_fault, &trap.previous), 0);
    assert_int_equal(mprotect((void *)trap.pages[0], trap.page_size, PROT_NONE), 0);
}

/* Opens the trap's pages and puts the SIGSEGV handler back. @return the steps taken. */
static inline unsigned trap_disarm(void)
{
    for (unsigned i = 0; i < trap.steps; i++) {
        assert_int_equal(mprotect((void *)trap.pages[i], trap.page_size, PROT_READ | PROT_WRITE),
                         0);
    }
    assert_int_equal(sigaction(SIGSEGV, &trap.previous, NULL), 0);
    return trap.taken;
}

#endif
