/**
 * @file sxe/http.h
 * @brief HTTP/1.1: the server module, on the parser of sxe/http_parser.h and the public API alone.
 *
 * A web service is a few lines:
 *
 *     static void hello(sxe_http_t *http, void *arg)
 *     {
 *         sxe_http_respond(http, 200, "text/plain", "Hello World\n", 12);
 *     }
 *     ...
 *     if (sxe_http_server_create(&server, NULL, NULL) < 0 ||
 *         sxe_http_server_route(server, "GET", "/", 0, hello, NULL) < 0 ||
 *         sxe_http_server_listen(server, "127.0.0.1:8080") < 0)
 *         return 1;
 *     return sxe_http_server_run(server);
 *
 * The server reads requests with the parser (sxe/http_parser.h), answers malformed ones itself with
 * the right status (400, 404, 405, 408, 413, 414, 431, 501, 505) and closes where the RFC requires
 * it, keeps connections alive by the rules of HTTP/1.0 and HTTP/1.1, answers pipelined requests in
 * order, sends 100 Continue when asked, sends no body for HEAD, adds Date (cached for a second)
 * and Content-Length, or chunked framing when the length is not known. Request bodies, by
 * Content-Length or chunked, arrive whole with the request (up to limits.body_bytes), or, on a
 * route made with SXE_HTTP_ROUTE_STREAM, in pieces as they arrive, with backpressure, and of any
 * size (sxe_http_body_stream(), sxe_http_body_read()). A handler may also hold its request and
 * answer it later (sxe_http_defer()), or run on a fiber of its own (SXE_HTTP_ROUTE_FIBER).
 *
 * While a connection has high_water bytes or more of output queued (a large file, or many
 * answers), its next pipelined request waits, unread, until the output drains: the client is held
 * back by TCP, and the server's memory stays what it was. A response whose bytes cannot be queued
 * (more than write_limit at once, or a failed connection) is cut off where it failed: the
 * sxe_http_*() call returns the error, as do later ones for that response, what was accepted is
 * sent (the answers before it whole), and the connection closes; nothing follows the cut.
 *
 * Workers. With options.workers N above 0, sxe_http_server_run() starts N workers (sxe/workers.h),
 * each running a copy of the server (its routes and limits) on a loop of its own, and a handler
 * runs on the worker that owns the request's connection. Processes (the default) share nothing: a
 * handler may keep what it likes in globals, each worker has its own, and a worker that dies is
 * restarted. Threads share the process: what a handler's arg points to, and every global it
 * touches, is shared by all workers at once, so make it read-only after start-up, atomic, or per
 * worker (index it by sxe_worker_index()). Counters per worker: sxe_http_server_stats().
 */
#ifndef SXE_HTTP_H
#define SXE_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sxe/conn.h"
#include "sxe/json.h"
#include "sxe/error.h"
#include "sxe/http_parser.h"
#include "sxe/loop.h"
#include "sxe/workers.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_http_server sxe_http_server_t;

/** One request being answered. Valid from the handler's call until it returns. */
typedef struct sxe_http sxe_http_t;

/**
 * Answers a request: the handler must call sxe_http_respond(), or sxe_http_start() with
 * sxe_http_send()/sxe_http_sendfile() and sxe_http_finish(), before it returns, or hold the
 * request to answer it later (sxe_http_defer()). A handler that does neither is answered 500 for
 * it.
 */
typedef void (*sxe_http_handler_t)(sxe_http_t *http, void *arg);

/**
 * The log hook (sxe_http_server_options.on_log): called once for every request the server read,
 * whoever answered it (a handler, a held request's holder, the server itself with 400, 404, 405,
 * 408, 413 and the like, or nobody), when its response is finished, cut off, or never to come.
 * sxe_http_status() and sxe_http_body_sent() say what the client got; the request, its path and
 * its connection are valid until the hook returns. The hook must not answer or hold the request.
 */
typedef void (*sxe_http_log_t)(const sxe_http_t *http, void *arg);

/**
 * A held request's connection went away (closed by the client, reset, timed out) before its
 * answer was finished. Called once; when it returns the handle is gone.
 */
typedef void (*sxe_http_cancel_t)(sxe_http_t *held, void *arg);

