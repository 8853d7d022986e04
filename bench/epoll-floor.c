/*
 * The floor: the least a server can do to answer HTTP keep-alive requests. One thread,
 * edge-triggered epoll, one recv per readiness event, one send of all the replies a recv completes
 * (recv and send, not read and write, which cost more: they pass the file layer). No buffers kept,
 * no timeouts, no limits: what sxe is measured against.
 *
 * Usage: epoll-floor PORT [ROOT [PROCESSES]]
 *
 * Without ROOT, every request gets a canned Hello World. With ROOT, the regular files at the top
 * of ROOT are the static-file floor: they are loaded at start-up, each with its 200 head ready, and
 * a request for /NAME gets the file. A file of up to 64 KB is held in memory and goes out with its
 * head in the same send; a larger one goes out as its head (MSG_MORE) and one sendfile from the
 * open file, continued on EPOLLOUT when the socket fills. That is what sxe-httpd does for cached
 * files, with no cache checks, conditional requests, ranges, logs or timeouts. Any other path gets
 * a 404. Requests pipelined behind a large file are not supported (the connection is closed).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILES_MAX   16
#define INLINE_MAX  65536
#define CLIENTS_MAX 65536
#define REPLIES_MAX 64

struct file {
    char path[256]; /* "/NAME" */
    size_t path_len;
    char
        *reply[2]; /* the head, and for a small file the body after it; [1] for Connection: close */
    size_t reply_len[2];
    int fd; /* a large file's, for sendfile; -1 for a small one */
    off_t size;
};

static const char hello[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";
static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
static struct file files[FILES_MAX];
static size_t files_count;
static off_t sending[CLIENTS_MAX]; /* a large file's next offset per fd, -1 when idle */
static struct file *sending_file[CLIENTS_MAX];
static bool closing[CLIENTS_MAX]; /* close once the large file is sent */

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
        file->size = status.st_size;
        size_t body_len = status.st_size <= INLINE_MAX ? (size_t)status.st_size : 0;
        for (int close_it = 0; close_it < 2; close_it++) {
            char head[128];
            size_t head_len = (size_t)snprintf(head, sizeof(head),
                                               "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                               "Content-Length: %lld\r\n%s\r\n",
                                               (long long)status.st_size,
                                               close_it ? "Connection: close\r\n" : "");
            file->reply[close_it] = malloc(head_len + body_len);
            memcpy(file->reply[close_it], head, head_len);
            file->reply_len[close_it] =
                head_len + (size_t)pread(fd, file->reply[close_it] + head_len, body_len, 0);
        }
        file->fd = fd;
        if (status.st_size <= INLINE_MAX) { /* held in memory */
            close(fd);
            file->fd = -1;
        }
    }
    if (dir != NULL) {
        closedir(dir);
    }
}

/* The file a request names, or NULL. */
static struct file *find(const char *request, size_t len)
{
    const char *path = memchr(request, ' ', len);
    if (path == NULL) {
        return NULL;
    }
    path++;
    const char *end = memchr(path, ' ', len - (size_t)(path - request));
    for (size_t i = 0; end != NULL && i < files_count; i++) {
        if ((size_t)(end - path) == files[i].path_len &&
            memcmp(path, files[i].path, files[i].path_len) == 0) {
            return &files[i];
        }
    }
    return NULL;
}

/* Goes on with a large file; returns 1 when it is all sent, 0 when the socket is full, -1 on an
 * error. */
static int push(int fd)
{
    struct file *file = sending_file[fd];
    while (sending[fd] < file->size) {
        ssize_t sent = sendfile(fd, file->fd, &sending[fd], (size_t)(file->size - sending[fd]));
        if (sent <= 0) {
            return sent < 0 && errno == EAGAIN ? 0 : -1;
        }
    }
    sending[fd] = -1;
    return closing[fd] ? -1 : 1;
}

/* Answers what the connection has sent; returns -1 when it should be closed. */
static int serve(int fd, bool static_files)
{
    static char in[16384], out[REPLIES_MAX * (INLINE_MAX + 128)];

    if (sending[fd] >= 0) {
        int pushed = push(fd);
        if (pushed <= 0) {
            return pushed;
        }
    }
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
        const char *reply = hello;
        size_t reply_len = sizeof(hello) - 1;
        struct file *file = NULL;
        /* Only the spelling wrk sends: what the connection-rate benchmark needs. */
        bool close_it = static_files &&
                        memmem(at, (size_t)(end + 2 - at), "\r\nConnection: close\r\n", 21) != NULL;
        if (static_files) {
            file = find(at, (size_t)(end - at));
            reply = file != NULL ? file->reply[close_it] : missing;
            reply_len = file != NULL ? file->reply_len[close_it] : sizeof(missing) - 1;
        }
        memcpy(out + out_len, reply, reply_len);
        out_len += reply_len;
        if (close_it && (file == NULL || file->fd < 0)) {
            send(fd, out, out_len, MSG_NOSIGNAL);
            return -1;
        }
        if (file != NULL && file->fd >= 0) {
            if (end + 4 != in + got) {
                return -1; /* a request pipelined behind a large file */
            }
            if (send(fd, out, out_len, MSG_NOSIGNAL | MSG_MORE) != (ssize_t)out_len) {
                return -1;
            }
            sending[fd] = 0;
            sending_file[fd] = file;
            closing[fd] = close_it;
            return push(fd) < 0 ? -1 : 0;
        }
    }
    return out_len > 0 && send(fd, out, out_len, MSG_NOSIGNAL) < 0 ? -1 : 0;
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
    /* PROCESSES copies, each with its own socket on the port (SO_REUSEPORT): the floor of
     * workers. Stop them as a process group. */
    for (int p = 1; p < processes && fork() > 0; p++) {
    }
    int one = 1, listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0),
        epfd = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener}, events[256];
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (processes > 1) {
        setsockopt(listener, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
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
                    /* The canned floor as it always was; files need EPOLLOUT and no Nagle. */
                    struct epoll_event add = {.events =
                                                  EPOLLIN | EPOLLET | (static_files ? EPOLLOUT : 0),
                                              .data.fd = conn};
                    if (conn >= CLIENTS_MAX || epoll_ctl(epfd, EPOLL_CTL_ADD, conn, &add) < 0) {
                        close(conn);
                        continue;
                    }
                    if (static_files) {
                        setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                    }
                    sending[conn] = -1;
                    /* The request usually came with the connection: read it now, not a turn
                     * later (as h2o and sxe do), so an answer-and-close needs no wait at all. */
                    if (serve(conn, static_files) < 0) {
                        close(conn);
                    }
                }
                continue;
            }
            if (serve(fd, static_files) < 0) {
                close(fd);
            }
        }
    }
}
