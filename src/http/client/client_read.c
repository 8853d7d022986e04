/*
 * The HTTP client's reading of a response (sxe/http_client.h): the strict response parser on what
 * a connection receives for the call first on it, and the whole response handed to its caller.
 * The connection's on_read (client.c) reads one response after another, in the order of its calls.
 *
 * A gathered (fetch) response is copied into its connection's store as it arrives: the head, then
 * the body without its framing. When it is whole the connection moves on (to its next call, or to
 * the pool) at once, and the done callback is given the head parsed again from the copy, which a
 * fiber's reply may keep. Streamed responses pass through without a copy: the head is parsed in
 * the connection's buffer, the body handed on piece by piece. A cancelled call's response is read
 * and dropped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define STORE_KEPT (64 * 1024) /* a larger store is freed after use, not kept for the next */

void sxe__http_call_deliver(struct sxe__upstream *up, struct sxe_http_call *call)
{
    sxe_http_client_t *client = call->client;

    if (call->discard) {
        sxe__http_call_free(call);
        return;
    }
    client->stats.requests++;
    sxe_timer_stop(client->loop, &call->timer);
    if (call->kind == SXE__CALL_STREAM) {
        if (call->handlers->on_done != NULL) {
            call->handlers->on_done(call, 0, call->arg);
        }
        sxe__http_call_free(call);
        return;
    }
    struct sxe_http_parser parser;
    struct sxe_http_response_head response;
    uint32_t head_len = up->head_len;
    size_t body_len = up->store_len - head_len;

    /*
     * The store stays the connection's: a callback that asks again may reuse the connection, but
     * nothing is read into its store before the callback returns. A fiber's reply takes it.
     */
    sxe_http_parser_init(&parser);
    (void)sxe_http_parse_response_head(&parser, up->store, head_len, &client->stream_limits,
                                       call->head_request, &response);
    call->store_of = up;
    call->done(call, 0, &response, up->store + head_len, body_len, call->arg);
    if (up->store_size > STORE_KEPT) { /* a large one is not kept for the next */
        free(up->store);
        up->store = NULL;
        up->store_size = 0;
    }
    sxe__http_call_free(call);
}

/* Appends to the connection's store for a gathered response. @return 0, or -EMSGSIZE. */
static int store(struct sxe__upstream *up, const char *data, size_t len)
{
    size_t most = up->head_len + up->client->options.limits.body_bytes;

    if (up->store_len + len > most) {
        return -EMSGSIZE;
    }
    if (up->store_len + len > up->store_size) {
        size_t size = up->store_size ? up->store_size : 4096;
        while (size < up->store_len + len) {
            size *= 2;
        }
        size = size < most ? size : most;
        char *grown = realloc(up->store, size);
        if (grown == NULL) {
            return -ENOMEM;
        }
        up->store = grown;
        up->store_size = size;
    }
    memcpy(up->store + up->store_len, data, len);
    up->store_len += len;
    return 0;
}

/* A response head was read: say so, or start gathering. @return false if the call ended. */
static bool head_read(struct sxe__upstream *up, struct sxe_http_call *call, const char *head,
                      size_t head_len, const struct sxe_http_response_head *response)
{
    int rc;

    up->in_body = true;
    up->until_close = response->until_close;
    up->keep_alive = response->keep_alive;
    if (call->discard) {
        return true;
    }
    if (call->kind == SXE__CALL_FETCH) {
        up->store_len = 0;
        up->head_len = (uint32_t)head_len;
        if ((rc = store(up, head, head_len)) < 0) {
            sxe__http_up_fail(up, call, rc);
            return false;
        }
        return true;
    }
    if (call->handlers->on_head != NULL) {
        call->handlers->on_head(call, response, call->arg);
    }
    return up->first == call;
}

/* Body bytes: gathered, or handed on. @return false if the call ended. */
static bool body_read(struct sxe__upstream *up, struct sxe_http_call *call, const char *data,
                      size_t len)
{
    int rc;

    if (len == 0 || call->discard) {
        return true;
    }
    if (call->kind == SXE__CALL_FETCH) {
        if ((rc = store(up, data, len)) < 0) {
            sxe__http_up_fail(up, call, rc);
            return false;
        }
        return true;
    }
    if (call->handlers->on_body != NULL) {
        call->handlers->on_body(call, data, len, call->arg);
    }
    return up->first == call;
}

size_t sxe__http_read_response(struct sxe__upstream *up, struct sxe_http_call *call,
                               const char *data, size_t len, struct sxe_http_response_head *head,
                               bool *whole, bool *switched)
{
    sxe_http_client_t *client = up->client;
    size_t at = 0;
    long rc;

    while (at < len && !call->paused) {
        if (!up->in_body) {
            rc = sxe_http_parse_response_head(&up->parser, data + at, len - at,
                                              &client->stream_limits, call->head_request, head);
            if (rc == 0) {
                return at;
            }
            if (rc > 0 && head->status == 101 && call->request.upgrade != NULL && !call->discard) {
                *switched = true;
                return at + (size_t)rc; /* what follows is the new protocol's */
            }
            if (rc < 0 || head->status == 101) { /* a request of ours that did not ask */
                sxe__http_up_fail(up, call, rc < 0 ? (int)rc : -EPROTO);
                return len;
            }
            at += (size_t)rc;
            if (head->status < 200) {
                continue;
            }
            sxe__http_call_rearm(call); /* the head has come: from now on, silence is the body's */
            if (!head_read(up, call, data + at - (size_t)rc, (size_t)rc, head)) {
                return len;
            }
            if (!head->has_body) {
                *whole = true;
                return at;
            }
        } else if (up->until_close) {
            size_t from = at;
            at = len;
            if (!body_read(up, call, data + from, len - from)) {
                return len;
            }
        } else {
            struct sxe_http_body body;
            if ((rc = sxe_http_parse_body(&up->parser, data + at, len - at, &client->stream_limits,
                                          &body)) < 0) {
                sxe__http_up_fail(up, call, -EPROTO);
                return len;
            }
            at += (size_t)rc;
            if (!body_read(up, call, body.data, body.len)) {
                return len;
            }
            if (body.done) {
                *whole = true;
                return at;
            }
        }
    }
    return at;
}

char *sxe__http_call_take_store(sxe_http_call_t *call)
{
    struct sxe__upstream *up = call->store_of;
    char *store = up->store;

    up->store = NULL;
    up->store_len = up->store_size = 0;
    return store;
}