struct sxe_http_server_options {
    struct sxe_loop_options loop; /**< For a loop the server makes (connections 10000). */
    /**
     * Zero fields take the parser's defaults (sxe_http_default_limits; body_bytes 1 MiB). A body
     * of up to 48 KiB waits in the connection's buffer; a larger one grows in one of large_bodies
     * large buffers shared by the loop's connections, so a 1 MiB limit does not cost a megabyte
     * per connection.
     */
    struct sxe_http_limits limits;
    uint64_t header_timeout; /**< ns for a request, head and body, to arrive: else 408 (10 s). */
    uint64_t idle_timeout;   /**< ns a kept-alive connection may wait for a request (60 s). */
    uint64_t write_timeout;  /**< ns a response may wait for the client to read (30 s). */
    /**
     * SXE_LISTEN_* for sxe_http_server_listen(): REUSEPORT, FASTOPEN, DEFER_ACCEPT, EVICT_IDLE,
     * V6ONLY.
     */
    unsigned listen_flags;
    /**
     * TLS (sxe/tls.h) for the listeners of sxe_http_server_listen(), or NULL for plain HTTP;
     * sxe_http_server_listen_tls() chooses per listener. It must outlive the server. With it the
     * loop's buffers (loop.buffers, unless set) are one for every connection beside the held
     * requests': a response being sent over TLS holds its sealed record in one until the client
     * takes it, so slow readers cannot take the ones new clients need (untouched memory until
     * used). A program with TLS on some listeners only (sxe_http_server_listen_tls()) sizes
     * loop.buffers the same way.
     */
    sxe_tls_t *tls;
    /**
     * Workers (sxe/workers.h): 0 runs one loop on the caller's thread; N runs N loops, each
     * with its own table of loop.connections, in processes or threads (worker_kind), spread as
     * spread says. See "Workers" above.
     */
    unsigned workers;
    enum sxe_workers_kind worker_kind; /**< SXE_WORKERS_PROCESSES. */
    enum sxe_workers_spread spread;    /**< SXE_SPREAD_REUSEPORT. */
    /** Requests that may be held to answer later at once, per loop (256); see sxe_http_defer(). */
    uint32_t deferred;
    /** ns a held request may wait for its answer: then 503 and the connection closes (30 s). */
    uint64_t response_timeout;
    /** Fibers for fiber routes, per loop (256), and each one's stack (65536): see sxe/fiber.h. */
    uint32_t fibers;
    uint32_t fiber_stack_size;
    /** The largest body a streamed route (SXE_HTTP_ROUTE_STREAM) takes: else 413 (0: no limit). */
    uint64_t stream_body_bytes;
    /**
     * The bytes per second a streamed body must keep coming at, judged over every window of three
     * seconds or more while its reader takes it (4096); else 408 and the connection closes. A
     * client that trickles a byte every few seconds would otherwise hold its request (and a
     * proxy's upstream connection) for as long as it liked. A whole body is bounded by
     * header_timeout instead.
     */
    uint32_t body_rate;
    /**
     * Requests with a body over 48 KiB (and up to limits.body_bytes) that may be arriving or held
     * at once, per loop (16): each takes a large buffer of about limits.body_bytes, reserved at
     * start-up and touched only when used. Past that, such a request is answered 503 with
     * Retry-After (sxe_loop_stats().no_large_buffer counts them). Ignored when options.loop sets
     * large_buffers itself.
     */
    uint32_t large_bodies;
    /**
     * HTTP/2 (docs/http2.md), in a build with libnghttp2: the settings each connection gets. Zero
     * fields take the defaults; the header list's limit is limits.header_bytes.
     */
    struct sxe_http2_options {
        uint32_t max_streams; /**< Streams a client may have open at once (100). */
        uint32_t window;    /**< Each stream's initial window, bytes, at most 2^31 - 1 (256 KiB). */
        uint32_t max_frame; /**< The largest frame taken, 16384 to 16777215 (16384). */
        /** No HTTP/2: TLS names http/1.1 only, and the preface is refused for its version (505). */
        bool off;
    } http2;
    /** Called for every request, once (an access log): see sxe_http_log_t. NULL: none. */
    sxe_http_log_t on_log;
    void *log_arg;
    /**
     * On SIGHUP, while sxe_http_server_run() runs: on_hangup(hangup_arg) once in every process that
     * serves (the workers' sxe_workers_options.on_hangup, or the server's own loop's,
     * sxe_loop_on_hangup()); reopen logs there. NULL: SIGHUP is logged and ignored.
     */
    void (*on_hangup)(void *arg);
    void *hangup_arg;
    /**
     * With worker processes: SIGHUP reloads by running the program again with these arguments,
     * after on_reload(hangup_arg) accepted (sxe_workers_options.reload_argv: the listeners pass
     * to the new image and the old workers drain). NULL: SIGHUP goes to on_hangup.
     */
    char *const *reload_argv;
    int (*on_reload)(void *arg);
    /**
     * On SIGUSR1, while sxe_http_server_run() runs: on_reopen(hangup_arg), as on_hangup is called
     * (the workers' sxe_workers_options.on_reopen, or the server's own loop's
     * sxe_loop_on_signal()); reopen logs there. NULL: with workers, SIGUSR1 writes their counters
     * to the log; on the server's own loop it is not read.
     */
    void (*on_reopen)(void *arg);
    /** With workers: their control socket (sxe_workers_options.control_path); NULL for none. */
    const char *control_path;
    /**
     * In sxe_http_server_run(), on each loop that serves, in its own thread (each worker's, or the
     * server's own): on_loop_start(loop, loop_arg) before the loop runs, for per-loop state (a
     * timer, say); on_loop_stop(loop_arg) after it has stopped, before its thread (or process)
     * ends, to finish what that thread holds (a buffered log's last lines). NULL: none.
     */
    void (*on_loop_start)(sxe_loop_t *loop, void *arg);
    void (*on_loop_stop)(void *arg);
    void *loop_arg;
};

