/*
 * A slot for every request: the bottom of the HTTP server, below responses and deferral.
 *
 * Every request the server hands to a handler lives in a slot of a table sized at start-up
 * (options.deferred + 1), from its dispatch to its finish: its parse (the parser writes into the
 * next free slot), its handle (a struct sxe_http), and, once held (defer.c), the holder's cancel
 * callback and a deadline timer. A request its handler finishes gives its slot back when the
 * handler returns, and the next request takes the same slot, its lines still in the cache.
 * "Deferred" means only that the handler returned before the request was finished: its slot
 * stays until its answer is (sxe__http_defer_done). Calls go down from here only: to the loop and
 * the public API, never up to the server's other files.
 */
#include "sxe/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/clock.h"
#include "sxe/fiber.h"
#include "sxe/timer.h"
#include "server.h"

#define DEFAULT_DEFERRED         256
#define DEFAULT_RESPONSE_TIMEOUT (30 * SXE_NS_PER_SEC)

int sxe__http_slots_init(sxe_http_server_t *server)
{
    server->config.held_max = server->config.held_max ? server->config.held_max : DEFAULT_DEFERRED;
    server->slot_capacity =
        server->config.held_max + 1; /* and one for the request whose handler runs */
    server->config.response_timeout = server->config.response_timeout
                                          ? server->config.response_timeout
                                          : DEFAULT_RESPONSE_TIMEOUT;
    if ((server->slots = calloc(server->slot_capacity, sizeof(*server->slots))) == NULL) {
        return -ENOMEM;
    }
    server->slot_free = UINT32_MAX; /* slots are taken from the untouched ones first */
    server->slot_untouched = 0;
    return 0;
}

struct slot *sxe__http_slot_next(sxe_http_server_t *server)
{
    if (server->slot_free == UINT32_MAX) {
        /* A slot's pages are touched only once it is first used: a large capacity costs memory
         * only as far as it is used. At most options.deferred are held: one is always free. */
        struct slot *fresh = &server->slots[server->slot_untouched];
        fresh->next_free = UINT32_MAX;
        server->slot_free = server->slot_untouched++;
    }
    return &server->slots[server->slot_free];
}

void sxe__http_slot_take(sxe_http_server_t *server, struct slot *slot)
{
    SXE_ASSERT(slot == &server->slots[server->slot_free] && slot->state == SLOT_FREE);
    server->slot_free = slot->next_free;
    slot->state = SLOT_RUNNING;
    slot->http.serial = ++server->serial;
    server->running = slot;
}

void sxe__http_slot_release(sxe_http_server_t *server, struct slot *slot)
{
    if (slot->state != SLOT_RUNNING) {
        free(slot->path);
        slot->path = NULL;
        sxe_timer_stop(server->loop, &slot->deadline);
        server->defer_stats.held--;
    }
    if (server->running == slot) {
        server->running = NULL;
    }
    slot->state = SLOT_FREE;
    slot->next_free = server->slot_free;
    server->slot_free = (uint32_t)(slot - server->slots);
}

int sxe__http_held_check(sxe_http_t *http)
{
    struct slot *held = sxe__http_slot(http);

    if (held->state == SLOT_HELD) {
        return 0;
    }
    if (held->state == SLOT_ORPHANED) { /* the holder hears of it now: the slot is free again */
        sxe__http_slot_release(http->server, held);
    }
    return -ECANCELED;
}

static uint32_t slot_number(const sxe_http_server_t *server, const struct slot *slot)
{
    return (uint32_t)(slot - server->slots) + 1;
}

void sxe__http_enlist(sxe_http_server_t *server, struct http_conn *state, struct slot *slot)
{
    uint32_t number = slot_number(server, slot);

    slot->conn_prev = state->last;
    slot->conn_next = 0;
    if (state->last != 0) {
        server->slots[state->last - 1].conn_next = number;
    } else {
        state->first = number;
    }
    state->last = number;
}

void sxe__http_delist(sxe_http_server_t *server, struct http_conn *state, struct slot *slot)
{
    if (slot->conn_prev != 0) {
        server->slots[slot->conn_prev - 1].conn_next = slot->conn_next;
    } else {
        state->first = slot->conn_next;
    }
    if (slot->conn_next != 0) {
        server->slots[slot->conn_next - 1].conn_prev = slot->conn_prev;
    } else {
        state->last = slot->conn_prev;
    }
    slot->conn_prev = slot->conn_next = 0;
}

void sxe__http_defer_done(sxe_http_t *http)
{
    sxe_http_server_t *server = http->server;
    struct slot *held = sxe__http_slot(http);
    sxe_conn_t *conn = http->conn;

    if (server->running == held) {
        return; /* answered inside its handler: the connection was never kept, dispatch frees it */
    }
    /* Off its connection's list even when the connection is closing: its on_close, when this
     * callback returns, cancels what is still live, and this request is over. */
    struct http_conn *state = sxe__http_state(server, conn);
    sxe__http_delist(server, state, held);
    sxe__http_slot_release(server, held);
    if (sxe_conn_closed(conn) || state->first != 0 || state->framed) {
        return; /* closing; the connection waits for the others still live on it; or HTTP/2 */
    }
    sxe_conn_unkeep(conn); /* the next read skips the answered request, and parses on */
    if (state->waiting) {
        state->waiting = false;
        (void)sxe_conn_resume(conn);
    }
}

