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
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sxe/sxe.h>
#include <sxe/http.h>

#include "access_log.h"
#include "cache.h"
#include "compress.h"
#include "fields.h"
#include "hosts.h"
#include "listing.h"
#include "metrics.h"
#include "mime.h"
#include "options.h"
#include "path.h"
#include "peer.h"
#include "precompressed.h"
#include "proxy.h"
#include "send.h"

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

/* Whether resolved (a realpath) lies under the host's root. */
static bool under_root(const struct host *host, const char *resolved)
{
    return strncmp(resolved, host->root, host->root_len) == 0 &&
           (resolved[host->root_len] == '\0' || resolved[host->root_len] == '/');
}

/* The fields --header adds for a path (the thread's: a handler's stack may be a fiber's). */
static __thread char added[64 + FIELDS_ROOM]; /* Vary, then the fields */

/* Sends an HTML listing of the directory at path (the URL path is shown as its title). */
static void list_directory(sxe_http_t *http, const struct host *host, const char *path,
                           const char *url_path)
{
    size_t len;
    const char *page = listing_page(path, url_path, &len);

    if (page == NULL) {
        respond(http, 403, NULL, NULL);
        return;
    }
    fields_for(host->index, url_path, strlen(url_path), added, sizeof(added));
    (void)sxe_http_respond_with(http, 200, "text/html; charset=utf-8", added, page, len);
}

/*
 * A directory asked for without its '/': 301 to it. The Location is built from the resolved path
 * (re-encoded), never from the client's bytes: it has no empty segment, so it can never start
 * with "//", which a browser would read as another host. The query goes along, as nginx sends it.
 */
static void redirect_to_directory(sxe_http_t *http, const struct host *host, const char *resolved,
                                  size_t len)
{
    char location[PATH_MAX * 3 + 64 + FIELDS_ROOM];
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
    fields_for(host->index, resolved, len, location + total, sizeof(location) - (size_t)total);
    respond(http, 301, location, NULL);
}

/* Sends file (fresh at the loop's second now) as the client takes it best: the sidecar it accepts
 * (--precompressed), a copy compressed now (--gzip, --brotli), or the file itself. */
static void serve_best(sxe_http_t *http, struct file *file, uint64_t now)
{
    if (config.precompressed) {
        file = precompressed_pick(http, file, now);
    }
    if (!compress_serve(http, file)) {
        send_file(http, file);
    }
}

/* Serves a file found as it is on disk at the loop's second now, with its sidecars found again
 * (--precompressed). */
static void serve_checked(sxe_http_t *http, struct file *file, uint64_t now)
{
    cache_checked(file, now);
    if (config.precompressed) {
        __atomic_store_n(&file->sidecars, precompressed_sidecars(file->resolved, file->mtime_ns),
                         __ATOMIC_RELAXED);
    }
    serve_best(http, file, now);
}