/** Counters of requests held to answer later (sxe_http_defer()). */
struct sxe_http_defer_stats {
    uint64_t deferred;  /**< Requests held. */
    uint64_t refused;   /**< sxe_http_defer() refused: all held, or no timer free. */
    uint64_t cancelled; /**< Held requests whose connection went away first. */
    uint64_t timed_out; /**< Held requests answered 503 after response_timeout. */
    uint32_t held;      /**< Held now. */
};

/**
 * Makes a server on loop, or on a loop of its own when loop is NULL (sxe_http_server_run() runs
 * it), or, with options->workers above 0, over that many workers, each with a loop of its own (loop
 * must then be NULL).
 * @param options NULL for the defaults. A loop passed in keeps its own timeouts and sizes; bodies
 *                must then fit its buffer_size along with their head.
 * @return 0, -EINVAL, or -ENOMEM.
 */
SXE_MUST_CHECK int sxe_http_server_create(sxe_http_server_t **server, sxe_loop_t *loop,
                                          const struct sxe_http_server_options *options);

/** Closes the server's connections and frees it, and its loop if it made one. */
void sxe_http_server_destroy(sxe_http_server_t *server);

/** The loop the server runs on (NULL for a server with workers: see sxe_http_conn()). */
sxe_loop_t *sxe_http_server_loop(sxe_http_server_t *server);

/** How many workers the server has: 1 without workers. */
unsigned sxe_http_server_workers(const sxe_http_server_t *server);

/**
 * Copies worker index's counters: connections, requests (responses finished), bytes of responses,
 * table-full refusals, evictions, open connections. Without workers index 0 is the server's loop
 * (pid 0). Any thread or process of the server may call it. @return 0, or -EINVAL for no such
 * worker.
 */
int sxe_http_server_stats(const sxe_http_server_t *server, unsigned index,
                          struct sxe_worker_stats *stats);

/** Route flags, for sxe_http_server_route(), or'ed; 0 routes the exact path, plainly. */
#define SXE_HTTP_ROUTE_PREFIX 0x1u /**< Any path that starts with the route's path matches. */
/**
 * The handler runs on a fiber of its own (sxe/fiber.h), so it may wait (sxe_fiber_sleep(), a
 * client's answer, ...) before answering, written as sequential code: the request is held for it
 * (as by sxe_http_defer(): options.deferred, options.response_timeout) and it answers on the http
 * it is given. A handler that returns without answering is answered 500. If the client goes away
 * while it waits, its next sxe_http_*() call returns -ECANCELED. When every fiber
 * (options.fibers) or held request is in use, the request is answered 503.
 */
