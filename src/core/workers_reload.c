/*
 * A reload of sxe/workers.h by a new program image (options.reload_argv): the supervisor executes
 * the program again, keeping its process and its listening sockets, and the new image's set takes
 * those sockets back instead of binding new ones. Nothing that waits in a socket's queue is lost:
 * the sockets never close. The old workers, whose channels close with the exec, drain.
 *
 * The sockets go across in the environment, SXE_WORKERS_INHERIT: one entry per listener,
 * separated by ';', each its descriptors separated by ',' and, for a hand-off listener holding an
 * accepted connection back, '+' and that connection's descriptor.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

#if defined(SXE_COVERAGE)
void __gcov_dump(void); /* libgcov's: writes this process's counters */
#endif

#define INHERIT_ENV "SXE_WORKERS_INHERIT"

/* What the image before this one left: its listeners' sockets, until a listener takes them. */
static struct inherited {
    int fds[SXE_WORKERS_MAX];
    unsigned count;
    int held;
    bool taken; /* a listener took them, or they were closed */
} inherited[SXE__WORKER_LISTENERS];
static unsigned inherited_count;
static bool inherited_read;

/* The workers of the images before this one, still draining: children of this process. */
#define DRAINING_ENV "SXE_WORKERS_DRAINING"
#define DRAINING_MAX (4 * SXE_WORKERS_MAX)
static pid_t draining[DRAINING_MAX];
static unsigned draining_count;

/* Reads SXE_WORKERS_DRAINING: only this process's running children are kept (another process
 * named there is not ours to wait for or to kill). */
static void read_draining(void)
{
    const char *at = getenv(DRAINING_ENV);
    char *end;
    int status;

    while (at != NULL && *at != '\0' && draining_count < DRAINING_MAX) {
        long pid = strtol(at, &end, 10);
        if (end == at || pid <= 0 || pid > INT32_MAX) {
            break;
        }
        if (sxe__sys.waitpid((pid_t)pid, &status, WNOHANG) == 0) {
            draining[draining_count++] = (pid_t)pid;
        }
        at = *end == ',' ? end + 1 : end;
    }
    unsetenv(DRAINING_ENV);
}

bool sxe__workers_drained(pid_t pid)
{
    for (unsigned i = 0; i < draining_count; i++) {
        if (draining[i] == pid) {
            draining[i] = draining[--draining_count];
            return true;
        }
    }
    return false;
}

unsigned sxe__workers_draining(bool kill_them)
{
    for (unsigned i = 0; kill_them && i < draining_count; i++) {
        sxe__sys.kill(draining[i], SIGKILL);
    }
    return draining_count;
}

static void set_cloexec(int fd, bool on)
{
    int flags = sxe__sys.fcntl(fd, F_GETFD, 0);

    if (flags >= 0) {
        (void)sxe__sys.fcntl(fd, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC);
    }
}

/* Whether fd is a stream socket that listens (or, listens false, one that does not): anything else
 * named in the environment is not ours to take or to close. */
static bool stream_socket(int fd, bool listens)
{
    int on = 0, type = 0;
    socklen_t len = sizeof(on), type_len = sizeof(type);

    return sxe__sys.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 &&
           (on != 0) == listens &&
           sxe__sys.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 &&
           type == SOCK_STREAM;
}

/* A descriptor's number at *at, moving past it. @return it, or -1 if there is none. */
static int read_fd(const char **at)
{
    char *end;
    long fd = strtol(*at, &end, 10);

    if (end == *at || fd < 0 || fd > INT32_MAX) {
        return -1;
    }
    *at = end;
    return (int)fd;
}

/* Reads SXE_WORKERS_INHERIT once; what follows a part that does not parse is left. */
static void read_inherited(void)
{
    const char *at = getenv(INHERIT_ENV);

    inherited_read = true;
    read_draining();
    while (at != NULL && *at != '\0' && inherited_count < SXE__WORKER_LISTENERS) {
        struct inherited *entry = &inherited[inherited_count];
        int fd;
        *entry = (struct inherited){.held = -1};
        while (entry->count < SXE_WORKERS_MAX && (fd = read_fd(&at)) >= 0) {
            entry->fds[entry->count++] = fd;
            if (*at != ',') {
                break;
            }
            at++;
        }
        if (*at == '+') {
            at++;
            entry->held = read_fd(&at);
        }
        if (entry->count == 0 || (*at != ';' && *at != '\0')) {
            SXE_LOG_ERROR("%s: cannot read the listeners passed on", INHERIT_ENV);
            return;
        }
        for (unsigned i = 0; i < entry->count; i++) {
            if (!stream_socket(entry->fds[i], true)) {
                SXE_LOG_ERROR("%s: descriptor %d is not a listening socket: ignored", INHERIT_ENV,
                              entry->fds[i]);
                return;
            }
        }
        if (entry->held >= 0 && !stream_socket(entry->held, false)) {
            entry->held = -1; /* not a connection held back: not ours */
        }
        inherited_count++;
        at += *at == ';';
    }
}