/* Serves a file of the host arg. */
static void serve(sxe_http_t *http, void *arg)
{
    char decoded[PATH_MAX], full[PATH_MAX * 2], resolved[PATH_MAX], key[CACHE_KEY_MAX];
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);
    const struct host *host = arg;
    struct stat status;

    if (path_redirect_https(http)) {
        return;
    }
    const char *why = "";
    long decoded_len = path_resolve(path, path_len, decoded, sizeof(decoded), &why);
    if (decoded_len < 0) {
        SXE_LOG_INFO("refused the path %.*s: %s", (int)path_len, path, why);
        respond(http, (int)-decoded_len, NULL, "the path cannot be served\n");
        return;
    }
    uint64_t second = sxe_loop_now(sxe_conn_loop(sxe_http_conn(http))) / SXE_NS_PER_SEC;
    int key_len = hosts_key(host, decoded, (size_t)decoded_len, key, sizeof(key));
    bool cacheable = key_len >= 0;
    struct file *file = cacheable ? cache_find(key, (size_t)key_len) : NULL;
    if (file != NULL && cache_fresh(file, second)) {
        serve_best(http, file, second);
        return;
    }
    if (file != NULL) { /* checked again below, and found again if unchanged */
        file_unref(file);
    }
    snprintf(full, sizeof(full), "%s%s", host->root, decoded);
    if (realpath(full, resolved) == NULL) {
        respond(http, errno == EACCES ? 403 : 404, NULL, NULL);
        return;
    }
    if (!under_root(host, resolved)) {
        respond(http, 403, NULL, "the path leads outside the root\n");
        return;
    }
    if (stat(resolved, &status) < 0) {
        respond(http, 404, NULL, NULL);
        return;
    }
    if (S_ISDIR(status.st_mode)) {
        if (decoded[decoded_len - 1] != '/') {
            redirect_to_directory(http, host, decoded, (size_t)decoded_len);
            return;
        }
        char index[PATH_MAX + 256];
        snprintf(index, sizeof(index), "%s/%s", resolved, host->index_file);
        if (realpath(index, full) != NULL && under_root(host, full) && stat(full, &status) == 0 &&
            S_ISREG(status.st_mode)) {
            strcpy(resolved, full);
        } else if (host->list) {
            list_directory(http, host, resolved, decoded);
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
    file = cacheable ? cache_find(key, (size_t)key_len) : NULL;
    if (file != NULL && strcmp(file->resolved, resolved) == 0 && file_unchanged(file, &status)) {
        serve_checked(http, file, second);
        return;
    }
    if (file != NULL) {
        file_unref(file);
    }
    /* Not blocking: a FIFO put in the file's place since the stat would hold the loop. */
    int fd = open(resolved, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &status) < 0 || !S_ISREG(status.st_mode)) {
        int error = fd < 0 ? errno : EACCES;
        if (fd >= 0) {
            close(fd);
        }
        respond(http, error == EACCES ? 403 : 404, NULL, NULL);
        return;
    }
    bool coded = config.precompressed || config.gzip > 0 || config.brotli > 0;
    size_t vary = coded ? strlen(PRECOMPRESSED_VARY) : 0;
    memcpy(added, PRECOMPRESSED_VARY, vary);
    fields_for(host->index, decoded, (size_t)decoded_len, added + vary, sizeof(added) - vary);
    if ((file = file_load(cacheable ? key : "", resolved, fd, &status,
                          mime_type(host->index, resolved), NULL, added)) == NULL) {
        respond(http, 500, NULL, "out of memory\n");
        return;
    }
    if (cacheable) {
        cache_keep(file);
    }
    serve_checked(http, file, second);
}

#define FILE_BODY_MOST (48 * 1024) /* a file's GET may carry this much body, as without hosts */

/* A file's GET that came with a body: served once the body is read away. */
static void body_read_away(sxe_http_t *held, const char *data, size_t len, bool done, void *arg)
{
    (void)data;
    (void)len;
    if (done) {
        serve(held, arg);
    }
}

static void body_cancelled(sxe_http_t *held, void *arg)
{
    (void)held;
    (void)arg; /* nothing is kept for it */
}

/* Serves a host's file for GET or HEAD; a body (rare, but allowed) is read away first, up to
 * what the routes take without hosts (413 past it), so that a request pipelined behind it is
 * answered as it is there, not cut off with the connection. */
static void serve_host(sxe_http_t *http, struct host *host)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);

    if (!request->has_body) {
        serve(http, host);
    } else if (request->chunked || request->content_length > FILE_BODY_MOST) {
        respond(http, 413, NULL, NULL);
    } else if (sxe_http_defer(http, body_cancelled, host) < 0 ||
               sxe_http_body_stream(http, body_read_away, host) < 0) {
        respond(http, 503, NULL, NULL);
    }
}

/*
 * With virtual hosts, every request comes here first: the host its authority names (Host, or
 * HTTP/2's :authority) serves it, from its proxied prefixes or its files (GET and HEAD; OPTIONS
 * is answered with what they allow, other methods 405, as the routes answer them with no hosts).
 */
