/*
 * sxe-httpd's access log: one line per request, whoever answered it (a file, the proxy, or the
 * server itself with 400, 404, 405, 408, 499 ...), written from the HTTP server's log hook, in
 * nginx's common or combined format.
 *
 * Every byte a client chose (the method, the target, Referer, User-Agent) is escaped as nginx
 * escapes it: '"', '\' and bytes outside printable ASCII become \xHH. So a field cannot end early
 * or add a field of its own, and each line reads back as exactly the fields it was written with.
 *
 * A line is built whole in a buffer of the thread's, then written whole: lines of workers never
 * interleave. By default each is one write(2) to the file, as it happens. With a buffer
 * (--access-log-buffer, as nginx's buffer=), lines gather in the process's buffer and go out
 * together, when the next would not fit, every second (a timer on each loop), on SIGHUP's reopen
 * and when a worker stops; each write(2) holds whole lines only, so the worker processes
 * appending to the one file never split each other's lines. Lines the file refuses (a full disk)
 * are lost, never waited for: counted, and said in the log.
 */
#define _GNU_SOURCE /* dup3 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sxe/clock.h>
#include <sxe/conn.h>
#include <sxe/http.h>
#include <sxe/json.h>
#include <sxe/log.h>
#include <sxe/timer.h>

#include "access_log.h"
#include "peer.h"
#include "proxy.h"

/* One log file (a host may have its own): its descriptor, and the buffer of the process
 * (--access-log-buffer), shared by its threads under the lock. */
struct log {
    int fd;
    char *path;
    pthread_mutex_t lock;
    char *pending;
    size_t pending_size, pending_used;
    uint64_t lost_lines;   /* lines a write could not take (see lose()) */
    uint64_t lost_said_at; /* the monotonic second they were last said, + 1 */
};

static struct log logs[ACCESS_LOGS_MOST];
static unsigned log_count;
static enum access_log_format line_format;
static __thread sxe_timer_t flush_timer; /* each loop's: the buffers go out every second */

/* Each field a client chose is cut at its share (escaped, a byte may take four), so the line's
 * own fields always fit after them. */
#define TARGET_SHARE   (32 * 1024)
#define HEADER_SHARE   (8 * 1024)
#define METHOD_SHARE   96       /* the parser knows methods of 11 bytes at most: 15 fit, escaped */
#define UPSTREAM_SHARE (6 * 64) /* an upstream's IP:PORT as configured: under 64 bytes */
#define LINE_MAX_BYTES (TARGET_SHARE + 2 * HEADER_SHARE + UPSTREAM_SHARE + 1024)

struct line {
    char text[LINE_MAX_BYTES];
    size_t used;
};

static __thread struct line line; /* not on the stack: the hook may run on a fiber's */

/* Lines a write could not take (a full disk, a file gone read-only), counted by the process and
 * said in its log at most once a minute, and when it stops: requests never wait for the log. */
