/*
 * The floor: the least a server can do to answer HTTP keep-alive requests with a canned reply.
 * One thread, edge-triggered epoll, one recv per readiness event, one send of all the replies a
 * recv completes (recv and send, not read and write, which cost more: they pass the file layer).
 * No buffers kept, no timeouts, no limits: what sxe is measured against.
 * Usage: epoll-floor PORT
 */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";

int main(int argc, char **argv)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? atoi(argv[1]) : 8080),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0),
        epfd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener}, events[256];
    static char in[16384], out[64 * sizeof(reply)];

    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        listen(listener, SOMAXCONN) < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, listener, &event) < 0) {
        return 1;
    }
    for (;;) {
        int count = epoll_wait(epfd, events, 256, -1);
        for (int i = 0; i < count; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                for (int conn; (conn = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0;) {
                    struct epoll_event add = {.events = EPOLLIN | EPOLLET, .data.fd = conn};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, conn, &add);
                }
                continue;
            }
            ssize_t got = recv(fd, in, sizeof(in), 0);
            if (got <= 0) {
                close(fd);
                continue;
            }
            size_t replies = 0;
            for (char *at = in; (at = memmem(at, (size_t)(in + got - at), "\r\n\r\n", 4)) != NULL;
                 at += 4) {
                if (replies == 64) {
                    break; /* more than 64 pipelined requests in one read: answer 64 */
                }
                memcpy(out + replies++ * (sizeof(reply) - 1), reply, sizeof(reply) - 1);
            }
            if (replies > 0 && send(fd, out, replies * (sizeof(reply) - 1), MSG_NOSIGNAL) < 0) {
                close(fd);
            }
        }
    }
}
