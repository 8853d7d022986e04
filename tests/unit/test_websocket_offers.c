/*
 * permessage-deflate offers (RFC 7692 §5, §7.1) read one by one (sxe__ws_deflate_negotiate()):
 * each parameter, each window size at the edges of 8..15 and of the bytes around '0'..'9',
 * quoted or not, repeated, unknown, valueless where a value belongs, in another case, with spaces
 * and tabs; offers in a list (the first that can be taken wins), other extensions, and the
 * field's name. The answer the server would send is checked whole.
 */
#include <stdio.h>
#include <string.h>

#include "sxe/http.h"
#include "sxe_test.h"
#include "websocket/ws.h"

#define BOTH "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

/* Negotiates over one field name: value; checks the bits and the answer (NULL: none). */
static void expect_offer(const char *name, const char *value, int bits, const char *answer)
{
    static struct sxe_http_request_head request;
    char out[256] = "";

    request.header_count = 2;
    request.headers[0] =
        (struct sxe_http_header){.name = "Host", .name_len = 4, .value = "h", .value_len = 1};
    request.headers[1] = (struct sxe_http_header){
        .name = name, .name_len = strlen(name), .value = value, .value_len = strlen(value)};

    int got = sxe__ws_deflate_negotiate(&request, out, sizeof(out));
    if (got != bits || (answer != NULL && strcmp(out, answer) != 0) ||
        (answer == NULL && out[0] != '\0')) {
        fail_msg("%s: %s: %d \"%s\", want %d \"%s\"", name, value, got, out, bits,
                 answer != NULL ? answer : "");
    }
}

static void offer(const char *value, int bits)
{
    char answer[256];
    snprintf(answer, sizeof(answer), BOTH "%s", bits == 15 ? "" : "; server_max_window_bits=");
    if (bits > 0 && bits < 15) {
        snprintf(answer + strlen(answer), sizeof(answer) - strlen(answer), "%d", bits);
    }
    expect_offer("Sec-WebSocket-Extensions", value, bits, bits > 0 ? answer : NULL);
}

static void test_window_sizes_at_their_edges(void **state)
{
    (void)state;
    offer("permessage-deflate", 15);
    offer("permessage-deflate; server_max_window_bits=15", 15);
    offer("permessage-deflate; server_max_window_bits=14", 14);
    offer("permessage-deflate; server_max_window_bits=10", 10);
    offer("permessage-deflate; server_max_window_bits=9", 9);
    offer("permessage-deflate; server_max_window_bits=\"12\"", 12);
    offer("permessage-deflate; server_max_window_bits= 11", 11);
    offer("permessage-deflate; server_max_window_bits=8", 0); /* zlib cannot keep to 256 bytes */
    offer("permessage-deflate; server_max_window_bits=7", 0);
    offer("permessage-deflate; server_max_window_bits=16", 0);
    offer("permessage-deflate; server_max_window_bits=19", 0);
    offer("permessage-deflate; server_max_window_bits=1/", 0); /* the byte before '0' */
    offer("permessage-deflate; server_max_window_bits=1:", 0); /* and after '9' */
    offer("permessage-deflate; server_max_window_bits=:", 0);
    offer("permessage-deflate; server_max_window_bits=A", 0);
    offer("permessage-deflate; server_max_window_bits=/", 0);
    offer("permessage-deflate; server_max_window_bits=09", 0);
    offer("permessage-deflate; server_max_window_bits=105", 0);
    offer("permessage-deflate; server_max_window_bits=\"9", 0);
    offer("permessage-deflate; server_max_window_bits=\"\"", 0);
    offer("permessage-deflate; server_max_window_bits=", 0);
    offer("permessage-deflate; server_max_window_bits", 0); /* the server's needs a value */
    offer("permessage-deflate; client_max_window_bits", 15);
    offer("permessage-deflate; client_max_window_bits=10", 15); /* the client's own window */
    offer("permessage-deflate; client_max_window_bits=16", 0);
    offer("permessage-deflate; client_max_window_bits=8; server_max_window_bits=13", 13);
}

static void test_parameters_and_lists(void **state)
{
    (void)state;
    offer("permessage-deflate; server_no_context_takeover", 15);
    offer("permessage-deflate; client_no_context_takeover", 15);
    offer("permessage-deflate;server_no_context_takeover;client_no_context_takeover", 15);
    offer("PerMessage-Deflate; Server_No_Context_Takeover", 15);
    offer("permessage-deflate \t; \t server_no_context_takeover \t", 15);
    offer("permessage-deflate; server_no_context_takeover=1", 0); /* a value where none goes */
    offer("permessage-deflate; client_no_context_takeover=", 0);
    offer("permessage-deflate; server_no_context_takeover; server_no_context_takeover", 0);
    offer("permessage-deflate; client_max_window_bits; client_max_window_bits", 0);
    offer("permessage-deflate; server_max_window_bits=10; server_max_window_bits=10", 0);
    offer("permessage-deflate; x_param", 0);
    offer("permessage-deflate; server_no_context_takeoverx", 0);
    offer("permessage-deflate; server_max_window_bits10", 0);
    offer("permessage-deflatex", 0);
    offer("permessage-deflat", 0);
    offer("x-webkit-deflate-frame", 0);
    /* The first offer that can be taken wins; others and other extensions are passed over. */
    offer("permessage-deflate; x_param, permessage-deflate; server_max_window_bits=12", 12);
    offer("x-other; server_max_window_bits=9, permessage-deflate", 15);
    offer("permessage-deflate; server_max_window_bits=8, permessage-deflate", 15);
    offer("permessage-deflate; server_max_window_bits=11, permessage-deflate", 11);
    offer(", ,permessage-deflate", 15);
    offer("", 0);
    /* The field's name, any case; another field is not read. */
    expect_offer("sec-websocket-extensions", "permessage-deflate", 15, BOTH);
    expect_offer("Sec-WebSocket-Extension", "permessage-deflate", 0, NULL);
    expect_offer("Sec-WebSocket-Extensionsx", "permessage-deflate", 0, NULL);
    expect_offer("Sec-WebSocket-Protocol", "permessage-deflate", 0, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_sizes_at_their_edges),
        cmocka_unit_test(test_parameters_and_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