static void dispatch(sxe_http_t *http, void *arg)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    struct host *host = hosts_find(request->host, request->host_len);
    size_t path_len;
    const char *path = sxe_http_path(http, &path_len);
    struct proxy *proxy = proxy_find(host->index, path, path_len);

    (void)arg;
    if (proxy != NULL) {
        proxy_handle(http, proxy);
    } else if (host->root == NULL) { /* proxies only, and none of their prefixes */
        respond(http, 404, NULL, NULL);
    } else if ((request->method_len == 3 && memcmp(request->method, "GET", 3) == 0) ||
               (request->method_len == 4 && memcmp(request->method, "HEAD", 4) == 0)) {
        serve_host(http, host);
    } else if (request->method_len == 7 && memcmp(request->method, "OPTIONS", 7) == 0) {
        if (sxe_http_start(http, 200, "Allow: GET, HEAD, OPTIONS\r\n", 0) == 0) {
            (void)sxe_http_finish(http);
        }
    } else {
        respond(http, 405, "Allow: GET, HEAD, OPTIONS\r\n", NULL);
    }
}

/* Makes the TLS context of --tls-cert and --tls-key, with --tls's names, into *tls. @return 0,
 * or an error, said on standard error (where) as well as in the log (why). */
static int tls_make(sxe_tls_t **tls, FILE *where)
{
    struct sxe_tls_options options = {.certificate = config.tls_cert,
                                      .key = config.tls_key,
                                      .no_tickets = config.tls_no_tickets,
                                      .ticket_key_file = config.tls_ticket_key,
                                      .client_ca = config.tls_client_ca,
                                      .client_certificate_optional = config.tls_client_optional,
                                      .ocsp_response = config.tls_ocsp};
    int rc = sxe_tls_server_create(tls, &options);

    if (rc < 0) {
        fprintf(where, "sxe-httpd: --tls-cert %s --tls-key %s: %s (the log above says why)\n",
                config.tls_cert, config.tls_key, sxe_strerror(rc));
        return rc;
    }
    for (unsigned i = 0; i < config.tls_name_count; i++) {
        const struct httpd_tls_name *name = &config.tls_names[i];
        options = (struct sxe_tls_options){
            .certificate = name->certificate, .key = name->key, .ocsp_response = name->ocsp};
        if ((rc = sxe_tls_server_add_name(*tls, name->name, &options)) < 0) {
            fprintf(where, "sxe-httpd: --tls %s=%s,%s: %s (the log above says why)\n", name->name,
                    name->certificate, name->key, sxe_strerror(rc));
            sxe_tls_destroy(*tls);
            *tls = NULL;
            return rc;
        }
    }
    return 0;
}

static sxe_tls_t *httpd_tls; /* the HTTPS listeners' context, or NULL */

/* A worker's loop has stopped: the log's last lines go out, the peers' table goes. */
static void loop_stop(void *arg)
{
    access_log_loop_stop(arg);
    peer_text_free();
}

/* The HTTP server's log hook, once per request: the metrics count it, the access log writes it. */
static void logged(const sxe_http_t *http, void *arg)
{
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    const struct host *host = hosts_find(request->host, request->host_len); /* once for both */

    (void)arg;
    if (metrics_on()) {
        metrics_count(http, host->index);
    }
    if (access_log_on() && host->log >= 0) {
        access_log_write_to((unsigned)host->log, http);
    }
}

/* SIGUSR1 (and SIGHUP without a reload), in every process that serves: the access log is opened
 * again at its path, so that logrotate can move it away without copytruncate. */
static void reopen(void *arg)
{
    int rc;

    (void)arg;
    if (!access_log_on()) {
        SXE_LOG_INFO("no access log to reopen");
    } else if ((rc = access_log_reopen()) < 0) {
        SXE_LOG_ERROR("cannot reopen the access log: %s", sxe_strerror(rc));
    } else {
        SXE_LOG_INFO("reopened the access log");
    }
}

/* SIGHUP without a reload (no file, or threads), in every process that serves: the TLS files are
 * read again (new handshakes get the new certificates, connections made go on, and files that
 * fail leave the old ones serving), and the access log is reopened. */
