/*
 * Logging: level resolution per module, line formatting, sinks, hex dumps, call-tree tracing and
 * assertion reports.
 *
 * The fast path is in the header: a macro reads its module's resolved level with one relaxed
 * load and compares. Everything here runs only for lines that will be written, or once per module
 * when its level is resolved, so it favours clarity over speed.
 */
#define SXE_LOG_MODULE log_module
#include "sxe/log.h"

#include <ctype.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sxe/clock.h"
#include "sys.h"

static struct sxe_log_module log_module = SXE_LOG_MODULE_INIT(LOG);
struct sxe_log_module sxe_log_module_main = SXE_LOG_MODULE_INIT(MAIN);

#define MODULE_NAME_MAX   32
#define OVERRIDE_MAX      32
#define CALL_STACK_MAX    64
#define INDENT_DEPTH_MAX  32
#define BACKTRACE_MAX     32
#define HEX_BYTES_PER_ROW 16

static const char *const level_names[] = {"NONE", "FATAL", "ERROR", "WARN",
                                          "INFO", "DEBUG", "TRACE", "DUMP"};

/*
 * Module registry and settings. The registry links every module whose level has been resolved, so
 * a change of settings can send them all back to unresolved. The list ends at registry_end rather
 * than NULL, so that next == NULL means "not registered".
 */
static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sxe_log_module registry_end;
static struct sxe_log_module *registry = &registry_end;
static int default_level = SXE_LOG_LEVEL_INFO;

static struct {
    char name[MODULE_NAME_MAX];
    int level;
} overrides[OVERRIDE_MAX];
static unsigned override_count;

static sxe_log_sink_t sink = sxe_log_sink_fd;
static void *sink_ctx = (void *)(intptr_t)STDERR_FILENO;

/* Per-thread state: the object id, the traced call stack, and caches of the tid and the second. */
static __thread uint32_t thread_id_shown = SXE_LOG_NO_ID;
static __thread unsigned call_depth;
static __thread const char *call_stack[CALL_STACK_MAX];
static __thread pid_t thread_tid;
static __thread time_t stamp_second = -1;
static __thread char stamp_text[sizeof("YYYYMMDD HHMMSS")];

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

const char *sxe_log_level_name(enum sxe_log_level level)
{
    if ((unsigned)level >= sizeof(level_names) / sizeof(level_names[0])) {
        return "?";
    }
    return level_names[level];
}

static bool level_is_valid(int level)
{
    return level >= SXE_LOG_LEVEL_NONE && level <= SXE_LOG_LEVEL_DUMP;
}

/* Parses "0".."7" or a level name in any case; returns -1 for anything else. */
static int parse_level(const char *text)
{
    if (text[0] >= '0' && text[0] <= '7' && text[1] == '\0') {
        return text[0] - '0';
    }
    for (int level = SXE_LOG_LEVEL_NONE; level <= SXE_LOG_LEVEL_DUMP; level++) {
        if (strcasecmp(text, level_names[level]) == 0) {
            return level;
        }
    }
    return -1;
}

/* The name of an environment variable whose value is not a level, kept to complain about. */
struct bad_variable {
    char name[sizeof("SXE_LOG_LEVEL_") + MODULE_NAME_MAX];
};

/*
 * Reads the level the environment variable gives, or -1 if it is unset. An invalid value is
 * reported through bad so the caller can complain once it holds no lock.
 */
static int level_from_env(const char *variable, struct bad_variable *bad)
{
    const char *text = getenv(variable);

    if (text == NULL) {
        return -1;
    }
    int level = parse_level(text);
    if (level < 0) {
        snprintf(bad->name, sizeof(bad->name), "%s", variable);
    }
    return level;
}

/* The precedence rules of the header, for one module name. Call with settings_lock held. */
static int level_for(const char *name, struct bad_variable *bad)
{
    char variable[sizeof("SXE_LOG_LEVEL_") + MODULE_NAME_MAX];
    int level;

    snprintf(variable, sizeof(variable), "SXE_LOG_LEVEL_%s", name);
    if ((level = level_from_env(variable, bad)) >= 0) {
        return level;
    }
    for (unsigned i = 0; i < override_count; i++) {
        if (strcmp(overrides[i].name, name) == 0) {
            return overrides[i].level;
        }
    }
    if ((level = level_from_env("SXE_LOG_LEVEL", bad)) >= 0) {
        return level;
    }
    return default_level;
}