#define SXE_HTTP_ROUTE_FIBER 0x2u
/**
 * The handler is called as soon as a request's head has arrived, before its body, which it reads
 * in pieces as they arrive: sxe_http_body_stream() (callbacks) or sxe_http_body_read() (fibers).
 * The body may be as long as options.stream_body_bytes, far beyond the connection's buffer. A
 * request answered before its body was read to the end is answered with "Connection: close",
 * and the rest of its body is read and dropped until the client closes; over HTTP/2 its stream is
 * reset with NO_ERROR after the answer instead, and the connection goes on.
 */
#define SXE_HTTP_ROUTE_STREAM 0x4u

/**
 * Routes requests for path to handler(http, arg), as flags say (SXE_HTTP_ROUTE_*): with
 * SXE_HTTP_ROUTE_PREFIX, any path that starts with path matches; the longest match wins, and an
 * exact route beats a prefix one. method is "GET", "POST", ... or NULL for any method (HEAD
 * matches GET routes). A path that matches routes of other methods only is answered 405 with an
 * Allow header. At most 64 routes.
 * @return 0; -EINVAL (NULL, too long, an unknown flag); -ENOBUFS; with SXE_HTTP_ROUTE_FIBER, the
 *         error of making the server's fibers.
 */
SXE_MUST_CHECK int sxe_http_server_route(sxe_http_server_t *server, const char *method,
                                         const char *path, unsigned flags,
                                         sxe_http_handler_t handler, void *arg);

/**
 * Listens on "IPv4:port" or "[IPv6]:port" (port 0: any; sxe_http_server_port() tells which), with
 * options.listen_flags. With workers, every worker takes its share (sxe_workers_listen()).
 * @return 0, -EINVAL for an address that does not parse, or -errno (-EADDRINUSE).
 */
SXE_MUST_CHECK int sxe_http_server_listen(sxe_http_server_t *server, const char *address);

/**
 * The same, with tls for this listener's connections (NULL: plain HTTP), whatever options.tls
 * says: HTTPS and HTTP side by side. tls must outlive the server.
 */
SXE_MUST_CHECK int sxe_http_server_listen_tls(sxe_http_server_t *server, const char *address,
                                              sxe_tls_t *tls);

/** The port of the server's first listener, or 0. */
int sxe_http_server_port(sxe_http_server_t *server);

/**
 * Runs the server's loop, or its workers, until SIGINT or SIGTERM, then stops cleanly: stops
 * accepting, gives queued output 5 s to drain, closes. @return 0 or -errno.
 */
int sxe_http_server_run(sxe_http_server_t *server);

/**
 * The whole server in one call: makes a server with default options, routes path (exactly, any
 * method) to handler, listens on address and runs until SIGINT or SIGTERM, on one loop (workers 0)
 * or on that many worker processes, spread by SO_REUSEPORT. A failure to start (an address in use
 * or that does not parse) is also said in an error line of the log.
 * @return 0 after a clean stop, or the negative errno that stopped it from starting or running.
 */
int sxe_http_serve(const char *address, const char *path, sxe_http_handler_t handler, void *arg,
                   unsigned workers);

/**
 * From a handler: holds the request, to answer it later from any callback on the same loop (a
 * timer, another connection's data, a client's response) with the same handle: a request keeps
 * the slot it was given at its dispatch until its response is finished. Pipelined requests after
 * it wait, so answers still go out in order. The handle's request, path, query and body stay
 * valid until its response is finished.
 *
 * If the connection goes away before the response is finished, on_cancel(held, arg) is called once
 * and the handle is gone; without on_cancel, the next sxe_http_*() call on it returns -ECANCELED
 * (calling a release it was given) and the handle is gone then. A request not answered within
 * options.response_timeout is answered 503, its connection closes, and it is cancelled so; once
 * its response has started, it may stream for as long as the client reads (server-sent events).
 * @return 0; -ENOBUFS when options.deferred requests are held already, or the loop's timers
 *         are all running (both counted in refused); -ENOMEM when a path that had to be
 *         normalized cannot be copied. After these the request is not held: answer it now (503,
 *         say). -EINVAL if http is not a handler's request, is held already, or its response
 *         has started (asserts in debug builds).
 */
