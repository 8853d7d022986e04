/*
 * A service that calls another service, written as sequential code: each request runs on a fiber,
 * asks the upstream (over a pool of keep-alive connections) for the same path, and answers with
 * what it said, or 502 if it could not say. The loop serves everyone else while a fiber waits.
 *
 *     http-gateway [IP:PORT [UPSTREAM]]        (127.0.0.1:8081, 127.0.0.1:8080)
 *     examples/http-hello 127.0.0.1:8080 &  http-gateway &  curl http://127.0.0.1:8081/
 */
#include <stdio.h>
#include <sxe/sxe.h>

static sxe_http_client_t *upstream;

static void relay(sxe_http_t *http, void *arg)
{
    struct sxe_http_client_reply reply;
    char text[256];

    (void)arg;
    const struct sxe_http_request_head *request = sxe_http_request_head(http);
    char target[2048];
    if (request->target_len >= sizeof(target)) {
        sxe_http_respond(http, 414, "text/plain", "too long\n", 9);
        return;
    }
    snprintf(target, sizeof(target), "%.*s", (int)request->target_len, request->target);
    int rc = sxe_http_client_fetch_wait(
        upstream, &(struct sxe_http_client_request){.target = target}, &reply);
    if (rc < 0) {
        int len =
            snprintf(text, sizeof(text), "the upstream did not answer: %s\n", sxe_strerror(rc));
        sxe_http_respond(http, 502, "text/plain", text, (size_t)len);
        return;
    }
    const struct sxe_http_header *type = sxe_http_response_header(&reply.response, "Content-Type");
    char headers[256];
    snprintf(headers, sizeof(headers), "Content-Type: %.*s\r\n", type ? (int)type->value_len : 10,
             type ? type->value : "text/plain");
    sxe_http_respond_with(http, reply.response.status, NULL, headers, reply.body, reply.body_len);
    sxe_http_client_reply_free(&reply);
}

int main(int argc, char **argv)
{
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8081";
    sxe_http_server_t *server = NULL; /* 256 fibers, and 256 requests held for them, by default */
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, NULL)) < 0 ||
        (rc = sxe_http_client_create(&upstream, sxe_http_server_loop(server),
                                     argc > 2 ? argv[2] : "127.0.0.1:8080", NULL)) < 0 ||
        (rc = sxe_http_server_route(
             server, "GET", "/", SXE_HTTP_ROUTE_FIBER | SXE_HTTP_ROUTE_PREFIX, relay, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-gateway: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_client_destroy(upstream);
    sxe_http_server_destroy(server);
    return rc < 0;
}
