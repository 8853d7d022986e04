/*
 * The HTTP server's life: making it on a loop or over workers (sxe/workers.h), listening,
 * running until a stop signal, and its counters. With workers, the server sxe_http_server_create()
 * makes is a template: routes and limits. Each worker copies it, with per-connection state sized
 * for its own loop, and takes its share of the template's listeners.
 */
#define SXE_LOG_MODULE http_log
#include "sxe/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "server.h"

static struct sxe_log_module http_log = SXE_LOG_MODULE_INIT(HTTP);

static void apply_limits(struct sxe_http_limits *limits, const struct sxe_http_limits *given)
{
    *limits = sxe_http_default_limits;
    if (given != NULL) {
        limits->request_line = given->request_line ? given->request_line : limits->request_line;
        limits->header_bytes = given->header_bytes ? given->header_bytes : limits->header_bytes;
        limits->header_count = given->header_count ? given->header_count : limits->header_count;
        limits->body_bytes = given->body_bytes ? given->body_bytes : limits->body_bytes;
    }
}

/* The options of a loop the server makes (its own, or each worker's). */
static struct sxe_loop_options loop_options(const struct sxe_http_server_options *options,
                                            const struct sxe_http_limits *limits)
{
    struct sxe_loop_options loop = options->loop;

    /* The clients, and a few slots more for listeners. */
    uint32_t clients = loop.connections ? loop.connections : 10000;
    loop.connections = clients <= UINT32_MAX - 16 ? clients + 16 : UINT32_MAX; /* no wrap to 15 */
    /* A request's head and body wait whole in one buffer: an ordinary one for a body of up to
     * 48 KiB, a large one, taken from a few shared by all connections, for more. The slack is for
     * chunked framing, and a next request's first bytes. */
    uint64_t inline_body =
        limits->body_bytes < INLINE_BODY_MAX ? limits->body_bytes : INLINE_BODY_MAX;
    loop.buffer_size = (uint32_t)(limits->header_bytes + inline_body + 1024);
    if (limits->body_bytes > inline_body && loop.large_buffers == 0) {
        uint64_t large = limits->header_bytes + limits->body_bytes + limits->body_bytes / 64 + 1024;
        loop.large_buffers = options->large_bodies ? options->large_bodies : LARGE_BODIES;
        loop.large_buffer_size =
            (uint32_t)(large < LARGE_BUFFER_LIMIT ? large : LARGE_BUFFER_LIMIT);
        /* An answer as large as the largest body may be queued whole (an echo, a transform), in
         * ordinary buffers; "stop" still comes at the usual mark. */
        if (loop.write_limit == 0 && loop.large_buffer_size > 4 * loop.buffer_size) {
            loop.write_limit = loop.large_buffer_size;
            loop.high_water = loop.high_water ? loop.high_water : 2 * loop.buffer_size;
        }
    }
    loop.read_timeout = options->header_timeout ? options->header_timeout : 10 * SXE_NS_PER_SEC;
    loop.idle_timeout = options->idle_timeout ? options->idle_timeout : 60 * SXE_NS_PER_SEC;
    loop.write_timeout = options->write_timeout ? options->write_timeout : 30 * SXE_NS_PER_SEC;
    /* A buffer for each request that may be held (its bytes wait there), beside the usual share:
     * over TLS, one for every connection (a sealed record waits in one for a slow reader). */
    if (loop.buffers == 0) {
        uint64_t buffers = (options->tls != NULL ? loop.connections : loop.connections / 4) +
                           16ULL + (options->deferred ? options->deferred : 256);
        loop.buffers = (uint32_t)(buffers < UINT32_MAX / 2 ? buffers : UINT32_MAX / 2);
    }
    /* A timer for each request that may be held (its deadline), beside the program's own. */
    loop.timers = (loop.timers ? loop.timers : 64) + (options->deferred ? options->deferred : 256) +
                  (options->fibers ? options->fibers : 256); /* sleeping fibers' */
    return loop;
}

/*
 * The loop begins to stop (or to drain): HTTP/2 connections are told (GOAWAY), so their clients
 * open no more streams, and the streams open finish; and every HTTP/1.1 answer from now on says
 * Connection: close, so that each connection ends with its next request. One that sends none
 * ends by the drain's short idle timeout (sxe_loop_drain()): closing it at once could meet a
 * request crossing the close, which its client would see fail.
 */
