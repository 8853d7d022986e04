/*
 * The floor: the least a server can do to answer HTTP keep-alive requests through epoll, what sxe
 * is measured against. One thread, edge-triggered epoll, no timeouts and no limits.
 *
 * Usage: epoll-floor PORT [ROOT [PROCESSES]]
 *
 * Without ROOT, every request gets a canned Hello World: one recv per readiness event and one send
 * of all the replies it completes (recv and send, not read and write, which cost more: they pass
 * the file layer).
 *
 * With ROOT, it is the static-file floor. The regular files at the top of ROOT are loaded at
 * start-up, each with its 200 head made once, and a request for /NAME gets the file; any other
 * path gets a 404. What it does per request, and why nothing is cheaper on this kernel:
 * - A file of up to 32 KB is held in memory with its head in front of it, and its reply is sent
 *   by reference: one send of that buffer, or for pipelined requests one sendmsg whose iovecs
 *   point at each reply's buffer. Nothing is copied in user space, and the kernel copies the bytes
 *   once, into the socket.
 * - A larger file goes out as its head (send with MSG_MORE, so head and body share packets) and
 *   one sendfile from the open file: the kernel hands page-cache pages to the socket, with no copy
 *   on the sending side.
 * - The line between the two was measured here (a scratch program sending replies over loopback
 *   TCP to itself; the CPU time of the sending calls, which on loopback includes the delivery to
 *   the receiving socket): at 12 B and at 4 KB, a send from memory costs 1.9 us, head + sendfile
 *   2.5 us, and one sendfile of head and body together from a memfd 2.2 us (the page-cache and
 *   pipe work outweigh copying a few KB); the two meet between 32 and 64 KB; at 1 MB, head +
 *   sendfile costs 49 us, the memfd sendfile 62 us and a send from memory 112 us.
 * - It asks for writability (EPOLLOUT) only when a write must wait: a short send or sendfile means
 *   the socket is full (TCP returns short only then, and marks the socket so that the room coming
 *   back wakes epoll). The rest of the reply, and any requests behind it, wait for that event, and
 *   EPOLLOUT is given up again once the reply is out. A reply that fits, the usual case, costs no
 *   epoll call at all.
 * - TCP_NODELAY is set once on the listener, which accepted connections inherit.
 * Requests are found by their "\r\n\r\n"; a request cut between reads, or not yet answered while
 * a reply waits, is kept (copied) until it is whole: that copy happens only then. No cache checks,
 * conditional requests, ranges, logs or timeouts.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define FILES_MAX   16
#define INLINE_MAX  32768 /* files up to this size are sent from memory, larger ones by sendfile */
#define CLIENTS_MAX 65536
#define REPLIES_MAX 64 /* replies in one send (canned) or one sendmsg (files) */
#define INPUT_MAX   16384

/* What a request gets: bytes from memory (a small file's head and body, or a large file's head),
 * then for a large file the bytes [from, to) of the open file fd, by sendfile. */
struct reply {
    char *bytes;
    size_t len;
    int fd; /* -1 for a reply all in memory */
    off_t from, to;
};

struct file {
    char path[256]; /* "/NAME" */
    size_t path_len;
    struct reply reply[2]; /* [1] for Connection: close */
};

/* A connection of the static-file floor: a reply that had to wait for room, and input that is not
 * answered yet (kept only while a reply waits, or while a request is cut short). */
struct conn {
    const struct reply *reply; /* NULL when nothing waits */
    size_t sent;               /* of reply */
    bool close_after;          /* the waiting reply answers "Connection: close" */
    bool wants_out;            /* EPOLLOUT is asked for */
    char *held;
    size_t held_len;
};

