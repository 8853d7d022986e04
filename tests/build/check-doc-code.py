#!/usr/bin/env python3
"""Compiles the C the documentation shows, so that a renamed call or a changed contract cannot
leave a page, the README or a header's example behind.

    check-doc-code.py SOURCE_DIR CC [FLAG ...]

Every fenced ```c block of README.md and docs/*.md, and every example indented in a public
header's comments, is compiled on its own with -Wall -Werror (an unchecked result of a
function marked SXE_MUST_CHECK fails it too). A block is a sketch, not a program, so it is made
into one: lines that define something at the left margin (a function, a static or an enum, a
struct with its initializer) stay at file scope; the other lines become the body of a function;
a line of "..." is left out and "..." within a line stands for a value. The names sketches use
without defining them (the loop, a handler's arg, ...) are declared by CONTEXT below, unless the
block defines them itself. A block that does not compile prints its file, line, the code as
compiled and the compiler's words.
"""
import os
import re
import subprocess
import sys
import tempfile

PRELUDE = """\
#define _GNU_SOURCE
#include <sxe/sxe.h>
#include <stdio.h>
#include <string.h>
#include <netinet/in.h>
#include <syslog.h>
#include <unistd.h>
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
struct conn {
    int fd;
};
struct state {
    sxe_http_t *held;
};
struct price {
    double bid, ask, last;
};
struct record {
    char name[24];
};
struct check {
    sxe_http_t *request;
    const char *user, *password;
    bool ok;
};
"""

# name -> its declaration, for names the sketches use without defining them.
CONTEXT = {
    "loop": "static sxe_loop_t *loop;",
    "listener": "static sxe_conn_t *listener;",
    "conn": "static sxe_conn_t *conn;",
    "handlers": "static struct sxe_conn_handlers handlers;",
    "echo": "static const struct sxe_conn_handlers echo;",
    "http": "static sxe_http_t *http;",
    "server": "static sxe_http_server_t *server;",
    "ws": "static sxe_ws_server_t *ws;",
    "client": "static sxe_http_client_t *client;",
    "call": "static sxe_http_call_t *call;",
    "arg": "static void *arg;",
    "rc": "static int rc;",
    "piece": "static const char *piece;",
    "len": "static size_t len;",
    "body": "static const char *body;",
    "state": "static struct state *state;",
    "on_cancel": "static void on_cancel(sxe_http_t *held, void *arg) { (void)held, (void)arg; }",
    "length_or_SXE_HTTP_BODY_UNKNOWN": "static uint64_t length_or_SXE_HTTP_BODY_UNKNOWN;",
    "definition": "static const char *definition;",
    "definition_size": "static size_t definition_size;",
    "size": "static size_t size;",
    "id": "static uint64_t id;",
    "price": "static struct price price;",
    "other": "static uint64_t other;",
    "record": "static struct record *record;",
    "fibers": "static sxe_fibers_t *fibers;",
    "workers": "static sxe_workers_t *workers;",
    "address": "static struct sockaddr_in address;",
    "my_state_for": "static void *my_state_for(sxe_worker_t *worker) { return worker; }",
    "stream_handlers": "static const struct sxe_http_client_handlers stream_handlers;",
    "count": "static size_t count;",
    "keys": "static const void *const keys[8];",
    "prices": "static char prices[8][24];",
    "sizes": "static int64_t sizes[8];",
    "reader": "static struct sxe_map_reader reader;",
    "map": "static sxe_map_t *map;",
    "fd": "static int fd = -1;",
    "buf": "static char buf[4096];",
    "got": "static ssize_t got;",
    "now": "static uint64_t now;",
    "close_idle": "static void close_idle(sxe_pool_t *pool, uint32_t index, void *arg)"
                  " { (void)pool, (void)index, (void)arg; }",
    "addr": "static struct sockaddr_in addr;",
    "chat": "static const struct sxe_ws_handlers chat;",
    "pool": "static sxe_work_pool_t *pool;",
    "db": "static sxe_sqlite_t *db;",
    "redis": "static sxe_redis_t *redis;",
    "resolver": "static sxe_resolver_t *resolver;",
    "resolved": "static void resolved(void *arg, int err, const struct sxe_resolved *answer)"
                " { (void)arg, (void)err, (void)answer; }",
    "check": "static struct check *check;",
    "request": "static sxe_http_t *request;",
    "answer": "static void answer(sxe_http_t *request, int status) { (void)request, (void)status; }",
    "password_matches": "static bool password_matches(const char *user, const char *password)"
                        " { return user == password; }",
    "ship": "static void ship(const char *sku, int64_t quantity) { (void)sku, (void)quantity; }",
}