static void going_away(void *arg)
{
    sxe_http_server_t *server = arg;

    server->going = true;
    sxe__h2_going_away(server);
}

/* Puts the server on loop, with per-connection state sized by its table. @return 0, -ENOMEM or
 * -ENOBUFS (the loop's stop hooks are all taken). */
static int attach_loop(sxe_http_server_t *server, sxe_loop_t *loop)
{
    server->loop = loop;
    /* Bodies must fit the loop's largest buffers along with their heads. */
    const struct sxe_loop_options *in_force = sxe_loop_options(loop);
    uint32_t largest =
        in_force->large_buffers > 0 ? in_force->large_buffer_size : in_force->buffer_size;
    uint64_t room = largest > server->config.limits.header_bytes
                        ? largest - server->config.limits.header_bytes
                        : 0;
    if (server->config.limits.body_bytes > room) {
        server->config.limits.body_bytes = room;
    }
    server->conn_count = in_force->connections;
    server->conns = calloc(server->conn_count, sizeof(*server->conns));
    server->scratch = malloc(server->config.limits.body_bytes + 1);
    server->path_scratch = malloc((size_t)server->config.limits.request_line + 1);
    if (server->conns == NULL || server->scratch == NULL || server->path_scratch == NULL) {
        return -ENOMEM;
    }
    int rc = sxe_loop_at_stop(loop, going_away, server);
    return rc < 0 ? rc : sxe__http_slots_init(server);
}

int sxe_http_server_create(sxe_http_server_t **server_out, sxe_loop_t *loop,
                           const struct sxe_http_server_options *options)
{
    static const struct sxe_http_server_options defaults;
    sxe_http_server_t *server;
    int rc;

    options = options != NULL ? options : &defaults;
    const struct sxe_http2_options *http2 = &options->http2;
    if (!SXE_CHECK(server_out != NULL && (options->workers == 0 || loop == NULL) &&
                   (options->workers > 0 || options->control_path == NULL) &&
                   http2->window <= INT32_MAX &&
                   (http2->max_frame == 0 ||
                    (http2->max_frame >= 16384 && http2->max_frame <= 16777215)))) {
        return -EINVAL;
    }
    if ((server = calloc(1, sizeof(*server))) == NULL) {
        return -ENOMEM;
    }
    server->handlers = sxe__http_handlers;
    server->config.held_max = options->deferred;
    server->config.response_timeout = options->response_timeout;
    server->config.on_log = options->on_log;
    server->config.log_arg = options->log_arg;
    server->config.on_hangup = options->on_hangup;
    server->config.hangup_arg = options->hangup_arg;
    server->config.on_reopen = options->on_reopen;
    server->config.on_loop_start = options->on_loop_start;
    server->config.on_loop_stop = options->on_loop_stop;
    server->config.loop_arg = options->loop_arg;
    server->config.body_rate = options->body_rate ? options->body_rate : 4096;
    server->config.stream_body_bytes =
        options->stream_body_bytes ? options->stream_body_bytes : UINT64_MAX;
    server->config.fiber_options = (struct sxe_fibers_options){
        .count = options->fibers, .stack_size = options->fiber_stack_size};
    apply_limits(&server->config.limits, &options->limits);
    server->config.listen_flags = options->listen_flags;
    server->config.tls = options->tls;
    /* At least 100 streams, as RFC 9113 suggests; a window a 1 MiB body fills in four trips. */
    server->config.http2 =
        (struct sxe_http2_options){.max_streams = http2->max_streams ? http2->max_streams : 100,
                                   .window = http2->window ? http2->window : 256 * 1024,
                                   .max_frame = http2->max_frame ? http2->max_frame : 16384,
                                   .off = http2->off};
    struct sxe_loop_options own_options = loop_options(options, &server->config.limits);
    if (options->workers > 0) {
        struct sxe_workers_options workers = {.count = options->workers,
                                              .kind = options->worker_kind,
                                              .spread = options->spread,
                                              .loop = own_options,
                                              .on_hangup = options->on_hangup,
                                              .hangup_arg = options->hangup_arg,
                                              .reload_argv = options->reload_argv,
                                              .on_reload = options->on_reload,
                                              .on_reopen = options->on_reopen,
                                              .control_path = options->control_path};
        if ((rc = sxe_workers_create(&server->workers, &workers)) < 0) {
            free(server);
            return rc;
        }
        *server_out = server;
        return 0;
    }
    if (loop == NULL) {
        if ((rc = sxe_loop_create(&loop, &own_options)) < 0) {
            free(server);
            return rc;
        }
        server->own_loop = true;
    }
    if ((rc = attach_loop(server, loop)) < 0) {
        sxe_http_server_destroy(server);
        return rc;
    }
    *server_out = server;
    return 0;
}