SXE_MUST_CHECK int sxe_http_defer(sxe_http_t *http, sxe_http_cancel_t on_cancel, void *arg);

/** A held request's connection drained: see sxe_http_set_drained(). */
typedef void (*sxe_http_drained_t)(sxe_http_t *held, void *arg);

/**
 * Whether the request's connection has high_water bytes or more of output queued, or, over HTTP/2,
 * its stream has 64 KiB or more waiting for its window: a response streamed over time (a proxied
 * body, server-sent events) should stop sending until its connection drains, so a slow client
 * holds the sender back instead of filling memory up to write_limit.
 */
bool sxe_http_backed_up(const sxe_http_t *http);

/**
 * Calls on_drained(held, arg) each time the held request's connection has sent all its queued
 * output, or, over HTTP/2, its stream that was backed up has sent what waited on it (NULL stops
 * it), until its response is finished or it is cancelled. @return 0, or
 * -EINVAL if held is not a held request (asserts in debug builds).
 */
int sxe_http_set_drained(sxe_http_t *held, sxe_http_drained_t on_drained, void *arg);

/** The program's pointer for this request (a held one's too): NULL until set. */
void *sxe_http_user(const sxe_http_t *http);
void sxe_http_set_user(sxe_http_t *http, void *user);

/** Copies the counters of requests held by the server (without workers: its loop's). */
void sxe_http_server_defer_stats(const sxe_http_server_t *server,
                                 struct sxe_http_defer_stats *stats);

/** The request. */
const struct sxe_http_request_head *sxe_http_request_head(const sxe_http_t *http);

/**
 * The status of the response (0 before it starts). In the log hook, a request that got no answer
 * says 499, as nginx's logs do: its connection closed first (the client left, or the handler closed
 * it).
 */
int sxe_http_status(const sxe_http_t *http);

/** The version of HTTP the request came over: 10 (HTTP/1.0), 11 (HTTP/1.1) or 20 (HTTP/2). */
int sxe_http_version(const sxe_http_t *http);

/** The bytes of the response's body queued so far (none for a HEAD): nginx's $body_bytes_sent. */
uint64_t sxe_http_body_sent(const sxe_http_t *http);

/**
 * When the request began, on its loop's clock (sxe_loop_now(), monotonic ns): the turn that read
 * its head whole and dispatched it, or refused it. sxe_clock_mono_ns() less it, in the log hook, is
 * the time the request took to be served, as nginx's $request_time (which starts at the first byte
 * instead).
 */
uint64_t sxe_http_began(const sxe_http_t *http);

/**
 * The request's path, the one its route was matched against: its target up to any '?', in normal
 * form (sxe_http_path_normalize(): "/a/./b//%7Ec/../d" is "/a/b/d"), so no spelling of a path
 * reaches a route it does not start with. Not NUL-terminated. The server answers 400 itself to a
 * path that climbs above "/" or holds a malformed escape. And the query after the '?' (NULL if
 * none), as the client sent it.
 */
const char *sxe_http_path(const sxe_http_t *http, size_t *len);
const char *sxe_http_query(const sxe_http_t *http, size_t *len);

/**
 * The request body, whole (chunked framing removed), or NULL with *len 0 (no body, or a streamed
 * route's, which comes in pieces instead).
 */
const char *sxe_http_body(const sxe_http_t *http, size_t *len);

/**
 * Reads the request's body (sxe_http_body()) as one JSON value within limits (NULL: the defaults
 * of sxe/json.h), into *root, the handler's to free with sxe_json_free(). When the body is not
 * JSON or breaks a limit, this answers the request itself: 400 (413 past limits->size, 503 out of
 * memory, 500 in a build without JSON reading) with a JSON body that says what and where,
 * {"error": "...", "line": L, "column": C, "position": BYTES}; the handler then just returns.
 *
 *     sxe_json_t *order;
 *     if (sxe_http_json(http, &order, NULL) < 0)
 *         return;                                  // answered
 *
 * @return 0, or the negative error of sxe_json_parse() (the request answered).
 */
int sxe_http_json(sxe_http_t *http, sxe_json_t **root, const struct sxe_json_limits *limits);

