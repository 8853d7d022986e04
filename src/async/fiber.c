/*
 * Fibers: see sxe/fiber.h.
 *
 * A context is a saved stack pointer: a switch pushes the callee-saved registers on the stack it
 * leaves, stores the stack pointer, loads the other context's and pops its registers (the System V
 * ABI makes every other register the caller's to save, so that is all a switch between two calls
 * has to keep). A new fiber's stack is laid out as if it had switched away just before its first
 * instruction, with sxe__fiber_boot as the return address. Elsewhere than x86-64, ucontext.
 *
 * Each fiber remembers who resumed it (its "back" context: the thread's own stack, or another
 * fiber that started or woke it), and switches back there when it waits or ends. The pool's
 * stacks sit in one mapping, each above a PROT_NONE guard page; a SIGSEGV handler on an alternate
 * signal stack tells a guard-page fault (a fiber's stack overflowing) from any other, says so, and
 * lets the fault kill the process as it would have.
 */
#define SXE_LOG_MODULE fiber_log
#include "sxe/log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sxe/fiber.h"
#include "sxe/timer.h"
#include "sys.h"

#if defined(__SANITIZE_ADDRESS__)
#define SXE_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SXE_FIBER_ASAN 1
#endif
#endif
#ifdef SXE_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define SXE_FIBER_VALGRIND 1
#endif
#endif
#if !defined(__x86_64__) && !defined(SXE_FIBER_UCONTEXT)
#define SXE_FIBER_UCONTEXT 1
#endif
#ifdef SXE_FIBER_UCONTEXT
#include <ucontext.h>
#endif

static struct sxe_log_module fiber_log = SXE_LOG_MODULE_INIT(FIBER);

#define DEFAULT_COUNT      256
#define DEFAULT_STACK_SIZE 65536
#define ALT_STACK_SIZE     65536
#define POOLS_MAX          256
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older glibc headers lack it */
#endif

struct context {
#ifdef SXE_FIBER_UCONTEXT
    ucontext_t uc;
#else
    void *sp;
#endif
    void *fake_stack;   /* ASan's, while the context is switched out */
    const void *bottom; /* the stack's lowest address and size, for ASan */
    size_t size;
};

enum fiber_state { FIBER_FREE, FIBER_RUNNING, FIBER_SLEEPING, FIBER_WAITING };

struct sxe_fiber {
    struct context context;
    struct context *back; /* who resumed it: where it goes when it waits or ends */
    sxe_fibers_t *fibers;
    sxe_fiber_fn_t fn;
    void *arg;
    sxe_timer_t timer;
    char *stack; /* the usable stack's lowest address; this struct sits just above its top */
    uint32_t index;
    uint32_t next_free;
    enum fiber_state state;
    int wake_value;
#ifdef SXE_FIBER_VALGRIND
    unsigned valgrind_id;
#endif
};

struct sxe_fibers {
    sxe_loop_t *loop;
    char *mapping;
    size_t mapping_size;
    size_t stride;       /* guard page + stack */
    uint32_t stack_size; /* usable: below each fiber's struct */
    uint32_t count;
    uint32_t free_head;
    struct sxe_fibers_stats stats;
};

/* A fiber's struct takes the top of its stack's mapping, so starting or waking it touches one page:
 * the fibers' structs and the stacks' hot tops are the same lines. */
#define FIBER_SIZE ((sizeof(struct sxe_fiber) + 63) & ~(size_t)63)

static sxe_fiber_t *fiber_at(const sxe_fibers_t *fibers, uint32_t index)
{
    return (sxe_fiber_t *)(fibers->mapping + (size_t)(index + 1) * fibers->stride - FIBER_SIZE);
}

static __thread sxe_fiber_t *current;
static void on_sleep_done(sxe_timer_t *timer, void *arg);
static __thread struct context thread_context;