def code_of(line):
    """A sketch's line as C: a line that starts with "..." is an empty statement, "{ ... }" an
    empty block, "= ...;" a value."""
    line = re.sub(r"^(\s*)\.\.\..*$", r"\1;", line)
    line = line.replace("{ ... }", "{ }")
    return re.sub(r"= \.\.\.;", "= 0;", line)


def ends_statement(line):
    return re.sub(r"/\*.*?\*/|//.*$", "", line).rstrip().endswith(";")


def blocks_of_markdown(path):
    """(line, text) of each ```c block."""
    inside, start, lines = False, 0, []
    for number, line in enumerate(open(path), 1):
        if not inside and line.rstrip() == "```c":
            inside, start, lines = True, number + 1, []
        elif inside and line.startswith("```"):
            inside = False
            yield start, "".join(lines)
        elif inside:
            lines.append(line)


def blocks_of_header(path):
    """(line, text) of each example in the header's comments: lines indented four spaces past
    the comment's margin, after an empty comment line (a wrapped @return's lines are not one)."""
    block, start, previous = [], 0, ""
    for number, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        code = re.match(r"^ \*     (.*)$", line)
        if code and (block or previous == " *"):
            start = start or number
            block.append(code.group(1) + "\n")
        elif block:
            yield start, "".join(block)
            block, start = [], 0
        previous = line


def program_of(text):
    """The block as a translation unit: what it defines at the margin (a function, a static, an
    enum) at file scope, the rest in a function."""
    lines = [code_of(line) for line in text.splitlines()]
    first = [line for line in lines if line.startswith("#")]
    lines = [line for line in lines if not line.startswith("#")]
    top, body = [], []
    i = 0
    while i < len(lines):
        line = lines[i]
        function = not line[:1].isspace() and i + 1 < len(lines) and lines[i + 1] == "{"
        if not function and not re.match(r"^(static|enum)\b", line):
            body.append("    " + line)
            i += 1
            continue
        chunk, depth = [line], line.count("{") - line.count("}")
        while i + 1 < len(lines) and (chunk[-1] != "}" if function else
                                      depth > 0 or not ends_statement(chunk[-1])):
            i += 1
            chunk.append(lines[i])
            depth += lines[i].count("{") - lines[i].count("}")
        top.extend(chunk)
        i += 1
    defined = "\n".join(top)
    context = [decl for name, decl in CONTEXT.items()
               if re.search(r"\b%s\b" % re.escape(name), text) and
               not re.search(r"^\S.*\b%s\s*(\(|=|\[|;)" % re.escape(name), defined, re.M)]
    kind = "void" if any(re.match(r"^\s*return;", line) for line in body) else "int"
    return ("\n".join(first) + "\n" + PRELUDE +
            "\n".join("__attribute__((unused)) " + decl for decl in context) + "\n\n" + defined +
            "\n\n%s doc_example(void);\n%s doc_example(void)\n{\n" % (kind, kind) +
            "\n".join(body) + ("\n    return 0;" if kind == "int" else "") + "\n}\n")


def main():
    source, cc, flags = sys.argv[1], sys.argv[2], sys.argv[3:]
    found = []
    for name in ["README.md"] + sorted(os.listdir(os.path.join(source, "docs"))):
        path = os.path.join(source, name if name == "README.md" else os.path.join("docs", name))
        if path.endswith(".md"):
            found += [(path, line, text) for line, text in blocks_of_markdown(path)]
    headers = os.path.join(source, "include", "sxe")
    for name in sorted(os.listdir(headers)):
        path = os.path.join(headers, name)
        found += [(path, line, text) for line, text in blocks_of_header(path)
                  if not text[:1].isdigit()]  # a sample of output (a log line), not code
    failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        for path, line, text in found:
            unit = os.path.join(scratch, "example.c")
            with open(unit, "w") as out:
                out.write(program_of(text))
            result = subprocess.run(
                [cc, "-std=gnu11", "-c", "-o", os.devnull, "-Wall", "-Wextra", "-Werror",
                 "-Wno-unused-parameter", "-I", os.path.join(source, "include"), *flags, unit],
                capture_output=True, text=True)
            where = "%s:%d" % (os.path.relpath(path, source), line)
            if result.returncode != 0:
                failed += 1
                print("check-doc-code: %s does not compile:\n%s\n%s" %
                      (where, open(unit).read(), result.stderr))
    print("check-doc-code: %d examples, %d compile" % (len(found), len(found) - failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
