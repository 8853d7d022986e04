/*
 * HTTP/2 in a build without libnghttp2 (-DSXE_HTTP2=OFF, or libnghttp2-dev missing): no session
 * ever begins, so the preface is refused as an HTTP/1.1 request of version 2.0 (505), and no
 * stream reaches the rest of these.
 */
#include <errno.h>

#include "server.h"

const struct sxe_conn_handlers sxe__h2_events = {0};

bool sxe__h2_begin(sxe_http_server_t *server, sxe_conn_t *conn)
{
    (void)server, (void)conn;
    return false;
}

void sxe__h2_offer(sxe_tls_t *tls)
{
    (void)tls; /* ALPN names http/1.1 only */
}

void sxe__h2_going_away(sxe_http_server_t *server)
{
    (void)server; /* no connection speaks HTTP/2 */
}

size_t sxe__h2_read(sxe_http_server_t *server, sxe_conn_t *conn, const char *data, size_t len)
{
    (void)server, (void)conn, (void)data;
    return len;
}

int sxe__h2_start(sxe_http_t *http, int status, const char *content_type, const char *date,
                  size_t date_len, const char *headers, int64_t content_length)
{
    (void)http, (void)status, (void)content_type, (void)date, (void)date_len, (void)headers;
    (void)content_length;
    return -ENOTSUP;
}

int sxe__h2_data(sxe_http_t *http, const void *data, size_t len, bool copy,
                 sxe_conn_release_t release, void *arg)
{
    (void)http, (void)data, (void)len, (void)copy;
    if (release != NULL) {
        release(arg);
    }
    return -ENOTSUP;
}

int sxe__h2_file(sxe_http_t *http, int fd, off_t offset, size_t len, bool close_when_sent,
                 sxe_conn_release_t release, void *arg)
{
    (void)http, (void)offset, (void)len;
    if (close_when_sent) {
        sxe_fd_close(fd);
    }
    if (release != NULL) {
        release(arg);
    }
    return -ENOTSUP;
}

void sxe__h2_end(sxe_http_t *http)
{
    (void)http;
}

void sxe__h2_reset(struct h2_stream *stream)
{
    (void)stream;
}

void sxe__h2_body_offer(struct slot *held)
{
    (void)held; /* no stream without HTTP/2 */
}

bool sxe__h2_backed_up(const struct h2_stream *stream)
{
    (void)stream;
    return false;
}
