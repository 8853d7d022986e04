/*
 * Blocking-style connections for fibers (sxe_fiber_connect and friends, sxe/fiber.h): the
 * connection's handlers wake the fiber that waits in a call, with the call's result. Input that
 * arrives with no read waiting is left in the connection, which pauses until the next read, so
 * the peer is held back by TCP and nothing is copied twice.
 */
#include <errno.h>
#include <string.h>

#include "sxe/conn.h"
#include "sxe/fiber.h"
#include "sxe/log.h"

/* Wakes the stream's waiting fiber, if any, with result. */
static void wake(sxe_fiber_stream_t *stream, int result)
{
    sxe_fiber_t *waiter = stream->waiter;

    if (waiter != NULL) {
        stream->waiter = NULL;
        (void)sxe_fiber_wake(waiter, result);
    }
}

/* Waits in the calling fiber until a handler wakes it. @return what it was woken with. */
static int await(sxe_fiber_stream_t *stream)
{
    stream->waiter = sxe_fiber_self();
    return sxe_fiber_wait();
}

/* The handlers find the stream by the connection's user pointer, NULL once the fiber has closed it
 * (the stream's memory is then no longer the connection's to touch). */
static void on_connect(sxe_conn_t *conn)
{
    wake(sxe_conn_user(conn), 0);
}

/* Hands input to the reads that wait, as many as come one after another; what is left waits in the
 * connection, which pauses, and so does the peer. */
static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    sxe_fiber_stream_t *stream;
    size_t used = 0;

    while (used < len && (stream = sxe_conn_user(conn)) != NULL && stream->buf != NULL) {
        size_t taken = len - used < stream->size ? len - used : stream->size;
        memcpy(stream->buf, data + used, taken);
        used += taken;
        stream->buf = NULL;
        wake(stream, (int)taken); /* the fiber runs now, and may read again before it waits */
    }
    if ((stream = sxe_conn_user(conn)) == NULL) {
        return len; /* closed by its fiber: nobody reads the rest */
    }
    if (used < len) {
        stream->paused = true;
        (void)sxe_conn_pause(conn);
    }
    return used;
}

static void on_eof(sxe_conn_t *conn)
{
    sxe_fiber_stream_t *stream = sxe_conn_user(conn);

    if (stream == NULL) {
        sxe_conn_close(conn);
        return;
    }
    stream->eof = true;
    if (stream->buf != NULL) {
        stream->buf = NULL;
        wake(stream, 0);
    }
}

static void on_drained(sxe_conn_t *conn)
{
    sxe_fiber_stream_t *stream = sxe_conn_user(conn);

    if (stream != NULL && stream->draining) {
        stream->draining = false;
        wake(stream, 0);
    }
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    sxe_fiber_stream_t *stream = sxe_conn_user(conn);

    if (stream == NULL) {
        return;
    }
    stream->conn = NULL;
    stream->err = err != 0 ? -err : reason == SXE_CLOSE_TIMEOUT ? -ETIMEDOUT : -EPIPE;
    stream->buf = NULL;
    stream->draining = false;
    wake(stream, stream->err);
}

static const struct sxe_conn_handlers handlers = {.on_connect = on_connect,
                                                  .on_read = on_read,
                                                  .on_eof = on_eof,
                                                  .on_drained = on_drained,
                                                  .on_close = on_close};

int sxe_fiber_connect(sxe_fiber_stream_t *stream, sxe_loop_t *loop, const struct sockaddr *address,
                      socklen_t address_len)
{
    int rc;

    if (!SXE_CHECK(stream != NULL && sxe_fiber_self() != NULL)) {
        return -EPERM;
    }
    *stream = (sxe_fiber_stream_t){0};
    if ((rc = sxe_conn_connect(loop, &stream->conn, address, address_len, NULL, &handlers,
                               stream)) < 0) {
        stream->conn = NULL;
        stream->err = rc;
        return rc;
    }
    return await(stream);
}

ssize_t sxe_fiber_read(sxe_fiber_stream_t *stream, void *buf, size_t size)
{
    if (!SXE_CHECK(stream != NULL && sxe_fiber_self() != NULL && stream->waiter == NULL)) {
        return -EPERM;
    }
    if (stream->conn == NULL) {
        return stream->err;
    }
    if (stream->eof && !stream->paused) {
        return 0;
    }
    if (size == 0) {
        return 0;
    }
    stream->buf = buf;
    stream->size = size;
    if (stream->paused) { /* what waited is offered from the loop's next turn */
        stream->paused = false;
        (void)sxe_conn_resume(stream->conn);
    }
    return await(stream);
}

int sxe_fiber_write(sxe_fiber_stream_t *stream, const void *data, size_t len)
{
    if (!SXE_CHECK(stream != NULL && sxe_fiber_self() != NULL && stream->waiter == NULL)) {
        return -EPERM;
    }
    if (stream->conn == NULL) {
        return stream->err;
    }
    int rc = sxe_conn_write(stream->conn, data, len);
    if (rc < 0 || !sxe_conn_backed_up(stream->conn)) {
        return rc;
    }
    stream->draining = true;
    return await(stream);
}

void sxe_fiber_close(sxe_fiber_stream_t *stream)
{
    if (stream != NULL && stream->conn != NULL) {
        sxe_conn_t *conn = stream->conn;
        sxe_conn_set_user(conn, NULL); /* its last bytes may go out after the stream is gone */
        if (sxe_conn_close_when_sent(conn) < 0) {
            sxe_conn_close(conn);
        }
        stream->conn = NULL;
        stream->err = -EPIPE;
    }
}