/* Closes an entry's sockets (a listener it was for is gone, or cannot take them). */
static void close_entry(struct inherited *entry)
{
    for (unsigned i = 0; i < entry->count; i++) {
        sxe__sys.close(entry->fds[i]);
    }
    if (entry->held >= 0) {
        sxe__sys.close(entry->held);
    }
    entry->taken = true;
}

/* Whether a socket bound to bound serves address: the same family and IP, and the same port
 * (any, for a port of 0, when same_place says it is the listener the old image had there). */
static bool serves(const struct sockaddr_storage *bound, const struct sockaddr *address,
                   bool same_place)
{
    int port = sxe_address_port(address);

    if (bound->ss_family != address->sa_family ||
        (port != 0 && port != sxe_address_port((const struct sockaddr *)bound)) ||
        (port == 0 && !same_place)) {
        return false;
    }
    if (address->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)bound)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)(const void *)address)->sin_addr.s_addr;
    }
    return memcmp(&((const struct sockaddr_in6 *)bound)->sin6_addr,
                  &((const struct sockaddr_in6 *)(const void *)address)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

/* Whether fd is a socket of a reuseport group. */
static bool reuseport(int fd)
{
    int on = 0;
    socklen_t len = sizeof(on);

    return sxe__sys.getsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, &len) == 0 && on != 0;
}

int sxe__workers_inherited(sxe_workers_t *set, struct sxe__workers_listener *listener,
                           const struct sockaddr *address)
{
    bool want_group = set->options.spread != SXE_SPREAD_HAND_OFF;

    if (!inherited_read) {
        read_inherited();
    }
    for (unsigned n = 0; n < inherited_count; n++) {
        struct inherited *entry = &inherited[n];
        struct sockaddr_storage bound;
        socklen_t len = sizeof(bound);
        if (entry->taken ||
            sxe__sys.getsockname(entry->fds[0], (struct sockaddr *)&bound, &len) < 0 ||
            !serves(&bound, address, n == set->listener_count)) {
            continue;
        }
        if (reuseport(entry->fds[0]) != want_group) {
            /* The old workers hold these sockets while they drain: new ones of another kind could
             * not bind beside them, and closing ours would drop what waits. The set keeps the
             * spread they were made for, until the program starts afresh. */
            if (set->listener_count > 0) { /* the set's first listener decided otherwise */
                SXE_LOG_WARN("the listener on port %d keeps its spread: closed and bound anew",
                             sxe_address_port((struct sockaddr *)&bound));
                close_entry(entry);
                return 0;
            }
            want_group = !want_group;
            set->options.spread = want_group ? SXE_SPREAD_REUSEPORT : SXE_SPREAD_HAND_OFF;
            SXE_LOG_WARN("the spread stays %s until the program starts afresh: the sockets "
                         "passed on were made for it",
                         want_group ? "reuseport" : "hand-off");
        }
        /* A group larger than the set: each worker takes every count-th socket (worker.c); one
         * smaller: the caller binds the rest. */
        unsigned wanted = want_group ? set->options.count : 1;
        unsigned count = entry->count > wanted ? entry->count : wanted;
        if ((listener->fds = malloc(count * sizeof(int))) == NULL) {
            return -ENOMEM;
        }
        entry->taken = true;
        memset(listener->fds, -1, count * sizeof(int));
        for (unsigned i = 0; i < entry->count; i++) {
            set_cloexec(entry->fds[i], true);
            int flags =
                sxe__sys.fcntl(entry->fds[i], F_GETFL, 0); /* a worker's accepts never wait */
            (void)sxe__sys.fcntl(entry->fds[i], F_SETFL,
                                 flags < 0 ? O_NONBLOCK : flags | O_NONBLOCK);
            listener->fds[i] = entry->fds[i];
        }
        listener->fd_count = count;
        listener->held = entry->held;
        if (entry->held >= 0) {
            set_cloexec(entry->held, true);
        }
        SXE_LOG_INFO("listening on port %d again with the %u socket%s the last image had",
                     sxe_address_port((struct sockaddr *)&bound), entry->count,
                     entry->count == 1 ? "" : "s");
        return (int)entry->count;
    }
    return 0;
}

