/* A JSON API: GET /hello?name=NAME says hello in JSON, POST /echo sends the body back; both add the
 * header given as their route's arg. Usage: http-api [IP:PORT] (127.0.0.1:8080). */
#include <stdio.h>
#include <string.h>
#include <sxe/sxe.h>

static char api_header[] = "X-Api: 1\r\n";

static void hello(sxe_http_t *http, void *arg)
{
    char name[256] = "world", quoted[1600];
    (void)sxe_http_query_param(http, "name", name, sizeof(name)); /* unchanged when absent */
    (void)sxe_json_string(quoted, sizeof(quoted), name, strlen(name));
    sxe_http_respondf(http, 200, "application/json", arg, "{\"hello\": %s}\n", quoted);
}

static void echo(sxe_http_t *http, void *arg)
{
    size_t len;
    const char *body = sxe_http_body(http, &len);
    sxe_http_respond_with(http, 200, "application/octet-stream", arg, body, len);
}

int main(int argc, char **argv)
{
    const char *address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    sxe_http_server_t *server = NULL;
    int rc;

    if ((rc = sxe_http_server_create(&server, NULL, NULL)) < 0 ||
        (rc = sxe_http_server_route(server, "GET", "/hello", 0, hello, api_header)) < 0 ||
        (rc = sxe_http_server_route(server, "POST", "/echo", 0, echo, api_header)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-api: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
