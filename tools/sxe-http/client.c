/*
 * A worker's connections (client.c): each opened in the ramp, its answers read, checked, timed
 * and counted, the next request sent, and its end accounted for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <sxe/sxe.h>

#include "response.h"
#include "worker.h"

void finish(struct client *client)
{
    if (!client->finished) {
        client->finished = true;
        worker.ended++;
    }
}

/*
 * Closes a connection whose work is done. By default with a reset (SO_LINGER 0): a normal close
 * would leave each of our ports in TIME_WAIT for a minute, and a run of 100,000 connections,
 * repeated, would find no free port. -g closes with a FIN instead.
 */
void close_done(struct client *client)
{
    if (!config.graceful_close) {
        struct linger linger = {.l_onoff = 1, .l_linger = 0};
        setsockopt(sxe_conn_fd(client->conn), SOL_SOCKET, SO_LINGER, &linger, sizeof(linger));
    }
    finish(client);
    sxe_conn_close(client->conn);
}

/*
 * An answer ended its connection (--http1.0, or one that said Connection: close: the server closes
 * it too); the client's next request goes on a new one, opened by reopen_all() from the run loop,
 * not from inside the old connection's on_read. Closed with a reset, as close_done() does: no
 * port left in TIME_WAIT.
 */
static void reopen_later(struct client *client)
{
    struct linger linger = {.l_onoff = 1, .l_linger = 0};

    setsockopt(sxe_conn_fd(client->conn), SOL_SOCKET, SO_LINGER, &linger, sizeof(linger));
    client->reopen = REOPEN_CLOSING;
    sxe_conn_close(client->conn);
    client->next_reopen = worker.reopen_head;
    worker.reopen_head = (uint32_t)(client - worker.clients);
}

static void connected(struct client *client)
{
    uint64_t now = sxe_loop_now(worker.loop);
    uint64_t took = now - client->connect_start;

    client->connected = true;
    worker.results.connected++;
    worker.settled++;
    worker.last_settled_ns = now;
    worker.progress->open++;
    if (took > SLOW_CONNECT_NS) {
        worker.results.slow_connects++;
        if (worker.results.slow_listed < SLOW_LISTED_MAX) {
            worker.results.slow[worker.results.slow_listed++] = (struct slow_connect){
                .connection = worker.first + (uint64_t)(client - worker.clients), .ns = took};
        }
    }
}

static void on_connect(sxe_conn_t *conn)
{
    struct client *client = sxe_conn_user(conn);

    if (client->reopen == REOPEN_CONNECTING) { /* the next request, timed from here */
        client->reopen = 0;
        worker.progress->open++;
        if (config.rate > 0) {
            send_owed(client); /* what came due while it reopened */
            return;
        }
        uint64_t want = config.duration_ns ? config.pipeline : config.queries - client->sent;
        send_queries(client, (unsigned)(want < config.pipeline ? want : config.pipeline));
        if (config.http10) {
            client->ring[(client->sent - 1) & worker.ring_mask] = client->connect_start;
        }
        return;
    }
    connected(client);
}

/* Whether a client has more to send, closed loop. */
static bool client_wants_more(const struct client *client)
{
    return !worker.stop_sending && (config.duration_ns != 0 || client->sent < config.queries);
}

/* Times and counts an answer that came at now. */
static void count_answer(const struct client *client, uint64_t now)
{
    uint64_t sent = client->ring[client->done & worker.ring_mask];
    uint64_t latency = now - sent;

    if (config.rate > 0) {
        uint64_t due = due_at(client, client->done); /* or sent, if that was earlier */
        histogram_add(&worker.results.service, latency);
        latency = now - (due < sent ? due : sent);
    }
    histogram_add(&worker.results.latency, latency);
    if (worker.intervals) {
        histogram_add(&worker.interval, latency);
    }
    worker.results.queries++;
    worker.last_response_ns = now;
    __atomic_store_n(&worker.progress->queries, worker.results.queries, __ATOMIC_RELAXED);
}

/* A query answered: timed and counted, and the next sent (on a new connection if the answer said
 * Connection: close, closing). @return false if the client is done or its connection closes. */
