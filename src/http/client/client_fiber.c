/*
 * The HTTP client from a fiber (sxe_http_client_fetch_wait()): a gathered call whose done callback
 * wakes the fiber, which takes the response's memory as its reply, so nothing is copied.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sxe/fiber.h"
#include "sxe/http_client.h"
#include "client.h"

struct fiber_wait {
    sxe_fiber_t *fiber;
    struct sxe_http_client_reply *reply;
};

static void fiber_done(sxe_http_call_t *call, int err,
                       const struct sxe_http_response_head *response, const char *body,
                       size_t body_len, void *arg)
{
    struct fiber_wait *wait = arg;

    if (err == 0) { /* the reply takes the call's store, and the head's pointers into it */
        wait->reply->memory = sxe__http_call_take_store(call);
        wait->reply->response = *response;
        wait->reply->body = body;
        wait->reply->body_len = body_len;
    }
    (void)sxe_fiber_wake(wait->fiber, err);
}

int sxe_http_client_fetch_wait(sxe_http_client_t *client,
                               const struct sxe_http_client_request *request,
                               struct sxe_http_client_reply *reply)
{
    struct fiber_wait wait = {.fiber = sxe_fiber_self(), .reply = reply};
    int rc;

    memset(reply, 0, sizeof(*reply));
    if (wait.fiber == NULL) {
        return -EPERM;
    }
    if ((rc = sxe_http_client_fetch(client, request, fiber_done, &wait, NULL)) < 0) {
        return rc;
    }
    return sxe_fiber_wait();
}

void sxe_http_client_reply_free(struct sxe_http_client_reply *reply)
{
    free(reply->memory);
    memset(reply, 0, sizeof(*reply));
}
