/*
 * The Redis client: see sxe/redis.h.
 *
 * A client has two links to the server, each a connection of the loop when up: one for commands,
 * and one for subscriptions, made on the first (a connection that has subscribed takes no other
 * command in RESP2). A link keeps a ring of the commands it has out, oldest first, each with its
 * callback and deadline: replies come in the order commands went, so the reply read is always the
 * ring's oldest. When a link connects, its set-up commands (HELLO, AUTH, SELECT) go first, and
 * take the ring's front, so their replies are read before any other; the commands queued while it
 * was down follow at once, pipelined behind them.
 *
 * Bytes that cannot go to the connection now (it is down, or its output is backed up) wait in
 * the link's `unsent` buffer, bounded by options.queue_bytes, and go when it is up and drains.
 * While a link is down the ring holds only commands that never went out, in the order of their
 * bytes in `unsent`: a command that expires then is taken out of both. A link that is lost while
 * up fails every command it has out (sent, or backed up behind one that was): none is resent.
 *
 * Callbacks may call anything of the client, its destruction included: `busy` counts the client's
 * own callbacks under way, and the client's memory goes when the last of them returns.
 */
#define SXE_LOG_MODULE redis_log
#include "sxe/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "redis.h"
#include "sxe/fiber.h"

static struct sxe_log_module redis_log = SXE_LOG_MODULE_INIT(REDIS);

#define DEFAULT_PENDING       1024
#define DEFAULT_QUEUE_BYTES   (1u << 20)
#define DEFAULT_TIMEOUT_NS    (5 * SXE_NS_PER_SEC)
#define DEFAULT_BACKOFF_MIN   (100 * SXE_NS_PER_MSEC)
#define DEFAULT_BACKOFF_MAX   (5 * SXE_NS_PER_SEC)
#define DEFAULT_SUBSCRIPTIONS 64
#define SETUP_MAX             3 /* HELLO, AUTH, SELECT */

static const struct sxe_conn_handlers link_handlers;
static const struct sxe_conn_handlers orphan_handlers; /* none: for a client that is gone */

static void leave(sxe_redis_t *redis)
{
    if (--redis->busy == 0 && redis->destroying) {
        sxe__redis_free(redis);
    }
}

static struct pending *front(struct link *link)
{
    return &link->ring[link->head];
}

/* Calls back and forgets the oldest command: status and its reply (NULL if status < 0). */
static void pop(struct link *link, int status, const struct sxe_redis_reply *reply)
{
    struct pending entry = *front(link);
    sxe_redis_t *redis = link->redis;

    link->head = (link->head + 1) % link->cap;
    link->count--;
    redis->stats.out -= entry.kind == PENDING_USER;
    if (entry.kind != PENDING_USER) {
        return;
    }
    if (status < 0) {
        redis->stats.failed++;
    } else {
        redis->stats.replies++;
    }
    entry.done(entry.arg, status, reply);
}

/* Fails every command the link has out, and forgets what waits to be sent. */
void sxe__redis_fail_all(struct link *link, int status)
{
    uint32_t failing = link->count; /* not those the callbacks give, which wait for the next */

    link->unsent_len = 0; /* the failing commands' bytes, all of them */
    while (failing-- > 0) {
        pop(link, status, NULL);
    }
}

/* Hands what waits to the connection, as far as its output takes it. */
static void flush(struct link *link)
{
    size_t at = 0;

    while (at < link->unsent_len && !sxe_conn_backed_up(link->conn)) {
        size_t piece = link->unsent_len - at < 16384 ? link->unsent_len - at : 16384;
        if (sxe_conn_write(link->conn, link->unsent + at, piece) < 0) {
            break; /* full (it drains later), or failing (on_close follows) */
        }
        at += piece;
    }
    if (at > 0) {
        memmove(link->unsent, link->unsent + at, link->unsent_len - at);
        link->unsent_len -= at;
    }
}