void sxe_http_server_destroy(sxe_http_server_t *server)
{
    if (server == NULL) {
        return;
    }
    sxe_fibers_destroy(server->fibers); /* before its loop: fibers still waiting are abandoned */
    if (server->own_loop) {
        sxe_loop_destroy(server->loop);
    } else if (server->loop != NULL) { /* the caller's loop goes on: close what is ours */
        (void)sxe_loop_at_stop(server->loop, NULL, server);
        if (server->listener != NULL) {
            sxe_conn_close(server->listener);
        }
        for (uint32_t i = 0; server->conns != NULL && i < server->conn_count; i++) {
            sxe_conn_t *conn =
                server->conns[i].id ? sxe_conn_from_id(server->loop, server->conns[i].id) : NULL;
            if (conn != NULL && sxe_conn_handlers(conn) == &server->handlers) {
                sxe_conn_close(conn);
            }
        }
    }
    sxe_workers_destroy(server->workers);
    free(server->conns);
    free(server->scratch);
    free(server->path_scratch);
    free(server->slots);
    free(server);
}

sxe_loop_t *sxe_http_server_loop(sxe_http_server_t *server)
{
    return server->loop;
}

int sxe_http_server_listen(sxe_http_server_t *server, const char *address_text)
{
    return sxe_http_server_listen_tls(server, address_text, server->config.tls);
}

int sxe_http_server_listen_tls(sxe_http_server_t *server, const char *address_text, sxe_tls_t *tls)
{
    struct sxe_listen_options options = {.flags = server->config.listen_flags, .tls = tls};
    struct sockaddr_storage address;
    socklen_t len;
    sxe_conn_t *listener;
    int rc;

    if ((rc = sxe_address_parse(address_text, -1, &address, &len)) < 0) {
        SXE_LOG_DEBUG("cannot listen on '%s': expected IP:PORT, [IPv6]:PORT, localhost:PORT or "
                      ":PORT",
                      address_text);
        return rc;
    }
    if (tls != NULL && !server->config.http2.off) {
        sxe__h2_offer(tls); /* ALPN names h2 too, where this build speaks it */
    }
    if (server->workers != NULL) {
        rc = sxe_workers_listen(server->workers, (struct sockaddr *)&address, len, &options);
    } else if ((rc = sxe_conn_listen(server->loop, &listener, (struct sockaddr *)&address, len,
                                     &options, &server->handlers, NULL)) == 0 &&
               server->listener == NULL) {
        server->listener = listener;
    }
    if (rc < 0) {
        SXE_LOG_DEBUG("cannot listen on %s: %s", address_text, sxe_strerror(rc));
        return rc;
    }
    server->config.listener_count++;
    return 0;
}

int sxe_http_server_port(sxe_http_server_t *server)
{
    struct sockaddr_storage address;
    socklen_t len = sizeof(address);

    if (server->workers != NULL) {
        return sxe_workers_port(server->workers, 0);
    }
    if (server->listener == NULL ||
        sxe_conn_local(server->listener, (struct sockaddr *)&address, &len) < 0) {
        return 0;
    }
    int port = sxe_address_port((struct sockaddr *)&address);
    return port > 0 ? port : 0;
}

