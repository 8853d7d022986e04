/*
 * sxe-http's report: the workers' results added up, and printed as text or as JSON. The JSON
 * carries everything the text does.
 */
#include <stdio.h>
#include <string.h>

#include <sxe/sxe.h>

#include "sxe-http.h"

const char *const error_names[ERR_KINDS] = {"connect",    "read",       "write", "timeout",
                                            "bad status", "bad length", "cap",   "bad body"};
const char *const error_keys[ERR_KINDS] = {"connect",    "read",       "write", "timeout",
                                           "bad_status", "bad_length", "cap",   "bad_body"};

static const double percentiles[] = {50, 90, 99, 99.9, 99.99, 99.999};
#define PERCENTILES (sizeof(percentiles) / sizeof(percentiles[0]))

void results_add(struct results *total, const struct results *part)
{
    total->connected += part->connected;
    total->reopened += part->reopened;
    total->slow_connects += part->slow_connects;
    total->connect_ns = part->connect_ns > total->connect_ns ? part->connect_ns : total->connect_ns;
    total->sent += part->sent;
    total->queries += part->queries;
    total->not_sent += part->not_sent;
    total->query_ns = part->query_ns > total->query_ns ? part->query_ns : total->query_ns;
    total->cpu_ns += part->cpu_ns;
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        total->errors[kind] += part->errors[kind];
    }
    for (unsigned status = 0; status < STATUS_SPAN; status++) {
        total->statuses[status] += part->statuses[status];
    }
    if (total->first_connect_errno == 0) {
        total->first_connect_errno = part->first_connect_errno;
    }
    for (uint32_t i = 0; i < part->slow_listed && total->slow_listed < SLOW_LISTED_MAX; i++) {
        total->slow[total->slow_listed++] = part->slow[i];
    }
    histogram_merge(&total->latency, &part->latency);
    histogram_merge(&total->service, &part->service);
}

uint64_t results_errors(const struct results *results)
{
    uint64_t errors = 0;

    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        errors += results->errors[kind];
    }
    return errors;
}

static double per_second(uint64_t count, uint64_t ns)
{
    return ns > 0 ? (double)count * 1e9 / (double)ns : 0.0;
}

static double ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* The connect failure's line, or NULL when none failed. */
static const char *connect_error(const struct results *total, char *line, size_t size)
{
    if (total->errors[ERR_CONNECT] == 0 || total->first_connect_errno == 0) {
        return NULL;
    }
    snprintf(line, size, "%s connection%s to %s failed; the first: %s",
             total->connected == 0 ? "every" : "some", total->connected == 0 ? "" : "s",
             config.target_text, strerror(total->first_connect_errno));
    return line;
}

static void json_latency(const char *name, const struct histogram *histogram)
{
    printf(" \"%s\": {", name);
    for (unsigned i = 0; i < PERCENTILES; i++) {
        printf("\"p%g\": %.3f, ", percentiles[i],
               ms(histogram_percentile(histogram, percentiles[i])));
    }
    printf("\"max\": %.3f},\n", ms(histogram->max));
}

static void report_json(const struct results *total, uint64_t run_ns,
                        const struct timeline_entry *timeline, size_t seconds)
{
    char line[256];
    const char *error = connect_error(total, line, sizeof(line));

    printf("{\"target\": \"%s\", \"connections\": %llu, \"queries_per_connection\": %llu, "
           "\"duration_s\": %llu, \"warmup_s\": %llu, \"pipeline\": %u, \"workers\": %u, "
           "\"rate\": %.0f,\n",
           config.target_text, (unsigned long long)config.connections,
           (unsigned long long)(config.duration_ns ? 0 : config.queries),
           (unsigned long long)(config.duration_ns / SXE_NS_PER_SEC),
           (unsigned long long)(config.warmup_ns / SXE_NS_PER_SEC), config.pipeline, config.workers,
           config.rate);
    printf(" \"connected\": %llu, \"reopened\": %llu, \"connect_s\": %.6f, "
           "\"connects_per_s\": %.1f, "
           "\"slow_connects\": %llu, \"slow_connects_listed\": [",
           (unsigned long long)total->connected, (unsigned long long)total->reopened,
           (double)total->connect_ns / 1e9, per_second(total->connected, total->connect_ns),
           (unsigned long long)total->slow_connects);
    for (uint32_t i = 0; i < total->slow_listed; i++) {
        printf("%s{\"connection\": %llu, \"s\": %.3f}", i ? ", " : "",
               (unsigned long long)total->slow[i].connection, (double)total->slow[i].ns / 1e9);
    }
    printf("],\n \"sent\": %llu, \"queries\": %llu, \"query_s\": %.6f, \"queries_per_s\": %.1f, "
           "\"not_sent\": %llu, \"run_s\": %.6f, \"cpu_s\": %.6f,\n",
           (unsigned long long)total->sent, (unsigned long long)total->queries,
           (double)total->query_ns / 1e9, per_second(total->queries, total->query_ns),
           (unsigned long long)total->not_sent, (double)run_ns / 1e9, (double)total->cpu_ns / 1e9);
    json_latency("latency_ms", &total->latency);
    if (config.rate > 0) {
        json_latency("uncorrected_latency_ms", &total->service);
    }
    printf(" \"errors\": {");
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        printf("%s\"%s\": %llu", kind ? ", " : "", error_keys[kind],
               (unsigned long long)total->errors[kind]);
    }
    printf(", \"total\": %llu},\n \"bad_statuses\": {", (unsigned long long)results_errors(total));
    for (unsigned status = 0, listed = 0; status < STATUS_SPAN; status++) {
        if (total->statuses[status] > 0) {
            printf("%s\"%u\": %llu", listed++ ? ", " : "", status + STATUS_LOW,
                   (unsigned long long)total->statuses[status]);
        }
    }
    printf("},\n \"error\": ");
    if (error != NULL) {
        printf("\"%s\"", error); /* no quote or backslash: an address and strerror's text */
    } else {
        printf("null");
    }
    if (config.timeline) {
        printf(",\n \"timeline\": [");
        for (size_t i = 0; i < seconds; i++) {
            printf("%s\n  {\"second\": %zu, \"s\": %.6f, \"queries_per_s\": %.1f, "
                   "\"errors\": %llu, \"p99_ms\": %.3f}",
                   i ? "," : "", i, timeline[i].seconds, timeline[i].queries_per_s,
                   (unsigned long long)timeline[i].errors, ms(timeline[i].p99_ns));
        }
        printf("]");
    }
    printf("}\n");
}