/* Adds bytes to what waits; -ENOBUFS past queue_bytes. */
static int queue(struct link *link, const char *bytes, size_t len)
{
    if (link->unsent_len + len > link->redis->options.queue_bytes) {
        return -ENOBUFS;
    }
    if (link->unsent_len + len > link->unsent_cap) {
        size_t cap = link->unsent_cap ? link->unsent_cap : 4096;
        while (cap < link->unsent_len + len) {
            cap *= 2;
        }
        char *grown = realloc(link->unsent, cap);
        if (grown == NULL) {
            return -ENOMEM;
        }
        link->unsent = grown;
        link->unsent_cap = cap;
    }
    memcpy(link->unsent + link->unsent_len, bytes, len);
    link->unsent_len += len;
    return 0;
}

/* Sends bytes now if the link is up and nothing waits before them, else queues them. */
int sxe__redis_send(struct link *link, const char *bytes, size_t len)
{
    int rc;

    if (link->up && link->unsent_len == 0 && !sxe_conn_backed_up(link->conn) &&
        sxe_conn_write(link->conn, bytes, len) == 0) {
        return 0;
    }
    if ((rc = queue(link, bytes, len)) == 0 && link->up) {
        flush(link); /* in pieces the connection takes (one it refused whole, say) */
    }
    return rc;
}

static void deadline_start(struct link *link)
{
    if (!sxe_timer_active(&link->deadline) && link->count > 0) {
        uint64_t now = sxe_loop_now(link->redis->loop);
        uint64_t due = front(link)->deadline;
        if (sxe_timer_start(link->redis->loop, &link->deadline, due > now ? due - now : 0, 0) < 0) {
            SXE_LOG_ONCE(SXE_LOG_LEVEL_ERROR, "redis: the loop has no timer free "
                                              "(sxe_loop_options.timers): replies are not timed");
        }
    }
}

/* Takes a command into the ring, at its back, and sends it (or queues its bytes). */
static int push(struct link *link, sxe_redis_reply_t done, void *arg, const char *bytes, size_t len)
{
    sxe_redis_t *redis = link->redis;
    struct pending entry = {.done = done,
                            .arg = arg,
                            .kind = PENDING_USER,
                            .bytes = (uint32_t)len,
                            .deadline = sxe_loop_now(redis->loop) + redis->options.timeout_ns};
    int rc;

    if ((rc = sxe__redis_send(link, bytes, len)) < 0) {
        return rc;
    }
    link->ring[(link->head + link->count) % link->cap] = entry;
    link->count++;
    redis->stats.out++;
    deadline_start(link);
    return 0;
}

/* The n set-up commands just written take the ring's front, before what was queued. */
bool sxe__redis_in_ring(struct link *link, uint32_t n, enum pending_kind kind)
{
    struct pending entry = {.kind = (uint8_t)kind,
                            .deadline =
                                sxe_loop_now(link->redis->loop) + link->redis->options.timeout_ns};

    if (link->count + n > link->cap) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        link->head = (link->head + link->cap - 1) % link->cap;
        link->ring[link->head] = entry;
    }
    link->count += n;
    link->setup = n;
    deadline_start(link);
    return true;
}

/* The link is lost, or given up: fail what it has out, and come back later. */
static void link_down(struct link *link, int err, int status)
{
    sxe_redis_t *redis = link->redis;
    bool was_up = link->up;

    link->conn = NULL;
    link->up = false;
    link->setup = 0;
    link->down_errno = err;
    redis->prefer += !was_up; /* a named server's next address, after one that failed */
    if (!redis->destroying && err != ESHUTDOWN) {
        if (sxe_timer_start(redis->loop, &link->retry, link->backoff, 0) < 0) {
            SXE_LOG_ERROR("redis: the loop has no timer free (sxe_loop_options.timers): the "
                          "connection is not made again");
        }
        link->backoff = link->backoff * 2 < redis->options.backoff_max_ns
                            ? link->backoff * 2
                            : redis->options.backoff_max_ns;
    }
    if (was_up) { /* last: a callback may give commands again, which wait for the next */
        sxe__redis_fail_all(link, status);
    }
}