static void hangup(void *arg)
{
    sxe_tls_t *fresh;
    int rc;

    (void)arg;
    if (httpd_tls != NULL) {
        if (tls_make(&fresh, stderr) < 0) {
            SXE_LOG_ERROR("SIGHUP: the TLS files were not reloaded; the old ones serve on");
        } else {
            rc = sxe_tls_server_replace(httpd_tls, fresh);
            SXE_LOG_INFO("SIGHUP: reloaded the TLS files%s", rc < 0 ? ": failed" : "");
        }
    }
    reopen(arg);
}

static char **program_argv;      /* main's: a reload runs the program again with them */
static char held_addresses[512]; /* the addresses listened on, a line each, for a reload's check */

/* SIGHUP, in a child of the supervisor, before the program runs again with its arguments to
 * reload: the program checks the files first (-t, said in the log), so that one with a mistake
 * leaves this image serving. @return 0, -EINVAL for a configuration that would not start, or
 * -ETIMEDOUT for a check that did not end in 10 s. */
static int reload_check(void *arg)
{
    int count = 0;
    int status = 0;

    (void)arg;
    while (program_argv[count] != NULL) {
        count++;
    }
    char **check = calloc((size_t)count + 2, sizeof(*check));
    if (check == NULL) {
        return -ENOMEM;
    }
    memcpy(check, program_argv, (size_t)count * sizeof(*check));
    check[count] = (char *)(uintptr_t) "-t";           /* execv takes char *const [] */
    (void)setenv("SXE_HTTPD_HELD", held_addresses, 1); /* the check's child's to compare */
    pid_t pid = fork();
    if (pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL); /* a check still hung when its waiter goes, too */
        execv("/proc/self/exe", check);
        _exit(127); /* GCOVR_EXCL_LINE: the program itself cannot be run */
    }
    free(check);
    (void)unsetenv("SXE_HTTPD_HELD");
    /* A check that hangs (a FIFO named as a file) is given 10 s by the clock (not in naps: each
     * may oversleep on a busy machine), and the reload refused. Its end is looked for each
     * millisecond: a check takes a few (bench/suites/reload.py). */
    uint64_t give_up = sxe_clock_mono_ns() + 10 * SXE_NS_PER_SEC;
    pid_t done = 0;
    while (pid > 0 && (done = waitpid(pid, &status, WNOHANG)) == 0 &&
           sxe_clock_mono_ns() < give_up) {
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    }
    if (pid > 0 && done == 0) {
        kill(pid, SIGKILL);
        (void)waitpid(pid, &status, 0);
        SXE_LOG_ERROR("SIGHUP: the check of the new configuration did not end in 10 s (a file "
                      "that does not end, such as a FIFO?); killed it");
        return -ETIMEDOUT;
    }
    if (pid < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        SXE_LOG_ERROR("SIGHUP: the new configuration does not start (said above)");
        return -EINVAL;
    }
    return 0;
}

/* The address as listened on: a port of 0 is told as the one the kernel chose. */
static const char *bound(const char *address, int port, char *text, size_t size)
{
    size_t len = strlen(address);

    if (port > 0 && len >= 2 && strcmp(address + len - 2, ":0") == 0) {
        snprintf(text, size, "%.*s:%d", (int)(len - 2), address, port);
        return text;
    }
    return address;
}

/* The routes: with no virtual host, the default host's proxied prefixes and its files; with
 * hosts, every request to dispatch(). @return 0, or sxe_http_server_route()'s error. */
static int route(sxe_http_server_t *server)
{
    int rc;

    if (hosts_count() > 0) {
        return sxe_http_server_route(server, NULL, "/",
                                     SXE_HTTP_ROUTE_PREFIX | SXE_HTTP_ROUTE_STREAM, dispatch, NULL);
    }
    if (!proxy_covers(0, "/") &&
        (rc = sxe_http_server_route(server, "GET", "/", SXE_HTTP_ROUTE_PREFIX, serve,
                                    hosts_at(0))) < 0) {
        return rc;
    }
    return proxy_route(server);
}

static int listen_all(sxe_http_server_t *server, sxe_tls_t *tls, const char **failed)
{
    int rc;

    *failed = config.listen;
    if ((rc = sxe_http_server_listen_tls(server, config.listen,
                                         config.https == NULL ? tls : NULL)) < 0 ||
        config.https == NULL) {
        return rc;
    }
    *failed = config.https;
    return sxe_http_server_listen_tls(server, config.https, tls);
}

