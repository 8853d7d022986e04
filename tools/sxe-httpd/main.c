/*
 * sxe-httpd: a static-file HTTP/1.1 server on the sxe HTTP module.
 *
 *     sxe-httpd --root DIR --listen 127.0.0.1:8080 [options]
 *
 * Files go out with sendfile, typed by extension, with ETag and Last-Modified for conditional
 * requests and single byte ranges. Directories serve their index file, or a listing when asked.
 * No request can reach outside the root: dot segments (percent-encoded or not) are resolved, and
 * one that would climb above the root is refused, as are encoded separators and NUL; then every
 * path is resolved, symbolic links included, and must stay under the resolved root.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sxe/sxe.h>
#include <sxe/http.h>

#include "access_log.h"
#include "cache.h"
#include "listing.h"
#include "path.h"
#include "proxy.h"

static struct {
    char root[PATH_MAX];
    size_t root_len;
    const char *listen;
    const char *index;
    bool list;
    uint32_t connections;
    unsigned workers; /* 0 until given: the CPUs */
    enum sxe_workers_kind kind;
    enum sxe_workers_spread spread;
    unsigned listen_flags;
    unsigned header_timeout; /* seconds; 0: the module's 10 */
    unsigned idle_timeout;   /* seconds; 0: the module's 60 */
    unsigned body_rate;      /* bytes a second; 0: the module's 4096 */
    size_t log_buffer;       /* --access-log-buffer: bytes; 0: a write per line */
    int cache; /* 1: one file cache for every worker thread; 0: one each; -1: not said */
    struct proxy_options proxy;
    uint64_t proxy_max_body; /* bytes; 0: no limit */
} config = {.listen = "127.0.0.1:8080",
            .index = "index.html",
            .connections = 10000,
            .cache = -1,
            .proxy = {.connections = 256,
                      .timeout = 30 * SXE_NS_PER_SEC,
                      .fail_timeout = 10 * SXE_NS_PER_SEC}};

static const struct {
    const char *extension;
    const char *type;
} mime_types[] = {
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"txt", "text/plain; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"xml", "application/xml"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"ico", "image/x-icon"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mp3", "audio/mpeg"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"ttf", "font/ttf"},
    {"zip", "application/zip"},
    {"gz", "application/gzip"},
    {"tar", "application/x-tar"},
};

static const char *mime_type(const char *path)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');

    if (dot != NULL && (slash == NULL || dot > slash)) {
        for (size_t i = 0; i < sizeof(mime_types) / sizeof(mime_types[0]); i++) {
            if (strcasecmp(dot + 1, mime_types[i].extension) == 0) {
                return mime_types[i].type;
            }
        }
    }
    return "application/octet-stream";
}

static void respond(sxe_http_t *http, int status, const char *headers, const char *text)
{
    char body[128];
    int len = snprintf(body, sizeof(body), "%d %s\n%s", status, sxe_http_reason(status),
                       text ? text : "");

    /* A failure means the client is gone, or cannot take more: the module closes the
     * connection. */
    (void)sxe_http_respond_with(http, status, "text/plain; charset=utf-8", headers, body,
                                (size_t)len);
}

/* Whether resolved (a realpath) lies under the root. */
static bool under_root(const char *resolved)
{
    return strncmp(resolved, config.root, config.root_len) == 0 &&
           (resolved[config.root_len] == '\0' || resolved[config.root_len] == '/');
}

