/*
 * The TLS floor: the least a server can do to answer HTTPS with OpenSSL, what sxe-httpd is measured
 * against in bench/tls.py: memory per idle keep-alive connection, and CPU per request for its
 * files and its handshakes. One thread, level-triggered epoll, non-blocking sockets, an SSL per
 * connection read and written on the socket itself, the same context settings as sxe's (TLS 1.2
 * and 1.3, SSL_MODE_RELEASE_BUFFERS, OpenSSL's own session tickets) and nothing of its own per
 * connection but what an answer not yet written needs: the SSL is the connection's state, kept
 * in epoll's data. Every request (found by its blank line) is answered from memory: the file of
 * ROOT its path names (read at start, each answer's head and body in one buffer), or a canned
 * 12-byte Hello World without ROOT; an HTTP/1.0 request is answered, then the connection closed.
 * No timeouts, limits, logs or parsing beyond that. With "read" after ROOT, each answer's file is
 * read again as it is sent, in pieces of CHUNK bytes (pread, the head in the first piece), as a
 * file server that keeps no file in memory must: the floor of serving a file rather than memory.
 *
 * Usage: tls-floor PORT CERT KEY [ROOT [read]] (PORT 0: any; the port is printed)
 *        tls-floor PORT                 (no TLS: plain sockets, the canned answer, for the idle
 *                                        case's difference)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILES_MOST 16
#define CHUNK      65536 /* read mode: the bytes read a time (four records, as sxe-httpd seals) */

struct answer {
    char path[64];     /* "/name", or "" for the canned answer */
    const char *bytes; /* the head, then the body */
    size_t len;
    size_t head_len; /* a file's: its head's bytes, and its file, kept open */
    int fd;
};

static bool read_mode; /* files are read as they are sent, not answered from memory */

static struct answer answers[FILES_MOST] = {
    {.path = "",
     .bytes =
         "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\nHello World\n",
     .len = 80}};
static int answer_count = 1;
static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";

/* An answer being written: kept as the SSL's app data only while the socket has no room. */
struct pending {
    const char *at;
    size_t left;
    bool close_after;
    /* Read mode: the head not yet copied into chunk, and the file's bytes not yet read. */
    const char *head;
    size_t head_left;
    int fd;
    off_t offset;
    size_t file_left;
    size_t chunk_size; /* CHUNK, or the whole answer when it is shorter */
    char chunk[];
};

/* Reads every regular file of root into an answer of its own. @return 0, or -1. */
static int load(const char *root)
{
    DIR *dir = opendir(root);
    struct dirent *entry;

    if (dir == NULL) {
        return -1;
    }
    answer_count = 0;
    while ((entry = readdir(dir)) != NULL && answer_count < FILES_MOST) {
        char name[4096], head[128];
        struct stat st;
        snprintf(name, sizeof(name), "%s/%s", root, entry->d_name);
        int fd = open(name, O_RDONLY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || strlen(entry->d_name) > 60) {
            if (fd >= 0) {
                close(fd);
            }
            continue;
        }
        struct answer *answer = &answers[answer_count++];
        int head_len =
            snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %lld\r\n\r\n",
                     (long long)st.st_size);
        snprintf(answer->path, sizeof(answer->path), "/%.60s", entry->d_name);
        answer->len = (size_t)head_len + (size_t)st.st_size;
        char *bytes = malloc(answer->len);
        if (bytes == NULL || read(fd, bytes + head_len, (size_t)st.st_size) != st.st_size) {
            close(fd);
            closedir(dir);
            return -1;
        }
        memcpy(bytes, head, (size_t)head_len);
        answer->bytes = bytes;
        answer->head_len = (size_t)head_len;
        answer->fd = fd;
    }
    closedir(dir);
    return 0;
}

/* The answer to the request starting at request: its path's file, the canned one, or a 404. */
static const struct answer *answer_for(const char *request, size_t len)
{
    static const struct answer not_found = {.bytes = missing, .len = sizeof(missing) - 1};
    const char *path = memchr(request, ' ', len);
    const char *end =
        path != NULL ? memchr(path + 1, ' ', len - (size_t)(path + 1 - request)) : NULL;

    if (answers[0].path[0] == '\0') {
        return &answers[0];
    }
    for (int i = 0; end != NULL && i < answer_count; i++) {
        if ((size_t)(end - path - 1) == strlen(answers[i].path) &&
            memcmp(path + 1, answers[i].path, (size_t)(end - path - 1)) == 0) {
            return &answers[i];
        }
    }
    return &not_found;
}

/* Read mode: the next piece of the answer into chunk, what is left of its head first, then the
 * file's bytes. @return whether it read them. */
