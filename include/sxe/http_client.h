/**
 * @file sxe/http_client.h
 * @brief HTTP/1.1 client: requests to one upstream over a pool of keep-alive connections.
 *
 * A client is one upstream ("127.0.0.1:9001") on one loop, with a pool of at most
 * options.connections connections to it, opened as needed and kept alive between requests. A
 * request goes out on an idle pooled connection, or on a new one, or waits in a queue of fixed
 * size for the next connection free. Its answer comes one of three ways:
 *
 * - whole, to a callback: sxe_http_client_fetch(); the body is gathered, up to
 *   options.limits.body_bytes;
 * - in pieces, as they arrive, for a body of any size: sxe_http_client_stream(), with
 *   sxe_http_call_pause() and sxe_http_call_resume() for backpressure (a reverse proxy);
 * - from a fiber (sxe/fiber.h), as sequential code that waits while the loop runs on:
 *
 *       struct sxe_http_client_request request = {.target = "/users/7"};
 *       struct sxe_http_client_reply reply;
 *       if (sxe_http_client_fetch_wait(client, &request, &reply) == 0) {
 *           ... reply.response.status, reply.body, reply.body_len ...
 *           sxe_http_client_reply_free(&reply);
 *       }
 *
 * A request body is given whole (request.body), or written in pieces as the caller gets them
 * (request.body_streamed, sxe_http_call_write(), with backpressure: a reverse proxy forwarding an
 * upload of any size).
 *
 * Responses are read with the strict response parser of sxe/http_parser.h; bodies are framed by
 * Content-Length, chunked (the framing removed) or the close. A response that breaks the rules
 * fails its call with -EPROTO, and its connection is closed, never reused.
 *
 * One request per connection at a time, unless options.pipeline asks for more. Then the requests
 * made in one turn of the loop share a connection, up to pipeline of them, and leave in one send
 * when the turn's events are handled; the upstream answers them in order, and the answers come
 * back in few reads. Fewer packets each way: less CPU at both ends. Only GETs without a body are
 * pipelined, only on a kept-alive connection taken from the pool, and only while every call on the
 * connection is one. The calls behind the one being answered were not started: if the
 * connection ends under them (or its answer says Connection: close), they are sent again, once.
 * A slow answer delays the ones behind it (head-of-line blocking): pipeline to an upstream that
 * answers quickly and in order, as an HTTP/1.1 server must, and that frames its answers right: a
 * body sent after an answer that has none (a 204's, a 304's) would be read as the next call's
 * answer, which may be another client's. HEAD is never pipelined: a body after its answer is the
 * commonest such upstream bug.
 *
 * A request sent on a pooled connection that the server had closed meanwhile (it closes, or
 * resets, before a byte of the answer) is sent again once on a new connection if its method is
 * idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE).
 *
 * Errors a call ends with: -ECONNREFUSED and other connect errors; -ETIMEDOUT when the upstream
 * is silent for options.timeout (waiting in the queue included; until the final head has come
 * whole, interim 1xx responses and a head's first bytes do not count as speaking, so the head must
 * come within timeout of the request); -ECONNRESET when the connection
 * ends before the response does; -EPROTO for a malformed response; -EMSGSIZE for a head past
 * options.limits.header_bytes, or a gathered body past body_bytes; -ECANCELED when the client is
 * destroyed first.
 *
 * Memory is fixed at sxe_http_client_create(): the connection and call tables. Each call queued or
 * in flight runs one of the loop's timers (sxe_loop_options.timers must allow connections x
 * pipeline + queue more, one for the client itself when it pipelines, and two for a resolver of
 * its own, made for an upstream given by name without options.resolver) and each connection
 * takes one of the loop's connections. A client belongs to its loop's
 * thread; with workers, make one per worker.
 */
#ifndef SXE_HTTP_CLIENT_H
#define SXE_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sxe/error.h"
#include "sxe/http_parser.h"
#include "sxe/loop.h"
#include "sxe/resolve.h"
#include "sxe/tls.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sxe_http_client sxe_http_client_t;