#define ADDRESS_FORMS "expected IP:PORT, [IPv6]:PORT, localhost:PORT or :PORT"

/* Whether address (parsed) is one someone else listens on: a plain bind fails. */
static bool taken(const struct sockaddr_storage *address, socklen_t len)
{
    int fd = socket(address->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int on = 1;

    if (fd < 0) {
        return false;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)); /* TIME_WAIT is no one */
    bool in_use = bind(fd, (const struct sockaddr *)address, len) < 0 && errno == EADDRINUSE;
    close(fd);
    return in_use;
}

/* Whether address is one of the running server's (SXE_HTTPD_HELD, set by a reload's check: its
 * addresses as it listens on them, a line each). */
static bool held(const char *address)
{
    const char *lines = getenv("SXE_HTTPD_HELD");
    size_t len = strlen(address);

    for (const char *at = lines; at != NULL && *at != '\0';
         at = strchr(at, '\n') ? strchr(at, '\n') + 1 : NULL) {
        if (strncmp(at, address, len) == 0 && (at[len] == '\n' || at[len] == '\0')) {
            return true;
        }
    }
    return false;
}

/* -t: the options and files were read and the certificates loaded; the addresses are checked
 * without listening on them (the server the check is for may hold them). For a reload's check,
 * an address the running server does not hold must be free: one another program listens on would
 * stop the new image from starting. */
static int test_only(sxe_tls_t *tls)
{
    const char *addresses[] = {config.listen, config.https};
    struct sockaddr_storage address;
    socklen_t len = 0;
    int rc = 0;

    for (unsigned i = 0; i < 2 && rc == 0; i++) {
        if (addresses[i] != NULL && sxe_address_parse(addresses[i], -1, &address, &len) < 0) {
            fprintf(stderr, "sxe-httpd: %s %s: %s\n", i == 0 ? "--listen" : "--https", addresses[i],
                    ADDRESS_FORMS);
            rc = 1;
        } else if (addresses[i] != NULL && getenv("SXE_HTTPD_HELD") != NULL &&
                   sxe_address_port((struct sockaddr *)&address) != 0 && !held(addresses[i]) &&
                   taken(&address, len)) {
            fprintf(stderr, "sxe-httpd: %s %s: %s\n", i == 0 ? "--listen" : "--https", addresses[i],
                    sxe_strerror(-EADDRINUSE));
            rc = 1;
        }
    }
    if (rc == 0) {
        fprintf(stderr, "sxe-httpd: the configuration%s%s is good\n", config.file ? " in " : "",
                config.file ? config.file : "");
    }
    sxe_tls_destroy(tls);
    sxe_tls_destroy(config.proxy.tls);
    access_log_flush();
    return rc;
}