static bool refill(struct pending *pending)
{
    size_t len = pending->head_left;
    size_t room = pending->chunk_size - len;
    size_t want = pending->file_left < room ? pending->file_left : room;

    memcpy(pending->chunk, pending->head, len);
    pending->head_left = 0;
    ssize_t got = pread(pending->fd, pending->chunk + len, want, pending->offset);
    if (got < 0 || (size_t)got != want) {
        return false;
    }
    pending->offset += got;
    pending->file_left -= (size_t)got;
    pending->at = pending->chunk;
    pending->left = len + (size_t)got;
    return true;
}

/* Writes what the connection's pending answer has left. @return 0 when it is written (and the
 * connection stays), 1 when the socket has no room (wait for EPOLLOUT), -1 when it is over. */
static int flush(SSL *ssl)
{
    struct pending *pending = SSL_get_app_data(ssl);

    while (pending->left > 0 || pending->file_left > 0) {
        if (pending->left == 0 && !refill(pending)) {
            return -1;
        }
        int sent =
            SSL_write(ssl, pending->at, pending->left < (1u << 30) ? (int)pending->left : 1 << 30);
        if (sent <= 0) {
            int error = SSL_get_error(ssl, sent);
            ERR_clear_error();
            return error == SSL_ERROR_WANT_WRITE ? 1 : -1;
        }
        pending->at += sent;
        pending->left -= (size_t)sent;
    }
    bool close_after = pending->close_after;
    free(pending);
    SSL_set_app_data(ssl, NULL);
    if (close_after) {
        SSL_shutdown(ssl);
        return -1;
    }
    return 0;
}

/* Reads what came (a stack buffer: nothing kept), answering each request it completes; a request
 * split across reads is answered when its end comes (the floor's clients send whole requests, and
 * none sends another before its answer).
 * @return 0, 1 while an answer waits for room, or -1 when the connection is over. */
static int serve(int fd, SSL *ssl)
{
    char input[4096];
    int rc = ssl != NULL && SSL_get_app_data(ssl) != NULL ? flush(ssl) : 0;

    while (rc == 0) {
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
        for (char *from = input, *at;
             rc == 0 &&
             (at = memmem(from, (size_t)got - (size_t)(from - input), "\r\n\r\n", 4)) != NULL;
             from = at + 4) {
            const struct answer *answer = answer_for(from, (size_t)(at - from));
            if (ssl == NULL) { /* plain: the idle case's canned answer always has room */
                if (send(fd, answer->bytes, answer->len, MSG_NOSIGNAL) != (ssize_t)answer->len) {
                    return -1;
                }
                continue;
            }
            bool reads = read_mode && answer->head_len > 0;
            size_t chunk_size = !reads ? 0 : answer->len < CHUNK ? answer->len : CHUNK;
            struct pending *pending = malloc(sizeof(*pending) + chunk_size);
            if (pending == NULL) {
                return -1;
            }
            bool close_after = memmem(from, (size_t)(at - from), "HTTP/1.0", 8) != NULL;
            *pending = reads ? /* its bytes from the file, the head first, in pieces */
                           (struct pending){.close_after = close_after,
                                            .head = answer->bytes,
                                            .head_left = answer->head_len,
                                            .fd = answer->fd,
                                            .file_left = answer->len - answer->head_len,
                                            .chunk_size = chunk_size}
                             : (struct pending){.at = answer->bytes,
                                                .left = answer->len,
                                                .close_after = close_after};
            SSL_set_app_data(ssl, pending);
            rc = flush(ssl);
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    SSL_CTX *ctx = NULL;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(address);
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int poller = epoll_create1(0);

    if (argc < 2 || argc == 3 || argc > 6 || (argc == 6 && strcmp(argv[5], "read") != 0)) {
        fprintf(stderr, "usage: tls-floor PORT [CERT KEY [ROOT [read]]]\n");
        return 2;
    }
    read_mode = argc == 6;
    if (argc >= 5 && load(argv[4]) < 0) {
        fprintf(stderr, "tls-floor: cannot read the files of %s\n", argv[4]);
        return 1;
    }
    if (argc >= 4) {
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
            int rc = serve(fd, ssl);
            if (rc < 0) {
                free(ssl != NULL ? SSL_get_app_data(ssl) : NULL);
                SSL_free(ssl);
                close(fd);
            } else if (rc == 1 || (events[i].events & EPOLLOUT)) { /* room wanted, or no more */
                struct epoll_event wanted = {.events = EPOLLIN | (rc == 1 ? EPOLLOUT : 0),
                                             .data.ptr = ssl};
                epoll_ctl(poller, EPOLL_CTL_MOD, fd, &wanted);
            }
        }
    }
}