static bool answered(struct client *client, bool closing)
{
    uint64_t now = sxe_loop_now(worker.loop);

    /* --warmup: a window's answers are those that come within it, as its CPU time is sampled at
     * its ends; those in flight at its end are checked, not counted. */
    if (!config.marks || now <= worker.window_ns + config.duration_ns) {
        count_answer(client, now);
    }
    client->done++;
    if (closing && !config.http10 &&
        (config.rate > 0 ? !worker.stop_sending : client_wants_more(client))) {
        /* Requests sent behind it were not answered and will not be: they go again on the new
         * connection, as a browser sends them again (they are GETs, or what -m says). */
        uint64_t unanswered = client->sent - client->done;
        client->sent = client->done;
        worker.results.sent -= unanswered;
        client->owed += config.rate > 0 ? unanswered : 0;
        reopen_later(client);
        return false;
    }
    if (config.rate > 0) {
        send_owed(client);
    } else if (client_wants_more(client)) {
        if (config.http10) {
            reopen_later(client);
            return false;
        }
        send_queries(client, 1);
        return true;
    }
    bool all_sent =
        config.rate > 0 ? worker.stop_sending && client->owed == 0 : !client_wants_more(client);
    if (all_sent && client->done == client->sent) {
        close_done(client);
        return false;
    }
    return true;
}

/* Whether the connection's response number index (from 0) is one whose body is hashed (--body):
 * every 64th, so that checking costs the load next to nothing. */
static bool sampled(uint64_t index)
{
    return config.expect_hash_set && index % 64 == 0;
}

/* Whether a response's body is what --body-length or --body says it must be (HEAD's: none). */
static bool body_as_expected(const struct response_reader *reader)
{
    if (config.head) {
        return reader->body_len == 0;
    }
    return (config.expect_length < 0 || reader->body_len == (uint64_t)config.expect_length) &&
           (!reader->hashing || reader->hash == config.expect_hash);
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct client *client = sxe_conn_user(conn);
    size_t used = 0;

    while (used < len) {
        size_t consumed = 0;
        enum response_result result =
            response_read(&client->reader, data + used, len - used, &consumed);
        used += consumed;
        if (result == RESPONSE_MORE) {
            break;
        }
        if (result == RESPONSE_BAD_LENGTH || client->done == client->sent) {
            worker.results.errors[ERR_LENGTH]++; /* broken framing, or a response to nothing */
            sxe_conn_close(conn);
            return len;
        }
        if (client->reader.status != config.expect_status) {
            worker.results.errors[ERR_STATUS]++;
            worker.results.statuses[client->reader.status - STATUS_LOW]++;
        } else if (!body_as_expected(&client->reader)) {
            worker.results.errors[ERR_BODY]++;
        }
        bool closing = client->reader.close_after;
        response_reader_init(&client->reader, config.head, sampled(client->done + 1));
        if (!answered(client, closing)) {
            return len;
        }
    }
    return used;
}

/* A connect failed: counted, and its queries never sent. */
static void connect_failed(struct client *client, int err)
{
    worker.results.errors[ERR_CONNECT]++;
    if (config.duration_ns == 0 && config.queries > client->sent) {
        worker.results.not_sent += config.queries - client->sent;
    }
    if (worker.results.first_connect_errno == 0) {
        worker.results.first_connect_errno = err;
    }
    finish(client);
}

static void closed(struct client *client, enum sxe_close_reason reason, int err)
{
    unsigned reopen = client->reopen;

    client->conn = NULL;
    if (reopen == REOPEN_CLOSING) { /* stays marked: what comes due waits for the new one */
        worker.progress->open--;    /* answered: its next request goes on a new connection */
        return;
    }
    client->reopen = 0;
    if (reopen == REOPEN_CONNECTING) { /* --http1.0's next connection failed, or was stopped */
        if (!client->finished) {
            connect_failed(client, reason == SXE_CLOSE_TIMEOUT ? ETIMEDOUT : err);
        }
        return;
    }
    if (!client->connected) {
        worker.settled++;
        worker.last_settled_ns = sxe_loop_now(worker.loop);
        connect_failed(client, reason == SXE_CLOSE_TIMEOUT ? ETIMEDOUT : err);
        return;
    }
    worker.progress->open--;
    if (client->finished) {
        return;
    }
    /* Closed before its queries were done: say why, and count what was never sent. */
    if (client->timed_out) {
        worker.results.errors[ERR_TIMEOUT]++;
    } else if (reason == SXE_CLOSE_ERROR && err == EPIPE) {
        worker.results.errors[ERR_WRITE]++;
    } else if (reason == SXE_CLOSE_PEER && client->reader.state != 0) {
        worker.results.errors[ERR_LENGTH]++; /* the server closed in the middle of a response */
    } else if (reason != SXE_CLOSE_LOCAL) {
        worker.results.errors[ERR_READ]++;
    }
    if (config.duration_ns == 0 && config.queries > client->sent) {
        worker.results.not_sent += config.queries - client->sent;
    }
    finish(client);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    closed(sxe_conn_user(conn), reason, err);
}

