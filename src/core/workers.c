/*
 * The supervisor of sxe/workers.h: makes the listening sockets, starts the workers (processes or
 * threads), passes them connections in hand-off mode, restarts processes that die, reopens (or
 * reports) on SIGUSR1 and stops them all on SIGINT or SIGTERM. It waits with poll: a signalfd, the
 * hand-off listeners and, for threads, the supervisor's ends of the channels, which hang up when a
 * worker ends. A worker's own side is worker.c.
 */
#define SXE_LOG_MODULE workers_log
#include "sxe/log.h"

#include <errno.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/signalfd.h>

#include "loop.h"
#include "sxe/clock.h"
#include "sys.h"
#include "worker.h"

static struct sxe_log_module workers_log = SXE_LOG_MODULE_INIT(WORKERS);

unsigned sxe_workers_cpus(void)
{
    cpu_set_t cpus;

    if (sxe__sys.sched_getaffinity(0, sizeof(cpus), &cpus) < 0) {
        return 1; /* GCOVR_EXCL_LINE: fails only for another process's pid */
    }
    return (unsigned)CPU_COUNT(&cpus);
}

int sxe_workers_create(sxe_workers_t **out, const struct sxe_workers_options *options)
{
    static const struct sxe_workers_options defaults;
    sxe_workers_t *set;

    options = options != NULL ? options : &defaults;
    if (!SXE_CHECK(out != NULL && options->count <= SXE_WORKERS_MAX &&
                   options->kind <= SXE_WORKERS_THREADS &&
                   options->spread <= SXE_SPREAD_HAND_OFF)) {
        return -EINVAL;
    }
    if ((set = calloc(1, sizeof(*set))) == NULL) {
        return -ENOMEM;
    }
    set->options = *options;
    set->options.count = options->count ? options->count : sxe_workers_cpus();
    set->options.drain_ns = options->drain_ns ? options->drain_ns : 5 * SXE_NS_PER_SEC;
    set->signal_fd = set->check_reply = -1;
    set->shared_size = set->options.count * sizeof(*set->shared) + sizeof(*set->levels) +
                       set->options.count * sizeof(*set->listings); /* touched when asked only */
    set->shared = sxe__sys.mmap(NULL, set->shared_size, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    set->workers = calloc(set->options.count, sizeof(*set->workers));
    if (set->shared == MAP_FAILED || set->workers == NULL) {
        set->shared = set->shared == MAP_FAILED ? NULL : set->shared;
        sxe_workers_destroy(set);
        return -ENOMEM;
    }
    set->levels = (struct sxe__workers_levels *)(set->shared + set->options.count);
    set->listings = (struct sxe__worker_listing *)(set->levels + 1);
    for (unsigned i = 0; i < set->options.count; i++) {
        sxe_worker_t *worker = &set->workers[i];
        worker->set = set;
        worker->index = i;
        worker->shared = &set->shared[i];
        memset(worker->channels, -1, sizeof(worker->channels));
        worker->thread_watch = worker->thread_done = -1;
        worker->wake[0] = worker->wake[1] = -1;
    }
    *out = set;
    return 0;
}

void sxe__worker_close_channels(sxe_worker_t *worker, unsigned end)
{
    for (unsigned l = 0; l < SXE__WORKER_LISTENERS; l++) {
        sxe__close_fd(&worker->channels[l][end]);
    }
}

void sxe__workers_close_listeners(sxe_workers_t *set)
{
    for (unsigned l = 0; l < set->listener_count; l++) {
        for (unsigned i = 0; i < set->listeners[l].fd_count; i++) {
            sxe__close_fd(&set->listeners[l].fds[i]);
        }
        sxe__close_fd(&set->listeners[l].held);
    }
}

void sxe_workers_destroy(sxe_workers_t *set)
{
    if (set == NULL) {
        return;
    }
    sxe__workers_close_listeners(set);
    for (unsigned l = 0; l < set->listener_count; l++) {
        free(set->listeners[l].fds);
    }
    for (unsigned i = 0; set->workers != NULL && i < set->options.count; i++) {
        for (unsigned l = 0; l < SXE__WORKER_LISTENERS; l++) {
            sxe__close_fd(&set->workers[i].channels[l][0]);
            sxe__close_fd(&set->workers[i].channels[l][1]);
        }
        sxe__close_fd(&set->workers[i].thread_watch);
        sxe__close_fd(&set->workers[i].thread_done);
        sxe__close_fd(&set->workers[i].wake[0]);
        sxe__close_fd(&set->workers[i].wake[1]);
    }
    if (set->shared != NULL) {
        sxe__sys.munmap(set->shared, set->shared_size);
    }
    free(set->workers);
    free(set);
}

/* The port a socket is bound to, or -errno. */
static int bound_port(int fd, struct sockaddr_storage *address)
{
    socklen_t len = sizeof(*address);

    if (sxe__sys.getsockname(fd, (struct sockaddr *)address, &len) < 0) {
        return -errno;
    }
    return sxe_address_port((struct sockaddr *)address);
}

/* Steers each connection to the listener whose index is the receiving CPU's (modulo count). */
static int steer_by_cpu(int fd, unsigned count)
{
    struct sock_filter code[] = {
        {BPF_LD | BPF_W | BPF_ABS, 0, 0, (uint32_t)(SKF_AD_OFF + SKF_AD_CPU)},
        {BPF_ALU | BPF_MOD | BPF_K, 0, 0, count},
        {BPF_RET | BPF_A, 0, 0, 0},
    };
    struct sock_fprog program = {.len = 3, .filter = code};

    if (sxe__sys.setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &program, sizeof(program)) <
        0) {
        int rc = -errno;
        SXE_LOG_ERROR("cannot steer connections by CPU (SO_ATTACH_REUSEPORT_CBPF): %s",
                      sxe_strerror(rc));
        return rc;
    }
    return 0;
}

