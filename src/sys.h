/*
 * The system call seam: every system call the library makes goes through the table sxe__sys.
 *
 * In the shipped library the table is const, so a call through it costs one indirect call and
 * nothing can redirect it at run time. The test variant of the library (built with
 * SXE_SYS_MUTABLE, linked only into tests) makes the table writable and adds fault injection:
 * a test can replace an entry with its own function, make the Nth call of any entry fail with a
 * chosen errno, and stop, set and move the clocks.
 *
 * To call a new system call from the library, add it to SXE_SYS_CALLS below and call it as
 * sxe__sys.name(...). tests/build/check-syscalls.sh fails the build's tests if any library object
 * other than sys.c calls a system call wrapper directly.
 */
#ifndef SXE_SYS_H
#define SXE_SYS_H

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct io_uring_params;

/*
 * X(name, return type, parameters, arguments, implementation): one row per system call. The
 * implementation is the libc function itself, except where its prototype does not fit a table
 * entry (open is variadic) or libc has no wrapper (io_uring), where sys.c supplies one.
 *
 * io_uring_result is not a system call but the seam's view of a completion: every completion's
 * result passes through it, so a test can fail the Nth completion with a chosen errno. Like a
 * system call it returns -1 and sets errno for a failure, and otherwise the result.
 */
#define SXE_SYS_CALLS(X)                                                                           \
    X(accept4, int, (int fd, struct sockaddr *address, socklen_t *len, int flags),                 \
      (fd, address, len, flags), accept4)                                                          \
    X(bind, int, (int fd, const struct sockaddr *address, socklen_t len), (fd, address, len),      \
      bind)                                                                                        \
    X(clock_gettime, int, (clockid_t clock, struct timespec * time), (clock, time), clock_gettime) \
    X(close, int, (int fd), (fd), close)                                                           \
    X(connect, int, (int fd, const struct sockaddr *address, socklen_t len), (fd, address, len),   \
      connect)                                                                                     \
    X(dup, int, (int fd), (fd), dup)                                                               \
    X(dup3, int, (int fd, int to, int flags), (fd, to, flags), dup3)                               \
    X(epoll_create1, int, (int flags), (flags), epoll_create1)                                     \
    X(epoll_ctl, int, (int epfd, int op, int fd, struct epoll_event *event),                       \
      (epfd, op, fd, event), epoll_ctl)                                                            \
    X(epoll_pwait2, int,                                                                           \
      (int epfd, struct epoll_event *events, int max, const struct timespec *timeout,              \
       const sigset_t *mask),                                                                      \
      (epfd, events, max, timeout, mask), epoll_pwait2)                                            \
    X(epoll_wait, int, (int epfd, struct epoll_event *events, int max, int timeout),               \
      (epfd, events, max, timeout), epoll_wait)                                                    \
    X(eventfd, int, (unsigned int count, int flags), (count, flags), eventfd)                      \
    X(fcntl, int, (int fd, int command, int arg), (fd, command, arg), sys_fcntl)                   \
    X(execv, int, (const char *path, char *const argv[]), (path, argv), execv)                     \
    X(fork, pid_t, (void), (), fork)                                                               \
    X(fstat, int, (int fd, struct stat *status), (fd, status), fstat)                              \
    X(ftruncate, int, (int fd, off_t len), (fd, len), ftruncate)                                   \
    X(getpid, pid_t, (void), (), getpid)                                                           \
    X(getrandom, ssize_t, (void *buf, size_t len, unsigned flags), (buf, len, flags), getrandom)   \
    X(getpeername, int, (int fd, struct sockaddr *address, socklen_t *len), (fd, address, len),    \
      getpeername)                                                                                 \
    X(getsockname, int, (int fd, struct sockaddr *address, socklen_t *len), (fd, address, len),    \
      getsockname)                                                                                 \
    X(getsockopt, int, (int fd, int level, int name, void *value, socklen_t *len),                 \
      (fd, level, name, value, len), getsockopt)                                                   \
    X(gettid, pid_t, (void), (), gettid)                                                           \
    X(io_uring_enter, int,                                                                         \
      (int fd, unsigned to_submit, unsigned min_complete, unsigned flags, void *arg, size_t size), \
      (fd, to_submit, min_complete, flags, arg, size), sys_io_uring_enter)                         \
    X(io_uring_register, int, (int fd, unsigned opcode, void *arg, unsigned count),                \
      (fd, opcode, arg, count), sys_io_uring_register)                                             \
    X(io_uring_result, int, (unsigned op, int res), (op, res), sys_io_uring_result)                \
    X(io_uring_setup, int, (unsigned entries, struct io_uring_params *params), (entries, params),  \
      sys_io_uring_setup)                                                                          \
    X(kill, int, (pid_t pid, int signal), (pid, signal), kill)                                     \
    X(listen, int, (int fd, int backlog), (fd, backlog), listen)                                   \
    X(mmap, void *, (void *addr, size_t len, int prot, int flags, int fd, off_t offset),           \
      (addr, len, prot, flags, fd, offset), mmap)                                                  \
    X(madvise, int, (void *addr, size_t len, int advice), (addr, len, advice), madvise)            \
    X(mprotect, int, (void *addr, size_t len, int prot), (addr, len, prot), mprotect)              \
    X(msync, int, (void *addr, size_t len, int flags), (addr, len, flags), msync)                  \
    X(munmap, int, (void *addr, size_t len), (addr, len), munmap)                                  \
    X(open, int, (const char *path, int flags, mode_t mode), (path, flags, mode), sys_open)        \
    X(pread, ssize_t, (int fd, void *buf, size_t len, off_t offset), (fd, buf, len, offset),       \
      pread)                                                                                       \
    X(poll, int, (struct pollfd * fds, nfds_t count, int timeout), (fds, count, timeout), poll)    \
    X(pthread_sigmask, int, (int how, const sigset_t *set, sigset_t *old), (how, set, old),        \
      pthread_sigmask)                                                                             \
    X(pthread_create, int,                                                                         \
      (pthread_t * thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg),         \
      (thread, attr, start, arg), pthread_create)                                                  \
    X(read, ssize_t, (int fd, void *buf, size_t len), (fd, buf, len), read)                        \
    X(recv, ssize_t, (int fd, void *buf, size_t len, int flags), (fd, buf, len, flags), recv)      \
    X(recvmmsg, int,                                                                               \
      (int fd, struct mmsghdr *messages, unsigned count, int flags, struct timespec *timeout),     \
      (fd, messages, count, flags, timeout), recvmmsg)                                             \
    X(recvmsg, ssize_t, (int fd, struct msghdr *message, int flags), (fd, message, flags),         \
      recvmsg)                                                                                     \
    X(sched_getaffinity, int, (pid_t pid, size_t size, cpu_set_t * set), (pid, size, set),         \
      sched_getaffinity)                                                                           \
    X(send, ssize_t, (int fd, const void *buf, size_t len, int flags), (fd, buf, len, flags),      \
      send)                                                                                        \
    X(sendfile, ssize_t, (int out, int in, off_t *offset, size_t len), (out, in, offset, len),     \
      sendfile)                                                                                    \
    X(sendmsg, ssize_t, (int fd, const struct msghdr *message, int flags), (fd, message, flags),   \
      sendmsg)                                                                                     \
    X(sendto, ssize_t,                                                                             \
      (int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,                  \
       socklen_t to_len),                                                                          \
      (fd, buf, len, flags, to, to_len), sendto)                                                   \
    X(setsockopt, int, (int fd, int level, int name, const void *value, socklen_t len),            \
      (fd, level, name, value, len), setsockopt)                                                   \
    X(shutdown, int, (int fd, int how), (fd, how), shutdown)                                       \
    X(sigaction, int, (int signal, const struct sigaction *action, struct sigaction *old),         \
      (signal, action, old), sigaction)                                                            \
    X(sigaltstack, int, (const stack_t *stack, stack_t *old), (stack, old), sigaltstack)           \
    X(signalfd, int, (int fd, const sigset_t *mask, int flags), (fd, mask, flags), signalfd)       \
    X(socket, int, (int domain, int type, int protocol), (domain, type, protocol), socket)         \
    X(socketpair, int, (int domain, int type, int protocol, int fds[2]),                           \
      (domain, type, protocol, fds), socketpair)                                                   \
    X(stat, int, (const char *path, struct stat *status), (path, status), stat)                    \
    X(unlink, int, (const char *path), (path), unlink)                                             \
    X(waitpid, pid_t, (pid_t pid, int *status, int options), (pid, status, options), waitpid)      \
    X(write, ssize_t, (int fd, const void *buf, size_t len), (fd, buf, len), write)

