#define _GNU_SOURCE /* memmem */
/* HTTP/1.1 keep-alive "Hello World" on raw callbacks: one canned reply per complete request,
 * pipelining included. Usage: hello [port [processes]] (8080, 1): several processes each run a
 * loop on the port (SO_REUSEPORT). Each stops cleanly on SIGINT or SIGTERM (kill the group). */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>
#include <unistd.h>

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                            "Content-Length: 12\r\n\r\nHello World\n";

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    size_t used = 0;
    for (const char *end; (end = memmem(data + used, len - used, "\r\n\r\n", 4)) != NULL;) {
        sxe_conn_write(conn, reply, sizeof(reply) - 1);
        used = (size_t)(end - data) + 4;
    }
    return used; /* a partial request stays buffered for the next read */
}

int main(int argc, char **argv)
{
    static const struct sxe_conn_handlers handlers = {.on_read = on_read};
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? atoi(argv[1]) : 8080),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int processes = argc > 2 ? atoi(argv[2]) : 1;
    struct sxe_listen_options listen_options = {.flags = processes > 1 ? SXE_LISTEN_REUSEPORT : 0};
    struct sxe_loop_options options = {.connections = 19000, .buffers = 1024};
    sxe_loop_t *loop;
    sxe_conn_t *listener;
    int rc;

    while (processes-- > 1 && fork() > 0) { /* each process: its own loop on the same port */
    }
    if ((rc = sxe_loop_create(&loop, &options)) < 0 ||
        (rc = sxe_loop_stop_on_signals(loop, SXE_NS_PER_SEC)) < 0 ||
        (rc = sxe_conn_listen(loop, &listener, (struct sockaddr *)&address, sizeof(address),
                              &listen_options, &handlers, NULL)) < 0) {
        fprintf(stderr, "hello: cannot serve on port %u: %s\n", ntohs(address.sin_port),
                sxe_strerror(rc));
        return 1;
    }
    rc = sxe_loop_run(loop);
    sxe_loop_destroy(loop);
    return rc < 0;
}