int sxe_workers_listen(sxe_workers_t *set, const struct sockaddr *address, socklen_t address_len,
                       const struct sxe_listen_options *options)
{
    static const struct sxe_listen_options defaults;
    struct sockaddr_storage bound;

    if (!SXE_CHECK(set != NULL && address != NULL && address_len <= sizeof(bound) &&
                   (address->sa_family == AF_INET || address->sa_family == AF_INET6))) {
        return -EINVAL;
    }
    if (set->listener_count == SXE__WORKER_LISTENERS) {
        return -ENOBUFS;
    }
    struct sxe__workers_listener *listener = &set->listeners[set->listener_count];
    listener->options = options != NULL ? *options : defaults;
    listener->held = -1;
    /* After a reload, the sockets the last image listened with (workers_reload.c); they may keep
     * the set to the spread they were made for. */
    int rc = sxe__workers_inherited(set, listener, address);
    unsigned from = rc > 0 ? (unsigned)rc : 0;
    bool reuseport = set->options.spread != SXE_SPREAD_HAND_OFF;
    if (reuseport) {
        listener->options.flags |= SXE_LISTEN_REUSEPORT;
    }
    if (rc > 0) {
        rc = listener->port = bound_port(listener->fds[0], &bound);
    } else if (rc == 0) {
        listener->fd_count = reuseport ? set->options.count : 1;
        if ((listener->fds = malloc(listener->fd_count * sizeof(int))) == NULL) {
            return -ENOMEM;
        }
        memset(listener->fds, -1, listener->fd_count * sizeof(int));
        /* A port someone listens on already (another server, or another set: SO_REUSEPORT would
         * let it join theirs and take half of their connections) is in use. */
        rc = reuseport && sxe_address_port(address) != 0
                 ? sxe__listen_probe(address, address_len, &listener->options)
                 : 0;
    }
    /* In order: a reuseport group numbers its sockets as they listen, as the CPU steering needs. */
    for (unsigned i = from; i < listener->fd_count && rc >= 0; i++) {
        rc = listener->fds[i] = sxe__listen_socket(i == 0 ? address : (struct sockaddr *)&bound,
                                                   address_len, &listener->options);
        if (rc >= 0 && i == 0 && (rc = listener->port = bound_port(rc, &bound)) >= 0) {
            memcpy(&bound, address, address_len); /* the others take the port the first got */
            if (bound.ss_family == AF_INET6) {
                ((struct sockaddr_in6 *)&bound)->sin6_port = htons((uint16_t)listener->port);
            } else {
                ((struct sockaddr_in *)&bound)->sin_port = htons((uint16_t)listener->port);
            }
        }
    }
    if (rc >= 0 && set->options.spread == SXE_SPREAD_REUSEPORT_CPU) {
        rc = steer_by_cpu(listener->fds[0], set->options.count);
    }
    if (rc < 0) {
        for (unsigned i = 0; listener->fds != NULL && i < listener->fd_count; i++) {
            sxe__close_fd(&listener->fds[i]);
        }
        sxe__close_fd(&listener->held);
        free(listener->fds);
        listener->fds = NULL;
        return rc;
    }
    return (int)set->listener_count++;
}

int sxe_workers_port(const sxe_workers_t *set, unsigned listener)
{
    return listener < set->listener_count ? set->listeners[listener].port : 0;
}

unsigned sxe_workers_count(const sxe_workers_t *set)
{
    return set->options.count;
}

void sxe_workers_stats(const sxe_workers_t *set, unsigned index, struct sxe_worker_stats *stats)
{
    const struct sxe_worker_stats *live = &set->shared[index].stats;

    *stats = (struct sxe_worker_stats){.connections = SXE__LOAD(live->connections),
                                       .requests = SXE__LOAD(live->requests),
                                       .bytes = SXE__LOAD(live->bytes),
                                       .table_full = SXE__LOAD(live->table_full),
                                       .evicted = SXE__LOAD(live->evicted),
                                       .open = SXE__LOAD(live->open),
                                       .restarts = SXE__LOAD(live->restarts),
                                       .pid = SXE__LOAD(live->pid)};
}