/* On a worker: its copy of the server, on its loop, with its share of every listener. */
static int worker_start(sxe_worker_t *worker, void *arg)
{
    const sxe_http_server_t *template = arg;
    sxe_http_server_t *server = calloc(1, sizeof(*server));
    int rc;

    if (server == NULL) {
        return -ENOMEM;
    }
    server->handlers = template->handlers;
    server->config = template->config; /* the configuration; the state is the worker's own */
    server->worker = worker;
    if ((rc = attach_loop(server, sxe_worker_loop(worker))) < 0 ||
        (server->config.has_fiber_routes && (rc = sxe__http_fibers_make(server)) < 0)) {
        sxe_http_server_destroy(server);
        return rc;
    }
    for (unsigned l = 0; l < template->config.listener_count && rc == 0; l++) {
        rc = sxe_worker_listen(worker, l, &server->handlers, NULL);
    }
    if (rc < 0) {
        sxe_http_server_destroy(server); /* GCOVR_EXCL_LINE: the worker's table has room */
        return rc;                       /* GCOVR_EXCL_LINE: as above */
    }
    template->copies[sxe_worker_index(worker)] = server;
    if (server->config.on_loop_start != NULL) {
        server->config.on_loop_start(server->loop, server->config.loop_arg);
    }
    return 0;
}

/* On a worker, its loop gone: frees its copy. */
static void worker_stop(sxe_worker_t *worker, void *arg)
{
    const sxe_http_server_t *template = arg;
    sxe_http_server_t *server = template->copies[sxe_worker_index(worker)];

    template->copies[sxe_worker_index(worker)] = NULL;
    server->loop = NULL; /* destroyed with the worker */
    sxe_http_server_destroy(server);
    if (template->config.on_loop_stop != NULL) {
        template->config.on_loop_stop(template->config.loop_arg);
    }
}

int sxe_http_server_run(sxe_http_server_t *server)
{
    if (server->workers != NULL) {
        unsigned count = sxe_workers_count(server->workers);
        if ((server->copies = calloc(count, sizeof(*server->copies))) == NULL) {
            return -ENOMEM;
        }
        int rc = sxe_workers_run(server->workers, worker_start, worker_stop, server);
        free(server->copies);
        server->copies = NULL;
        return rc;
    }
    int rc = sxe_loop_stop_on_signals(server->loop, 5 * SXE_NS_PER_SEC);
    if (rc < 0) {
        return rc;
    }
    sxe_loop_on_hangup(server->loop, server->config.on_hangup, server->config.hangup_arg);
    if (server->config.on_reopen != NULL &&
        (rc = sxe_loop_on_signal(server->loop, SIGUSR1, server->config.on_reopen,
                                 server->config.hangup_arg)) < 0) {
        return rc;
    }
    if (server->config.on_loop_start != NULL) {
        server->config.on_loop_start(server->loop, server->config.loop_arg);
    }
    rc = sxe_loop_run(server->loop);
    if (server->config.on_loop_stop != NULL) {
        server->config.on_loop_stop(server->config.loop_arg);
    }
    return rc;
}

int sxe_http_serve(const char *address, const char *path, sxe_http_handler_t handler, void *arg,
                   unsigned workers)
{
    struct sxe_http_server_options options = {.workers = workers};
    sxe_http_server_t *server;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, &options)) < 0) {
        return rc;
    }
    if ((rc = sxe_http_server_route(server, NULL, path, 0, handler, arg)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        /* The call is the whole program: it says why it could not start. */
        SXE_LOG_ERROR("cannot serve on %s: %s", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc;
}

unsigned sxe_http_server_workers(const sxe_http_server_t *server)
{
    return server->workers != NULL ? sxe_workers_count(server->workers) : 1;
}

int sxe_http_server_stats(const sxe_http_server_t *server, unsigned worker,
                          struct sxe_worker_stats *stats)
{
    if (worker >= sxe_http_server_workers(server)) {
        return -EINVAL;
    }
    if (server->workers != NULL) {
        sxe_workers_stats(server->workers, worker, stats);
        return 0;
    }
    struct sxe_loop_stats loop;
    sxe_loop_stats(server->loop, &loop);
    *stats = (struct sxe_worker_stats){.connections = loop.accepted,
                                       .requests = server->requests,
                                       .bytes = server->bytes,
                                       .table_full = loop.table_full,
                                       .evicted = loop.evicted,
                                       .open = loop.open > server->config.listener_count
                                                   ? loop.open - server->config.listener_count
                                                   : 0};
    return 0;
}