/* The guard pages of every pool, for the SIGSEGV handler; written under guard_lock. */
static struct guard {
    uintptr_t base, end;
    size_t stride, page;
    uint32_t stack_size;
} guards[POOLS_MAX];
static pthread_mutex_t guard_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous_segv;
static __thread void *alt_stack; /* this thread's, if sxe made it */
static __thread unsigned thread_pools;

#ifndef SXE_FIBER_UCONTEXT
/* Saves the callee-saved registers and stack pointer in *save, and resumes the context at load. */
void sxe__fiber_switch(void **save, void *load) __attribute__((visibility("hidden")));
/* A new fiber's first return address: calls fiber_main(r12). */
void sxe__fiber_boot(void) __attribute__((visibility("hidden")));
__asm__(".text\n"
        ".p2align 4\n"
        ".globl sxe__fiber_switch\n"
        ".type sxe__fiber_switch, @function\n"
        "sxe__fiber_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size sxe__fiber_switch, .-sxe__fiber_switch\n"
        ".globl sxe__fiber_boot\n"
        ".type sxe__fiber_boot, @function\n"
        "sxe__fiber_boot:\n"
        "    movq %r12, %rdi\n"
        "    call fiber_main\n"
        "    ud2\n"
        ".size sxe__fiber_boot, .-sxe__fiber_boot\n");
#endif

/* Switches from the running context to another; ending: the running one will never resume. */
static void switch_context(struct context *from, struct context *to, bool ending)
{
#ifdef SXE_FIBER_ASAN
    __sanitizer_start_switch_fiber(ending ? NULL : &from->fake_stack, to->bottom, to->size);
#else
    (void)ending;
#endif
#ifdef SXE_FIBER_UCONTEXT
    swapcontext(&from->uc, &to->uc);
#else
    sxe__fiber_switch(&from->sp, to->sp);
#endif
#ifdef SXE_FIBER_ASAN
    /* Back in from: learn the bounds of the stack that switched here, for switching back. */
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(from->fake_stack, &bottom, &size);
    if (current != NULL && current->back != NULL && &current->context == from) {
        current->back->bottom = bottom;
        current->back->size = size;
    }
#endif
}

/* A fiber's life: its function, then back to whoever resumed it last, never to return. */
static void __attribute__((used, noreturn)) fiber_main(sxe_fiber_t *fiber)
{
#ifdef SXE_FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, &fiber->back->bottom, &fiber->back->size);
#endif
    fiber->fn(fiber->arg);
    sxe_fibers_t *fibers = fiber->fibers;
    fibers->stats.finished++;
    fibers->stats.live--;
    fiber->state = FIBER_FREE;
    fiber->next_free = fibers->free_head;
    fibers->free_head = fiber->index;
    switch_context(&fiber->context, fiber->back, true);
    abort(); /* GCOVR_EXCL_LINE: an ended fiber is never resumed */
}

#ifdef SXE_FIBER_UCONTEXT
static __thread sxe_fiber_t *starting;

static void fiber_entry(void)
{
    fiber_main(starting);
}
#endif

/* Lays out a fresh fiber's stack so that switching to it starts fiber_main(fiber). */
static void prepare(sxe_fiber_t *fiber)
{
#ifdef SXE_FIBER_ASAN
    /* Frames of an earlier fiber on this stack (or of a pool mapped here before) ended without
     * returning, so their poison is still in ASan's shadow: clear it. */
    __asan_unpoison_memory_region(fiber->stack, fiber->fibers->stack_size);
#endif
    fiber->context.bottom = fiber->stack;
    fiber->context.size = fiber->fibers->stack_size;
#ifdef SXE_FIBER_UCONTEXT
    getcontext(&fiber->context.uc);
    fiber->context.uc.uc_stack.ss_sp = fiber->stack;
    fiber->context.uc.uc_stack.ss_size = fiber->fibers->stack_size;
    fiber->context.uc.uc_link = NULL;
    makecontext(&fiber->context.uc, fiber_entry, 0);
    starting = fiber;
#else
    /* From the 16-byte aligned top: r15, r14, r13, r12 (the fiber), rbx, rbp (0 ends backtraces),
     * the return address; sxe__fiber_boot then runs with the stack aligned for its call. */
    uintptr_t *sp = (uintptr_t *)(fiber->stack + fiber->fibers->stack_size) - 7;
    memset(sp, 0, 7 * sizeof(*sp));
    sp[3] = (uintptr_t)fiber;
    sp[6] = (uintptr_t)sxe__fiber_boot;
    fiber->context.sp = sp;
#endif
}