/**
 * A piece of a streamed request body: len bytes at data, chunked framing removed, valid during the
 * call only. done is true with the last piece (whose len may be 0); then the body has all come.
 */
typedef void (*sxe_http_body_t)(sxe_http_t *held, const char *data, size_t len, bool done,
                                void *arg);

/**
 * For a held request of a route made with SXE_HTTP_ROUTE_STREAM: calls on_body(held, ..., arg)
 * with the body's pieces as they arrive (those that came with the head from the loop's next turn;
 * over HTTP/2, those its stream keeps at once, within this call, as sxe_http_body_resume() does),
 * and sends 100 Continue first if the client asked for it. A request without a body gets one call,
 * done, before this returns. Each piece restarts the held request's response_timeout. The client
 * goes away, or sends a malformed body (answered 400, or 413 past options.stream_body_bytes,
 * unless a response has started): the holder's on_cancel is called, as for any held request.
 * @return 0; -EINVAL if held is not a held request of a streamed route, or its body is already
 *         being read; -ECANCELED as other sxe_http_*() calls.
 */
int sxe_http_body_stream(sxe_http_t *held, sxe_http_body_t on_body, void *arg);

/**
 * Stops on_body calls (after the one running, if any) and reading from the client, whom TCP then
 * holds back (over HTTP/2, its stream's window), until sxe_http_body_resume(). @return 0, or
 * -EINVAL as sxe_http_body_stream().
 */
int sxe_http_body_pause(sxe_http_t *held);
int sxe_http_body_resume(sxe_http_t *held);

/**
 * From the handler of a fiber route made with SXE_HTTP_ROUTE_STREAM: waits for the next bytes of
 * the body and copies up to size of them to buf; the client is read only as fast as this is
 * called. @return bytes copied; 0 at the body's end; -ECANCELED if the client went away or sent a
 * malformed body; -EPERM outside a fiber; -EINVAL if held is not a streamed route's request, or
 * another fiber reads its body.
 */
ssize_t sxe_http_body_read(sxe_http_t *held, void *buf, size_t size);

/**
 * For a request without a body, from its handler or later from its held handle (sxe_http_defer():
 * a proxy that waits for its upstream's 101): answers "101 Switching Protocols" with headers
 * (lines each ending in CRLF, or NULL), and hands the connection to handlers: the HTTP module
 * forgets it, and what the client sent after the request goes to the new on_read
 * (sxe_conn_set_handlers()), from the next turn. Every event of the connection goes to handlers
 * from then on. A held handle is gone when this returns (its on_cancel is not called). The new
 * protocol's module checks the request itself (the WebSocket module does, in sxe/websocket.h).
 * Requests pipelined behind it are the new protocol's bytes. @return 0; -ECANCELED for a held
 * request whose client left; -EPROTONOSUPPORT for a request that came over HTTP/2 (a stream cannot
 * switch protocols: answer it as usual, 426 say); -EINVAL if the request was answered, has a body,
 * is not HTTP/1.1, or headers do not end in CRLF (an assertion in debug builds); or the write's
 * error (the connection then closes).
 */
SXE_MUST_CHECK int sxe_http_upgrade(sxe_http_t *http, const char *headers,
                                    const struct sxe_conn_handlers *handlers);

/**
 * The connection the request came on. Its user pointer is the program's: the module keeps its
 * own state elsewhere, so sxe_conn_set_user(sxe_http_conn(http), p) holds p for the connection's
 * later requests (keep-alive), and each new connection starts with NULL.
 */
sxe_conn_t *sxe_http_conn(const sxe_http_t *http);

/**
 * Starts a response: the status line, Date, Server, the framing (Content-Length when
 * content_length is 0 or more, else chunked, or for HTTP/1.0 a close), Connection when needed,
 * then headers: extra header lines, each ending in CRLF, or NULL.
 * @return 0, -EALREADY if a response was started, or -errno from the connection (-ENOBUFS: more
 *         than the connection may queue), after which the connection closes (see above).
 */
SXE_MUST_CHECK int sxe_http_start(sxe_http_t *http, int status, const char *headers,
                                  int64_t content_length);

/**
 * Sends body bytes (chunked if no length was given; nothing for HEAD). Bytes past the
 * content_length given to sxe_http_start() are refused whole, since the client would read them as
 * the next response: -EMSGSIZE, logged, and an assertion in debug builds. The same holds for the
 * calls below that send body bytes.
 * @return 0, -EMSGSIZE, or -errno.
 */
