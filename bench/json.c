/*
 * What reading a request's body as JSON costs: POST / with a JSON body answered "ok" after the
 * body is parsed with sxe_http_json() (parse), after it is only looked at (raw), or after yyjson
 * alone has read it into its tree and freed it (yyjson: the parser without sxe's limits and
 * checks, the floor of parse). bench/all's "json" suite loads each with the same 4 KB body, in
 * turn, and compares their CPU per request.
 *
 *     bench/json PORT parse|raw|yyjson
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sxe/sxe.h>

#include "yyjson.h" /* third_party/yyjson, compiled into this program (sxe exports none of it) */

static void parse(sxe_http_t *http, void *arg)
{
    sxe_json_t *root;

    (void)arg;
    if (sxe_http_json(http, &root, NULL) < 0) {
        return; /* answered 400 */
    }
    sxe_http_respond(http, sxe_json_type(root) == SXE_JSON_OBJECT ? 200 : 422, "text/plain", "ok\n",
                     3);
    sxe_json_free(root);
}

static void raw(sxe_http_t *http, void *arg)
{
    size_t len;
    const char *body = sxe_http_body(http, &len);

    (void)arg;
    sxe_http_respond(http, len > 0 && body[0] == '{' ? 200 : 422, "text/plain", "ok\n", 3);
}

static void floor_of_parse(sxe_http_t *http, void *arg)
{
    size_t len;
    const char *body = sxe_http_body(http, &len);
    yyjson_doc *doc = yyjson_read(body, len, 0);

    (void)arg;
    sxe_http_respond(http, yyjson_is_obj(yyjson_doc_get_root(doc)) ? 200 : 422, "text/plain",
                     "ok\n", 3);
    yyjson_doc_free(doc);
}

int main(int argc, char **argv)
{
    char address[32];
    sxe_http_server_t *server = NULL;
    int rc = -EINVAL;

    sxe_http_handler_t handler = argc != 3                        ? NULL
                                 : strcmp(argv[2], "parse") == 0  ? parse
                                 : strcmp(argv[2], "raw") == 0    ? raw
                                 : strcmp(argv[2], "yyjson") == 0 ? floor_of_parse
                                                                  : NULL;
    if (handler == NULL) {
        fprintf(stderr, "usage: json PORT parse|raw|yyjson\n");
        return 2;
    }
    snprintf(address, sizeof(address), "127.0.0.1:%s", argv[1]);
    if ((rc = sxe_http_server_create(&server, NULL, NULL)) < 0 ||
        (rc = sxe_http_server_route(server, "POST", "/", 0, handler, NULL)) < 0 ||
        (rc = sxe_http_server_listen(server, address)) < 0) {
        fprintf(stderr, "json: cannot serve on %s: %s\n", address, sxe_strerror(rc));
    } else {
        rc = sxe_http_server_run(server);
    }
    sxe_http_server_destroy(server);
    return rc < 0;
}
