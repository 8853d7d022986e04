/*
 * libuv's canned-reply HTTP keep-alive server for bench/compare: the reply and the request
 * counting of bench/epoll-floor, written the way a libuv user would (uv_try_write first, a queued
 * uv_write for what the socket did not take). One loop, one thread. Usage: libuv-hello PORT
 */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define REPLY                                                                                      \
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nHello World\n"
#define REPLIES_MAX 64 /* pipelined requests answered with one write */

struct client {
    uv_tcp_t tcp;
    unsigned matched; /* bytes of "\r\n\r\n" seen at the end of the input so far */
};

struct pending {
    uv_write_t request;
    char data[];
};

static char input[65536];
static char replies[REPLIES_MAX * (sizeof(REPLY) - 1)];

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buffer)
{
    (void)handle;
    (void)suggested;
    *buffer = uv_buf_init(input, sizeof(input)); /* one thread: every read completes at once */
}

static void on_closed(uv_handle_t *handle)
{
    free(handle);
}

static void on_written(uv_write_t *request, int status)
{
    (void)status;
    free(request);
}

static void reply(uv_stream_t *stream, size_t count)
{
    size_t len = count * (sizeof(REPLY) - 1);
    uv_buf_t buffer = uv_buf_init(replies, (unsigned)len);
    int sent = uv_try_write(stream, &buffer, 1);

    if (sent == UV_EAGAIN) {
        sent = 0;
    }
    if (sent < 0) {
        uv_close((uv_handle_t *)stream, on_closed);
        return;
    }
    if ((size_t)sent < len) { /* the socket is full: queue the rest */
        struct pending *pending = malloc(sizeof(*pending) + len - (size_t)sent);
        memcpy(pending->data, replies + sent, len - (size_t)sent);
        buffer = uv_buf_init(pending->data, (unsigned)(len - (size_t)sent));
        uv_write(&pending->request, stream, &buffer, 1, on_written);
    }
}

static void on_read(uv_stream_t *stream, ssize_t got, const uv_buf_t *buffer)
{
    struct client *client = (struct client *)stream;
    static const char end[] = "\r\n\r\n";
    size_t count = 0;

    if (got < 0) {
        uv_close((uv_handle_t *)stream, on_closed);
        return;
    }
    for (ssize_t i = 0; i < got; i++) {
        char c = buffer->base[i];
        client->matched = c == end[client->matched] ? client->matched + 1 : (c == '\r' ? 1 : 0);
        if (client->matched == 4) {
            client->matched = 0;
            if (++count == REPLIES_MAX) {
                reply(stream, count);
                count = 0;
            }
        }
    }
    if (count > 0) {
        reply(stream, count);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) {
        return;
    }
    struct client *client = calloc(1, sizeof(*client));
    uv_tcp_init(server->loop, &client->tcp);
    if (uv_accept(server, (uv_stream_t *)&client->tcp) < 0) {
        uv_close((uv_handle_t *)&client->tcp, on_closed);
        return;
    }
    uv_tcp_nodelay(&client->tcp, 1);
    uv_read_start((uv_stream_t *)&client->tcp, on_alloc, on_read);
}

int main(int argc, char **argv)
{
    uv_loop_t *loop = uv_default_loop();
    uv_tcp_t server;
    struct sockaddr_in address;

    for (size_t i = 0; i < REPLIES_MAX; i++) {
        memcpy(replies + i * (sizeof(REPLY) - 1), REPLY, sizeof(REPLY) - 1);
    }
    uv_ip4_addr("127.0.0.1", argc > 1 ? atoi(argv[1]) : 8080, &address);
    uv_tcp_init(loop, &server);
    if (uv_tcp_bind(&server, (const struct sockaddr *)&address, 0) < 0 ||
        uv_listen((uv_stream_t *)&server, 4096, on_connection) < 0) {
        return 1;
    }
    return uv_run(loop, UV_RUN_DEFAULT);
}
