/*
 * A request's body read as JSON (sxe_http_json(), sxe/http.h): the parse of sxe/json.h, and the
 * answer a client gets when its body is not what it should be, which says where.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sxe/http.h"
#include "sxe/json.h"
#include "sxe/log.h"

int sxe_http_json(sxe_http_t *http, sxe_json_t **root, const struct sxe_json_limits *limits)
{
    struct sxe_json_error error;
    char text[6 * sizeof(error.text) + 3], body[sizeof(text) + 128]; /* \u00XX each, quoted */
    size_t len;

    if (!SXE_CHECK(http != NULL)) {
        return -EINVAL;
    }
    const char *data = sxe_http_body(http, &len);
    int rc = sxe_json_parse(root, data, len, limits, &error);

    if (rc == 0 || root == NULL) {
        return rc; /* (no root is an invalid use: the parse asserted, or said -EINVAL) */
    }
    int status = rc == -EMSGSIZE ? 413 : rc == -ENOMEM ? 503 : rc == -ENOTSUP ? 500 : 400;
    if (sxe_json_string(text, sizeof(text), error.text, strlen(error.text)) < 0) {
        strcpy(text, "\"?\""); /* GCOVR_EXCL_LINE: text holds 159 control bytes escaped */
    }
    int body_len = snprintf(body, sizeof(body),
                            "{\"error\": %s, \"line\": %u, \"column\": %u, \"position\": %zu}\n",
                            text, error.line, error.column, error.position);
    (void)sxe_http_respond(http, status, "application/json", body, (size_t)body_len);
    return rc;
}
