/*
 * An HTTP client's call as its caller holds it (sxe/http_client.h): paused, resumed, cancelled;
 * and its failure, which ends it with an error its caller hears. These only take a call off the
 * queue or its connection and free its slot, so every other file of the client may use them.
 */
#define SXE_LOG_MODULE client_call_log
#include "sxe/log.h"

#include <errno.h>

#include "client.h"

static struct sxe_log_module client_call_log = SXE_LOG_MODULE_INIT(HTTP_CLIENT);

void sxe__http_call_fail(struct sxe_http_call *call, int err)
{
    if (call->queued) {
        sxe__http_queue_remove(call->client, call);
    }
    call->up = NULL;
    if (!call->discard) {
        SXE_LOG_DEBUG("request %s %s to %s failed: %s", call->request.method, call->request.target,
                      call->client->host, sxe_strerror(err));
        call->client->stats.failed++;
        if (call->kind == SXE__CALL_FETCH) {
            call->done(call, err, NULL, NULL, 0, call->arg);
        } else if (call->handlers->on_done != NULL) {
            call->handlers->on_done(call, err, call->arg);
        }
    }
    sxe__http_call_free(call);
}

void sxe__http_up_fail(struct sxe__upstream *up, struct sxe_http_call *call, int err)
{
    if (err == -EPROTO) {
        SXE_LOG_WARN("a malformed response from %s to %s %s; closing the connection",
                     up->client->host, call->request.method, call->request.target);
    }
    SXE_ASSERT(up->first == call); /* only the call being sent or answered fails this way */
    sxe__http_up_pop(up);
    sxe_conn_close(up->conn);
    sxe__http_call_fail(call, err);
}

void sxe_http_call_pause(sxe_http_call_t *call)
{
    if (!call->paused) {
        call->paused = true;
        if (call->up != NULL && call->up->state == SXE__UP_BUSY && call->up->first == call) {
            (void)sxe_conn_pause(call->up->conn);
        }
    }
}

void sxe_http_call_resume(sxe_http_call_t *call)
{
    if (call->paused) {
        call->paused = false;
        sxe__http_call_rearm(call);
        if (call->up != NULL && call->up->state == SXE__UP_BUSY && call->up->first == call) {
            (void)sxe_conn_resume(call->up->conn);
        }
    }
}

void sxe_http_call_cancel(sxe_http_call_t *call)
{
    struct sxe__upstream *up = call->up;

    if (call->queued) {
        sxe__http_queue_remove(call->client, call);
    }
    if (up != NULL && up->first != call) {
        call->discard = true; /* its answer comes after the one ahead: read, and dropped */
        return;
    }
    if (up != NULL) {
        sxe__http_up_pop(up);
        if (up->state != SXE__UP_CONNECTING) {
            sxe_conn_close(up->conn); /* the calls behind are sent again */
        }
    }
    call->up = NULL;
    sxe__http_call_free(call);
}