/* Forces every registered module to resolve its level again. Call with settings_lock held. */
static void unresolve_all(void)
{
    for (struct sxe_log_module *module = registry; module != &registry_end; module = module->next) {
        __atomic_store_n(&module->level, SXE_LOG_LEVEL_UNRESOLVED, __ATOMIC_RELAXED);
    }
}

int sxe__log_module_resolve(struct sxe_log_module *module)
{
    struct bad_variable bad = {""};

    pthread_mutex_lock(&settings_lock);
    int level = level_for(module->name, &bad);
    if (module->next == NULL) {
        module->next = registry;
        registry = module;
    }
    __atomic_store_n(&module->level, level, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&settings_lock);

    /* The log module's own resolution must not complain, or complaining would recurse. */
    if (bad.name[0] != '\0' && module != &log_module) {
        SXE_LOG_WARN("ignoring %s=%s: expected 0-7 or a level name such as WARN", bad.name,
                     getenv(bad.name));
    }
    return level;
}

int sxe_log_set_level(enum sxe_log_level level)
{
    if (!SXE_CHECK(level_is_valid((int)level))) {
        return -EINVAL;
    }
    pthread_mutex_lock(&settings_lock);
    default_level = (int)level;
    unresolve_all();
    pthread_mutex_unlock(&settings_lock);
    return 0;
}