SXE_MUST_CHECK int sxe_http_send(sxe_http_t *http, const void *data, size_t len);

/**
 * Sends len bytes of the file fd from offset with sendfile, after what was sent before. With
 * close_when_sent, sxe closes fd once the bytes are sent (or the connection closes), and on
 * failure; without, the caller keeps fd and must keep it open until then (a file cache does).
 * @return 0 or -errno.
 */
SXE_MUST_CHECK int sxe_http_sendfile(sxe_http_t *http, int fd, off_t offset, size_t len,
                                     bool close_when_sent);

/**
 * sxe_http_send() without a copy: the bytes stay the caller's, unchanged, until release(arg), which
 * is called exactly once, when they are sent, dropped (the connection closed or the response
 * failed), or before this returns if they are not queued (HEAD, len 0, an error). For memory that
 * outlives the call, such as a cache's; see sxe_conn_write_ref(). @return 0 or -errno.
 */
SXE_MUST_CHECK int sxe_http_send_ref(sxe_http_t *http, const void *data, size_t len,
                                     sxe_conn_release_t release, void *arg);

/**
 * sxe_http_sendfile() that says when it is done with fd: release(arg) is called exactly once, as
 * for sxe_http_send_ref(). A file cache keeps an entry (and its fd) alive until then.
 * @return 0 or -errno.
 */
SXE_MUST_CHECK int sxe_http_sendfile_ref(sxe_http_t *http, int fd, off_t offset, size_t len,
                                         sxe_conn_release_t release, void *arg);

/**
 * Ends the response. One that ends short of its content_length is logged and closes the connection
 * once sent: the close is the only way the client learns the rest is not coming.
 * @return 0 or -errno.
 */
int sxe_http_finish(sxe_http_t *http);

/**
 * Cuts off a held request's response that cannot be finished (what it relays failed half-way),
 * so that the client does not take what it got for the whole: over HTTP/1.1 the connection closes
 * (its other requests are cancelled with it); over HTTP/2 the request's stream is reset
 * (INTERNAL_ERROR) and the connection's other streams go on. Either way the request is cancelled:
 * its on_cancel is called (now, or once the reset is sent: at the end of the read it was called
 * in), and its calls fail from then on.
 * @return 0; -EINVAL if http is not a held request (asserts in debug builds); -ECANCELED as
 *         other sxe_http_*() calls.
 */
int sxe_http_abort(sxe_http_t *held);

/** Starts, sends and finishes a whole response with a Content-Type and a body. */
int sxe_http_respond(sxe_http_t *http, int status, const char *content_type, const void *body,
                     size_t len);

/**
 * sxe_http_respond() with extra header lines (each ending in CRLF, or NULL), as sxe_http_start()
 * takes them: one call for a response with, say, a Location or a Cache-Control. content_type is at
 * most 255 bytes (else -EINVAL; an assert in debug builds).
 */
int sxe_http_respond_with(sxe_http_t *http, int status, const char *content_type,
                          const char *headers, const void *body, size_t len);

/** The most bytes sxe_http_respondf() formats. */
#define SXE_HTTP_FORMAT_MAX 4096

/**
 * sxe_http_respond_with() with a body formatted as printf does, on the stack: at most
 * SXE_HTTP_FORMAT_MAX bytes, else -EMSGSIZE and nothing is sent (the handler may answer otherwise).
 */
int sxe_http_respondf(sxe_http_t *http, int status, const char *content_type, const char *headers,
                      const char *format, ...) __attribute__((format(printf, 5, 6)));

/**
 * Header lines built in a caller's buffer, checked as they are added, for sxe_http_start() and
 * sxe_http_respond_with() (pass text):
 *
 *     char buffer[256];
 *     struct sxe_http_headers headers = SXE_HTTP_HEADERS_INIT(buffer);
 *     sxe_http_headers_add(&headers, "Cache-Control", "no-store");
 *     sxe_http_respond_with(http, 200, "text/plain", headers.text, body, len);
 */
