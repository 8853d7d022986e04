/*
 * The output queue on its own: copies sharing buffers, references and file ranges in order, the
 * gather that sends them, advancing by what a send took, dropping, and the self-checks of the
 * queue and of the connection table, shown to catch each broken invariant they claim to.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loop.h"
#include "outq.h"
#include "sxe_test.h"
#include "sys.h"

static sxe_loop_t *loop;
static sxe_conn_t *conn, *peer;
static unsigned released;

static const struct sxe_conn_handlers no_handlers;

static int setup(void **state)
{
    (void)state;
    assert_int_equal(
        sxe_loop_create(
            &loop, &(struct sxe_loop_options){.connections = 8, .buffers = 8, .buffer_size = 64}),
        0);
    assert_int_equal(sxe_conn_pair(loop, &conn, &peer, 0, &no_handlers, NULL), 0);
    released = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(sxe__conn_validate(loop), 0);
    sxe_loop_destroy(loop);
    loop = NULL;
    sxe__sys_reset();
    return 0;
}

static void release(void *arg)
{
    (void)arg;
    released++;
}

/* Copies fill one buffer, then take the next; a gather sees both spans in order. */
static void test_copies_share_buffers(void **state)
{
    struct iovec iov[SXE__GATHER_MAX];
    char bytes[100];
    bool before_file;

    (void)state;
    for (size_t i = 0; i < sizeof(bytes); i++) {
        bytes[i] = (char)i;
    }
    assert_true(sxe__outq_can_append(conn, &conn->out, sizeof(bytes)));
    sxe__outq_append(conn, &conn->out, bytes, 40);
    sxe__outq_append(conn, &conn->out, bytes + 40, 60);
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);
    assert_int_equal(conn->queued, 100);
    assert_int_equal(loop->buffers_free, 8 - 2);
    assert_int_equal(sxe__outq_gather(conn, &conn->out, iov, &before_file), 2);
    assert_false(before_file);
    assert_int_equal(iov[0].iov_len, 64);
    assert_int_equal(iov[1].iov_len, 36);
    assert_memory_equal(iov[0].iov_base, bytes, 64);
    assert_memory_equal(iov[1].iov_base, bytes + 64, 36);

    sxe__outq_advance(conn, &conn->out, 70,
                      false); /* the first buffer goes, 6 bytes of the second */
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);
    assert_int_equal(conn->queued, 30);
    assert_int_equal(loop->buffers_free, 8 - 1);
    assert_int_equal(sxe__outq_gather(conn, &conn->out, iov, &before_file), 1);
    assert_memory_equal(iov[0].iov_base, bytes + 70, 30);
    sxe__outq_drop(conn, &conn->out);
    assert_int_equal(conn->queued, 0);
    assert_int_equal(loop->buffers_free, 8);

    /* With no buffer free, a partly filled last buffer still takes what fits in it, no more. */
    static const char fill[64 * 7];
    sxe__outq_append(conn, &conn->out, bytes, 10);
    sxe__outq_append(peer, &peer->out, fill, sizeof(fill));
    assert_int_equal(loop->buffers_free, 0);
    assert_true(sxe__outq_can_append(conn, &conn->out, 54));
    assert_false(sxe__outq_can_append(conn, &conn->out, 55));
    sxe__outq_drop(peer, &peer->out);
    sxe__outq_drop(conn, &conn->out);
}