struct sxe__sys {
#define SXE_SYS_FIELD(name, ret, params, args, impl) ret(*name) params;
    SXE_SYS_CALLS(SXE_SYS_FIELD)
#undef SXE_SYS_FIELD
};

#ifdef SXE_SYS_MUTABLE

extern struct sxe__sys sxe__sys;

enum sxe__sys_call {
#define SXE_SYS_ENUM(name, ret, params, args, impl) SXE_SYS_##name,
    SXE_SYS_CALLS(SXE_SYS_ENUM)
#undef SXE_SYS_ENUM
        SXE_SYS_CALL_COUNT
};

/*
 * Arms a fault on call: counting from now, calls nth .. nth + times - 1 fail with -1 and errno
 * set to err (times 0 means every call from the nth on). Other calls go to whatever the table
 * held before arming, so a fault can be layered over a replaced entry.
 */
void sxe__sys_fail(enum sxe__sys_call call, unsigned nth, unsigned times, int err);

/* Counts calls of call from now on, without failing any. */
void sxe__sys_count(enum sxe__sys_call call);

/* How many calls of call were made since it was last armed with sxe__sys_fail or sxe__sys_count. */
unsigned sxe__sys_calls(enum sxe__sys_call call);

/*
 * Stops real time: from now on CLOCK_MONOTONIC reads mono_ns and CLOCK_REALTIME reads wall_ns
 * until sxe__sys_clock_advance() moves both forward.
 */
void sxe__sys_clock_fake(uint64_t mono_ns, uint64_t wall_ns);
void sxe__sys_clock_advance(uint64_t ns);

/* Restores every entry to the real system call and real time, and disarms every fault. */
void sxe__sys_reset(void);

#else

extern const struct sxe__sys sxe__sys;

#endif

#endif