/* Closes the link's connection after a fault, failing what it has out with status. */
void sxe__redis_reset(struct link *link, int status)
{
    sxe_conn_t *conn = link->conn;

    if (conn == NULL) {
        sxe__redis_fail_all(link, status);
        return;
    }
    sxe_conn_set_handlers(conn, &orphan_handlers); /* down first: then the callbacks run */
    sxe_conn_close(conn);
    link_down(link, -status, status);
}

/* A server given by name: its answer came, and the link connects, or is down for why. */
static void resolved(void *arg, int err, const struct sxe_resolved *answer)
{
    struct link *link = arg;
    sxe_redis_t *redis = link->redis;

    (void)answer; /* in the cache, where address_of() finds it */
    link->resolving = NULL;
    redis->busy++;
    if (err < 0) {
        link_down(link, -err, err); /* asked again after the backoff */
    } else {
        sxe__redis_connect(link);
    }
    leave(redis);
}

/*
 * The address the link connects to, in redis->address: at once for an address, or a name whose
 * answer is known. @return 0; -EAGAIN while the name is asked (resolved() connects); or the
 * name's failure.
 */
static int address_of(struct link *link)
{
    sxe_redis_t *redis = link->redis;
    union sxe_resolved_address chosen;

    if (redis->name == NULL) {
        return 0;
    }
    int rc = sxe_resolve_address(redis->resolver, redis->name, redis->port, redis->prefer, &chosen,
                                 resolved, link, &link->resolving);
    if (rc == 0) {
        redis->address_len = sxe_resolved_len(&chosen);
        memcpy(&redis->address, &chosen, redis->address_len);
    }
    return rc;
}

/* Connects the link; a failure at once counts as the link lost. */
void sxe__redis_connect(struct link *link)
{
    sxe_redis_t *redis = link->redis;

    if (redis->destroying || link->resolving != NULL) {
        return;
    }
    int rc = address_of(link);
    if (rc == -EAGAIN) {
        return;
    }
    if (rc == 0) {
        rc = sxe_conn_connect(redis->loop, &link->conn, (const struct sockaddr *)&redis->address,
                              redis->address_len, NULL, &link_handlers, link);
    }
    if (rc < 0) {
        link->conn = NULL;
        link->up = false;
        link_down(link, -rc, rc);
    }
}

static void on_connect(sxe_conn_t *conn)
{
    struct link *link = sxe_conn_user(conn);
    sxe_redis_t *redis = link->redis;
    int rc;

    redis->busy++;
    (void)sxe_conn_set_nodelay(conn);
    link->up = true;
    if ((rc = sxe__redis_setup(link)) < 0) { /* the set-up commands did not fit: later */
        SXE_LOG_ERROR("redis: the connection could not be set up: %s", sxe_strerror(rc));
        sxe__redis_reset(link, rc);
    } else {
        flush(link);
        if (link->setup == 0) {
            redis->stats.connects++; /* set up: its set-up replies all read */
        }
    }
    leave(redis);
}

/* A reply read: the oldest command's, a set-up's, or a message pushed. */
static void dispatch(struct link *link, const struct sxe_redis_reply *reply)
{
    if (sxe__redis_message(link, reply)) {
        return;
    }
    if (link->count == 0) {
        SXE_LOG_ERROR("redis: a reply for no command: closing the connection");
        sxe__redis_reset(link, -EPROTO);
        return;
    }
    if (front(link)->kind == PENDING_SETUP) {
        if (reply->type == SXE_REDIS_ERROR) {
            SXE_LOG_ERROR("redis: the connection's set-up was refused: %.*s", (int)reply->len,
                          reply->str);
            sxe__redis_reset(link, -EACCES);
            return;
        }
        pop(link, 0, reply);
        if (--link->setup == 0) {
            link->redis->stats.connects++;
        }
        return;
    }
    if (reply->type != SXE_REDIS_ERROR) { /* the server serves: the next wait is short again */
        link->backoff = link->redis->options.backoff_min_ns;
    }
    pop(link, 0, reply);
}

