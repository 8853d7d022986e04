/* A JSON API: GET /hello?name=NAME says hello in JSON; POST /hello takes {"name": NAME, "times": N}
 * (a string of 1 to 64 bytes, an integer from 1 to 3), checks it and says hello N times, and a
 * body that is not JSON gets a 400 that says where; POST /echo sends the body back. Each adds the
 * header given as its route's arg. Usage: http-api [IP:PORT] (127.0.0.1:8080). */
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

static void hello_posted(sxe_http_t *http, void *arg)
{
    sxe_json_t *request;
    if (sxe_http_json(http, &request, NULL) < 0) /* not JSON, or too big: answered */
        return;
    size_t len;
    int64_t times;
    const char *name = sxe_json_text(sxe_json_get(request, "name"), &len);
    if (name == NULL || len == 0 || len > 64 || strlen(name) != len ||
        sxe_json_integer(sxe_json_get(request, "times"), &times) < 0 || times < 1 || times > 3) {
        sxe_http_respondf(http, 422, "application/json", arg,
                          "{\"error\": \"want a name of 1 to 64 bytes and times from 1 to 3\"}\n");
    } else {
        char quoted[400], list[3 * 402] = "";
        (void)sxe_json_string(quoted, sizeof(quoted), name, len); /* 64 bytes fit, escaped */
        for (int64_t i = 0; i < times; i++)
            strcat(strcat(list, i > 0 ? ", " : ""), quoted);
        sxe_http_respondf(http, 200, "application/json", arg, "{\"hello\": [%s]}\n", list);
    }
    sxe_json_free(request);
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
        (rc = sxe_http_server_route(server, "POST", "/hello", 0, hello_posted, api_header)) < 0 ||
        (rc = sxe_http_server_route(server, "POST", "/echo", 0, echo, api_header)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "http-api: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