void sxe__workers_inherit_end(void)
{
    if (!inherited_read) {
        read_inherited();
    }
    for (unsigned n = 0; n < inherited_count; n++) {
        if (!inherited[n].taken) {
            close_entry(&inherited[n]);
        }
    }
    inherited_count = 0;
    unsetenv(INHERIT_ENV);
}

/* Writes the set's listeners into SXE_WORKERS_INHERIT and lets them live through the exec, or
 * (pass false, when it failed) takes that back. @return 0 or -errno. */
static int pass_listeners(sxe_workers_t *set, bool pass)
{
    char text[SXE__WORKER_LISTENERS * SXE_WORKERS_MAX * 12];
    size_t used = 0;

    for (unsigned l = 0; l < set->listener_count; l++) {
        const struct sxe__workers_listener *listener = &set->listeners[l];
        for (unsigned i = 0; i < listener->fd_count; i++) {
            if (listener->fds[i] >= 0) {
                set_cloexec(listener->fds[i], !pass);
                used += (size_t)snprintf(text + used, sizeof(text) - used, "%s%d",
                                         used > 0 && text[used - 1] != ';' ? "," : "",
                                         listener->fds[i]);
            }
        }
        if (listener->held >= 0) {
            set_cloexec(listener->held, !pass);
            used += (size_t)snprintf(text + used, sizeof(text) - used, "+%d", listener->held);
        }
        used += (size_t)snprintf(text + used, sizeof(text) - used, ";");
        if (used >= sizeof(text)) {
            return -ENOBUFS; /* GCOVR_EXCL_LINE: 12 bytes a descriptor always fit */
        }
    }
    if (!pass) {
        return unsetenv(INHERIT_ENV) < 0 || unsetenv(DRAINING_ENV) < 0 ? -errno : 0;
    }
    /* The workers the new image is to wait for: these, and those still draining from before. */
    char pids[DRAINING_MAX * 12] = "";
    size_t at = 0;
    for (unsigned i = 0; i < set->options.count; i++) {
        if (set->workers[i].pid > 0 && at < sizeof(pids) - 12) {
            at += (size_t)snprintf(pids + at, sizeof(pids) - at, "%d,", (int)set->workers[i].pid);
        }
    }
    for (unsigned i = 0; i < draining_count && at < sizeof(pids) - 12; i++) {
        at += (size_t)snprintf(pids + at, sizeof(pids) - at, "%d,", (int)draining[i]);
    }
    return setenv(INHERIT_ENV, text, 1) < 0 || setenv(DRAINING_ENV, pids, 1) < 0 ? -errno : 0;
}

int sxe__workers_reexec(sxe_workers_t *set, int reply_fd)
{
    int rc;

    if ((rc = pass_listeners(set, true)) < 0) {
        SXE_LOG_ERROR("SIGHUP: cannot pass the listeners on: %s", sxe_strerror(rc));
        (void)pass_listeners(set, false);
        return rc;
    }
    SXE_LOG_INFO("SIGHUP: reloading: a new image of the program takes the listeners, and the %u "
                 "worker%s",
                 set->options.count, set->options.count == 1 ? " drains" : "s drain");
    for (unsigned i = 0; i < set->options.count; i++) {
        SXE__STORE(set->workers[i].shared->drain, 1); /* their channels close with the exec */
    }
    /* The program by its path, so that it keeps its name (ps, pkill); /proc/self/exe if that is
     * gone (the file was replaced: the image that runs is still there). The signals the
     * supervisor reads stay blocked: those that come meanwhile wait for the new image's. */
    char path[4096];
    ssize_t len = readlink("/proc/self/exe", path, sizeof(path) - 1);
    path[len > 0 ? len : 0] = '\0';
    if (reply_fd >= 0) { /* a control peer: told before its connection closes with the exec */
        static const char ok[] = "ok: reloading\n";
        (void)sxe__sys.send(reply_fd, ok, sizeof(ok) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
#if defined(SXE_COVERAGE)
    __gcov_dump(); /* an exec drops the counters not yet written: this image's lines count too */
#endif
    sxe__sys.execv(len > 0 && access(path, X_OK) == 0 ? path : "/proc/self/exe",
                   set->options.reload_argv);
    rc = -errno;
    for (unsigned i = 0; i < set->options.count; i++) {
        SXE__STORE(set->workers[i].shared->drain, 0);
    }
    (void)pass_listeners(set, false);
    SXE_LOG_ERROR("SIGHUP: cannot execute the program again: %s; serving on as before",
                  sxe_strerror(rc));
    return rc;
}