static size_t on_read(sxe_conn_t *conn, const char *data, size_t len)
{
    struct link *link = sxe_conn_user(conn);
    sxe_redis_t *redis = link->redis;
    size_t consumed = 0, nodes;
    ssize_t n;

    redis->busy++;
    while (consumed < len && link->conn == conn && !redis->destroying &&
           (n = sxe__resp_scan(data + consumed, len - consumed, &nodes)) != 0) {
        if (n < 0) {
            SXE_LOG_ERROR("redis: the server's bytes are not RESP: closing the connection");
            sxe__redis_reset(link, -EPROTO);
            break;
        }
        if (nodes > link->nodes_cap) {
            struct sxe_redis_reply *grown = realloc(link->nodes, nodes * sizeof(*grown));
            if (grown == NULL) {
                sxe__redis_reset(link, -ENOMEM);
                break;
            }
            link->nodes = grown;
            link->nodes_cap = nodes;
        }
        sxe__resp_build(data + consumed, (size_t)n, link->nodes);
        consumed += (size_t)n;
        dispatch(link, link->nodes);
    }
    if (link->conn == conn && link->count == 0) {
        sxe_timer_stop(redis->loop, &link->deadline);
    }
    leave(redis);
    return consumed;
}

static void on_drained(sxe_conn_t *conn)
{
    struct link *link = sxe_conn_user(conn);

    link->redis->busy++;
    flush(link);
    leave(link->redis);
}

static void on_overflow(sxe_conn_t *conn)
{
    struct link *link = sxe_conn_user(conn);

    link->redis->busy++;
    SXE_LOG_ERROR("redis: a reply outgrew the loop's buffers: closing the connection");
    sxe__redis_reset(link, -EMSGSIZE);
    leave(link->redis);
}

static void on_close(sxe_conn_t *conn, enum sxe_close_reason reason, int err)
{
    struct link *link = sxe_conn_user(conn);
    sxe_redis_t *redis = link->redis;

    redis->busy++;
    if (link->conn == conn) {
        int why = reason == SXE_CLOSE_ERROR      ? err
                  : reason == SXE_CLOSE_TIMEOUT  ? ETIMEDOUT
                  : reason == SXE_CLOSE_SHUTDOWN ? ESHUTDOWN
                                                 : ECONNRESET;
        if (link->up && why != ESHUTDOWN) {
            SXE_LOG_WARN("redis: the connection was lost (%s)", sxe_close_reason_name(reason));
        }
        link_down(link, why ? why : ECONNRESET, -ECONNRESET);
        if (why == ESHUTDOWN) {
            sxe__redis_fail_all(link, -ECANCELED);
        }
    }
    leave(redis);
}

static const struct sxe_conn_handlers link_handlers = {
    .on_connect = on_connect,
    .on_read = on_read,
    .on_drained = on_drained,
    .on_overflow = on_overflow,
    .on_close = on_close,
};

static void on_retry(sxe_timer_t *timer, void *arg)
{
    struct link *link = arg;

    (void)timer;
    link->redis->busy++;
    sxe__redis_connect(link);
    leave(link->redis);
}

/* The oldest command is due: it and everything after it fail (up), or only the late (down). */
static void on_deadline(sxe_timer_t *timer, void *arg)
{
    struct link *link = arg;
    sxe_redis_t *redis = link->redis;
    uint64_t now = sxe_loop_now(redis->loop);

    (void)timer;
    redis->busy++;
    if (link->up && link->count > 0 && front(link)->deadline <= now) {
        SXE_LOG_WARN("redis: a reply is later than %llu ms: closing the connection",
                     (unsigned long long)(redis->options.timeout_ns / SXE_NS_PER_MSEC));
        sxe__redis_reset(link, -ETIMEDOUT);
    }
    while (!link->up && link->count > 0 && front(link)->deadline <= now) {
        size_t bytes = front(link)->bytes; /* its bytes are the first that wait */
        memmove(link->unsent, link->unsent + bytes, link->unsent_len - bytes);
        link->unsent_len -= bytes;
        pop(link, link->down_errno ? -link->down_errno : -ETIMEDOUT, NULL);
    }
    deadline_start(link);
    leave(redis);
}

