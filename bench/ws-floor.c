/*
 * The WebSocket echo floor: the least a server can do to echo small WebSocket messages. One
 * thread, edge-triggered epoll, accept at once, one recv per readiness event, the echoes of what
 * it completed in one send. The handshake is answered with libsxe's accept key (it is not what is
 * measured); frames are read with no checks but their length, unmasked, and echoed unmasked. No
 * buffers kept (a frame split across reads closes the connection: small messages never are), no
 * fragments, control frames, limits or timeouts: what sxe's WebSocket module is measured against.
 * Sockets opened at /chat get every message a /chat socket sends: one send of the frame to each.
 *
 * Usage: ws-floor PORT
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sxe/websocket.h>

static char open_sockets[65536]; /* by fd: 1 when the handshake is done, 2 for /chat */
static int chat[65536];
static int chat_count;

/* Answers the handshake in request (len bytes). @return 0, or -1 to close. */
static int handshake(int fd, const char *request, size_t len)
{
    const char *key = memmem(request, len, "Sec-WebSocket-Key: ", 19);
    char accept[29], reply[256];

    if (key == NULL || memmem(request, len, "\r\n\r\n", 4) == NULL) {
        return -1;
    }
    key += 19;
    (void)sxe_ws_accept_key(key, strcspn(key, "\r"), accept);
    int n = snprintf(reply, sizeof(reply),
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                     "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                     accept);
    open_sockets[fd] = strncmp(request, "GET /chat ", 10) == 0 ? 2 : 1;
    if (open_sockets[fd] == 2) {
        chat[chat_count++] = fd;
    }
    return send(fd, reply, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Echoes the whole frames in data. @return 0, or -1 to close. */
static int echo(int fd, unsigned char *data, size_t len)
{
    static unsigned char out[65536];
    size_t at = 0, used = 0;

    while (at < len) {
        if (len - at < 6 || (data[at + 1] & 0x7f) >= 126) {
            return -1; /* a split or large frame: not the floor's case */
        }
        size_t payload = data[at + 1] & 0x7f;
        if (at + 6 + payload > len || used + 2 + payload > sizeof(out)) {
            return -1;
        }
        const unsigned char *mask = data + at + 2;
        out[used++] = data[at];
        out[used++] = (unsigned char)payload;
        for (size_t i = 0; i < payload; i++) {
            out[used++] = data[at + 6 + i] ^ mask[i % 4];
        }
        at += 6 + payload;
    }
    if (open_sockets[fd] == 2) {
        for (int i = 0; i < chat_count; i++) {
            (void)send(chat[i], out, used, MSG_NOSIGNAL);
        }
        return 0;
    }
    return send(fd, out, used, MSG_NOSIGNAL) == (ssize_t)used ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)atoi(argc > 1 ? argv[1] : "8080")),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int epoll = epoll_create1(0);
    struct epoll_event events[256], event = {.events = EPOLLIN, .data.fd = listener};
    static unsigned char buffer[65536];

    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        listen(listener, 4096) < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event) < 0) {
        perror("ws-floor");
        return 1;
    }
    for (;;) {
        int count = epoll_wait(epoll, events, 256, -1);
        for (int i = 0; i < count; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= (int)sizeof(open_sockets)) {
                        close(client);
                        continue;
                    }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    open_sockets[client] = 0;
                    event = (struct epoll_event){.events = EPOLLIN | EPOLLET, .data.fd = client};
                    epoll_ctl(epoll, EPOLL_CTL_ADD, client, &event);
                }
                continue;
            }
            ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
            if (got <= 0 || (open_sockets[fd] ? echo(fd, buffer, (size_t)got)
                                              : handshake(fd, (char *)buffer, (size_t)got)) < 0) {
                for (int c = 0; open_sockets[fd] == 2 && c < chat_count; c++) {
                    chat[c] = chat[c] == fd ? chat[--chat_count] : chat[c]; /* rare: a leave */
                }
                open_sockets[fd] = 0;
                close(fd);
            }
        }
    }
}