static void text_latency(const char *name, const struct histogram *histogram)
{
    printf("%s", name);
    for (unsigned i = 0; i < PERCENTILES; i++) {
        printf(" p%g %.3f", percentiles[i], ms(histogram_percentile(histogram, percentiles[i])));
    }
    printf(" max %.3f ms\n", ms(histogram->max));
}

void report(const struct results *total, uint64_t run_ns, const struct timeline_entry *timeline,
            size_t seconds)
{
    char line[256];
    const char *error = connect_error(total, line, sizeof(line));

    if (config.json) {
        report_json(total, run_ns, timeline, seconds);
        return;
    }
    printf("sxe-http: %llu connections x %llu %s to %s, %s %u, %u worker%s\n",
           (unsigned long long)config.connections,
           (unsigned long long)(config.duration_ns ? config.duration_ns / SXE_NS_PER_SEC
                                                   : config.queries),
           config.duration_ns ? "seconds" : "queries", config.target_text,
           config.rate > 0 ? "at most outstanding" : "pipeline", config.pipeline, config.workers,
           config.workers == 1 ? "" : "s");
    if (config.marks) {
        printf("warm-up:     %llu s before, not counted but for its errors\n",
               (unsigned long long)(config.warmup_ns / SXE_NS_PER_SEC));
    }
    printf("connections: %llu in %.3f s, %.0f per second; %llu slower than 1 s; %llu failed\n",
           (unsigned long long)total->connected, (double)total->connect_ns / 1e9,
           per_second(total->connected, total->connect_ns),
           (unsigned long long)total->slow_connects,
           (unsigned long long)total->errors[ERR_CONNECT]);
    if (config.http10) {
        printf("reopened:    %llu connections after the first, one per request (HTTP/1.0)\n",
               (unsigned long long)total->reopened);
    } else if (total->reopened > 0) {
        printf("reopened:    %llu connections after answers that said Connection: close\n",
               (unsigned long long)total->reopened);
    }
    for (uint32_t i = 0; config.verbose && i < total->slow_listed; i++) {
        printf("slow connect: connection %llu took %.3f s\n",
               (unsigned long long)total->slow[i].connection, (double)total->slow[i].ns / 1e9);
    }
    printf("queries:     %llu in %.3f s, %.0f per second", (unsigned long long)total->queries,
           (double)total->query_ns / 1e9, per_second(total->queries, total->query_ns));
    if (total->not_sent > 0) {
        printf("; %llu never sent", (unsigned long long)total->not_sent);
    }
    if (config.rate > 0) {
        printf("; asked %.0f per second, sent %llu", config.rate, (unsigned long long)total->sent);
    }
    printf("\nrun:         %.3f s\n", (double)run_ns / 1e9);
    text_latency(config.rate > 0 ? "latency:     from when due," : "latency:    ", &total->latency);
    if (config.rate > 0) {
        text_latency("             from the send,", &total->service);
    }
    printf("errors:     ");
    for (unsigned kind = 0; kind < ERR_KINDS; kind++) {
        if (kind == ERR_CAP && config.rate == 0) {
            continue; /* no cap in a closed loop */
        }
        printf("%s %s %llu", kind > 0 ? "," : "", error_names[kind],
               (unsigned long long)total->errors[kind]);
    }
    printf("\n");
    if (total->errors[ERR_STATUS] > 0) {
        printf("statuses:   ");
        for (unsigned status = 0; status < STATUS_SPAN; status++) {
            if (total->statuses[status] > 0) {
                printf(" %u x %llu", status + STATUS_LOW,
                       (unsigned long long)total->statuses[status]);
            }
        }
        printf(" (expected %d)\n", config.expect_status);
    }
    for (size_t i = 0; config.timeline && i < seconds; i++) {
        printf("second %zu:%s %.0f per second, %llu errors, p99 %.3f ms", i, i < 10 ? " " : "",
               timeline[i].queries_per_s, (unsigned long long)timeline[i].errors,
               ms(timeline[i].p99_ns));
        printf(timeline[i].seconds < 0.9995 ? " (the last %.3f s)\n" : "\n", timeline[i].seconds);
    }
    if (total->slow_connects > 0) {
        printf("warning:     %llu connects took over 1 s: the server's accept queue or the "
               "client's ramp is the bottleneck\n",
               (unsigned long long)total->slow_connects);
    }
    if (error != NULL) {
        printf("error:       %s\n", error);
    }
}