static void link_init(struct link *link, sxe_redis_t *redis, struct pending *ring, uint32_t cap)
{
    link->redis = redis;
    link->ring = ring;
    link->cap = cap;
    link->backoff = redis->options.backoff_min_ns;
    sxe_timer_init(&link->retry, on_retry, link);
    sxe_timer_init(&link->deadline, on_deadline, link);
}

/* Closes the link for good (the client goes): its connection no longer reaches the client. */
static void link_close(struct link *link)
{
    sxe_timer_stop(link->redis->loop, &link->retry);
    sxe_timer_stop(link->redis->loop, &link->deadline);
    if (link->conn != NULL) {
        sxe_conn_set_handlers(link->conn, &orphan_handlers);
        sxe_conn_close(link->conn);
        link->conn = NULL;
    }
    link->up = false;
}

static int parse_address(sxe_redis_t *redis, const char *address)
{
    char name[SXE_RESOLVE_NAME_MAX + 1];
    union sxe_resolved_address numeric;
    int rc;

    if (address[0] == '/') {
        struct sockaddr_un *un = (struct sockaddr_un *)&redis->address;
        if (strlen(address) >= sizeof(un->sun_path)) {
            return -EINVAL;
        }
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, address);
        redis->address_len = sizeof(*un);
        return 0;
    }
    if (sxe_address_parse(address, -1, &redis->address, &redis->address_len) == 0) {
        return 0;
    }
    if ((rc = sxe_resolve_split(address, name, &redis->port, &numeric)) <= 0) {
        redis->address_len = rc == 0 ? sxe_resolved_len(&numeric) : 0;
        memcpy(&redis->address, &numeric, redis->address_len);
        return rc;
    }
    if ((redis->name = strdup(name)) == NULL) {
        return -ENOMEM;
    }
    if ((redis->resolver = redis->options.resolver) == NULL) {
        if ((rc = sxe_resolver_create(&redis->resolver, redis->loop, NULL)) < 0) {
            return rc;
        }
        redis->own_resolver = true;
    }
    return 0;
}

static bool options_valid(const struct sxe_redis_options *options)
{
    return options->pending <= (1u << 24) && options->subscriptions <= 4096 &&
           (options->username == NULL || options->password != NULL) &&
           (options->backoff_max_ns == 0 || options->backoff_max_ns >= options->backoff_min_ns);
}

int sxe_redis_create(sxe_redis_t **created, sxe_loop_t *loop, const char *address,
                     const struct sxe_redis_options *options)
{
    struct sxe_redis_options given = options ? *options : (struct sxe_redis_options){0};
    sxe_redis_t *redis;
    int rc;

    if (!SXE_CHECK(created != NULL && loop != NULL && address != NULL) ||
        !SXE_CHECK(options_valid(&given))) {
        return -EINVAL;
    }
    *created = NULL;
    given.pending = given.pending ? given.pending : DEFAULT_PENDING;
    given.queue_bytes = given.queue_bytes ? given.queue_bytes : DEFAULT_QUEUE_BYTES;
    given.timeout_ns = given.timeout_ns ? given.timeout_ns : DEFAULT_TIMEOUT_NS;
    given.backoff_min_ns = given.backoff_min_ns ? given.backoff_min_ns : DEFAULT_BACKOFF_MIN;
    given.backoff_max_ns = given.backoff_max_ns ? given.backoff_max_ns : DEFAULT_BACKOFF_MAX;
    given.subscriptions = given.subscriptions ? given.subscriptions : DEFAULT_SUBSCRIPTIONS;
    uint32_t cap = given.pending + SETUP_MAX;
    if ((redis = calloc(1, sizeof(*redis))) == NULL ||
        (redis->rings = calloc(2 * (size_t)cap, sizeof(struct pending))) == NULL ||
        (redis->subs = calloc(given.subscriptions, sizeof(*redis->subs))) == NULL ||
        (rc = sxe__redis_options_copy(redis, &given)) < 0) {
        sxe__redis_free(redis);
        return -ENOMEM;
    }
    redis->loop = loop;
    if ((rc = parse_address(redis, address)) < 0) {
        sxe__redis_free(redis);
        return rc;
    }
    link_init(&redis->command, redis, redis->rings, cap);
    link_init(&redis->pubsub, redis, redis->rings + cap, SETUP_MAX);
    redis->pubsub.subscriber = true;
    sxe__redis_connect(&redis->command);
    *created = redis;
    return 0;
}