/* Whether an If-None-Match value lists etag (or is "*"). */
static bool etag_matches(const struct sxe_http_header *header, const char *etag)
{
    size_t etag_len = strlen(etag);
    const char *at = header->value;
    const char *end = header->value + header->value_len;

    while (at < end) {
        while (at < end && (*at == ' ' || *at == ',' || *at == '\t')) {
            at++;
        }
        const char *item = at;
        while (at < end && *at != ',') {
            at++;
        }
        const char *item_end = at;
        while (item_end > item && (item_end[-1] == ' ' || item_end[-1] == '\t')) {
            item_end--;
        }
        if (item_end - item == 1 && *item == '*') {
            return true;
        }
        if (item_end - item >= 2 && item[0] == 'W' && item[1] == '/') {
            item += 2; /* weak comparison, as If-None-Match asks */
        }
        if ((size_t)(item_end - item) == etag_len && memcmp(item, etag, etag_len) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Parses a single byte range against size. Returns 1 and sets first and last for a satisfiable one,
 * 0 to ignore the header (several ranges, or not bytes), -1 for an unsatisfiable one.
 */
static int parse_range(const struct sxe_http_header *header, uint64_t size, uint64_t *first,
                       uint64_t *last)
{
    char text[64];
    char *end;

    if (header->value_len >= sizeof(text) || header->value_len < 7 ||
        strncmp(header->value, "bytes=", 6) != 0) {
        return 0;
    }
    memcpy(text, header->value + 6, header->value_len - 6);
    text[header->value_len - 6] = '\0';
    if (strchr(text, ',') != NULL) {
        return 0; /* several ranges: answer with the whole file */
    }
    if (text[0] == '-') {
        uint64_t suffix = strtoull(text + 1, &end, 10);
        if (*end != '\0' || end == text + 1 || suffix == 0 || size == 0) {
            return -1;
        }
        *first = suffix >= size ? 0 : size - suffix;
        *last = size - 1;
        return 1;
    }
    if (!isdigit((unsigned char)text[0])) {
        return -1;
    }
    *first = strtoull(text, &end, 10);
    if (*end != '-') {
        return -1;
    }
    const char *second = end + 1;
    *last = *second == '\0' ? size - 1 : strtoull(second, &end, 10);
    if ((*second != '\0' && *end != '\0') || *first >= size || *last < *first) {
        return -1;
    }
    if (*last >= size) {
        *last = size - 1;
    }
    return 1;
}

/*
 * Whether an If-Range validator (RFC 9110 §13.1.5) names the file as it is: its strong ETag,
 * byte for byte (a weak one never matches), or its Last-Modified date exactly.
 */
static bool if_range_matches(const struct sxe_http_header *if_range, const struct file *file)
{
    const char *validator = if_range->value;
    size_t len = if_range->value_len;
    const char *current = validator[0] == '"' ? file->etag : file->modified;

    return len > 0 && len == strlen(current) && memcmp(validator, current, len) == 0;
}

/* Sends an HTML listing of the directory at path (the URL path is shown as its title). */
static void list_directory(sxe_http_t *http, const char *path, const char *url_path)
{
    size_t len;
    const char *page = listing_page(path, url_path, &len);

    if (page == NULL) {
        respond(http, 403, NULL, NULL);
        return;
    }
    sxe_http_respond(http, 200, "text/html; charset=utf-8", page, len);
}

/* Sends the file, honouring conditional requests and a range; takes the caller's reference. */
static void serve_file(sxe_http_t *http, struct file *file)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    char headers[512];
    uint64_t first = 0, last = file->size ? file->size - 1 : 0;
    int code = 200;

    /* Conditional requests: If-None-Match wins over If-Modified-Since. */
    const struct sxe_http_header *none_match = sxe_http_request_header(request, "If-None-Match");
    const struct sxe_http_header *since = sxe_http_request_header(request, "If-Modified-Since");
    bool not_modified = false;
    if (none_match != NULL) {
        not_modified = etag_matches(none_match, file->etag);
    } else if (since != NULL && since->value_len < 64) {
        char text[64];
        struct tm when = {0};
        memcpy(text, since->value, since->value_len);
        text[since->value_len] = '\0';
        const char *end = strptime(text, "%a, %d %b %Y %H:%M:%S GMT", &when);
        not_modified = end != NULL && *end == '\0' && file->mtime <= timegm(&when);
    }
    if (not_modified) {
        snprintf(headers, sizeof(headers), "ETag: %s\r\nLast-Modified: %s\r\n", file->etag,
                 file->modified);
        if (sxe_http_start(http, 304, headers, -1) == 0) {
            (void)sxe_http_finish(http);
        }
        file_unref(file);
        return;
    }

    const struct sxe_http_header *range = sxe_http_request_header(request, "Range");
    const struct sxe_http_header *if_range = sxe_http_request_header(request, "If-Range");
    if (range != NULL && if_range != NULL && !if_range_matches(if_range, file)) {
        range = NULL; /* the file changed since the client's copy: all of it, not a piece */
    }
    int ranged = range != NULL ? parse_range(range, file->size, &first, &last) : 0;
    if (ranged < 0) {
        snprintf(headers, sizeof(headers), "Content-Range: bytes */%" PRIu64 "\r\n", file->size);
        respond(http, 416, headers, NULL);
        file_unref(file);
        return;
    }
    uint64_t length = file->size;
    const char *ready = file->headers;
    if (ranged > 0) {
        code = 206;
        length = last - first + 1;
        snprintf(headers, sizeof(headers),
                 "%sContent-Range: bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64 "\r\n", file->headers,
                 first, last, file->size);
        ready = headers;
    }
    if (sxe_http_start(http, code, ready, (int64_t)length) < 0) {
        file_unref(file); /* the module closes the connection: nothing more to send */
        return;
    }
    /* The reference goes to the response: dropped once the body is sent or dropped, or at once
     * when it cannot be queued (the module then closes the connection). */
    int rc =
        file->content != NULL
            ? sxe_http_send_ref(http, file->content + first, (size_t)length, file_unref, file)
            : sxe_http_sendfile_ref(http, file->fd, (off_t)first, (size_t)length, file_unref, file);
    if (rc == 0) {
        (void)sxe_http_finish(http);
    }
}

/*
 * A directory asked for without its '/': 301 to it. The Location is built from the resolved path
 * (re-encoded), never from the client's bytes: it has no empty segment, so it can never start
 * with "//", which a browser would read as another host. The query goes along, as nginx sends it.
 */
static void redirect_to_directory(sxe_http_t *http, const char *resolved, size_t len)
{
    char location[PATH_MAX * 3 + 64];
    size_t query_len;
    const char *query = sxe_http_query(http, &query_len);
    ssize_t encoded = sxe_http_path_encode(resolved, len, location + 10, sizeof(location) - 10);

    if (encoded < 0 || (size_t)encoded + query_len + 16 > sizeof(location) - 10) {
        respond(http, 414, NULL, NULL);
        return;
    }
    memcpy(location, "Location: ", 10);
    int total = 10 + (int)encoded;
    total += snprintf(location + total, sizeof(location) - (size_t)total, "/%s%.*s\r\n",
                      query != NULL ? "?" : "", (int)query_len, query != NULL ? query : "");
    respond(http, 301, location, NULL);
}

static void serve(sxe_http_t *http, void *arg)
{
    char decoded[PATH_MAX], full[PATH_MAX * 2], resolved[PATH_MAX];
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);
    struct stat status;

    (void)arg;
    const char *why = "";
    long decoded_len = path_resolve(path, path_len, decoded, sizeof(decoded), &why);
    if (decoded_len < 0) {
        SXE_LOG_INFO("refused the path %.*s: %s", (int)path_len, path, why);
        respond(http, (int)-decoded_len, NULL, "the path cannot be served\n");
        return;
    }
    uint64_t second = sxe_loop_now(sxe_conn_loop(sxe_http_conn(http))) / SXE_NS_PER_SEC;
    bool cacheable = decoded_len < CACHE_KEY_MAX;
    struct file *file = cacheable ? cache_find(decoded, (size_t)decoded_len) : NULL;
    if (file != NULL && cache_fresh(file, second)) {
        serve_file(http, file);
        return;
    }
    if (file != NULL) { /* checked again below, and found again if unchanged */
        file_unref(file);
    }
    snprintf(full, sizeof(full), "%s%s", config.root, decoded);
    if (realpath(full, resolved) == NULL) {
        respond(http, errno == EACCES ? 403 : 404, NULL, NULL);
        return;
    }
    if (!under_root(resolved)) {
        respond(http, 403, NULL, "the path leads outside the root\n");
        return;
    }
    if (stat(resolved, &status) < 0) {
        respond(http, 404, NULL, NULL);
        return;
    }
    if (S_ISDIR(status.st_mode)) {
        if (decoded[decoded_len - 1] != '/') {
            redirect_to_directory(http, decoded, (size_t)decoded_len);
            return;
        }
        char index[PATH_MAX + 256];
        snprintf(index, sizeof(index), "%s/%s", resolved, config.index);
        if (realpath(index, full) != NULL && under_root(full) && stat(full, &status) == 0 &&
            S_ISREG(status.st_mode)) {
            strcpy(resolved, full);
        } else if (config.list) {
            list_directory(http, resolved, decoded);
            return;
        } else {
            respond(http, 403, NULL, "directory listing is off\n");
            return;
        }
    }
    if (!S_ISREG(status.st_mode)) {
        respond(http, 403, NULL, NULL);
        return;
    }
    /* A cached file that has not changed only needs its check renewed. */
    file = cacheable ? cache_find(decoded, (size_t)decoded_len) : NULL;
    if (file != NULL && strcmp(file->resolved, resolved) == 0 && file->inode == status.st_ino &&
        file->mtime == status.st_mtime && file->size == (uint64_t)status.st_size) {
        cache_checked(file, second);
        serve_file(http, file);
        return;
    }
    if (file != NULL) {
        file_unref(file);
    }
    int fd = open(resolved, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &status) < 0) {
        if (fd >= 0) {
            close(fd);
        }
        respond(http, errno == EACCES ? 403 : 404, NULL, NULL);
        return;
    }
    if ((file = file_load(cacheable ? decoded : "", resolved, fd, &status, mime_type(resolved))) ==
        NULL) {
        respond(http, 500, NULL, "out of memory\n");
        return;
    }
    cache_checked(file, second);
    if (cacheable) {
        cache_keep(file);
    }
    serve_file(http, file);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sxe-httpd --root DIR [--listen IP:PORT] [options]\n"
            "\n"
            "Serves the files under DIR over HTTP/1.1: sendfile, MIME types by extension, index\n"
            "files, ETag and Last-Modified conditional requests, single byte ranges. Requests\n"
            "for paths outside DIR get 400 (.., %%2e%%2e above the root) or 403 (symbolic\n"
            "links leading out, encoded separators).\n"
            "Stops cleanly on SIGTERM or SIGINT.\n"
            "\n"
            "  --root DIR            the directory to serve (required)\n"
            "  --listen IP:PORT      where to listen, [IPv6]:PORT too (127.0.0.1:8080)\n"
            "  --index NAME          the file a directory serves (index.html)\n"
            "  --list                list directories that have no index file\n"
            "  --access-log FILE     log requests to FILE (- for standard output); off by default\n"
            "  --log-format FORMAT   common (default) or combined\n"
            "  --access-log-buffer BYTES\n"
            "                        gather log lines in a buffer of BYTES, written when\n"
            "                        full and every second (nginx's buffer=); 0: a write\n"
            "                        per line (0)\n"
            "  --connections N       the most connections at once, per worker (10000)\n"
            "  --workers N           worker processes, each with its own loop and connections\n"
            "                        (the CPUs it may run on; more to pass the file limit)\n"
            "  --threads             workers are threads of one process, not processes\n"
            "  --cache MODE          with --threads: shared (one file cache for all, each\n"
            "                        file held once) or per-worker (each thread its own,\n"
            "                        nothing locked) (shared; processes: per-worker)\n"
            "  --spread MODE         how connections reach workers: reuseport (each its own\n"
            "                        socket, the kernel's hash), cpu (reuseport, steered to\n"
            "                        the worker of the receiving CPU) or hand-off (one\n"
            "                        acceptor passes each to the least loaded) (reuseport)\n"
            "  --fastopen            TCP Fast Open on the listener\n"
            "  --defer-accept        wake a worker only once a request's bytes have come\n"
            "  --evict-idle          when the table is full, close the oldest idle connection\n"
            "                        to make room, instead of refusing the new one\n"
            "  --header-timeout SECS answer 408 to a request whose head and body have not\n"
            "                        all come in this long (10)\n"
            "  --idle-timeout SECS   close a kept-alive connection idle this long (60)\n"
            "  --body-rate BYTES     answer 408 to a proxied body that comes at under this\n"
            "                        many bytes a second, over three seconds or more (4096)\n"
            "  --proxy PREFIX=HOST:PORT[,HOST:PORT...]\n"
            "                        forward requests whose path starts with PREFIX to\n"
            "                        these upstreams, over kept-alive connections (repeatable;\n"
            "                        the longest prefix wins; static files for the rest)\n"
            "  --balance MODE        among a prefix's upstreams: least (connections) or\n"
            "                        round-robin (least)\n"
            "  --proxy-timeout SECS  an upstream silent this long gets 504 (30)\n"
            "  --proxy-connections N the most connections to each upstream, per worker (256)\n"
            "  --proxy-pipeline N    send up to N requests at once on an upstream connection\n"
            "                        (GETs; only to upstreams that frame answers right) (1)\n"
            "  --proxy-max-body BYTES  a proxied request body longer than this gets 413\n"
            "                        (0: no limit; bodies stream, whatever their size) (0)\n"
            "  --proxy-underscores   pass on request fields whose names have '_' (dropped by\n"
            "                        default: CGI upstreams read X_A and X-A as one)\n"
            "  -h, --help            this text\n"
            "      --version         the versions of sxe-httpd and of the libsxe it runs on\n"
            "\n"
            "SIGUSR1 logs one line of counters per worker; SIGHUP reopens the access log\n"
            "(after logrotate moved it). A worker process that dies is restarted; the others\n"
            "serve on.\n");
}

