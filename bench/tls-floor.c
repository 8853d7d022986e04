/*
 * The TLS floor: the least a server can keep for an idle HTTPS keep-alive connection with
 * OpenSSL, what sxe-httpd's memory per idle TLS connection is measured against (bench/tls.py's
 * idle case). One thread, level-triggered epoll, non-blocking sockets, an SSL per connection read
 * and written on the socket itself, the same context settings as sxe's (TLS 1.2 and 1.3,
 * SSL_MODE_RELEASE_BUFFERS, OpenSSL's own session tickets) and nothing of its own per connection:
 * the SSL is the connection's state, kept in epoll's data. Every request (found by its blank
 * line) is answered a canned 12-byte Hello World. No timeouts, limits, files or logs.
 *
 * Usage: tls-floor PORT CERT KEY   (PORT 0: any; the port is printed: "tls-floor: port N")
 *        tls-floor PORT            (no TLS: plain sockets, the same answers, for the difference)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: "
                             "12\r\n\r\nHello World\n";

/* Reads what came (a stack buffer: nothing kept), answering each request it completes; a request
 * split across reads is answered when its end comes (the floor's clients send whole requests).
 * @return 0, or -1 when the connection is over. */
static int serve(int fd, SSL *ssl)
{
    char input[4096];

    for (;;) {
        int got = ssl != NULL ? SSL_read(ssl, input, sizeof(input))
                              : (int)recv(fd, input, sizeof(input), MSG_DONTWAIT);
        if (got <= 0) {
            if (ssl != NULL) {
                int error = SSL_get_error(ssl, got);
                ERR_clear_error();
                return error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE ? 0 : -1;
            }
            return got < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
        }
        for (char *at = input;
             (at = memmem(at, (size_t)got - (size_t)(at - input), "\r\n\r\n", 4)) != NULL;
             at += 4) {
            int sent = ssl != NULL ? SSL_write(ssl, answer, sizeof(answer) - 1)
                                   : (int)send(fd, answer, sizeof(answer) - 1, MSG_NOSIGNAL);
            if (sent != (int)sizeof(answer) - 1) {
                return -1; /* an idle client's socket always has room for 80 bytes */
            }
        }
    }
}

int main(int argc, char **argv)
{
    SSL_CTX *ctx = NULL;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int poller = epoll_create1(0);

    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: tls-floor PORT [CERT KEY]\n");
        return 2;
    }
    if (argc == 4) {
        ctx = SSL_CTX_new(TLS_server_method());
        SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF); /* tickets only, as sxe */
        if (!SSL_CTX_use_certificate_chain_file(ctx, argv[2]) ||
            !SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM)) {
            fprintf(stderr, "tls-floor: cannot load %s and %s\n", argv[2], argv[3]);
            return 1;
        }
    }
    address.sin_port = htons((uint16_t)atoi(argv[1]));
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) < 0 ||
        listen(listener, 4096) < 0 ||
        getsockname(listener, (struct sockaddr *)&address, &len) < 0) {
        perror("tls-floor: listen");
        return 1;
    }
    printf("tls-floor: port %d%s\n", ntohs(address.sin_port), ctx != NULL ? " (TLS)" : "");
    fflush(stdout);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL}, events[256];
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    for (;;) {
        int ready = epoll_wait(poller, events, 256, -1);
        for (int i = 0; i < ready; i++) {
            if (events[i].data.ptr == NULL) { /* the listener */
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    SSL *ssl = ctx != NULL ? SSL_new(ctx) : NULL;
                    if (ssl != NULL) {
                        SSL_set_fd(ssl, fd);
                        SSL_set_accept_state(ssl);
                    }
                    event.data.ptr = ssl != NULL ? (void *)ssl : (void *)(intptr_t)(fd + 1);
                    epoll_ctl(poller, EPOLL_CTL_ADD, fd, &event);
                }
                continue;
            }
            SSL *ssl = ctx != NULL ? events[i].data.ptr : NULL;
            int fd = ssl != NULL ? SSL_get_fd(ssl) : (int)(intptr_t)events[i].data.ptr - 1;
            if (serve(fd, ssl) < 0) {
                SSL_free(ssl);
                close(fd);
            }
        }
    }
}