/** One request and its response, from submission until its last callback returns. */
typedef struct sxe_http_call sxe_http_call_t;

struct sxe_http_client_options {
    uint32_t connections; /**< Most connections open to the upstream at once (64). */
    uint32_t queue;       /**< Requests that may wait for a connection (256): else -ENOBUFS. */
    uint64_t timeout; /**< ns the upstream may be silent before the call fails (30 s): see above. */
    /** Zero fields take the defaults; body_bytes bounds gathered bodies only (1 MiB). */
    struct sxe_http_limits limits;
    const char *host; /**< The Host header (the address given to create when NULL). */
    bool no_retry;    /**< Never send a request twice (see above); turns pipelining off. */
    /** Requests one connection may carry at once (1: no pipelining; at most 64). See above. */
    uint32_t pipeline;
    /**
     * A client TLS context (sxe_tls_client_create()): HTTPS to the upstream. Its certificate is
     * checked for host's name (without a port; the address's IP when host is NULL), which SNI
     * sends too. The context must outlive the client.
     */
    sxe_tls_t *tls;
    /**
     * For an upstream given by name: the resolver that finds its addresses (sxe/resolve.h),
     * shared by the loop's clients; NULL makes one for this client, with the defaults. It must
     * outlive the client.
     */
    sxe_resolver_t *resolver;
};

/**
 * A request. Its strings and body are the caller's and must stay valid and unchanged until the
 * call ends (its done or on_done callback returns, or sxe_http_client_fetch_wait() returns):
 * literals, a held server request's parts and a fiber's locals do. The client copies the struct
 * itself.
 */
struct sxe_http_client_request {
    const char *method;  /**< "GET" when NULL. */
    const char *target;  /**< "/path?query". */
    const char *host;    /**< The Host header's value (options.host when NULL). */
    const char *headers; /**< Extra header lines, each ending in CRLF, or NULL. Not Host. */
    const void *body;    /**< Sent with a Content-Length (also for a POST or PUT of 0 bytes). */
    /** body's length; with body_streamed, the length to come, or SXE_HTTP_BODY_UNKNOWN. */
    size_t body_len;
    /**
     * The body is written in pieces, as the caller gets them, with sxe_http_call_write() and
     * sxe_http_call_finish() (body NULL; only with sxe_http_client_stream() and an on_writable
     * handler). It is sent with a Content-Length of body_len, or chunked when body_len is
     * SXE_HTTP_BODY_UNKNOWN. Such a request is never pipelined and never sent twice, once the
     * caller was told it may write.
     */
    bool body_streamed;
    /**
     * Asks the upstream to switch protocols: "Connection: upgrade" and "Upgrade: " this value
     * ("websocket") are sent. Only with sxe_http_client_stream() and an on_upgrade handler, and
     * without a body; such a request is never pipelined and never sent twice. A 101 answer hands
     * the connection to on_upgrade; any other is read as usual.
     */
    const char *upgrade;
};

/** body_len of a streamed body whose length is not known: it is sent chunked. */
#define SXE_HTTP_BODY_UNKNOWN SIZE_MAX

/**
 * A whole response arrived, or the call failed (err < 0, response NULL). response and body point
 * into the client's memory, valid until this returns.
 */
typedef void (*sxe_http_client_done_t)(sxe_http_call_t *call, int err,
                                       const struct sxe_http_response_head *response,
                                       const char *body, size_t body_len, void *arg);

