/*
 * The requests live on one connection (src/http/server/request.c): a list in the slots, oldest
 * first, that a request joins when it outlives its handler and leaves when it is finished or
 * cancelled, from wherever it is in it. Over HTTP/1.1 it holds one at most; the list is checked
 * here with several, as a connection carrying several requests at once uses it.
 */
#include "../../src/http/server/server.h"
#include "sxe_test.h"

static struct slot slots[5];
static struct sxe_http_server server = {.slots = slots, .slot_capacity = 5};
static struct http_conn state;

/* The list's slots, by number, oldest first, as a string ("" when empty), walked both ways. */
static const char *order(void)
{
    static char text[16];
    size_t at = 0;
    uint32_t previous = 0;

    for (struct slot *slot = sxe__http_first(&server, &state); slot != NULL;
         slot = slot->conn_next != 0 ? &slots[slot->conn_next - 1] : NULL) {
        assert_int_equal(slot->conn_prev, previous);
        previous = (uint32_t)(slot - slots) + 1;
        text[at++] = (char)('0' + previous);
    }
    assert_int_equal(state.last, previous);
    text[at] = '\0';
    return text;
}

static void test_requests_leave_from_anywhere_in_order(void **unused)
{
    (void)unused;
    assert_string_equal(order(), "");
    sxe__http_enlist(&server, &state, &slots[2]);
    sxe__http_enlist(&server, &state, &slots[0]);
    sxe__http_enlist(&server, &state, &slots[4]);
    sxe__http_enlist(&server, &state, &slots[1]);
    assert_string_equal(order(), "3152");
    sxe__http_delist(&server, &state, &slots[0]); /* from the middle */
    assert_string_equal(order(), "352");
    sxe__http_delist(&server, &state, &slots[2]); /* the oldest */
    assert_string_equal(order(), "52");
    sxe__http_delist(&server, &state, &slots[1]); /* the newest */
    assert_string_equal(order(), "5");
    sxe__http_enlist(&server, &state, &slots[3]);
    assert_string_equal(order(), "54");
    sxe__http_delist(&server, &state, &slots[4]);
    sxe__http_delist(&server, &state, &slots[3]);
    assert_string_equal(order(), "");
    assert_int_equal(state.first, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests_leave_from_anywhere_in_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