void sxe_redis_destroy(sxe_redis_t *redis)
{
    if (redis == NULL || redis->destroying) {
        return;
    }
    redis->destroying = true;
    redis->busy++;
    sxe_resolve_cancel(redis->command.resolving);
    sxe_resolve_cancel(redis->pubsub.resolving);
    link_close(&redis->command);
    link_close(&redis->pubsub);
    sxe__redis_fail_all(&redis->command, -ECANCELED);
    sxe__redis_fail_all(&redis->pubsub, -ECANCELED);
    leave(redis);
}

int sxe_redis_command(sxe_redis_t *redis, sxe_redis_reply_t done, void *arg, unsigned argc,
                      const char *const *argv, const size_t *len)
{
    char small[512], *bytes = small;
    size_t need;
    int rc;

    if (!SXE_CHECK(redis != NULL && done != NULL && argc > 0 && argv != NULL)) {
        return -EINVAL;
    }
    for (unsigned i = 0; i < argc; i++) {
        if (!SXE_CHECK(argv[i] != NULL)) {
            return -EINVAL;
        }
    }
    if (redis->destroying) {
        return -ESHUTDOWN;
    }
    if (redis->stats.out >= redis->options.pending) { /* set-up commands are not counted */
        return -ENOBUFS;
    }
    if ((need = sxe__resp_command(small, sizeof(small), argc, argv, len)) > sizeof(small)) {
        if (need > redis->options.queue_bytes || (bytes = malloc(need)) == NULL) {
            return need > redis->options.queue_bytes ? -ENOBUFS : -ENOMEM;
        }
        (void)sxe__resp_command(bytes, need, argc, argv, len);
    }
    rc = push(&redis->command, done, arg, bytes, need);
    if (bytes != small) {
        free(bytes);
    }
    redis->stats.commands += rc == 0;
    return rc;
}

struct call {
    sxe_fiber_t *fiber;
    int status;
    struct sxe_redis_reply *reply;
};

static void call_done(void *arg, int status, const struct sxe_redis_reply *reply)
{
    struct call *call = arg;

    call->status = status;
    if (status == 0 && (call->reply = sxe__resp_copy(reply)) == NULL) {
        call->status = -ENOMEM;
    }
    sxe_fiber_wake(call->fiber, 0);
}

int sxe_redis_call(sxe_redis_t *redis, struct sxe_redis_reply **reply, unsigned argc,
                   const char *const *argv, const size_t *len)
{
    struct call call = {.fiber = sxe_fiber_self()};
    int rc;

    *reply = NULL;
    if (call.fiber == NULL) {
        return -EPERM;
    }
    if ((rc = sxe_redis_command(redis, call_done, &call, argc, argv, len)) < 0) {
        return rc;
    }
    sxe_fiber_wait();
    *reply = call.reply;
    return call.status;
}

void sxe_redis_reply_free(struct sxe_redis_reply *reply)
{
    free(reply);
}

void sxe_redis_stats(const sxe_redis_t *redis, struct sxe_redis_stats *stats)
{
    *stats = redis->stats;
    stats->connected = redis->command.up && redis->command.setup == 0;
    stats->subscribed = sxe__redis_confirmed(redis);
}
