/* A UDP echo server: every datagram goes back to its sender. Usage: udp-echo [port] (7007). */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sxe/sxe.h>

static void on_datagram(sxe_conn_t *socket, const char *data, size_t len,
                        const struct sockaddr *from, socklen_t from_len)
{
    sxe_udp_send(socket, data, len, from, from_len); /* a full socket buffer drops it, as UDP may */
}

int main(int argc, char **argv)
{
    static const struct sxe_conn_handlers handlers = {.on_datagram = on_datagram};
    struct sockaddr_in address = {.sin_family = AF_INET,
                                  .sin_port = htons(argc > 1 ? atoi(argv[1]) : 7007),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    sxe_loop_t *loop;
    sxe_conn_t *socket;
    int rc;

    if ((rc = sxe_loop_create(&loop, NULL)) < 0 ||
        (rc = sxe_loop_stop_on_signals(loop, SXE_NS_PER_SEC)) < 0 ||
        (rc = sxe_udp_bind(loop, &socket, (struct sockaddr *)&address, sizeof(address), &handlers,
                           NULL)) < 0) {
        fprintf(stderr, "udp-echo: cannot serve on port %u: %s\n", ntohs(address.sin_port),
                sxe_strerror(rc));
        return 1;
    }
    rc = sxe_loop_run(loop);
    sxe_loop_destroy(loop);
    return rc < 0;
}