const struct sxe_conn_handlers client_handlers = {
    .on_connect = on_connect, .on_read = on_read, .on_close = on_close};

/* WebSocket mode: the socket opened (the connect is settled), an echo came, the socket closed. */
static void ws_open(sxe_ws_t *ws)
{
    connected(sxe_ws_user(ws));
}

static void ws_message(sxe_ws_t *ws, enum sxe_ws_type type, const char *data, size_t len)
{
    struct client *client = sxe_ws_user(ws);

    (void)data;
    if (type != SXE_WS_BINARY || len != config.ws_size || client->done == client->sent) {
        worker.results.errors[ERR_LENGTH]++; /* not our echo, or an echo of nothing */
        sxe_conn_close(client->conn);
        return;
    }
    (void)answered(client, false);
}

static void ws_close(sxe_ws_t *ws, int code, const char *reason, size_t reason_len)
{
    struct client *client = sxe_ws_user(ws);

    (void)reason;
    (void)reason_len;
    if (client->connected && client->finished) {
        client->conn = NULL;
        return;
    }
    if (!client->connected && worker.results.first_connect_errno == 0) {
        worker.results.first_connect_errno = code == SXE_WS_CLOSE_PROTOCOL ? EPROTO : ECONNREFUSED;
    }
    closed(client, code == SXE_WS_CLOSE_ABNORMAL ? SXE_CLOSE_PEER : SXE_CLOSE_ERROR, 0);
}

const struct sxe_ws_handlers client_ws_handlers = {
    .on_open = ws_open, .on_message = ws_message, .on_close = ws_close};

/* Closes connections whose oldest query has waited longer than the timeout. */
void check_timeouts(sxe_timer_t *timer, void *arg)
{
    uint64_t now = sxe_loop_now(worker.loop);

    (void)timer;
    (void)arg;
    for (uint64_t i = 0; i < worker.count; i++) {
        struct client *client = &worker.clients[i];
        if (client->conn != NULL && client->connected && client->sent > client->done &&
            now - client->ring[client->done & worker.ring_mask] > config.timeout_ns) {
            client->timed_out = true;
            sxe_conn_close(client->conn);
        }
    }
}

/* Connects a client, from its source address (in turn, by its global index): sxe's rc. */
static int connect_client(struct client *client)
{
    uint64_t global = worker.first + (uint64_t)(client - worker.clients);
    const struct sockaddr *source =
        config.source_count > 0
            ? (const struct sockaddr *)&config.sources[global % config.source_count]
            : NULL;
    int rc;

    client->connect_start = sxe_clock_mono_ns();
    if (config.ws_path != NULL) {
        rc = sxe_ws_client_connect(worker.ws_set, &client->ws, config.target_text, config.ws_path,
                                   NULL, source, source ? config.source_len : 0, client);
        client->conn = rc == 0 ? sxe_ws_conn(client->ws) : NULL;
    } else {
        rc = sxe_conn_connect(
            worker.loop, &client->conn, (const struct sockaddr *)&config.target, config.target_len,
            &(struct sxe_connect_options){
                .source = source, .source_len = source ? config.source_len : 0, .tls = config.tls},
            &client_handlers, client);
    }
    if (rc < 0) {
        client->conn = NULL;
    }
    return rc;
}

/*
 * Ramps: keeps at most ramp_batch connects outstanding, so the server's accept queue is not
 * flooded (a dropped SYN costs a second's retransmission). Called each turn until all are opened.
 */
void open_more(void)
{
    for (; worker.opened < worker.count && worker.opened - worker.settled < config.ramp_batch;
         worker.opened++) {
        struct client *client = &worker.clients[worker.opened];

        response_reader_init(&client->reader, config.head, sampled(0));
        client->ring = worker.rings + worker.opened * (worker.ring_mask + 1);
        client->next_owing = client->next_reopen = NONE;
        int rc = connect_client(client);
        if (rc < 0) {
            worker.settled++;
            connect_failed(client, -rc);
        }
    }
}

/* Opens a new connection for each client whose answer ended its last one. */
void reopen_all(void)
{
    while (worker.reopen_head != NONE) {
        struct client *client = &worker.clients[worker.reopen_head];
        worker.reopen_head = client->next_reopen;
        client->next_reopen = NONE;
        if (worker.stop_sending) {
            finish(client);
            continue;
        }
        client->reopen = REOPEN_CONNECTING;
        worker.results.reopened++;
        int rc = connect_client(client);
        if (rc < 0) {
            client->reopen = 0;
            connect_failed(client, -rc);
        }
    }
}
