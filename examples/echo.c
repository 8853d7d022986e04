/* A TCP echo server: every byte read is written back. Usage: echo [IP:PORT] (127.0.0.1:7007). */
#include <stdio.h>
#include <sxe/sxe.h>

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    if (sxe_conn_write(conn, data, len) < 0) {
        sxe_conn_close(conn); /* the peer reads too slowly to keep up: let it go */
    }
    return len;
}

int main(int argc, char **argv)
{
    static const struct sxe_conn_handlers handlers = {.on_read = on_read};
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:7007";
    sxe_loop_t *loop = NULL;
    sxe_conn_t *listener;
    int rc;

    if ((rc = sxe_loop_create(&loop, NULL)) < 0 ||
        (rc = sxe_loop_stop_on_signals(loop, SXE_NS_PER_SEC)) < 0 ||
        (rc = sxe_conn_listen_at(loop, &listener, address, NULL, &handlers, NULL)) < 0) {
        fprintf(stderr, "echo: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_loop_run(loop);
    }
    sxe_loop_destroy(loop);
    return rc < 0;
}
