/*
 * The system call table, and in the test variant its fault injection and fake clocks.
 * This is the only file in the library that names a system call wrapper directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>

#include "sys.h"

/* open and fcntl are variadic: these give them the fixed prototypes a table entry needs. */
static int sys_open(const char *path, int flags, mode_t mode)
{
    return open(path, flags, mode);
}

static int sys_fcntl(int fd, int command, int arg)
{
    return fcntl(fd, command, arg);
}

/* glibc 2.36 has no io_uring wrappers. */
static int sys_io_uring_setup(unsigned entries, struct io_uring_params *params)
{
    return (int)syscall(SYS_io_uring_setup, entries, params);
}

static int sys_io_uring_enter(int fd, unsigned to_submit, unsigned min_complete, unsigned flags,
                              void *arg, size_t size)
{
    return (int)syscall(SYS_io_uring_enter, fd, to_submit, min_complete, flags, arg, size);
}

static int sys_io_uring_register(int fd, unsigned opcode, void *arg, unsigned count)
{
    return (int)syscall(SYS_io_uring_register, fd, opcode, arg, count);
}

/* A completion's result, as a system call would give it: -1 and errno for a failure. */
static int sys_io_uring_result(unsigned op, int res)
{
    (void)op;
    if (res < 0) {
        errno = -res;
        return -1;
    }
    return res;
}

#ifndef SXE_SYS_MUTABLE

const struct sxe__sys sxe__sys = {
#define SXE_SYS_REAL(name, ret, params, args, impl) .name = impl,
    SXE_SYS_CALLS(SXE_SYS_REAL)
#undef SXE_SYS_REAL
};

#else

static const struct sxe__sys sys_real = {
#define SXE_SYS_REAL(name, ret, params, args, impl) .name = impl,
    SXE_SYS_CALLS(SXE_SYS_REAL)
#undef SXE_SYS_REAL
};

struct sxe__sys sxe__sys = {
#define SXE_SYS_REAL(name, ret, params, args, impl) .name = impl,
    SXE_SYS_CALLS(SXE_SYS_REAL)
#undef SXE_SYS_REAL
};

/* What an armed entry passes through to, and when it fails instead. */
static struct sxe__sys sys_next;

struct fault {
    unsigned calls; /* calls seen since armed */
    unsigned first; /* first failing call, counting from 1; 0 means count only */
    unsigned times; /* how many fail; 0 means all from first on */
    int err;
};

static struct fault faults[SXE_SYS_CALL_COUNT];

/* Counts a call and decides whether it fails; sets errno when it does. Safe across threads. */
static bool fault_fires(enum sxe__sys_call call)
{
    struct fault *fault = &faults[call];
    unsigned nth = __atomic_add_fetch(&fault->calls, 1, __ATOMIC_RELAXED);

    if (fault->first == 0 || nth < fault->first) {
        return false;
    }
    if (fault->times != 0 && nth - fault->first >= fault->times) {
        return false;
    }
    errno = fault->err;
    return true;
}

#define SXE_SYS_WRAPPER(name, ret, params, args, impl)                                             \
    static ret fault_##name params                                                                 \
    {                                                                                              \
        if (fault_fires(SXE_SYS_##name)) {                                                         \
            return (ret)-1;                                                                        \
        }                                                                                          \
        return sys_next.name args;                                                                 \
    }
SXE_SYS_CALLS(SXE_SYS_WRAPPER)
#undef SXE_SYS_WRAPPER

static void arm(enum sxe__sys_call call, unsigned first, unsigned times, int err)
{
    faults[call] = (struct fault){.first = first, .times = times, .err = err};

    switch (call) {
#define SXE_SYS_ARM(name, ret, params, args, impl)                                                 \
    case SXE_SYS_##name:                                                                           \
        if (sxe__sys.name != fault_##name) {                                                       \
            sys_next.name = sxe__sys.name;                                                         \
            sxe__sys.name = fault_##name;                                                          \
        }                                                                                          \
        break;
        SXE_SYS_CALLS(SXE_SYS_ARM)
#undef SXE_SYS_ARM
    /* GCOVR_EXCL_START: every call in the enum has a case above. */
    default:
        break;
        /* GCOVR_EXCL_STOP */
    }
}

void sxe__sys_fail(enum sxe__sys_call call, unsigned nth, unsigned times, int err)
{
    arm(call, nth == 0 ? 1 : nth, times, err);
}

void sxe__sys_count(enum sxe__sys_call call)
{
    arm(call, 0, 0, 0);
}

unsigned sxe__sys_calls(enum sxe__sys_call call)
{
    return __atomic_load_n(&faults[call].calls, __ATOMIC_RELAXED);
}

static uint64_t fake_mono_ns;
static uint64_t fake_wall_ns;

static int fake_clock_gettime(clockid_t clock, struct timespec *time)
{
    uint64_t ns;

    switch (clock) {
    case CLOCK_MONOTONIC:
        ns = __atomic_load_n(&fake_mono_ns, __ATOMIC_RELAXED);
        break;
    case CLOCK_REALTIME:
        ns = __atomic_load_n(&fake_wall_ns, __ATOMIC_RELAXED);
        break;
    default:
        errno = EINVAL;
        return -1;
    }
    time->tv_sec = (time_t)(ns / 1000000000u);
    time->tv_nsec = (long)(ns % 1000000000u);
    return 0;
}

void sxe__sys_clock_fake(uint64_t mono_ns, uint64_t wall_ns)
{
    __atomic_store_n(&fake_mono_ns, mono_ns, __ATOMIC_RELAXED);
    __atomic_store_n(&fake_wall_ns, wall_ns, __ATOMIC_RELAXED);

    /* Under an armed fault the fake clock goes behind it, so both can be used together. */
    if (sxe__sys.clock_gettime == fault_clock_gettime) {
        sys_next.clock_gettime = fake_clock_gettime;
    } else {
        sxe__sys.clock_gettime = fake_clock_gettime;
    }
}

void sxe__sys_clock_advance(uint64_t ns)
{
    __atomic_add_fetch(&fake_mono_ns, ns, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fake_wall_ns, ns, __ATOMIC_RELAXED);
}

void sxe__sys_reset(void)
{
    sxe__sys = sys_real;
    sys_next = sys_real;
    for (unsigned i = 0; i < SXE_SYS_CALL_COUNT; i++) {
        faults[i] = (struct fault){0};
    }
}

#endif