void sxe__http_defer_started(sxe_http_t *http)
{
    /* Answered: a stream (server-sent events, say) may last; the client's reading paces it. */
    sxe_timer_stop(http->server->loop, &sxe__http_slot(http)->deadline);
}

int sxe_http_set_drained(sxe_http_t *held, sxe_http_drained_t on_drained, void *arg)
{
    if (!SXE_CHECK(held != NULL && held->held)) {
        return -EINVAL;
    }
    sxe__http_slot(held)->on_drained = on_drained;
    sxe__http_slot(held)->drained_arg = arg;
    return 0;
}

void sxe__http_defer_drained(sxe_http_server_t *server, sxe_conn_t *conn)
{
    struct http_conn *state = sxe__http_state(server, conn);
    uint32_t next = state->first;

    while (next != 0 && !sxe_conn_closed(conn)) {
        struct slot *held = &server->slots[next - 1];
        next = held->conn_next; /* taken first: its callback may finish it */
        if (held->state == SLOT_HELD && held->on_drained != NULL) {
            held->on_drained(&held->http, held->drained_arg);
        }
    }
}

void *sxe_http_user(const sxe_http_t *http)
{
    return http->user;
}

void sxe_http_set_user(sxe_http_t *http, void *user)
{
    http->user = user;
}

void sxe_http_server_defer_stats(const sxe_http_server_t *server,
                                 struct sxe_http_defer_stats *stats)
{
    *stats = server->defer_stats;
}

/*
 * Decodes a complete chunked body into out (the scratch area, or the body's own place: the decoded
 * bytes never overtake the framing they come from): the request's head is head bytes at data, its
 * chunked body body_len bytes after. The head is parsed again to set a parser up for the body.
 */
size_t sxe__http_decode_chunked(sxe_http_server_t *server, const char *data, int head,
                                size_t body_len, char *out)
{
    struct sxe_http_parser parser;
    struct sxe_http_request_head request;
    struct sxe_http_body piece;
    size_t at = (size_t)head, decoded = 0;

    sxe_http_parser_init(&parser);
    (void)sxe_http_parse_request_head(&parser, data, at, &server->config.limits, &request);
    do {
        long used = sxe_http_parse_body(&parser, data + at, (size_t)head + body_len - at,
                                        &server->config.limits, &piece);
        memmove(out + decoded, piece.data, piece.len);
        decoded += piece.len;
        at += (size_t)used;
    } while (!piece.done);
    return decoded;
}

/*
 * Streamed request bodies' pieces, as the reader takes them: over HTTP/1.1 from the connection's
 * input (upload.c), over HTTP/2 from the stream's DATA (h2_body.c).
 */
size_t sxe__http_body_wanted(const struct slot *held)
{
    if (held->reader != NULL) {
        return held->read_room;
    }
    return held->on_body != NULL && !held->body_paused ? SIZE_MAX : 0;
}

void sxe__http_body_hand(struct slot *held, const char *data, size_t len, bool done)
{
    if (held->reader == NULL) {
        held->on_body(&held->http, data, len, done, held->body_arg);
        return;
    }
    sxe_fiber_t *reader = held->reader;
    held->reader = NULL;
    if (len > 0) {
        memcpy(held->read_buf, data, len); /* len <= read_room: the feed gave no more */
    }
    if (reader == sxe_fiber_self()) { /* within its own read (HTTP/2's kept DATA): it returns */
        held->read_got = (ssize_t)len;
        return;
    }
    (void)sxe_fiber_wake(reader, (int)len);
}

/*
 * Judged over windows of BODY_WINDOW or more, while the body is wanted (a window restarts when its
 * reader stops taking it). A client that trickles a byte every few seconds would otherwise hold
 * its request, and a proxy's upstream connection, for as long as it likes: each byte restarts the
 * held request's deadline.
 */
#define BODY_WINDOW (3 * SXE_NS_PER_SEC)

bool sxe__http_body_too_slow(sxe_http_server_t *server, struct slot *held, size_t bytes)
{
    uint64_t now = sxe_loop_now(server->loop);

    if (held->rate_restart) {
        held->rate_restart = false;
        held->rate_since = now;
        held->rate_bytes = 0;
    }
    held->rate_bytes += bytes;
    uint64_t window = now - held->rate_since;
    if (window < BODY_WINDOW) {
        return false;
    }
    if ((double)held->rate_bytes < (double)server->config.body_rate * (double)window / 1e9) {
        return true;
    }
    held->rate_since = now;
    held->rate_bytes = 0;
    return false;
}
