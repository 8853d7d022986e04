/*
 * The recorder for tests/build/walk-request.py. The library is compiled with
 * -finstrument-functions, so each of its functions calls __cyg_profile_func_enter on entry; this
 * file is compiled without it. It is linked into the program with ld's --wrap for recv, send and
 * sendmsg, so the socket calls the library makes through its system call table come here first
 * and mark the trace.
 *
 * Recording starts at the program's first recv, so the trace leaves out start-up, and stops when
 * the buffer is full. At exit (the program returns from main after a clean stop) the trace goes to
 * the file named by SXE_WALK_TRACE, one event a line:
 *     f OFFSET     a function was entered; OFFSET (hex) is from the program's load address,
 *                  which is what addr2line expects of a position-independent executable
 *     recv RESULT  recv returned RESULT; send and sendmsg likewise
 *     dropped N    the buffer was full and N events were not recorded
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#define HOOK       __attribute__((no_instrument_function))
#define EVENTS_MAX (1u << 20)

enum event_kind { EVENT_ENTER, EVENT_RECV, EVENT_SEND, EVENT_SENDMSG };

static const char *const event_names[] = {"f", "recv", "send", "sendmsg"};

struct event {
    enum event_kind kind;
    intptr_t value; /* an offset for EVENT_ENTER, else the call's result */
};

static struct event events[EVENTS_MAX];
static unsigned events_claimed;
static int recording;
static uintptr_t load_base;

/* Claims slots atomically: the traced server runs one loop, but nothing here should rely on it. */
static HOOK void record(enum event_kind kind, intptr_t value)
{
    if (!__atomic_load_n(&recording, __ATOMIC_RELAXED)) {
        return;
    }
    unsigned slot = __atomic_fetch_add(&events_claimed, 1, __ATOMIC_RELAXED);
    if (slot < EVENTS_MAX) {
        events[slot] = (struct event){.kind = kind, .value = value};
    }
}

HOOK void __cyg_profile_func_enter(void *function, void *call_site);
HOOK void __cyg_profile_func_exit(void *function, void *call_site);

void __cyg_profile_func_enter(void *function, void *call_site)
{
    (void)call_site;
    record(EVENT_ENTER, (intptr_t)((uintptr_t)function - load_base));
}

void __cyg_profile_func_exit(void *function, void *call_site)
{
    (void)function;
    (void)call_site;
}

ssize_t __real_recv(int fd, void *buf, size_t len, int flags);
ssize_t __real_send(int fd, const void *buf, size_t len, int flags);
ssize_t __real_sendmsg(int fd, const struct msghdr *message, int flags);
HOOK ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags);
HOOK ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags);
HOOK ssize_t __wrap_sendmsg(int fd, const struct msghdr *message, int flags);

ssize_t __wrap_recv(int fd, void *buf, size_t len, int flags)
{
    ssize_t got = __real_recv(fd, buf, len, flags);

    __atomic_store_n(&recording, 1, __ATOMIC_RELAXED);
    record(EVENT_RECV, got);
    return got;
}

ssize_t __wrap_send(int fd, const void *buf, size_t len, int flags)
{
    ssize_t sent = __real_send(fd, buf, len, flags);

    record(EVENT_SEND, sent);
    return sent;
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *message, int flags)
{
    ssize_t sent = __real_sendmsg(fd, message, flags);

    record(EVENT_SENDMSG, sent);
    return sent;
}

static HOOK void write_trace(void)
{
    const char *path = getenv("SXE_WALK_TRACE");
    FILE *file;

    __atomic_store_n(&recording, 0, __ATOMIC_RELAXED);
    unsigned claimed = __atomic_load_n(&events_claimed, __ATOMIC_RELAXED);
    unsigned used = claimed < EVENTS_MAX ? claimed : EVENTS_MAX;
    if (path == NULL || (file = fopen(path, "w")) == NULL) {
        return;
    }
    for (unsigned i = 0; i < used; i++) {
        if (events[i].kind == EVENT_ENTER) {
            fprintf(file, "f %jx\n", (uintmax_t)events[i].value);
        } else {
            fprintf(file, "%s %jd\n", event_names[events[i].kind], (intmax_t)events[i].value);
        }
    }
    if (claimed > EVENTS_MAX) {
        fprintf(file, "dropped %u\n", claimed - EVENTS_MAX);
    }
    fclose(file);
}

/* The load address is the base dladdr reports for any function of the program, this one too. */
static HOOK __attribute__((constructor)) void start(void)
{
    Dl_info info;

    if (dladdr((void *)(uintptr_t)start, &info) != 0) {
        load_base = (uintptr_t)info.dli_fbase;
    }
    atexit(write_trace);
}