struct sxe_http_headers {
    char *text;  /**< The lines so far, each ending in CRLF, NUL-terminated. */
    size_t size; /**< Of the buffer text points into. */
    size_t len;  /**< Of text. */
    int error;   /**< The first add's error: later adds return it and add nothing. */
};
#define SXE_HTTP_HEADERS_INIT(buffer)                                                              \
    {                                                                                              \
        .text = ((buffer)[0] = '\0', (buffer)), .size = sizeof(buffer)                             \
    }

/**
 * Adds "name: value" CRLF. The lines added before a failure stay. @return 0; -ENOBUFS when the
 * buffer is full; -EINVAL for a name that is not a token or a value with CR or LF (header
 * injection; an assert in debug builds); or the error of an earlier add.
 */
int sxe_http_headers_add(struct sxe_http_headers *headers, const char *name, const char *value);

/**
 * Finds the query parameter name (a=1&b=2; compared after percent-decoding) and writes its value,
 * percent-decoded and with '+' as a space, NUL-terminated, into buf; buf is written only on
 * success. A parameter without '=' has the empty value.
 * @return the value's length; -ENOENT if the query has no such parameter; -ENOBUFS if its value
 *         does not fit in size bytes with its NUL; -EINVAL for a malformed escape in it.
 */
ssize_t sxe_http_query_param(const sxe_http_t *http, const char *name, char *buf, size_t size);

/** A query parameter as it is in the target: still percent-encoded (sxe_http_percent_decode()). */
struct sxe_http_param {
    const char *name;
    size_t name_len;
    const char *value; /**< Empty, not NULL, for a parameter without '='. */
    size_t value_len;
};

/**
 * Iterates over the query's parameters in order: start *cursor at 0; each call fills param and
 * returns true, then false after the last. Empty ones (a&&b) are skipped.
 */
bool sxe_http_query_next(const sxe_http_t *http, size_t *cursor, struct sxe_http_param *param);

/**
 * Percent-decodes len bytes into out (size bytes, NUL-terminated), '+' as a space when
 * plus_is_space (query strings). in and out may be the same buffer. @return the decoded length,
 * -ENOBUFS, or -EINVAL for a malformed escape.
 */
ssize_t sxe_http_percent_decode(const char *in, size_t len, char *out, size_t size,
                                bool plus_is_space);

/**
 * One byte of a percent-encoded string, for a caller that decodes as it goes (comparing, counting):
 * the byte in[*at] stands for (a %XX escape, a '+' as a space when plus_is_space, or itself), with
 * *at moved past it. *at must be below len. @return the byte, or -1 for a malformed escape.
 */
int sxe_http_percent_decode_byte(const char *in, size_t len, size_t *at, bool plus_is_space);

/**
 * Puts a request path in normal form (RFC 3986 §6.2.2), as routes see it: escapes of unreserved
 * bytes decoded ("%2e" is "."), other escapes kept with upper-case digits ("%2f" is "%2F", still
 * not a separator), dot segments resolved, and empty segments ("//") collapsed. The result is still
 * an encoded path, never longer than in. in and out may be the same buffer.
 * @return its length (out NUL-terminated); -EINVAL for a path that does not start with '/' or holds
 *         a malformed escape; -EACCES for one whose ".." climbs above "/"; -ENOBUFS unless size is
 *         above len.
 */
ssize_t sxe_http_path_normalize(const char *in, size_t len, char *out, size_t size);

/** Whether a path (len bytes, no query) is in the form sxe_http_path_normalize() gives already. */
bool sxe_http_path_is_normal(const char *path, size_t len);

/**
 * Percent-encodes len bytes into out (size bytes, NUL-terminated) as a path: every byte but '/'
 * and the unreserved ones (letters, digits, "-._~"). For a Location or a link built from a decoded
 * path. @return the encoded length, or -ENOBUFS.
 */
ssize_t sxe_http_path_encode(const char *in, size_t len, char *out, size_t size);

/**
 * For a prefix route: the path after the route's prefix (for the route "/users/" and the path
 * "/users/42", "42"); for an exact route, the empty string at the path's end.
 */
const char *sxe_http_path_rest(const sxe_http_t *http, size_t *len);

/** The reason phrase of a status ("Not Found"), or "Unknown". */
const char *sxe_http_reason(int status);

#ifdef __cplusplus
}
#endif

#endif