int main(int argc, char **argv)
{
    sxe_http_server_t *server;
    const char *failed = config.listen;
    sigset_t start_set;
    int rc;

    /* A signal sent as the server starts (a reload, a reopen, a stop right after the port opens)
     * waits for the loops or the supervisor to read it, rather than ending the process as the
     * default does: the listening sockets are bound before anything reads signals. */
    sigemptyset(&start_set);
    sigaddset(&start_set, SIGHUP);
    sigaddset(&start_set, SIGUSR1);
    sigaddset(&start_set, SIGTERM);
    sigaddset(&start_set, SIGINT);
    sigaddset(&start_set, SIGQUIT);
    sigprocmask(SIG_BLOCK, &start_set, NULL);
    options_parse(argc, argv);
    program_argv = argv;
    /* The library's advice, in this program's words. */
    (void)sxe_log_name_setting("options.connections", "--connections");
    (void)sxe_log_name_setting("SXE_LISTEN_EVICT_IDLE", "--evict-idle");
    cache_configure(config.cache == 1);
    /* Made before the workers start: they share its ticket keys. */
    if (config.tls_cert != NULL && tls_make(&httpd_tls, stderr) < 0) {
        return 1;
    }
    sxe_tls_t *tls = httpd_tls;
    if (proxy_secure() &&
        (rc = sxe_tls_client_create(&config.proxy.tls, &(struct sxe_tls_client_options){
                                                           .ca_file = config.proxy.ca_file})) < 0) {
        fprintf(stderr, "sxe-httpd: https:// upstreams: %s (the log above says why)\n",
                sxe_strerror(rc));
        return 1;
    }
    if (config.test) {
        return test_only(tls);
    }
    struct sxe_http_server_options options = {
        /* Over TLS a response being sent holds a sealed record in a buffer until the client takes
         * it (a file too, unlike sendfile's): a buffer for every connection, so that slow readers
         * cannot take the ones new clients need. The buffers' memory is touched only when used. */
        .loop = {.connections = config.connections,
                 .buffers = tls != NULL ? config.connections + config.connections / 4 + 272 : 0},
        .workers = config.workers ? config.workers : sxe_workers_cpus(),
        .worker_kind = config.kind,
        .spread = config.spread,
        .listen_flags = config.listen_flags,
        .header_timeout = (uint64_t)config.header_timeout * SXE_NS_PER_SEC,
        .idle_timeout = (uint64_t)config.idle_timeout * SXE_NS_PER_SEC,
        .write_timeout = (uint64_t)config.write_timeout * SXE_NS_PER_SEC,
        .body_rate = config.body_rate,
        .http2 = config.http2,
        .on_log = access_log_on() || config.metrics != NULL ? logged : NULL,
        .on_loop_start = access_log_loop_start,
        .on_loop_stop = loop_stop,
        .on_hangup = hangup,
        /* With a file and worker processes, SIGHUP runs the program again to read it; with a
         * command line alone, nothing but files can change: hangup() reads those in place. */
        .reload_argv = config.file != NULL ? argv : NULL,
        .on_reload = reload_check,
        .on_reopen = reopen,
        .control_path = config.control};
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
    if ((config.metrics != NULL && (rc = metrics_open(options.workers)) < 0) ||
        (rc = sxe_http_server_create(&server, NULL, &options)) < 0) {
        fprintf(stderr, "sxe-httpd: cannot start: %s\n", sxe_strerror(rc));
        return 1;
    }
    proxy_configure(&config.proxy);
    if ((config.metrics != NULL && (rc = metrics_route(server, config.metrics)) < 0) ||
        (rc = route(server)) < 0 || (rc = listen_all(server, tls, &failed)) < 0) {
        fprintf(stderr, "sxe-httpd: cannot listen on %s: %s\n", failed,
                rc == -EINVAL ? ADDRESS_FORMS : sxe_strerror(rc));
        sxe_http_server_destroy(server);
        sxe_tls_destroy(tls);
        return 1;
    }
    char listen[80], hosts_said[48];
    snprintf(hosts_said, sizeof(hosts_said), " and %u host%s", hosts_count(),
             hosts_count() == 1 ? "" : "s");
    snprintf(held_addresses, sizeof(held_addresses), "%s\n%s",
             bound(config.listen, sxe_http_server_port(server), listen, sizeof(listen)),
             config.https ? config.https : "");
    static const char *const kinds[2][2] = {{"processes", "process"}, {"threads", "thread"}};
    const char *kind = kinds[config.kind == SXE_WORKERS_THREADS][options.workers == 1];
    const struct host *main_host = hosts_at(0);
    SXE_LOG_INFO("serving %s%s on %s%s%s%s with %u worker %s of up to %u connections each%s",
                 main_host->root[0] ? main_host->root : "/", hosts_count() ? hosts_said : "",
                 config.https == NULL && tls ? "https://" : "",
                 bound(config.listen, sxe_http_server_port(server), listen, sizeof(listen)),
                 config.https ? " and https://" : "", config.https ? config.https : "",
                 options.workers, kind, config.connections,
                 config.cache == 1 ? ", sharing one file cache" : "");
    rc = sxe_http_server_run(server);
    sxe_http_server_destroy(server);
    sxe_tls_destroy(tls);
    sxe_tls_destroy(config.proxy.tls);
    cache_clear();
    access_log_flush();
    return rc < 0 ? 1 : 0;
}