static void __attribute__((format(printf, 2, 3), noreturn)) die(int status, const char *format, ...)
{
    va_list args;

    fprintf(stderr, "sxe-httpd: ");
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fprintf(stderr, "\n");
    exit(status);
}

static unsigned long number(const char *text, unsigned long low, unsigned long high,
                            const char *option)
{
    char *end;
    unsigned long value = strtoul(text, &end, 10);

    if (*end != '\0' || end == text || strchr(text, '-') != NULL || value < low || value > high) {
        die(2, "%s must be a number from %lu to %lu, not '%s'", option, low, high, text);
    }
    return value;
}

static enum sxe_workers_spread spread_mode(const char *text)
{
    static const char *const names[] = {[SXE_SPREAD_REUSEPORT] = "reuseport",
                                        [SXE_SPREAD_REUSEPORT_CPU] = "cpu",
                                        [SXE_SPREAD_HAND_OFF] = "hand-off"};

    for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(text, names[i]) == 0) {
            return (enum sxe_workers_spread)i;
        }
    }
    die(2, "--spread must be reuseport, cpu or hand-off, not '%s'", text);
}

static void parse_options(int argc, char **argv)
{
    static const struct option options[] = {{"root", required_argument, NULL, 'r'},
                                            {"listen", required_argument, NULL, 'l'},
                                            {"index", required_argument, NULL, 'i'},
                                            {"list", no_argument, NULL, 'L'},
                                            {"access-log", required_argument, NULL, 'a'},
                                            {"log-format", required_argument, NULL, 'f'},
                                            {"access-log-buffer", required_argument, NULL, 'A'},
                                            {"connections", required_argument, NULL, 'c'},
                                            {"workers", required_argument, NULL, 'w'},
                                            {"threads", no_argument, NULL, 'T'},
                                            {"cache", required_argument, NULL, 'C'},
                                            {"spread", required_argument, NULL, 's'},
                                            {"fastopen", no_argument, NULL, 'F'},
                                            {"defer-accept", no_argument, NULL, 'D'},
                                            {"evict-idle", no_argument, NULL, 'E'},
                                            {"header-timeout", required_argument, NULL, 'H'},
                                            {"idle-timeout", required_argument, NULL, 'I'},
                                            {"body-rate", required_argument, NULL, 'R'},
                                            {"proxy", required_argument, NULL, 'P'},
                                            {"balance", required_argument, NULL, 'B'},
                                            {"proxy-timeout", required_argument, NULL, 'O'},
                                            {"proxy-connections", required_argument, NULL, 'N'},
                                            {"proxy-pipeline", required_argument, NULL, 'Q'},
                                            {"proxy-max-body", required_argument, NULL, 'M'},
                                            {"proxy-underscores", no_argument, NULL, 'U'},
                                            {"help", no_argument, NULL, 'h'},
                                            {"version", no_argument, NULL, 'V'},
                                            {NULL, 0, NULL, 0}};
    const char *root = NULL, *access_log = NULL;
    bool combined = false;
    int option;

    while ((option = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (option) {
        case 'r':
            root = optarg;
            break;
        case 'l':
            config.listen = optarg;
            break;
        case 'i':
            config.index = optarg;
            break;
        case 'L':
            config.list = true;
            break;
        case 'a':
            access_log = optarg;
            break;
        case 'f':
            if (strcmp(optarg, "combined") != 0 && strcmp(optarg, "common") != 0) {
                die(2, "--log-format must be common or combined, not '%s'", optarg);
            }
            combined = strcmp(optarg, "combined") == 0;
            break;
        case 'A':
            config.log_buffer = number(optarg, 0, 64u << 20, "--access-log-buffer");
            break;
        case 'c':
            config.connections = (uint32_t)number(optarg, 16, 1000000, "--connections");
            break;
        case 'w':
            config.workers = (unsigned)number(optarg, 1, SXE_WORKERS_MAX, "--workers");
            break;
        case 'T':
            config.kind = SXE_WORKERS_THREADS;
            break;
        case 'C':
            if (strcmp(optarg, "shared") != 0 && strcmp(optarg, "per-worker") != 0) {
                die(2, "--cache must be per-worker or shared, not '%s'", optarg);
            }
            config.cache = strcmp(optarg, "shared") == 0;
            break;
        case 's':
            config.spread = spread_mode(optarg);
            break;
        case 'F':
            config.listen_flags |= SXE_LISTEN_FASTOPEN;
            break;
        case 'D':
            config.listen_flags |= SXE_LISTEN_DEFER_ACCEPT;
            break;
        case 'E':
            config.listen_flags |= SXE_LISTEN_EVICT_IDLE;
            break;
        case 'H':
            config.header_timeout = (unsigned)number(optarg, 1, 86400, "--header-timeout");
            break;
        case 'I':
            config.idle_timeout = (unsigned)number(optarg, 1, 86400, "--idle-timeout");
            break;
        case 'R':
            config.body_rate = (unsigned)number(optarg, 1, 1u << 30, "--body-rate");
            break;
        case 'P': {
            const char *wrong = proxy_add(optarg);
            if (wrong != NULL) {
                die(2, "--proxy %s: %s", optarg, wrong);
            }
            break;
        }
        case 'B':
            if (strcmp(optarg, "least") != 0 && strcmp(optarg, "round-robin") != 0) {
                die(2, "--balance must be least or round-robin, not '%s'", optarg);
            }
            config.proxy.round_robin = strcmp(optarg, "round-robin") == 0;
            break;
        case 'O':
            config.proxy.timeout = number(optarg, 1, 3600, "--proxy-timeout") * SXE_NS_PER_SEC;
            break;
        case 'N':
            config.proxy.connections = (uint32_t)number(optarg, 1, 65536, "--proxy-connections");
            break;
        case 'M':
            config.proxy_max_body = number(optarg, 0, ULONG_MAX, "--proxy-max-body");
            break;
        case 'Q':
            config.proxy.pipeline = (uint32_t)number(optarg, 1, 64, "--proxy-pipeline");
            break;
        case 'U':
            config.proxy.underscores = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        case 'V':
            printf("sxe-httpd %s (libsxe %s)\n", SXE_VERSION, sxe_version());
            exit(0);
        default:
            usage(stderr);
            exit(2);
        }
    }
    if (config.cache == 1 && config.kind != SXE_WORKERS_THREADS) {
        die(2, "%s", "--cache shared needs --threads (worker processes share no memory)");
    }
    if (config.cache == -1) { /* threads share one by default: measured, docs/benchmarks.md */
        config.cache = config.kind == SXE_WORKERS_THREADS;
    }
    if (optind < argc) {
        die(2, "unexpected argument '%s' (see --help)", argv[optind]);
    }
    if (root == NULL) {
        die(2, "%s", "--root DIR is required (see --help)");
    }
    struct stat status;
    if (realpath(root, config.root) == NULL || stat(config.root, &status) < 0) {
        fprintf(stderr, "sxe-httpd: --root %s: %s\n", root, strerror(errno));
        exit(1);
    }
    if (!S_ISDIR(status.st_mode)) {
        die(1, "--root %s: not a directory", root);
    }
    config.root_len = strlen(config.root);
    if (config.root_len == 1) {
        config.root_len = 0; /* "/" itself: every resolved path is under it */
        config.root[0] = '\0';
    }
    int rc;
    if (access_log != NULL && (rc = access_log_open(access_log, combined, config.log_buffer)) < 0) {
        fprintf(stderr, "sxe-httpd: --access-log %s: %s\n", access_log, sxe_strerror(rc));
        exit(1);
    }
}

/* SIGHUP, in every process that serves: the access log is opened again at its path, so that
 * logrotate can move it away without copytruncate. */
static void reopen_logs(void *arg)
{
    (void)arg;
    if (!access_log_on()) {
        SXE_LOG_INFO("SIGHUP: no access log to reopen");
        return;
    }
    int rc = access_log_reopen();
    if (rc < 0) {
        SXE_LOG_ERROR("SIGHUP: cannot reopen the access log: %s", sxe_strerror(rc));
    } else {
        SXE_LOG_INFO("SIGHUP: reopened the access log");
    }
}

int main(int argc, char **argv)
{
    sxe_http_server_t *server;
    int rc;

    parse_options(argc, argv);
    /* The library's advice, in this program's words. */
    (void)sxe_log_name_setting("options.connections", "--connections");
    (void)sxe_log_name_setting("SXE_LISTEN_EVICT_IDLE", "--evict-idle");
    cache_configure(config.cache == 1);
    struct sxe_http_server_options options = {
        .loop = {.connections = config.connections},
        .workers = config.workers ? config.workers : sxe_workers_cpus(),
        .worker_kind = config.kind,
        .spread = config.spread,
        .listen_flags = config.listen_flags,
        .header_timeout = (uint64_t)config.header_timeout * SXE_NS_PER_SEC,
        .idle_timeout = (uint64_t)config.idle_timeout * SXE_NS_PER_SEC,
        .body_rate = config.body_rate,
        .on_log = access_log_on() ? access_log_write : NULL,
        .on_loop_start = access_log_loop_start,
        .on_loop_stop = access_log_loop_stop,
        .on_hangup = reopen_logs};
    /* Files take no body, and proxied bodies stream: a whole body is never over 48 KiB here, so
     * the loops need no large buffers (the module's default would reserve 16 of 1 MiB each). */
    options.limits.body_bytes = 48 * 1024;
    if (proxy_count() > 0) { /* each connection may have a request held for its upstream */
        config.proxy.requests = config.connections;
        options.deferred = config.connections;
        options.response_timeout = config.proxy.timeout + 5 * SXE_NS_PER_SEC; /* 504 comes first */
        options.loop.timers = proxy_timers(&config.proxy);
        options.stream_body_bytes = config.proxy_max_body;
    }
    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0) {
        fprintf(stderr, "sxe-httpd: cannot start: %s\n", sxe_strerror(rc));
        return 1;
    }
    if ((!proxy_covers("/") && (rc = sxe_http_server_route(
                                    server, "GET", "/", SXE_HTTP_ROUTE_PREFIX, serve, NULL)) < 0) ||
        (rc = proxy_route(server, &config.proxy)) < 0 ||
        (rc = sxe_http_server_listen(server, config.listen)) < 0) {
        fprintf(stderr, "sxe-httpd: cannot listen on %s: %s\n", config.listen,
                rc == -EINVAL ? "expected IP:PORT, [IPv6]:PORT, localhost:PORT or :PORT"
                              : sxe_strerror(rc));
        sxe_http_server_destroy(server);
        return 1;
    }
    SXE_LOG_INFO("serving %s on %s with %u worker %s of up to %u connections each%s",
                 config.root[0] ? config.root : "/", config.listen, options.workers,
                 config.kind == SXE_WORKERS_THREADS ? "threads" : "processes", config.connections,
                 config.cache == 1 ? ", sharing one file cache" : "");
    rc = sxe_http_server_run(server);
    sxe_http_server_destroy(server);
    cache_clear();
    access_log_flush();
    return rc < 0 ? 1 : 0;
}