/** A response in pieces (sxe_http_client_stream()). Every callback gets the call's arg. */
struct sxe_http_client_handlers {
    /** The head arrived (interim 1xx responses are skipped). Pointers valid until it returns. */
    void (*on_head)(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                    void *arg);
    /** Body bytes (chunked framing removed), valid until it returns. */
    void (*on_body)(sxe_http_call_t *call, const char *data, size_t len, void *arg);
    /** The call ended: 0 after the whole body, else the error (after on_head, or instead). */
    void (*on_done)(sxe_http_call_t *call, int err, void *arg);
    /**
     * For a request with body_streamed: the call has a connection and may take body bytes
     * (sxe_http_call_write()); called first from the loop once the connection is there, then
     * after each write that left the call backed up (sxe_http_call_backed_up()), once the
     * upstream has taken what was queued.
     */
    void (*on_writable)(sxe_http_call_t *call, void *arg);
    /**
     * For a request with upgrade: the upstream answered 101 (response valid until this returns).
     * conn has left the client's pool and is the caller's: give it handlers of its own here
     * (sxe_conn_set_handlers(), sxe_conn_set_user()), or it is closed when this returns. Bytes
     * the upstream sent after the 101's head go to the new on_read from the next turn. The call
     * ends here: no other callback of it follows.
     */
    void (*on_upgrade)(sxe_http_call_t *call, const struct sxe_http_response_head *response,
                       sxe_conn_t *conn, void *arg);
};

/**
 * Makes a client for address on loop: "IPv4:port", "[IPv6]:port", "name:port", or a URL without
 * a path, "http://HOST[:PORT]" or "https://HOST[:PORT]" (ports 80 and 443 by default; the URL's
 * authority is the Host, unless options.host; https:// without options.tls makes a TLS context
 * of the client's own, trusting the system's authorities). A name is
 * resolved when a connection is to be opened and its answer is not known (sxe/resolve.h, with
 * options.resolver): the calls wait meanwhile, within their timeout, and fail with the resolver's
 * error (-ENOENT for a name that does not exist, say) when it has none. New connections follow
 * the name when it moves (its answer's TTL); a name's addresses are tried in order, the next when
 * one refuses the connection.
 * @param options NULL for the defaults.
 * @return 0, -EINVAL for an address that does not parse (or a URL with a path), -ENOMEM, for
 *         a name what sxe_resolver_create() says, for https:// what sxe_tls_client_create()
 *         says (-ENOTSUP when built without c-ares, or OpenSSL).
 */
SXE_MUST_CHECK int sxe_http_client_create(sxe_http_client_t **client, sxe_loop_t *loop,
                                          const char *address,
                                          const struct sxe_http_client_options *options);

/** Fails every call still queued or in flight with -ECANCELED, closes the connections, frees. */
void sxe_http_client_destroy(sxe_http_client_t *client);

/**
 * Sends a request; done(call, err, response, body, body_len, arg) is called once, later, from the
 * loop (never from inside this call).
 * @param call NULL, or set to the call's handle (for sxe_http_call_cancel()).
 * @return 0; -ENOBUFS when the queue is full or no timer is free; a connect's error, or a named
 *         upstream's known failure (-ENOENT, say), when the call would open a connection and
 *         that fails at once; -EINVAL for a request without a
 *         target, or with a CR or LF in its method, target, host or upgrade, or an upgrade
 *         asked of sxe_http_client_fetch() or without on_upgrade.
 */
SXE_MUST_CHECK int sxe_http_client_fetch(sxe_http_client_t *client,
                                         const struct sxe_http_client_request *request,
                                         sxe_http_client_done_t done, void *arg,
                                         sxe_http_call_t **call);

/**
 * sxe_http_client_fetch() with the response in pieces, to handlers (which must outlive the call).
 * Bodies of any size pass through; none is gathered.
 */
SXE_MUST_CHECK int sxe_http_client_stream(sxe_http_client_t *client,
                                          const struct sxe_http_client_request *request,
                                          const struct sxe_http_client_handlers *handlers,
                                          void *arg, sxe_http_call_t **call);

/**
 * Stops reading the call's response (from on_head or on_body, or any time after): the upstream is
 * held back by TCP until sxe_http_call_resume(). The call's timeout does not run while paused.
 */
void sxe_http_call_pause(sxe_http_call_t *call);
void sxe_http_call_resume(sxe_http_call_t *call);

