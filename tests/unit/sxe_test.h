/*
 * Helpers shared by the unit tests: include this instead of cmocka.h.
 */
#ifndef SXE_TEST_H
#define SXE_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmocka.h>

#include "sxe/log.h"
#include "sxe/loop.h"

/* Lines captured by sxe_test_capture_start(), joined in one buffer. */
struct sxe_test_capture {
    char text[64 * 1024];
    size_t len;
    unsigned lines;
};

/* Sends every log line into capture (cleared first) until sxe_test_capture_stop(). */
void sxe_test_capture_start(struct sxe_test_capture *capture);
void sxe_test_capture_stop(void);

/*
 * Runs body(arg) in a child process whose log goes to a pipe, and checks that the child aborts
 * (SIGABRT) and that its log contains every string in expected (NULL-terminated). Returns the
 * child's log, in a static buffer, so the caller can check more.
 */
const char *sxe_test_expect_abort(void (*body)(void *arg), void *arg, const char *const *expected);

/* An invalid use of the API: what it is, a call that makes it, and a piece of the assertion's
 * text it trips in debug builds. */
struct sxe_test_invalid_use {
    const char *what;
    void (*call)(void);
    const char *check;
};

/* Makes each invalid use in turn: in debug builds each must abort naming its check (a child
 * process each); in release builds each call runs here and asserts its own error code. */
void sxe_test_invalid_uses(const struct sxe_test_invalid_use *uses, size_t count);

/*
 * Whether the tests run on io_uring (SXE_BACKEND=io_uring). A test that drives or counts the
 * system calls of the epoll path (recv, send, accept4, epoll_wait: io_uring makes none of them)
 * skips those parts there, and says so; test_io_uring fails io_uring's own calls and completions.
 */
bool sxe_test_uring(void);

/* How many descriptors this process has open now (entries of /proc/self/fd, its own included). */
unsigned sxe_test_open_fds(void);

/* Ends a forked child with status, its coverage counters written first (_exit skips that). */
void sxe_test_exit(int status) __attribute__((noreturn));
/* The same for another process of this user (0: this one). */
unsigned sxe_test_open_fds_of(pid_t pid);

/* Skips the test on io_uring, printing why: it drives the epoll path's system calls. */
void sxe_test_skip_on_uring(const char *why);

/*
 * For a test this machine cannot run (why says what it lacks: too few CPUs, a low open-file
 * limit, no io_uring). It skips the test, printing why; under CI (the environment variable CI set
 * and not "0" or "false", as .ci/run sets it) it fails it instead, because a skip there would be a
 * test that never ran with nobody told.
 */
void sxe_test_skip_or_fail_in_ci(const char *why);

/* The next number of a seeded SplitMix64 sequence (state advances): reproducible random tests. */
uint64_t sxe_test_random(uint64_t *state);

/* A blocking TCP client connected to 127.0.0.1:port (the test fails if it cannot connect). */
int sxe_test_client(int port);

/* Sends text on fd, all of it at once (the test fails otherwise). */
void sxe_test_say(int fd, const char *text);

/* Appends what the peer has sent on fd so far to the string out (without waiting): the bytes
 * read, or -1 once the peer closed. */
ssize_t sxe_test_heard(int fd, char *out, size_t size);

/* Turns the loop until *counter reaches count; fails the test after 5 s. */
void sxe_test_run_until(sxe_loop_t *loop, const int *counter, int count);

/* What /proc/self/smaps says of the mapping that holds memory: the kB of field (with its colon,
 * "ShmemPmdMapped:"), or -1 if it has none. */
long sxe_test_smaps_kb(const void *memory, const char *field);

/* Whether this kernel makes huge pages of shared memory on request (MADV_COLLAPSE, Linux 6.1),
 * asked outside the system call seam. */
bool sxe_test_kernel_collapses(void);

#endif
