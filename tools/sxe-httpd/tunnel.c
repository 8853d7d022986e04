/*
 * Tunnels: once an upstream has answered 101 to an upgrade the proxy forwarded (WebSocket, or any
 * protocol it accepts), the client's connection and the upstream's are joined, and bytes go each
 * way as they come, unread and unchanged.
 *
 * Backpressure: a side whose peer's output backs up (sxe_conn_backed_up() after a write) is not
 * read until that output drains, so a slow reader holds the writer back through TCP and the queue
 * stays bounded. A side that shuts its sending half (FIN) has that passed on once what it sent is
 * out; a side that closes closes the other once its queue is sent. A tunnel silent both ways for
 * the loop's idle timeout is closed; traffic either way keeps both sides open.
 *
 * State is per worker (thread-local): a table of tunnels, one for every two connections its loop
 * may hold, made on its first tunnel; a tunnel's slot is free again once both its sides closed.
 */
#define SXE_LOG_MODULE proxy_log
#include <sxe/log.h>

#include <errno.h>
#include <stdlib.h>

#include <sxe/clock.h>

#include "tunnel.h"

static struct sxe_log_module proxy_log = SXE_LOG_MODULE_INIT(PROXY);

struct tunnel {
    sxe_conn_t *sides[2]; /* 0: the client's, 1: the upstream's; NULL once closed */
    uint64_t last_active; /* loop time of the last bytes relayed either way */
    bool waiting[2];      /* side i is paused until the other side's output drains */
    bool eof[2];          /* side i has shut its sending half */
    struct tunnel *next_free;
};

static __thread struct tunnel *tunnels;
static __thread struct tunnel *free_tunnels;

static unsigned side_of(const struct tunnel *tunnel, const sxe_conn_t *conn)
{
    return tunnel->sides[1] == conn;
}

/* Closes both sides: the one given at once, the other once what it was given is sent. */
static void close_both(struct tunnel *tunnel, sxe_conn_t *conn)
{
    sxe_conn_t *other = tunnel->sides[!side_of(tunnel, conn)];

    if (other != NULL && sxe_conn_close_when_sent(other) < 0) {
        sxe_conn_close(other);
    }
    sxe_conn_close(conn);
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct tunnel *tunnel = sxe_conn_user(conn);
    unsigned side = side_of(tunnel, conn);
    sxe_conn_t *other = tunnel->sides[!side];

    if (other == NULL) {
        return len; /* the other side is gone: what still comes has nowhere to go */
    }
    tunnel->last_active = sxe_loop_now(sxe_conn_loop(conn));
    int rc = sxe_conn_write(other, data, len);
    if (rc == 0 && sxe_conn_backed_up(other)) {
        tunnel->waiting[side] = true;
        (void)sxe_conn_pause(conn);
    } else if (rc < 0) {
        SXE_LOG_DEBUG("a tunnel's %s side cannot take more: %s; closing both",
                      side ? "client" : "upstream", sxe_strerror(rc));
        close_both(tunnel, conn);
    }
    return len;
}

/* conn's output drained: the side that waited for it is read again. */
static void on_drained(sxe_conn_t *conn)
{
    struct tunnel *tunnel = sxe_conn_user(conn);
    unsigned writer = !side_of(tunnel, conn);

    if (tunnel->waiting[writer] && tunnel->sides[writer] != NULL) {
        tunnel->waiting[writer] = false;
        (void)sxe_conn_resume(tunnel->sides[writer]);
    }
}

/* A side is done sending: so is the tunnel towards the other, after what it sent. */
static void on_eof(sxe_conn_t *conn)
{
    struct tunnel *tunnel = sxe_conn_user(conn);
    unsigned side = side_of(tunnel, conn);
    sxe_conn_t *other = tunnel->sides[!side];

    tunnel->eof[side] = true;
    if (other == NULL || tunnel->eof[!side]) {
        close_both(tunnel, conn);
    } else if (sxe_conn_shutdown(other) < 0) {
        close_both(tunnel, conn);
    }
}

/* Silent this long: kept while the other way was busy, else both close. */
static void on_timeout(sxe_conn_t *conn)
{
    struct tunnel *tunnel = sxe_conn_user(conn);
    const struct sxe_loop_options *options = sxe_loop_options(sxe_conn_loop(conn));
    uint64_t now = sxe_loop_now(sxe_conn_loop(conn));

    if (now - tunnel->last_active < options->idle_timeout) {
        (void)sxe_conn_touch(conn);
        return;
    }
    SXE_LOG_DEBUG("a tunnel was silent both ways for %llu ms: closing it",
                  (unsigned long long)(options->idle_timeout / SXE_NS_PER_MSEC));
    sxe_conn_t *other = tunnel->sides[!side_of(tunnel, conn)];
    if (other != NULL) {
        sxe_conn_close(other);
    }
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    struct tunnel *tunnel = sxe_conn_user(conn);
    unsigned side = side_of(tunnel, conn);
    sxe_conn_t *other = tunnel->sides[!side];

    (void)reason;
    (void)err;
    tunnel->sides[side] = NULL;
    if (other == NULL) { /* both are closed: the slot is free */
        tunnel->next_free = free_tunnels;
        free_tunnels = tunnel;
    } else if (sxe_conn_close_when_sent(other) < 0) {
        sxe_conn_close(other); /* its on_close frees the slot */
    }
}

static const struct sxe_conn_handlers handlers = {.on_read = on_read,
                                                  .on_drained = on_drained,
                                                  .on_eof = on_eof,
                                                  .on_timeout = on_timeout,
                                                  .on_close = on_close};

const struct sxe_conn_handlers *tunnel_handlers(void)
{
    return &handlers;
}

int tunnel_ready(sxe_loop_t *loop)
{
    if (tunnels == NULL) {
        uint32_t count = sxe_loop_options(loop)->connections / 2 + 1;
        if ((tunnels = calloc(count, sizeof(*tunnels))) == NULL) {
            return -ENOMEM; /* GCOVR_EXCL_LINE: out of memory */
        }
        for (uint32_t i = count; i-- > 0;) {
            tunnels[i].next_free = free_tunnels;
            free_tunnels = &tunnels[i];
        }
    }
    return 0;
}

void tunnel_open(sxe_conn_t *client, sxe_conn_t *upstream)
{
    struct tunnel *tunnel = free_tunnels; /* there is one: each takes two of the connections */

    free_tunnels = tunnel->next_free;
    *tunnel = (struct tunnel){.sides = {client, upstream},
                              .last_active = sxe_loop_now(sxe_conn_loop(client))};
    sxe_conn_set_user(client, tunnel);
    sxe_conn_set_user(upstream, tunnel);
    (void)sxe_conn_set_handlers(upstream, &handlers); /* open: it was just handed over */
}