/* Bytes behind a reference go on in the buffer before it; the gather stops at a file range. */
static void test_references_and_files_keep_their_order(void **state)
{
    struct iovec iov[SXE__GATHER_MAX];
    static const char body[] = "referenced body";
    bool before_file;

    (void)state;
    sxe__outq_append(conn, &conn->out, "head1", 5);
    sxe__outq_link(conn, &conn->out, sizeof(body) - 1, release, NULL)->data = body;
    sxe__outq_append(conn, &conn->out, "head2", 5);
    assert_int_equal(loop->buffers_free, 8 - 1); /* head2 shares head1's buffer */
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    struct sxe__segment *file = sxe__outq_link(conn, &conn->out, 10, release, NULL);
    file->file_fd = fd;
    file->close_fd = true;
    file->offset = 0;
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);
    assert_int_equal(conn->queued, 5 + 15 + 5 + 10);

    assert_int_equal(sxe__outq_gather(conn, &conn->out, iov, &before_file), 3);
    assert_true(before_file);
    assert_memory_equal(iov[0].iov_base, "head1", 5);
    assert_ptr_equal(iov[1].iov_base, body);
    assert_memory_equal(iov[2].iov_base, "head2", 5);
    assert_false(sxe__outq_head_is_file(conn, &conn->out));

    sxe__outq_advance(conn, &conn->out, 25, false);
    assert_int_equal(released, 1);
    assert_true(sxe__outq_head_is_file(conn, &conn->out));
    assert_int_equal(loop->buffers_free, 8); /* head2's segment gave the shared buffer back */
    sxe__outq_advance(conn, &conn->out, 4, true);
    assert_int_equal(conn->queued, 6);
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);
    sxe__outq_drop(conn, &conn->out); /* closes the file the connection owns, and releases it */
    assert_int_equal(released, 2);
    assert_int_equal(fcntl(fd, F_GETFD), -1);
}

/* The queue's self-check names each broken invariant. */
static void test_validate_catches_a_broken_queue(void **state)
{
    (void)state;
    sxe__outq_append(conn, &conn->out, "abc", 3);
    conn->queued = 4;
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    conn->queued = 3;

    uint32_t tail = conn->out.tail;
    conn->out.tail = SXE_NONE;
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    conn->out.tail = tail;

    struct sxe__segment *segment = &loop->segments[conn->out.head];
    struct sxe_test_capture capture;
    char finding[128];
    segment->start = 10; /* past its end */
    sxe_test_capture_start(&capture);
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    sxe_test_capture_stop();
    snprintf(finding, sizeof(finding), "buffer segment %u spans 10..3 of buffer %u", conn->out.head,
             segment->buffer);
    assert_non_null(strstr(capture.text, finding));
    segment->start = 0;

    segment->owns = false; /* handed over to no one */
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    segment->owns = true;

    sxe__outq_link(conn, &conn->out, 3, NULL, NULL)->data = NULL; /* memory without data */
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    loop->segments[conn->out.tail].data = "xyz";
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);

    struct sxe__segment *tail_segment = &loop->segments[conn->out.tail];
    uint32_t start = tail_segment->start;
    tail_segment->start = conn->out.tail; /* a reference that follows no buffer */
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    tail_segment->start = start;

    tail_segment->next = conn->out.head; /* a cycle */
    assert_int_equal(sxe__outq_validate(conn, NULL), -EUCLEAN);
    tail_segment->next = SXE_NONE;
    assert_int_equal(sxe__outq_validate(conn, NULL), 0);
    sxe__outq_drop(conn, &conn->out);
}

/* The table's self-check: buffers held twice or lost, slots that disagree with their state. */
static void test_validate_catches_a_broken_table(void **state)
{
    (void)state;
    assert_int_equal(sxe__conn_validate(loop), 0);

    conn->input_buffer = loop->buffer_free[loop->buffers_free - 1]; /* free and held */
    conn->input_len = 1;
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    conn->input_buffer = sxe__buffer_take(loop); /* held only here: sound */
    assert_int_equal(sxe__conn_validate(loop), 0);
    conn->input_len = 0; /* a buffer without input */
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    conn->input_len = 1;
    peer->input_buffer = conn->input_buffer; /* held twice */
    peer->input_len = 1;
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    peer->input_buffer = SXE_NONE;
    peer->input_len = 0;
    sxe__buffer_give(loop, conn->input_buffer);
    conn->input_buffer = SXE_NONE;
    conn->input_len = 0;

    uint32_t lost = sxe__buffer_take(loop); /* neither free nor held */
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    sxe__buffer_give(loop, lost);

    int fd = conn->fd;
    conn->fd = -1; /* open in the pool, without a descriptor */
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    conn->fd = fd;

    uint32_t segments_free = loop->segments_free;
    loop->segments_free--;
    assert_int_equal(sxe__conn_validate(loop), -EUCLEAN);
    loop->segments_free = segments_free;
    assert_int_equal(sxe__conn_validate(loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_copies_share_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_references_and_files_keep_their_order, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_validate_catches_a_broken_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_catches_a_broken_table, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
