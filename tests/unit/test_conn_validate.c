/*
 * The connection table's self-check (sxe__conn_validate): every invariant it states is broken
 * once by hand, and the check must name it; put back, the table must pass again. The other unit
 * tests call the check after every change, so a check that found nothing would pass them all.
 */
#include <errno.h>
#include <string.h>

#include "loop.h"
#include "sxe/conn.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;
static sxe_conn_t *a, *b;
static struct sxe_test_capture capture;

static size_t read_nothing(sxe_conn_t *conn, const char *data, size_t len)
{
    (void)conn;
    (void)data;
    (void)len;
    return 0;
}

static const struct sxe_conn_handlers handlers = {.on_read = read_nothing};

static int setup(void **state)
{
    struct sxe_loop_options options = {
        .connections = 4, .buffers = 4, .large_buffers = 2, .large_buffer_size = 65536};

    (void)state;
    assert_int_equal(sxe_loop_create(&loop, &options), 0);
    assert_int_equal(sxe_conn_pair(loop, &a, &b, 0, &handlers, NULL), 0);
    assert_true(sxe_loop_run_once(loop, 0) >= 0); /* the pair connects on the next turn */
    /* Corked, a's output waits in a buffer of its own: one segment, one buffer held. */
    assert_true(sxe_conn_cork(a));
    assert_int_equal(sxe_conn_write(a, "held", 4), 0);
    assert_int_not_equal(a->out.head, SXE_NONE);
    assert_int_equal(sxe__conn_validate(loop), 0);
    sxe_test_capture_start(&capture);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sxe_test_capture_stop();
    assert_int_equal(sxe__conn_validate(loop), 0);
    sxe_loop_destroy(loop);
    loop = NULL;
    sxe__sys_reset();
    return 0;
}

/* The check fails and names what broke; the caller then puts it back. */
static void expect_broken(const char *finding)
{
    capture.len = 0;
    capture.text[0] = '\0';
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    if (strstr(capture.text, finding) == NULL) {
        fail_msg("the check's finding lacks \"%s\"; it is: %s", finding, capture.text);
    }
}

/* A slot's state must agree with its descriptor and with its close-pending flag. */
static void test_state_against_descriptor_and_flags(void **state)
{
    struct sxe_conn *free_slot = &loop->conns[3];
    int fd = b->fd;

    (void)state;
    b->fd = -1;
    expect_broken("with fd -1");
    b->fd = fd;

    free_slot->fd = fd;
    expect_broken("slot 3 is FREE with fd");
    free_slot->fd = -1;

    b->flags ^= SXE__CONN_CLOSE_PENDING;
    expect_broken("with flags");
    b->flags ^= SXE__CONN_CLOSE_PENDING;
}

/* A free slot holds no output, no input and no held input. */
static void test_a_free_slot_holds_nothing(void **state)
{
    struct sxe_conn *free_slot = &loop->conns[3];

    (void)state;
    free_slot->out.head = 0;
    expect_broken("free slot 3 holds a queue or input");
    free_slot->out.head = SXE_NONE;
    free_slot->input_buffer = 0;
    expect_broken("free slot 3 holds a queue or input");
    free_slot->input_buffer = SXE_NONE;
    free_slot->held_head = 0;
    expect_broken("free slot 3 holds a queue or input");
    free_slot->held_head = SXE_NONE;
}

/*
 * Kept input: a length without a buffer, a buffer past the last, more bytes than the buffer holds,
 * and one buffer kept by two connections, or kept and free at once.
 */
static void test_kept_input(void **state)
{
    uint32_t all = loop->options.buffers + loop->options.large_buffers;
    uint32_t free_buffer = loop->buffer_free[loop->buffers_free - 1];

    (void)state;
    b->input_len = 5;
    expect_broken("keeps 5 bytes of input in buffer");
    b->input_buffer = all;
    expect_broken("keeps 5 bytes of input in buffer");
    b->input_buffer = free_buffer;
    b->input_len = loop->options.buffer_size + 1;
    expect_broken("keeps");
    b->input_len = 5;
    expect_broken("is free and held");

    loop->buffers_free--; /* b keeps the buffer now, as if it had taken it */
    a->input_buffer = free_buffer;
    a->input_len = 1;
    expect_broken("is held twice (input of");
    a->input_buffer = SXE_NONE;
    a->input_len = 0;
    assert_int_equal(sxe__conn_validate(loop), 0);

    b->input_buffer = SXE_NONE;
    b->input_len = 0;
    expect_broken("is neither free nor held");
    loop->buffers_free++;
}

/* A buffer that queued output owns is held by it alone. */
static void test_output_owns_its_buffer(void **state)
{
    uint32_t owned = loop->segments[a->out.head].buffer;

    (void)state;
    assert_int_not_equal(owned, SXE_NONE);
    a->input_buffer = owned;
    a->input_len = 1;
    expect_broken("is held twice (output of");
    a->input_buffer = SXE_NONE;
    a->input_len = 0;
}

/* The free lists: a small buffer's index within the small ones, a large one's past them, once. */
static void test_free_lists(void **state)
{
    uint32_t small = loop->buffer_free[0];
    uint32_t large = loop->large_free[0];

    (void)state;
    loop->buffer_free[0] = loop->options.buffers;
    expect_broken("is free and held");
    loop->buffer_free[0] = small;

    loop->large_free[0] = 0;
    expect_broken("large buffer 0 is free and held, or not large");
    loop->large_free[0] = loop->large_free[1];
    expect_broken("is free and held, or not large");
    loop->large_free[0] = large;
}

/* Every segment is queued or free. */
static void test_segments_add_up(void **state)
{
    (void)state;
    loop->segments_free++;
    expect_broken("segments queued and");
    loop->segments_free--;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_state_against_descriptor_and_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(test_a_free_slot_holds_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kept_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_owns_its_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_lists, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segments_add_up, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