int sxe_log_set_module_level(const char *name, enum sxe_log_level level)
{
    int rc = 0;
    unsigned i;

    if (!SXE_CHECK(name != NULL && strlen(name) < MODULE_NAME_MAX && level_is_valid((int)level))) {
        return -EINVAL;
    }

    pthread_mutex_lock(&settings_lock);
    for (i = 0; i < override_count && strcmp(overrides[i].name, name) != 0; i++) {
    }
    if (i == OVERRIDE_MAX) {
        rc = -ENOBUFS;
        goto out;
    }
    if (i == override_count) {
        strcpy(overrides[i].name, name);
        override_count++;
    }
    overrides[i].level = (int)level;
    unresolve_all();
out:
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

enum sxe_log_level sxe_log_get_module_level(const char *name)
{
    struct bad_variable ignored;

    pthread_mutex_lock(&settings_lock);
    int level = level_for(name, &ignored);
    pthread_mutex_unlock(&settings_lock);
    return (enum sxe_log_level)level;
}

uint32_t sxe_log_set_id(uint32_t id)
{
    uint32_t previous = thread_id_shown;

    thread_id_shown = id;
    return previous;
}

/* Settings named in the program's own words (sxe_log_name_setting), set at start-up. */
static struct {
    const char *setting;
    const char *words;
} setting_names[16];

int sxe_log_name_setting(const char *setting, const char *words)
{
    for (size_t i = 0; i < sizeof(setting_names) / sizeof(setting_names[0]); i++) {
        if (setting_names[i].setting == NULL || strcmp(setting_names[i].setting, setting) == 0) {
            setting_names[i].setting = setting;
            setting_names[i].words = words;
            return 0;
        }
    }
    return -ENOBUFS;
}

const char *sxe_log_setting(const char *setting)
{
    for (size_t i = 0;
         i < sizeof(setting_names) / sizeof(setting_names[0]) && setting_names[i].setting != NULL;
         i++) {
        if (strcmp(setting_names[i].setting, setting) == 0) {
            return setting_names[i].words;
        }
    }
    return setting;
}

void sxe_log_set_sink(sxe_log_sink_t new_sink, void *ctx)
{
    if (new_sink == NULL) {
        new_sink = sxe_log_sink_fd;
        ctx = (void *)(intptr_t)STDERR_FILENO;
    }
    sink = new_sink;
    sink_ctx = ctx;
}

void sxe_log_sink_fd(void *ctx, enum sxe_log_level level, const char *line, size_t len)
{
    int fd = (int)(intptr_t)ctx;

    (void)level;
    while (len > 0) {
        ssize_t written = sxe__sys.write(fd, line, len);
        if (written < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        line += written;
        len -= (size_t)written;
    }
}

/* A forked child is a new thread with the parent's thread-local copy: forget the cached tid. */
static void forget_tid_in_child(void)
{
    thread_tid = 0;
}

static void register_atfork(void)
{
    pthread_atfork(NULL, NULL, forget_tid_in_child);
}

static pid_t current_tid(void)
{
    if (thread_tid == 0) {
        pthread_once(&atfork_once, register_atfork);
        thread_tid = sxe__sys.gettid();
    }
    return thread_tid;
}

/* Writes "YYYYMMDD HHMMSS.mmm" for now, reformatting the seconds only when they change. */
static int format_stamp(char *out, size_t size)
{
    uint64_t now_ns = sxe_clock_wall_ns();
    time_t second = (time_t)(now_ns / SXE_NS_PER_SEC);
    unsigned millis = (unsigned)(now_ns % SXE_NS_PER_SEC / SXE_NS_PER_MSEC);

    if (second != stamp_second) {
        struct tm utc;
        gmtime_r(&second, &utc);
        strftime(stamp_text, sizeof(stamp_text), "%Y%m%d %H%M%S", &utc);
        stamp_second = second;
    }
    return snprintf(out, size, "%s.%03u", stamp_text, millis);
}

/*
 * Formats one line, prefix first, and hands it to the sink. A message that does not fit is cut
 * and marked with "..." so a reader knows it was cut.
 */
static void emit_va(enum sxe_log_level level, unsigned indent, const char *format, va_list args)
{
    char line[SXE_LOG_LINE_MAX];
    char id_text[sizeof("4294967295")];
    size_t used;

    if (thread_id_shown == SXE_LOG_NO_ID) {
        strcpy(id_text, "------");
    } else {
        snprintf(id_text, sizeof(id_text), "%06u", thread_id_shown);
    }
    if (indent > INDENT_DEPTH_MAX) {
        indent = INDENT_DEPTH_MAX;
    }

    used = (size_t)format_stamp(line, sizeof(line));
    used +=
        (size_t)snprintf(line + used, sizeof(line) - used, " T %6d %s %-5s %*s", (int)current_tid(),
                         id_text, sxe_log_level_name(level), (int)(indent * 2), "");
    int message_len = vsnprintf(line + used, sizeof(line) - used, format, args);
    if (message_len < 0) {
        /* GCOVR_EXCL_START: vsnprintf fails only for a bad format, which the compiler checks. */
        message_len = 0;
        /* GCOVR_EXCL_STOP */
    }
    used += (size_t)message_len;

    /* Leave room for the newline; a cut line ends in "...\n". */
    if (used > sizeof(line) - 1) {
        memcpy(line + sizeof(line) - 5, "...", 3);
        used = sizeof(line) - 2;
    }
    line[used++] = '\n';
    sink(sink_ctx, level, line, used);
}

static void __attribute__((format(printf, 3, 4)))
emit(enum sxe_log_level level, unsigned indent, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    emit_va(level, indent, format, args);
    va_end(args);
}

void sxe__log_line(struct sxe_log_module *module, enum sxe_log_level level, const char *format, ...)
{
    va_list args;

    (void)module;
    va_start(args, format);
    emit_va(level, call_depth, format, args);
    va_end(args);
}

void sxe__log_trace(struct sxe_log_module *module, const char *format, ...)
{
    va_list args;

    (void)module;
    va_start(args, format);
    emit_va(SXE_LOG_LEVEL_TRACE, call_depth, format, args);
    va_end(args);
}

void sxe__log_hex(struct sxe_log_module *module, enum sxe_log_level level, const void *data,
                  size_t len)
{
    const unsigned char *bytes = data;

    (void)module;
    for (size_t row = 0; row < len; row += HEX_BYTES_PER_ROW) {
        char hex[HEX_BYTES_PER_ROW * 3 + 2];
        char text[HEX_BYTES_PER_ROW + 1];
        size_t hex_used = 0;
        size_t i;

        for (i = 0; i < HEX_BYTES_PER_ROW; i++) {
            /* An extra space after the eighth byte splits the row in two halves for the eye. */
            const char *gap = i == HEX_BYTES_PER_ROW / 2 ? " " : "";
            if (row + i < len) {
                hex_used += (size_t)snprintf(hex + hex_used, sizeof(hex) - hex_used, "%s%02x ", gap,
                                             bytes[row + i]);
                text[i] = isprint(bytes[row + i]) ? (char)bytes[row + i] : '.';
            } else {
                hex_used += (size_t)snprintf(hex + hex_used, sizeof(hex) - hex_used, "%s   ", gap);
                text[i] = ' ';
            }
        }
        text[i] = '\0';
        emit(level, call_depth, "%04zx  %s |%s|", row, hex, text);
    }
}

void sxe__log_dump(struct sxe_log_module *module, const void *data, size_t len)
{
    sxe__log_hex(module, SXE_LOG_LEVEL_DUMP, data, len);
}

void sxe__log_enter(struct sxe_log_module *module, const char *function, const char *format, ...)
{
    if (SXE_LOG_LEVEL_TRACE <= sxe__log_module_level(module)) {
        char args_text[SXE_LOG_LINE_MAX];
        va_list args;

        va_start(args, format);
        vsnprintf(args_text, sizeof(args_text), format, args);
        va_end(args);
        emit(SXE_LOG_LEVEL_TRACE, call_depth, "> %s%s", function, args_text);
    }
    if (call_depth < CALL_STACK_MAX) {
        call_stack[call_depth] = function;
    }
    call_depth++;
}

void sxe__log_leave(struct sxe_log_module *module, const char *function, const char *format, ...)
{
    /*
     * Unwind to the frame of function. Normally it is the top one; if a callee returned without
     * SXE_LOG_LEAVE, its frames are dropped here so the tree heals. A leave that matches no frame
     * (no ENTER) leaves the depth alone.
     */
    unsigned depth = call_depth;
    while (depth > 0 && depth <= CALL_STACK_MAX && call_stack[depth - 1] != function) {
        depth--;
    }
    if (depth > 0) {
        call_depth = depth - 1;
    }

    if (SXE_LOG_LEVEL_TRACE <= sxe__log_module_level(module)) {
        char result_text[SXE_LOG_LINE_MAX];
        va_list args;

        va_start(args, format);
        vsnprintf(result_text, sizeof(result_text), format, args);
        va_end(args);
        emit(SXE_LOG_LEVEL_TRACE, call_depth, "< %s%s", function, result_text);
    }
}

void sxe__assert_fail(const char *expression, const char *file, int line, const char *function)
{
    char path[SXE_LOG_LINE_MAX];
    size_t used = 0;
    unsigned frames = call_depth < CALL_STACK_MAX ? call_depth : CALL_STACK_MAX;
    static __thread bool reporting;

    /* An assertion that fails while a report is being written (in a sink, say) must not recurse. */
    if (reporting) {
        abort();
    }
    reporting = true;

    /* These lines bypass the level filter: an assertion report is never worth hiding. */
    emit(SXE_LOG_LEVEL_FATAL, 0, "assertion failed: %s (%s:%d in %s)", expression, file, line,
         function);

    path[0] = '\0';
    for (unsigned i = 0; i < frames && used < sizeof(path); i++) {
        used += (size_t)snprintf(path + used, sizeof(path) - used, "%s%s", i ? " > " : "",
                                 call_stack[i]);
    }
    emit(SXE_LOG_LEVEL_FATAL, 0, "traced call path: %s",
         frames ? path : "(nothing traced; SXE_LOG_ENTER traces in SXE_DEBUG builds)");

    void *addresses[BACKTRACE_MAX];
    int depth = backtrace(addresses, BACKTRACE_MAX);
    char **symbols = backtrace_symbols(addresses, depth);
    for (int i = 0; i < depth; i++) {
        emit(SXE_LOG_LEVEL_FATAL, 0, "  #%d %s", i, symbols != NULL ? symbols[i] : "?");
    }
    abort();
}
