/*
 * The control socket of sxe/workers.h (options.control_path): a Unix stream socket the supervisor
 * polls beside its signals. A peer sends one command line and gets the answer, then the end of
 * the connection. At most SXE__CONTROL_PEERS are read at once (the rest wait in the backlog),
 * each for up to a second, and only a peer of the same user, or root, is answered: the file's
 * mode (0600) keeps others out, and its credentials are checked too. The commands do what the
 * signals do (workers_act.c) and tell the workers' counters from their shared lines. A log level is
 * set in the supervisor and, through the shared mapping and SIGUSR2, in every worker process.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sxe/clock.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

#define LINE_BYTES 256                     /* a command line, its newline included */
#define PEER_NS    SXE_NS_PER_SEC          /* a peer's time to send its line */
#define LISTING_NS (250 * SXE_NS_PER_MSEC) /* the workers' time to list their connections */
/* The longest answer: status of SXE_WORKERS_MAX workers, or 256 connections' lines of up to
 * 740 bytes (workers_list.c); one send to a Unix socket takes it whole. */
#define ANSWER_SIZE (16 * 1024 + 256 * 740)

struct peer {
    int fd; /* -1: a free place */
    unsigned len;
    uint64_t deadline;
    bool listing;      /* "connections": waits for the workers' lists until listing_until */
    bool listing_json; /* ... to be said as JSON */
    uint64_t listing_until;
    char line[LINE_BYTES];
};

struct sxe__workers_control {
    int fd;
    dev_t dev; /* the socket file bound: removed at the end only if it is still this one */
    ino_t ino;
    size_t out_len; /* the answer being made */
    char out[ANSWER_SIZE];
    struct peer peers[SXE__CONTROL_PEERS];
};

/* Adds to the answer being made; what does not fit is cut. */
static void __attribute__((format(printf, 2, 3)))
say(struct sxe__workers_control *control, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    int len = vsnprintf(control->out + control->out_len, sizeof(control->out) - control->out_len,
                        format, args);
    va_end(args);
    size_t room = sizeof(control->out) - control->out_len - 1;
    control->out_len += len < 0 ? 0 : (size_t)len < room ? (size_t)len : room;
}

/* say() for a text made elsewhere (workers_list.c). */
static void say_text(void *arg, const char *text)
{
    say(arg, "%s", text);
}

/* Whether a file at path is a socket that no program answers on (it is then removed), or nothing.
 * @return 0, -EADDRINUSE if a program answers, -EEXIST for a file of another kind, or -errno. */
static int claim(const char *path, const struct sockaddr_un *address)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    if (!S_ISSOCK(st.st_mode)) {
        return -EEXIST;
    }
    int probe = sxe__sys.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (probe < 0) {
        return -errno;
    }
    int rc = sxe__sys.connect(probe, (const struct sockaddr *)address, sizeof(*address));
    rc = rc == 0 || errno == EAGAIN ? -EADDRINUSE : errno == ECONNREFUSED ? 0 : -errno;
    sxe__sys.close(probe);
    if (rc == 0 && sxe__sys.unlink(path) < 0 && errno != ENOENT) {
        rc = -errno;
    }
    return rc;
}

/* Binds and listens at path, mode 0600. @return the socket, or -errno. */
static int bind_at(const char *path, const struct sockaddr_un *address)
{
    int fd = sxe__sys.socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0) {
        return -errno;
    }
    mode_t mask = umask(0177); /* born 0600: never a moment open to others */
    int rc = sxe__sys.bind(fd, (const struct sockaddr *)address, sizeof(*address));
    umask(mask);
    if (rc < 0 || sxe__sys.listen(fd, 64) < 0) {
        rc = -errno;
        if (rc != -EADDRINUSE) {
            sxe__sys.unlink(path);
        }
        sxe__sys.close(fd);
        return rc;
    }
    return fd;
}