/* Runs fiber from where it stopped (or its start) until it waits or ends. */
static void resume(sxe_fiber_t *fiber)
{
    sxe_fiber_t *resumer = current;
    struct context *back = resumer != NULL ? &resumer->context : &thread_context;

    fiber->back = back;
    fiber->state = FIBER_RUNNING;
    fiber->fibers->stats.switches += 2;
    current = fiber;
    switch_context(back, &fiber->context, false);
    current = resumer;
}

/* From a fiber: switches back to its resumer until resumed again. */
static void suspend(sxe_fiber_t *fiber, enum fiber_state state)
{
    fiber->state = state;
    switch_context(&fiber->context, fiber->back, false);
}

/* The SIGSEGV handler: names a fiber's stack overflow, then lets the fault take its course. */
static void on_segv(int signal, siginfo_t *info, void *ucontext)
{
    static const char message[] = "sxe: a fiber overflowed its stack (the guard page below it was "
                                  "touched): raise sxe_fibers_options.stack_size\n";
    uintptr_t address = (uintptr_t)info->si_addr;

    for (unsigned i = 0; i < POOLS_MAX; i++) {
        const struct guard *guard = &guards[i];
        if (address >= guard->base && address < guard->end &&
            (address - guard->base) % guard->stride < guard->page) {
            (void)!sxe__sys.write(STDERR_FILENO, message, sizeof(message) - 1);
            break;
        }
    }
    if (previous_segv.sa_flags & SA_SIGINFO) {
        previous_segv.sa_sigaction(signal, info, ucontext); /* GCOVR_EXCL_LINE: ASan's, say */
        return;                                             /* GCOVR_EXCL_LINE: as above */
    }
    /* Put the previous plain handler back, or the default: the faulting instruction runs again,
     * and the fault takes the process down as it would have without sxe. */
    struct sigaction fallback = previous_segv;
    if (fallback.sa_handler == SIG_IGN) {
        fallback.sa_handler = SIG_DFL;
    }
    (void)sxe__sys.sigaction(SIGSEGV, &fallback, NULL);
}