static void lose(struct log *log, const char *bytes, size_t len, int error)
{
    uint64_t lines = 0;
    for (const char *end = bytes + len; (bytes = memchr(bytes, '\n', (size_t)(end - bytes)));) {
        lines++;
        bytes++;
    }
    uint64_t lost = __atomic_add_fetch(&log->lost_lines, lines ? lines : 1, __ATOMIC_RELAXED);
    uint64_t now = sxe_clock_mono_ns() / SXE_NS_PER_SEC + 1, said = log->lost_said_at;
    if ((said == 0 || now >= said + 60) &&
        __atomic_compare_exchange_n(&log->lost_said_at, &said, now, false, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        SXE_LOG_WARN("access log %s: %s: lines lost so far: %" PRIu64 " (said once a minute)",
                     log->path, strerror(error), lost);
    }
}

/* Writes len bytes whole, however the file takes them; what it refuses is lost, and counted. */
static void write_whole(struct log *log, const char *bytes, size_t len)
{
    while (len > 0) {
        ssize_t wrote = write(log->fd, bytes, len);
        if (wrote < 0 && errno == EINTR) {
            continue;
        }
        if (wrote <= 0) {
            lose(log, bytes, len, wrote < 0 ? errno : ENOSPC);
            return;
        }
        bytes += wrote;
        len -= (size_t)wrote;
    }
}

/* Writes what the buffer holds: the lock is held. */
static void flush_locked(struct log *log)
{
    write_whole(log, log->pending, log->pending_used);
    log->pending_used = 0;
}

int access_log_open(const char *path, enum access_log_format format, size_t buffer_bytes)
{
    for (unsigned i = 0; i < log_count; i++) {
        if (strcmp(logs[i].path, path) == 0) { /* hosts that share a file share its buffer */
            return (int)i;
        }
    }
    if (log_count == ACCESS_LOGS_MOST) {
        return -ENOBUFS; /* GCOVR_EXCL_LINE: a log a host at most, and the default host's */
    }
    struct log *log = &logs[log_count];
    int fd = strcmp(path, "-") == 0 ? STDOUT_FILENO
                                    : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

    if (fd < 0) {
        return -errno;
    }
    *log = (struct log){.fd = fd, .pending_size = buffer_bytes};
    if ((buffer_bytes > 0 && (log->pending = malloc(buffer_bytes)) == NULL) ||
        (log->path = strdup(path)) == NULL) {
        free(log->pending);
        if (fd != STDOUT_FILENO) {
            close(fd);
        }
        return -ENOMEM;
    }
    pthread_mutex_init(&log->lock, NULL);
    line_format = format;
    return (int)log_count++;
}

bool access_log_on(void)
{
    return log_count > 0;
}

int access_log_reopen(void)
{
    int failed = 0;

    for (unsigned i = 0; i < log_count; i++) {
        struct log *log = &logs[i];
        if (log->fd == STDOUT_FILENO) {
            continue;
        }
        /* The path is opened anew and put in the place of the log's descriptor: the descriptor
         * stays valid whatever happens (one that failed to open keeps the old file), and with
         * the lock held no thread's lines are split between the two files. */
        int fd = open(log->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) {
            failed = -errno;
            continue;
        }
        pthread_mutex_lock(&log->lock);
        flush_locked(log);
        failed = dup3(fd, log->fd, O_CLOEXEC) < 0 ? -errno : failed;
        pthread_mutex_unlock(&log->lock);
        close(fd);
    }
    return failed;
}

void access_log_flush(void)
{
    for (unsigned i = 0; i < log_count; i++) {
        if (logs[i].pending != NULL) {
            pthread_mutex_lock(&logs[i].lock);
            flush_locked(&logs[i]);
            pthread_mutex_unlock(&logs[i].lock);
        }
    }
}

static void flush_tick(sxe_timer_t *timer, void *arg)
{
    (void)timer;
    (void)arg;
    access_log_flush();
}

void access_log_loop_start(sxe_loop_t *loop, void *arg)
{
    (void)arg;
    if (log_count > 0 && logs[0].pending != NULL) { /* every log has a buffer, or none has */
        sxe_timer_init(&flush_timer, flush_tick, NULL);
        if (sxe_timer_start(loop, &flush_timer, SXE_NS_PER_SEC, SXE_NS_PER_SEC) < 0) {
            SXE_LOG_WARN("access log: no timer to flush its buffer each second: it goes out "
                         "when full and when the worker stops");
        }
    }
}

void access_log_loop_stop(void *arg)
{
    (void)arg;
    access_log_flush();
    for (unsigned i = 0; i < log_count; i++) {
        uint64_t lost = __atomic_exchange_n(&logs[i].lost_lines, 0, __ATOMIC_RELAXED); /* once */
        if (lost > 0) {
            SXE_LOG_WARN("access log %s: lines lost: %" PRIu64, logs[i].path, lost);
        }
    }
}

/* Writes a whole line: at once, or into the buffer (what it held first, if it would not fit). */
static void put_line(struct log *log, const char *text, size_t len)
{
    if (log->pending == NULL) {
        write_whole(log, text, len);
        return;
    }
    pthread_mutex_lock(&log->lock);
    if (log->pending_used + len > log->pending_size) {
        flush_locked(log);
    }
    if (len > log->pending_size) {
        write_whole(log, text, len);
    } else {
        memcpy(log->pending + log->pending_used, text, len);
        log->pending_used += len;
    }
    pthread_mutex_unlock(&log->lock);
}

/* Appends a string literal. */
#define add_text(literal) add(literal, sizeof(literal) - 1)

/* Appends what fits of len bytes. */
static void add(const char *text, size_t len)
{
    size_t room = sizeof(line.text) - 1 - line.used; /* the newline always fits */
    len = len < room ? len : room;
    memcpy(line.text + line.used, text, len);
    line.used += len;
}

static void add_format(const char *format, ...) __attribute__((format(printf, 1, 2)));

static void add_format(const char *format, ...)
{
    char text[256];
    va_list args;

    va_start(args, format);
    int len = vsnprintf(text, sizeof(text), format, args);
    va_end(args);
    add(text, len < 0 ? 0 : (size_t)len < sizeof(text) ? (size_t)len : sizeof(text) - 1);
}

/* Appends a number in decimal (snprintf's cost is most of a short line's otherwise). */
static void add_uint(uint64_t value)
{
    char text[20];
    size_t at = sizeof(text);

    do {
        text[--at] = (char)('0' + value % 10);
        value /= 10;
    } while (value != 0);
    add(text + at, sizeof(text) - at);
}

/* Appends " HTTP/1.1" (or the request's version) with lead in front. */
static void add_version(const sxe_http_t *http, const char *lead, size_t lead_len)
{
    int version = sxe_http_version(http); /* 10, 11 or 20 */
    char text[8] = {
        'H', 'T', 'T', 'P', '/', (char)('0' + version / 10 % 10), '.', (char)('0' + version % 10)};

    add(lead, lead_len);
    add(text, sizeof(text));
}

static bool plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

/* Appends a client's bytes, escaped, up to share bytes; "-" for none, as nginx writes it. Runs of
 * plain bytes go in one copy. */
static void add_escaped(const char *bytes, size_t len, size_t share)
{
    static const char digits[] = "0123456789ABCDEF";
    size_t end = line.used + share;

    if (len == 0) {
        add("-", 1);
        return;
    }
    for (size_t i = 0; i < len && line.used + 4 <= end;) {
        size_t run = i;
        while (run < len && plain((unsigned char)bytes[run])) {
            run++;
        }
        if (run > i) { /* as many as leave room for an escape, as one byte at a time would */
            size_t room = end - line.used - 3, take = run - i < room ? run - i : room;
            add(bytes + i, take);
            i += take;
            continue;
        }
        unsigned char c = (unsigned char)bytes[i++];
        char escaped[4] = {'\\', 'x', digits[c >> 4], digits[c & 15]};
        add(escaped, sizeof(escaped));
    }
}

/* The peer's address, as text. */
static void add_peer(sxe_conn_t *conn)
{
    const char *host = peer_text(conn);

    add(host != NULL ? host : "-", host != NULL ? strlen(host) : 1); /* "-": a Unix socket's */
}

/* The line's time as its format writes it, made once a second per thread (strftime's cost is
 * most of a line's otherwise). */
static const char *stamp(size_t *len)
{
    static __thread time_t made_at = -1;
    static __thread char made[64];
    static __thread size_t made_len;
    time_t now = time(NULL);

    if (now != made_at) {
        struct tm utc;
        gmtime_r(&now, &utc);
        made_len = strftime(made, sizeof(made),
                            line_format == ACCESS_LOG_JSON
                                ? "{\"time\":\"%Y-%m-%dT%H:%M:%SZ\",\"remote_addr\":\""
                                : " - - [%d/%b/%Y:%H:%M:%S +0000] \"",
                            &utc);
        made_at = now;
    }
    *len = made_len;
    return made;
}

/* Appends a client's bytes as a JSON string (null for none), escaped into share bytes at most: a
 * byte may take six (\u00XX), so the shares of a line's fields always fit it together. */
static void add_json(const char *bytes, size_t len, bool given, size_t share)
{
    if (!given) {
        add("null", 4);
        return;
    }
    size_t most = share / 6 - 1;                     /* and the quotes */
    size_t room = sizeof(line.text) - 1 - line.used; /* the newline always fits */
    ssize_t wrote = sxe_json_string(line.text + line.used, room, bytes, len < most ? len : most);
    line.used += wrote > 0 ? (size_t)wrote : 0;
}

/* A request's line as a JSON object. */
static void write_json(const sxe_http_t *http, const struct sxe_http_request_head *request)
{
    const struct sxe_http_header *referer = sxe_http_request_header(request, "Referer");
    const struct sxe_http_header *agent = sxe_http_request_header(request, "User-Agent");
    bool read = request->method_len != 0; /* else refused before its request line was read */
    uint64_t took = sxe_clock_mono_ns() - sxe_http_began(http);
    size_t when_len;
    const char *when = stamp(&when_len);

    add(when, when_len);
    add_peer(sxe_http_conn(http));
    add("\",\"method\":", 11);
    add_json(request->method, request->method_len, read, METHOD_SHARE);
    add(",\"target\":", 10);
    add_json(request->target, request->target_len, read, TARGET_SHARE);
    add(",\"protocol\":", 12);
    if (read) {
        add_version(http, "\"", 1);
        add("\"", 1);
    } else {
        add("null", 4);
    }
    add_text(",\"status\":");
    add_uint((uint64_t)sxe_http_status(http));
    add_text(",\"body_bytes_sent\":");
    add_uint(sxe_http_body_sent(http));
    add_text(",\"referer\":");
    add_json(referer ? referer->value : NULL, referer ? referer->value_len : 0, referer != NULL,
             HEADER_SHARE);
    add(",\"user_agent\":", 14);
    add_json(agent ? agent->value : NULL, agent ? agent->value_len : 0, agent != NULL,
             HEADER_SHARE);
    add_format(",\"request_time\":%" PRIu64 ".%06" PRIu64, took / (uint64_t)SXE_NS_PER_SEC,
               took % (uint64_t)SXE_NS_PER_SEC / 1000);
    unsigned id;
    uint64_t upstream_ns;
    bool ended;
    if (proxy_upstream(http, &id, &upstream_ns, &ended)) {
        const char *upstream = proxy_upstream_name(id);
        add(",\"upstream_addr\":", sizeof(",\"upstream_addr\":") - 1);
        add_json(upstream, strlen(upstream), true, UPSTREAM_SHARE);
        add_format(",\"upstream_time\":%" PRIu64 ".%06" PRIu64 "}",
                   upstream_ns / (uint64_t)SXE_NS_PER_SEC,
                   upstream_ns % (uint64_t)SXE_NS_PER_SEC / 1000);
    } else {
        static const char none[] = ",\"upstream_addr\":null,\"upstream_time\":null}";
        add(none, sizeof(none) - 1);
    }
}

void access_log_write(const sxe_http_t *http, void *arg)
{
    (void)arg; /* (a hook only while a log is open: it stays open, reopened in place) */
    access_log_write_to(0, http);
}

void access_log_write_to(unsigned number, const sxe_http_t *http)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    struct log *log = &logs[number];
    size_t when_len;

    line.used = 0;
    if (line_format == ACCESS_LOG_JSON) {
        write_json(http, request);
        line.text[line.used++] = '\n';
        put_line(log, line.text, line.used);
        return;
    }
    add_peer(sxe_http_conn(http));
    const char *when = stamp(&when_len);
    add(when, when_len);
    if (request->method_len == 0) { /* refused before its request line could be read */
        add("-", 1);
    } else {
        add_escaped(request->method, request->method_len, HEADER_SHARE);
        add(" ", 1);
        add_escaped(request->target, request->target_len, TARGET_SHARE);
        add_version(http, " ", 1);
    }
    add_text("\" ");
    add_uint((uint64_t)sxe_http_status(http));
    add(" ", 1);
    add_uint(sxe_http_body_sent(http));
    if (line_format == ACCESS_LOG_COMBINED) {
        const struct sxe_http_header *referer = sxe_http_request_header(request, "Referer");
        const struct sxe_http_header *agent = sxe_http_request_header(request, "User-Agent");
        add(" \"", 2);
        add_escaped(referer ? referer->value : "", referer ? referer->value_len : 0, HEADER_SHARE);
        add("\" \"", 3);
        add_escaped(agent ? agent->value : "", agent ? agent->value_len : 0, HEADER_SHARE);
        add("\"", 1);
    }
    line.text[line.used++] = '\n';
    put_line(log, line.text, line.used);
}