static const char hello[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";
static char missing_bytes[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static const struct reply missing = {missing_bytes, sizeof(missing_bytes) - 1, -1, 0, 0};
static struct file files[FILES_MAX];
static size_t files_count;
static struct conn conns[CLIENTS_MAX];
static int epfd;

static void load(const char *root)
{
    DIR *dir = opendir(root);
    for (struct dirent *entry;
         dir != NULL && (entry = readdir(dir)) != NULL && files_count < FILES_MAX;) {
        char name[4096];
        struct stat status;
        snprintf(name, sizeof(name), "%s/%s", root, entry->d_name);
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &status) < 0 || !S_ISREG(status.st_mode)) {
            close(fd);
            continue;
        }
        struct file *file = &files[files_count++];
        file->path_len = (size_t)snprintf(file->path, sizeof(file->path), "/%s", entry->d_name);
        bool inline_body = status.st_size <= INLINE_MAX;
        size_t body_len = inline_body ? (size_t)status.st_size : 0;
        for (int close_it = 0; close_it < 2; close_it++) {
            char head[128];
            size_t head_len = (size_t)snprintf(head, sizeof(head),
                                               "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                               "Content-Length: %lld\r\n%s\r\n",
                                               (long long)status.st_size,
                                               close_it ? "Connection: close\r\n" : "");
            struct reply *reply = &file->reply[close_it];
            reply->bytes = malloc(head_len + body_len);
            memcpy(reply->bytes, head, head_len);
            reply->len = head_len + (size_t)pread(fd, reply->bytes + head_len, body_len, 0);
            reply->fd = inline_body ? -1 : fd;
            reply->from = 0;
            reply->to = inline_body ? 0 : status.st_size;
        }
        if (inline_body) {
            close(fd);
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
}

/* The reply to a request (a path's file, or the 404). */
static const struct reply *find(const char *request, size_t len, bool close_it)
{
    const char *path = memchr(request, ' ', len);
    if (path == NULL) {
        return &missing;
    }
    path++;
    const char *end = memchr(path, ' ', len - (size_t)(path - request));
    for (size_t i = 0; end != NULL && i < files_count; i++) {
        if ((size_t)(end - path) == files[i].path_len &&
            memcmp(path, files[i].path, files[i].path_len) == 0) {
            return &files[i].reply[close_it];
        }
    }
    return &missing;
}

/* The canned floor: answers what the connection has sent; returns -1 when it should be closed. */
static int serve_canned(int fd)
{
    static char in[INPUT_MAX], out[REPLIES_MAX * (sizeof(hello) - 1)];

    ssize_t got = recv(fd, in, sizeof(in), 0);
    if (got <= 0) {
        return got < 0 && errno == EAGAIN ? 0 : -1;
    }
    size_t out_len = 0, replies = 0;
    for (char *at = in, *end; (end = memmem(at, (size_t)(in + got - at), "\r\n\r\n", 4)) != NULL;
         at = end + 4) {
        if (replies++ == REPLIES_MAX) {
            break; /* more than 64 pipelined requests in one read: answer 64 */
        }
        memcpy(out + out_len, hello, sizeof(hello) - 1);
        out_len += sizeof(hello) - 1;
    }
    return out_len > 0 && send(fd, out, out_len, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

/* Asks for EPOLLOUT (a write must wait) or gives it up (nothing waits any more). */
static int want_out(int fd, struct conn *conn, bool wanted)
{
    if (conn->wants_out != wanted) {
        struct epoll_event event = {.events = EPOLLIN | EPOLLET | (wanted ? EPOLLOUT : 0),
                                    .data.fd = fd};
        if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &event) < 0) {
            return -1;
        }
        conn->wants_out = wanted;
    }
    return 0;
}

/* Sends what is left of the connection's waiting reply; returns 1 when it is all out, 0 when the
 * socket is full (a short write: TCP wakes epoll when room comes back), -1 on an error. */
static int reply_push(int fd, struct conn *conn)
{
    const struct reply *reply = conn->reply;
    size_t total = reply->len + (size_t)(reply->to - reply->from);

    if (conn->sent < reply->len) {
        ssize_t sent = send(fd, reply->bytes + conn->sent, reply->len - conn->sent,
                            MSG_NOSIGNAL | (reply->fd >= 0 ? MSG_MORE : 0));
        if (sent < 0) {
            return errno == EAGAIN ? 0 : -1;
        }
        conn->sent += (size_t)sent;
        if (conn->sent < reply->len) {
            return 0;
        }
    }
    if (conn->sent < total) {
        off_t offset = reply->from + (off_t)(conn->sent - reply->len);
        ssize_t sent = sendfile(fd, reply->fd, &offset, total - conn->sent);
        if (sent <= 0) {
            return sent < 0 && errno == EAGAIN ? 0 : -1;
        }
        conn->sent += (size_t)sent;
        if (conn->sent < total) {
            return 0;
        }
    }
    conn->reply = NULL;
    return 1;
}

/* Keeps len bytes of input for later. */
static int hold(struct conn *conn, const char *data, size_t len)
{
    if (len == 0) {
        return 0;
    }
    conn->held = malloc(len);
    if (conn->held == NULL) {
        return -1;
    }
    memcpy(conn->held, data, len);
    conn->held_len = len;
    return 0;
}

/* Replies in memory, gathered to go out in one call. next[i] is where the input after the
 * request of reply i begins. */
struct batch {
    struct iovec iov[REPLIES_MAX];
    const struct reply *reply[REPLIES_MAX];
    size_t next[REPLIES_MAX];
    unsigned count;
};

/* Sends a batch. If the socket takes only part of it, the reply it stopped in waits (it is
 * cached, so its remainder is sent from where it is) and the input after that reply's request is
 * held. Returns 1 when all went, 0 when a reply waits, -1 on an error. */
static int batch_send(int fd, struct conn *conn, struct batch *batch, bool last_closes,
                      const char *input, size_t input_len)
{
    struct msghdr message = {.msg_iov = batch->iov, .msg_iovlen = batch->count};
    size_t total = 0;
    ssize_t sent;

    if (batch->count == 0) {
        return 1;
    }
    for (unsigned i = 0; i < batch->count; i++) {
        total += batch->iov[i].iov_len;
    }
    sent = batch->count == 1 ? send(fd, batch->iov[0].iov_base, total, MSG_NOSIGNAL)
                             : sendmsg(fd, &message, MSG_NOSIGNAL);
    if (sent < 0 && errno != EAGAIN) {
        return -1;
    }
    size_t left = sent < 0 ? 0 : (size_t)sent;
    unsigned count = batch->count;
    batch->count = 0;
    if (left == total) {
        return 1;
    }
    unsigned i = 0;
    while (left >= batch->iov[i].iov_len) {
        left -= batch->iov[i++].iov_len;
    }
    conn->reply = batch->reply[i];
    conn->sent = left;
    conn->close_after = last_closes && i == count - 1;
    return conn->close_after ? 0 : hold(conn, input + batch->next[i], input_len - batch->next[i]);
}

/* Answers the whole requests in len bytes of input and holds what follows the last one. Returns
 * 0 when it is done or a reply waits (conn->reply), -1 when the connection should be closed. */
static int answer(int fd, struct conn *conn, char *input, size_t len)
{
    struct batch batch = {.count = 0};
    size_t at = 0;
    int rc = 1;

    for (char *end; rc == 1 && (end = memmem(input + at, len - at, "\r\n\r\n", 4)) != NULL;) {
        size_t next = (size_t)(end + 4 - input);
        /* Only the spelling wrk sends: what the connection-rate benchmark needs. */
        bool close_it =
            memmem(input + at, (size_t)(end + 2 - (input + at)), "\r\nConnection: close\r\n", 21);
        const struct reply *reply = find(input + at, (size_t)(end - (input + at)), close_it);
        at = next;
        if (reply->fd < 0) {
            batch.iov[batch.count] = (struct iovec){reply->bytes, reply->len};
            batch.reply[batch.count] = reply;
            batch.next[batch.count++] = next;
            if (close_it || batch.count == REPLIES_MAX) {
                rc = batch_send(fd, conn, &batch, close_it, input, len);
            }
        } else { /* a large file: what is batched goes first, then its head and sendfile */
            rc = batch_send(fd, conn, &batch, false, input, len);
            if (rc == 1) {
                conn->reply = reply;
                conn->sent = 0;
                conn->close_after = close_it;
                rc = reply_push(fd, conn);
                if (rc == 0 && !close_it && hold(conn, input + next, len - next) < 0) {
                    rc = -1;
                }
            }
        }
        if (close_it) {
            return rc == 1 ? -1 : rc; /* nothing after a "Connection: close" is answered */
        }
    }
    if (rc == 1) {
        rc = batch_send(fd, conn, &batch, false, input, len);
    }
    if (rc == 1 && len - at == INPUT_MAX) {
        return -1; /* a request larger than the input buffer: not for a floor */
    }
    return rc < 0 ? -1 : rc == 1 ? hold(conn, input + at, len - at) : 0;
}

/* The static-file floor: goes on with a waiting reply, then answers what the connection has sent,
 * reading until a read comes back short. Returns -1 when the connection should be closed. */
static int serve_files(int fd)
{
    static char in[INPUT_MAX];
    struct conn *conn = &conns[fd];

    if (conn->reply != NULL) {
        int pushed = reply_push(fd, conn);
        if (pushed <= 0) {
            return pushed < 0 ? -1 : want_out(fd, conn, true);
        }
        if (conn->close_after) {
            return -1;
        }
    }
    for (;;) {
        size_t len = conn->held_len;
        if (len > 0) {
            memcpy(in, conn->held, len);
            free(conn->held);
            conn->held = NULL;
            conn->held_len = 0;
        }
        ssize_t got = recv(fd, in + len, sizeof(in) - len, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN)) {
            return -1;
        }
        if (got < 0 && len == 0) {
            break;
        }
        bool drained = got < 0 || (size_t)got < sizeof(in) - len;
        if (answer(fd, conn, in, len + (got < 0 ? 0 : (size_t)got)) < 0) {
            return -1;
        }
        if (conn->reply != NULL) {
            return want_out(fd, conn, true);
        }
        if (drained) {
            break;
        }
    }
    return want_out(fd, conn, false);
}

static void conn_close(int fd, bool static_files)
{
    if (static_files) {
        free(conns[fd].held);
        conns[fd] = (struct conn){.reply = NULL};
    }
    close(fd);
}

int main(int argc, char **argv)
{
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? atoi(argv[1]) : 8080),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool static_files = argc > 2 && strcmp(argv[2], "-") != 0;
    int processes = argc > 3 ? atoi(argv[3]) : 1;

    if (static_files) {
        load(argv[2]);
    }
    /* sendfile has no MSG_NOSIGNAL: a peer that resets in the middle of a large file would kill
     * the floor with SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    /* PROCESSES copies, each with its own socket on the port (SO_REUSEPORT): the floor of
     * workers. Stop them as a process group. */
    for (int p = 1; p < processes && fork() > 0; p++) {
    }
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    epfd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener}, events[256];
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (processes > 1) {
        setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    }
    if (static_files) { /* accepted connections inherit it: no call per connection */
        setsockopt(listener, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
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
                    if (conn >= CLIENTS_MAX || epoll_ctl(epfd, EPOLL_CTL_ADD, conn, &add) < 0) {
                        close(conn);
                        continue;
                    }
                    /* The request usually came with the connection: read it now, not a turn
                     * later (as h2o and sxe do), so an answer-and-close needs no wait at all. */
                    if ((static_files ? serve_files(conn) : serve_canned(conn)) < 0) {
                        conn_close(conn, static_files);
                    }
                }
                continue;
            }
            if ((static_files ? serve_files(fd) : serve_canned(fd)) < 0) {
                conn_close(fd, static_files);
            }
        }
    }
}