/* Registers a pool's guard pages, and, once, the handler; gives this thread an alternate stack. */
static int guard_pool(sxe_fibers_t *fibers, size_t page)
{
    stack_t old;
    int rc = 0;

    pthread_mutex_lock(&guard_lock);
    unsigned i = 0;
    while (i < POOLS_MAX && guards[i].base != 0) {
        i++;
    }
    if (i == POOLS_MAX) {
        rc = -ENOBUFS;
    } else {
        /* Ours goes first, over whatever holds SIGSEGV now (the default, a sanitizer's, a test
         * framework's), which it hands every fault on to. */
        struct sigaction now,
            action = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO | SA_ONSTACK};
        sigemptyset(&action.sa_mask);
        if (sxe__sys.sigaction(SIGSEGV, NULL, &now) < 0 ||
            (!((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_segv) &&
             sxe__sys.sigaction(SIGSEGV, &action, &previous_segv) < 0)) {
            rc = -errno;
        }
    }
    if (rc == 0) {
        guards[i] = (struct guard){.base = (uintptr_t)fibers->mapping,
                                   .end = (uintptr_t)fibers->mapping + fibers->mapping_size,
                                   .stride = fibers->stride,
                                   .page = page,
                                   .stack_size = fibers->stack_size};
    }
    pthread_mutex_unlock(&guard_lock);
    if (rc == 0 && thread_pools++ == 0 && sxe__sys.sigaltstack(NULL, &old) == 0 &&
        (old.ss_flags & SS_DISABLE)) {
        void *stack = sxe__sys.mmap(NULL, ALT_STACK_SIZE, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        stack_t alt = {.ss_sp = stack, .ss_size = ALT_STACK_SIZE};
        if (stack != MAP_FAILED && sxe__sys.sigaltstack(&alt, NULL) == 0) {
            alt_stack = stack;
        } else if (stack != MAP_FAILED) {
            (void)sxe__sys.munmap(stack, ALT_STACK_SIZE); /* then overflows die unnamed */
        }
    }
    return rc;
}

static void unguard_pool(sxe_fibers_t *fibers)
{
    pthread_mutex_lock(&guard_lock);
    for (unsigned i = 0; i < POOLS_MAX; i++) {
        if (guards[i].base == (uintptr_t)fibers->mapping) {
            guards[i] = (struct guard){0};
        }
    }
    pthread_mutex_unlock(&guard_lock);
    if (--thread_pools == 0 && alt_stack != NULL) {
        stack_t off = {.ss_flags = SS_DISABLE};
        (void)sxe__sys.sigaltstack(&off, NULL);
        (void)sxe__sys.munmap(alt_stack, ALT_STACK_SIZE);
        alt_stack = NULL;
    }
}

/* Maps the stacks with their guard pages, and faults every stack page in. */
static int map_stacks(sxe_fibers_t *fibers, size_t page)
{
    fibers->mapping = sxe__sys.mmap(NULL, fibers->mapping_size, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (fibers->mapping == MAP_FAILED) {
        fibers->mapping = NULL;
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < fibers->count; i++) {
        char *guard = fibers->mapping + (size_t)i * fibers->stride;
        if (sxe__sys.mprotect(guard, page, PROT_NONE) < 0) {
            return -errno; /* ENOMEM: past vm.max_map_count, two areas per fiber */
        }
        /* Fault the stack in now, one call per stack; touch it where the kernel has no
         * MADV_POPULATE_WRITE (before 5.14). */
        size_t mapped = fibers->stride - page;
        if (sxe__sys.madvise(guard + page, mapped, MADV_POPULATE_WRITE) < 0) {
            for (size_t at = 0; at < mapped; at += page) {
                guard[page + at] = 0;
            }
        }
#ifdef SXE_FIBER_VALGRIND
#endif
        sxe_fiber_t *fiber = fiber_at(fibers, i);
        *fiber = (struct sxe_fiber){.fibers = fibers,
                                    .stack = guard + page,
                                    .index = i,
                                    .next_free = i + 1 < fibers->count ? i + 1 : UINT32_MAX};
        sxe_timer_init(&fiber->timer, on_sleep_done, fiber);
#ifdef SXE_FIBER_VALGRIND
        fiber->valgrind_id = VALGRIND_STACK_REGISTER(fiber->stack, (char *)fiber);
#endif
    }
    return 0;
}

int sxe_fibers_create(sxe_fibers_t **fibers_out, sxe_loop_t *loop,
                      const struct sxe_fibers_options *options)
{
    static const struct sxe_fibers_options defaults = {0};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int rc;

    if (!SXE_CHECK(fibers_out != NULL && loop != NULL)) {
        return -EINVAL;
    }
    options = options != NULL ? options : &defaults;
    uint32_t count = options->count ? options->count : DEFAULT_COUNT;
    size_t stack_size = options->stack_size ? options->stack_size : DEFAULT_STACK_SIZE;
    stack_size = (stack_size + FIBER_SIZE + page - 1) / page * page; /* its struct on top */
    if (!SXE_CHECK(stack_size <= UINT32_MAX / 2 && count <= UINT32_MAX / 2)) {
        return -EINVAL;
    }
    sxe_fibers_t *fibers = calloc(1, sizeof(*fibers));
    if (fibers == NULL) {
        return -ENOMEM;
    }
    fibers->loop = loop;
    fibers->count = count;
    fibers->stack_size = (uint32_t)(stack_size - FIBER_SIZE);
    fibers->stride = stack_size + page;
    fibers->mapping_size = fibers->stride * count;
    if ((rc = map_stacks(fibers, page)) < 0 || (rc = guard_pool(fibers, page)) < 0) {
        SXE_LOG_ERROR("cannot make %u fiber stacks of %zu bytes: %s", count, stack_size,
                      sxe_strerror(rc));
        if (fibers->mapping != NULL) {
            (void)sxe__sys.munmap(fibers->mapping, fibers->mapping_size);
        }
        free(fibers);
        return rc;
    }
    *fibers_out = fibers;
    return 0;
}

void sxe_fibers_destroy(sxe_fibers_t *fibers)
{
    if (fibers == NULL) {
        return;
    }
    for (uint32_t i = 0; i < fibers->count; i++) {
        sxe_fiber_t *fiber = fiber_at(fibers, i);
        sxe_timer_stop(fibers->loop, &fiber->timer);
#ifdef SXE_FIBER_VALGRIND
        VALGRIND_STACK_DEREGISTER(fiber->valgrind_id);
#endif
    }
    unguard_pool(fibers);
#ifdef SXE_FIBER_ASAN
    /* Frames that never returned left their poison in ASan's shadow: memory mapped here next (a
     * loop's table, say) must not be taken for a stack's red zones. */
    __asan_unpoison_memory_region(fibers->mapping, fibers->mapping_size);
#endif
    (void)sxe__sys.munmap(fibers->mapping, fibers->mapping_size);
    free(fibers);
}

int sxe_fiber_start(sxe_fibers_t *fibers, sxe_fiber_fn_t fn, void *arg, sxe_fiber_t **fiber_out)
{
    if (!SXE_CHECK(fibers != NULL && fn != NULL)) {
        return -EINVAL;
    }
    if (fibers->free_head == UINT32_MAX) {
        fibers->stats.no_fiber++;
        SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "all %u fibers are in use: raise %s", fibers->count,
                     sxe_log_setting("sxe_fibers_options.count"));
        return -ENOBUFS;
    }
    sxe_fiber_t *fiber = fiber_at(fibers, fibers->free_head);
    fibers->free_head = fiber->next_free;
    fiber->fn = fn;
    fiber->arg = arg;
    fibers->stats.started++;
    if (++fibers->stats.live > fibers->stats.most_live) {
        fibers->stats.most_live = fibers->stats.live;
    }
    if (fiber_out != NULL) {
        *fiber_out = fiber;
    }
    prepare(fiber);
    resume(fiber);
    return 0;
}

sxe_fiber_t *sxe_fiber_self(void)
{
    return current;
}

static void on_sleep_done(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    resume(arg);
}

int sxe_fiber_sleep(uint64_t ns)
{
    sxe_fiber_t *fiber = current;
    int rc;

    if (!SXE_CHECK(fiber != NULL)) {
        return -EPERM;
    }
    /* At least 1 ns: a timer due now would run again in this turn's expiry pass. */
    if ((rc = sxe_timer_start(fiber->fibers->loop, &fiber->timer, ns ? ns : 1, 0)) < 0) {
        return rc;
    }
    suspend(fiber, FIBER_SLEEPING);
    return 0;
}

int sxe_fiber_yield(void)
{
    return sxe_fiber_sleep(0);
}

int sxe_fiber_wait(void)
{
    sxe_fiber_t *fiber = current;

    if (!SXE_CHECK(fiber != NULL)) {
        return -EPERM;
    }
    suspend(fiber, FIBER_WAITING);
    return fiber->wake_value;
}

int sxe_fiber_wake(sxe_fiber_t *fiber, int value)
{
    if (!SXE_CHECK(fiber != NULL && fiber->state == FIBER_WAITING)) {
        return -EINVAL;
    }
    fiber->wake_value = value;
    resume(fiber);
    return 0;
}

void sxe_fibers_stats(const sxe_fibers_t *fibers, struct sxe_fibers_stats *stats)
{
    *stats = fibers->stats;
}