int sxe__workers_control_open(sxe_workers_t *set)
{
    const char *path = set->options.control_path;
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    struct stat st;
    int rc;

    if (path == NULL) {
        return 0;
    }
    if (path[0] == '\0' || strlen(path) >= sizeof(address.sun_path)) {
        SXE_LOG_ERROR("control socket \"%s\": a path of 1 to %zu bytes is needed", path,
                      sizeof(address.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    memcpy(address.sun_path, path, strlen(path));
    if ((rc = claim(path, &address)) < 0) {
        SXE_LOG_ERROR("control socket %s: %s", path,
                      rc == -EADDRINUSE ? "another program answers on it"
                      : rc == -EEXIST   ? "a file that is not a socket is there"
                                        : sxe_strerror(rc));
        return rc;
    }
    if ((set->control = calloc(1, sizeof(*set->control))) == NULL) {
        return -ENOMEM;
    }
    for (unsigned i = 0; i < SXE__CONTROL_PEERS; i++) {
        set->control->peers[i].fd = -1;
    }
    if ((set->control->fd = bind_at(path, &address)) < 0) {
        rc = set->control->fd;
        SXE_LOG_ERROR("control socket %s: %s", path, sxe_strerror(rc));
        free(set->control);
        set->control = NULL;
        return rc;
    }
    if (sxe__sys.stat(path, &st) == 0) {
        set->control->dev = st.st_dev;
        set->control->ino = st.st_ino;
    }
    SXE_LOG_INFO("control socket %s: answering (mode 0600)", path);
    return 0;
}

static void drop(struct peer *peer)
{
    sxe__close_fd(&peer->fd);
    peer->len = 0;
    peer->listing = false;
}

void sxe__workers_control_close(sxe_workers_t *set, bool remove)
{
    struct sxe__workers_control *control = set->control;
    struct stat st;

    if (control == NULL) {
        return;
    }
    for (unsigned i = 0; i < SXE__CONTROL_PEERS; i++) {
        drop(&control->peers[i]);
    }
    sxe__close_fd(&control->fd);
    if (remove && sxe__sys.stat(set->options.control_path, &st) == 0 && st.st_dev == control->dev &&
        st.st_ino == control->ino) {
        sxe__sys.unlink(set->options.control_path);
    }
    free(control);
    set->control = NULL;
}

unsigned sxe__workers_control_poll(sxe_workers_t *set, struct pollfd *fds, uint64_t *deadline)
{
    struct sxe__workers_control *control = set->control;
    bool room = false;

    *deadline = UINT64_MAX;
    if (control == NULL) {
        return 0;
    }
    for (unsigned i = 0; i < SXE__CONTROL_PEERS; i++) {
        const struct peer *peer = &control->peers[i];
        /* A peer waiting for the workers' lists is not polled (its hang-up would wake the poll
         * at once, again and again): the lists are looked for each millisecond. */
        fds[1 + i] = (struct pollfd){.fd = peer->listing ? -1 : peer->fd, .events = POLLIN};
        room = room || peer->fd < 0;
        uint64_t until = !peer->listing ? peer->deadline
                         : peer->listing_until < sxe_clock_mono_ns() + SXE_NS_PER_MSEC
                             ? peer->listing_until
                             : sxe_clock_mono_ns() + SXE_NS_PER_MSEC;
        if (peer->fd >= 0 && until < *deadline) {
            *deadline = until;
        }
    }
    fds[0] = (struct pollfd){.fd = room ? control->fd : -1, .events = POLLIN};
    return 1 + SXE__CONTROL_PEERS;
}

/* Sends the answer made and ends the peer's connection. */
static void answer(struct sxe__workers_control *control, struct peer *peer)
{
    ssize_t sent =
        sxe__sys.send(peer->fd, control->out, control->out_len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent != (ssize_t)control->out_len &&
        (sent >= 0 || (errno != EPIPE && errno != ECONNRESET))) {
        SXE_LOG_WARN("control socket: an answer of %zu bytes was cut at %zd", control->out_len,
                     sent); /* (a peer that left before its answer is no news) */
    }
    control->out_len = 0;
    /* What the peer sent past its line is read away first: a Unix socket closed with bytes
     * unread resets the peer's end, which may then lose the answer. */
    char rest[4096];
    for (unsigned i = 0; i < 16 && sxe__sys.recv(peer->fd, rest, sizeof(rest), MSG_DONTWAIT) > 0;
         i++) {
    }
    drop(peer);
}

/* The peer's credentials: the same user as this process, or root. */
static bool allowed(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (sxe__sys.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        return false;
    }
    return cred.uid == 0 || cred.uid == geteuid();
}

static void take_peers(sxe_workers_t *set, uint64_t now)
{
    struct sxe__workers_control *control = set->control;

    for (unsigned i = 0; i < SXE__CONTROL_PEERS; i++) {
        struct peer *peer = &control->peers[i];
        if (peer->fd >= 0) {
            continue;
        }
        if ((peer->fd = sxe__sys.accept4(control->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) <
            0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "control socket: accept failed: %s",
                             sxe_strerror(-errno));
            }
            return;
        }
        peer->len = 0;
        peer->deadline = now + PEER_NS;
        if (!allowed(peer->fd)) {
            say(control, "error: not allowed: this socket serves its own user only\n");
            answer(control, peer);
        }
    }
}

static void run(sxe_workers_t *set, struct peer *peer, char *line);

/* Reads what a peer sent; a whole line is run. */
static void read_peer(sxe_workers_t *set, struct peer *peer)
{
    struct sxe__workers_control *control = set->control;
    ssize_t got = sxe__sys.read(peer->fd, peer->line + peer->len, LINE_BYTES - peer->len);

    if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (got <= 0 && (got < 0 || peer->len == 0)) {
        drop(peer); /* gone, or said nothing */
        return;
    }
    peer->len += got > 0 ? (unsigned)got : 0;
    char *end = memchr(peer->line, '\n', peer->len);
    if (end == NULL && got > 0 && peer->len < LINE_BYTES) {
        return; /* more to come */
    }
    if (end == NULL && peer->len == LINE_BYTES) {
        say(control, "error: a command is one line of at most %d bytes\n", LINE_BYTES - 1);
        answer(control, peer);
        return;
    }
    end = end != NULL ? end : peer->line + peer->len; /* the peer shut its side: the line ends */
    *end = '\0';
    if (end > peer->line && end[-1] == '\r') {
        end[-1] = '\0';
    }
    run(set, peer, peer->line);
}

void sxe__workers_control_ready(sxe_workers_t *set, const struct pollfd *fds, uint64_t now)
{
    struct sxe__workers_control *control = set->control;

    if (control == NULL) {
        return;
    }
    for (unsigned i = 0; i < SXE__CONTROL_PEERS; i++) {
        struct peer *peer = &control->peers[i];
        if (peer->fd >= 0 && peer->listing) {
            if (now >= peer->listing_until || sxe__workers_list_ready(set)) {
                sxe__workers_list_say(set, peer->listing_json, say_text, control);
                answer(control, peer);
            }
            continue;
        }
        if (peer->fd < 0 || fds[1 + i].fd != peer->fd) {
            continue; /* free, or taken after the poll */
        }
        if (fds[1 + i].revents) {
            read_peer(set, peer);
        } else if (now >= peer->deadline) {
            say(control, "error: no command line came within a second\n");
            answer(control, peer);
        }
    }
    if (fds[0].revents) {
        take_peers(set, now);
    }
}

/* The workers' counters, as text for people or as JSON. */
static void status(sxe_workers_t *set, bool json)
{
    struct sxe__workers_control *control = set->control;
    struct sxe_worker_stats total = {0}, one;
    uint64_t up_ms = (sxe_clock_mono_ns() - set->started_ns) / SXE_NS_PER_MSEC;
    bool threads = set->options.kind == SXE_WORKERS_THREADS;
    static const char *const spreads[] = {"reuseport", "reuseport-cpu", "hand-off"};
    const char *spread = spreads[set->options.spread];
    unsigned count = set->options.count, draining = sxe__workers_draining(false);

    if (json) {
        say(control,
            "{\"pid\":%d,\"workers\":%u,\"kind\":\"%s\",\"spread\":\"%s\",\"up_ms\":%llu,"
            "\"stopping\":%s,\"draining_from_before\":%u,\"per_worker\":[",
            (int)set->pid, count, threads ? "threads" : "processes", spread,
            (unsigned long long)up_ms, set->stopping ? "true" : "false", draining);
    } else {
        say(control, "pid %d: %u worker %s (%s), up %llu.%03llu s%s\n", (int)set->pid, count,
            threads ? (count == 1 ? "thread" : "threads") : (count == 1 ? "process" : "processes"),
            spread, (unsigned long long)(up_ms / 1000), (unsigned long long)(up_ms % 1000),
            set->stopping ? ", stopping" : "");
        say(control, "%-7s %8s %8s %12s %12s %14s %10s %8s %8s\n", "worker", "pid", "open",
            "connections", "requests", "bytes", "table-full", "evicted", "restarts");
    }
    for (unsigned i = 0; i < count; i++) {
        sxe_workers_stats(set, i, &one);
        total.open += one.open;
        total.connections += one.connections;
        total.requests += one.requests;
        total.bytes += one.bytes;
        total.table_full += one.table_full;
        total.evicted += one.evicted;
        total.restarts += one.restarts;
        if (json) {
            say(control,
                "%s{\"index\":%u,\"pid\":%d,\"running\":%s,\"open\":%u,\"connections\":%llu,"
                "\"requests\":%llu,\"bytes\":%llu,\"table_full\":%llu,\"evicted\":%llu,"
                "\"restarts\":%u}",
                i ? "," : "", i, (int)one.pid, set->workers[i].running ? "true" : "false", one.open,
                (unsigned long long)one.connections, (unsigned long long)one.requests,
                (unsigned long long)one.bytes, (unsigned long long)one.table_full,
                (unsigned long long)one.evicted, one.restarts);
        } else {
            say(control, "%-7u %8d %8u %12llu %12llu %14llu %10llu %8llu %8u%s\n", i, (int)one.pid,
                one.open, (unsigned long long)one.connections, (unsigned long long)one.requests,
                (unsigned long long)one.bytes, (unsigned long long)one.table_full,
                (unsigned long long)one.evicted, one.restarts,
                set->workers[i].running ? "" : " (not running)");
        }
    }
    if (json) {
        say(control,
            "],\"total\":{\"open\":%u,\"connections\":%llu,\"requests\":%llu,\"bytes\":%llu,"
            "\"table_full\":%llu,\"evicted\":%llu,\"restarts\":%u}}\n",
            total.open, (unsigned long long)total.connections, (unsigned long long)total.requests,
            (unsigned long long)total.bytes, (unsigned long long)total.table_full,
            (unsigned long long)total.evicted, total.restarts);
        return;
    }
    say(control, "%-7s %8s %8u %12llu %12llu %14llu %10llu %8llu %8u\n", "total", "", total.open,
        (unsigned long long)total.connections, (unsigned long long)total.requests,
        (unsigned long long)total.bytes, (unsigned long long)total.table_full,
        (unsigned long long)total.evicted, total.restarts);
    if (draining > 0) {
        say(control, "%u worker%s from before a reload still draining\n", draining,
            draining == 1 ? "" : "s");
    }
}

/* A line as an error shows it: printable bytes only, at most size - 1. */
static void shown(const char *text, char *out, size_t size)
{
    size_t n = 0;

    for (; text[n] != '\0' && n + 1 < size; n++) {
        out[n] = isprint((unsigned char)text[n]) ? text[n] : '?';
    }
    out[n] = '\0';
}

/* A level by name (case aside: "debug") or number (0 to 7). @return it, or -1. */
static int level_named(const char *text)
{
    if (text[0] >= '0' && text[0] <= '7' && text[1] == '\0') {
        return text[0] - '0';
    }
    for (int level = SXE_LOG_LEVEL_NONE; level <= SXE_LOG_LEVEL_DUMP; level++) {
        if (strcasecmp(text, sxe_log_level_name((enum sxe_log_level)level)) == 0) {
            return level;
        }
    }
    return -1;
}

/* Sets module's level here, and in the shared table the worker processes read on SIGUSR2. */
static void set_level(sxe_workers_t *set, char *module, const char *level_text)
{
    struct sxe__workers_control *control = set->control;
    struct sxe__workers_levels *levels = set->levels;
    int level = level_named(level_text);
    bool all = strcasecmp(module, "all") == 0, named = module[0] != '\0';
    char text[17], variable[48];

    for (char *c = module; *c != '\0'; c++) {
        *c = (char)toupper((unsigned char)*c); /* modules are named in capitals: HTTP, WORKERS */
        named = named && (isalnum((unsigned char)*c) || *c == '_');
    }
    if (!named || strlen(module) >= sizeof(levels->set[0].module)) {
        say(control,
            "error: a module is named in 1 to %zu letters, digits or '_' (HTTP, CONN, "
            "WORKERS...), or all\n",
            sizeof(levels->set[0].module) - 1);
        return;
    }
    if (level < 0) {
        shown(level_text, text, sizeof(text));
        say(control,
            "error: no level \"%s\": none, fatal, error, warn, info, debug, trace, dump, "
            "or 0 to 7\n",
            text);
        return;
    }
    snprintf(variable, sizeof(variable), "SXE_LOG_LEVEL%s%s", all ? "" : "_", all ? "" : module);
    const char *setting = getenv(variable);
    if (setting != NULL && setting[0] != '\0') { /* it would win: say so, rather than "ok" */
        say(control, "error: %s in the server's environment sets that level; it wins\n", variable);
        return;
    }
    unsigned slot = 0;
    while (!all && slot < levels->count && strcmp(levels->set[slot].module, module) != 0) {
        slot++;
    }
    int rc = all ? sxe_log_set_level((enum sxe_log_level)level)
             : slot == SXE__WORKERS_LEVELS
                 ? -ENOBUFS
                 : sxe_log_set_module_level(module, (enum sxe_log_level)level);
    if (rc < 0) {
        say(control, "error: cannot set %s's level: %s\n", module,
            rc == -ENOBUFS ? "as many modules as can be have levels set (a reload clears them)"
                           : sxe_strerror(rc));
        return;
    }
    __atomic_store_n(&levels->seq, levels->seq + 1, __ATOMIC_RELAXED); /* odd: being written */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    if (all) {
        levels->all_set = 1;
        levels->all_level = level;
    } else {
        snprintf(levels->set[slot].module, sizeof(levels->set[slot].module), "%s", module);
        levels->set[slot].level = level;
        levels->count = slot == levels->count ? slot + 1 : levels->count;
    }
    __atomic_store_n(&levels->seq, levels->seq + 1, __ATOMIC_RELEASE);
    unsigned told = 0;
    for (unsigned i = 0; set->options.kind == SXE_WORKERS_PROCESSES && i < set->options.count;
         i++) {
        if (set->workers[i].running && set->workers[i].pid > 0 &&
            sxe__sys.kill(set->workers[i].pid, SIGUSR2) == 0) {
            told++;
        }
    }
    const char *name = sxe_log_level_name((enum sxe_log_level)level);
    SXE_LOG_INFO("control socket: log level of %s set to %s", all ? "every module" : module, name);
    say(control, "ok: %s at %s in the supervisor and %u worker process%s\n",
        all ? "every module not set by name" : module, name, told, told == 1 ? "" : "es");
}

/* Runs a command line and answers it. */
static void run(sxe_workers_t *set, struct peer *peer, char *line)
{
    struct sxe__workers_control *control = set->control;
    char *words[4] = {NULL}, *save = NULL, text[33];
    unsigned count = 0;

    shown(line, text, sizeof(text));
    for (char *word = strtok_r(line, " \t", &save); word != NULL && count < 4;
         word = strtok_r(NULL, " \t", &save)) {
        words[count++] = word;
    }
    const char *command = count > 0 ? words[0] : "";
    if (strcmp(command, "status") == 0 && count <= 2 &&
        (count == 1 || strcmp(words[1], "json") == 0 || strcmp(words[1], "--json") == 0)) {
        status(set, count == 2);
    } else if (strcmp(command, "connections") == 0 && count <= 2 &&
               (count == 1 || strcmp(words[1], "json") == 0 || strcmp(words[1], "--json") == 0)) {
        if (sxe__workers_list_ask(set) > 0) { /* answered when the workers have listed */
            peer->listing = true;
            peer->listing_json = count == 2;
            peer->listing_until = sxe_clock_mono_ns() + LISTING_NS;
            return;
        }
        sxe__workers_list_say(set, count == 2, say_text, control);
    } else if (strcmp(command, "log-level") == 0 && count == 3) {
        set_level(set, words[1], words[2]);
    } else if (strcmp(command, "reopen") == 0 && count == 1) {
        sxe__workers_reopen(set, "control socket");
        say(control, "ok: %s\n",
            set->options.on_reopen != NULL ? "reopening, in the supervisor and every worker"
                                           : "nothing to reopen here: counters written to the log");
    } else if (strcmp(command, "reload") == 0 && count == 1 && !set->stopping) {
        SXE_LOG_INFO("control socket: reload");
        int rc = sxe__workers_hangup(set, peer->fd); /* returns if no new image runs (yet) */
        if (rc == 2) { /* the check runs: its end answers the peer, whose place is free now */
            peer->fd = -1;
            peer->len = 0;
            return;
        }
        say(control,
            rc < 0    ? "error: not reloaded (%s): serving on as before; the log says why\n"
            : rc == 0 ? "ok: passed on as SIGHUP (%s)\n"
                      : "error: SIGHUP is ignored here (%s)\n",
            rc < 0    ? sxe_strerror(rc)
            : rc == 0 ? "this program reloads in place"
                      : "no hook");
    } else if ((strcmp(command, "drain") == 0 || strcmp(command, "stop") == 0) && count == 1) {
        bool drain = command[0] == 'd';
        if (set->stopping) { /* a stop does not cut a drain short: said, not answered "ok" */
            say(control, "%s: already %s\n", !drain && set->draining ? "error" : "ok",
                set->draining ? "draining (a stop does not cut it short)" : "stopping");
        } else {
            say(control, "ok: %s\n", drain ? "draining, then stopping" : "stopping");
        }
        sxe__workers_begin_stop(set, sxe_clock_mono_ns(), "control socket", drain);
    } else if (strcmp(command, "help") == 0 && count == 1) {
        say(control, "status [json]            uptime, workers and their counters\n"
                     "connections [json]       each worker's open connections, the longest in "
                     "their state first\n"
                     "reload                   as SIGHUP: check, then run the program again\n"
                     "reopen                   as SIGUSR1: reopen the log files\n"
                     "drain                    as SIGQUIT: finish what is under way, then stop\n"
                     "stop                     as SIGTERM\n"
                     "log-level MODULE LEVEL   MODULE (HTTP, WORKERS... or all) at LEVEL "
                     "(error, warn, info, debug...)\n");
    } else if (strcmp(command, "reload") == 0 && count == 1) {
        say(control, "error: stopping: no reload\n");
    } else {
        say(control, "error: \"%s\" is not a command (help lists them)\n", text);
    }
    answer(control, peer);
}