/**
 * Abandons a call: no callback of it runs after this (it may be called from them). A call whose
 * response is being read closes its connection, since the rest would have to be read first (the
 * pipelined calls behind it are sent again); one waiting behind another on its connection has its
 * response read and dropped when it comes.
 */
void sxe_http_call_cancel(sxe_http_call_t *call);

/**
 * Writes len bytes of a streamed request body (body_streamed), from on_writable or any later
 * callback until the body ends; the request's head leaves with the first bytes, in one send. The
 * bytes are copied: data is the caller's again when this returns. The call's timeout does not run
 * while the upstream waits for the caller's bytes, only while the caller waits for the upstream.
 * A response may come before the body is all written (an upstream that refuses it early, say): the
 * call then ends with on_done as usual and the connection is closed, not reused; write no more.
 * After each write that returned 0, ask sxe_http_call_backed_up() whether to go on now or to wait
 * for on_writable.
 * @return 0: accepted; -EINVAL (asserts in debug builds) before the first on_writable, after the
 *         end, past the declared length, or for a call without a streamed body; else the
 *         connection's error (-ENOBUFS when the caller wrote past the loop's write_limit without
 *         waiting), after which the call is cancelled as by sxe_http_call_cancel(): no callback of
 *         it follows.
 */
int sxe_http_call_write(sxe_http_call_t *call, const void *data, size_t len);

/**
 * Whether the call's upstream is behind: the last sxe_http_call_write() left its connection's
 * output backed up (high_water bytes or more queued, as sxe_conn_backed_up() says). Check it after
 * each write that returned 0: when true, write no more until on_writable, before which it turns
 * false again. Cheap: a flag. Not after a write that failed: that cancelled the call.
 */
bool sxe_http_call_backed_up(const sxe_http_call_t *call);

/**
 * Ends a streamed request body (the chunked body's last chunk goes out); the call waits for its
 * response from here. @return 0; -EINVAL (asserts in debug builds) as sxe_http_call_write(), or
 *         for a body with a length of which bytes are missing; else the connection's error, after
 *         which the call is cancelled.
 */
int sxe_http_call_finish(sxe_http_call_t *call);

/** A response gathered for a fiber: the program's until sxe_http_client_reply_free(). */
struct sxe_http_client_reply {
    struct sxe_http_response_head response; /**< Its pointers point into memory the reply owns. */
    const char *body;
    size_t body_len;
    char *memory; /* the head and body bytes */
};

/**
 * From a fiber: sends the request and waits, while the loop runs on, for the whole response.
 * @return 0 with reply filled in (free it with sxe_http_client_reply_free()); else a call's
 *         error, as sxe_http_client_fetch() or its done would give it, with nothing to free;
 *         -EPERM outside a fiber.
 */
int sxe_http_client_fetch_wait(sxe_http_client_t *client,
                               const struct sxe_http_client_request *request,
                               struct sxe_http_client_reply *reply);

void sxe_http_client_reply_free(struct sxe_http_client_reply *reply);

/** A client's counters. */
struct sxe_http_client_stats {
    uint64_t requests;  /**< Calls that ended with a whole response. */
    uint64_t failed;    /**< Calls that ended with an error. */
    uint64_t connects;  /**< Connections opened. */
    uint64_t reused;    /**< Requests sent on a connection that had carried one before. */
    uint64_t retried;   /**< Requests sent again after a pooled connection died under them. */
    uint64_t refused;   /**< Calls refused with -ENOBUFS: the queue was full. */
    uint64_t pipelined; /**< Requests sent behind another on a connection (options.pipeline). */
    uint64_t upgraded;  /**< Connections handed over after a 101 (request.upgrade). */
    uint32_t open;      /**< Connections open now. */
    uint32_t busy;      /**< Of them, carrying a request now. */
    uint32_t queued;    /**< Calls waiting for a connection now. */
};

void sxe_http_client_stats(const sxe_http_client_t *client, struct sxe_http_client_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
