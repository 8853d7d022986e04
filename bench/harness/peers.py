"""The servers bench/all compares, by kind, each configured as its users run it (bench/peers/
holds the peers' configurations, a comment on every line that differs from the default). sxe's
own programs run with their defaults but for the number of workers (one per core given) and the
size of their connection table (--connections, as nginx's worker_connections, for the
10,000-connection scenarios)."""
import os

from .servers import Spec

HELLO = b"Hello World\n"


class Context:
    """What a suite works with: the build, a scratch directory, the files' root, the options."""

    def __init__(self, build, tmp, root, args):
        self.build, self.tmp, self.root, self.args = build, tmp, root, args
        self.peers = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                  "peers")

    def program(self, path):
        return os.path.join(self.build, path)

    def config(self, template, port, **values):
        """bench/peers/template with {port}, {root}, {tmp} and values filled in, in tmp."""
        with open(os.path.join(self.peers, template)) as source:
            text = source.read()
        values = {"port": port, "root": self.root, "tmp": self.tmp, **values}
        for key, value in values.items():
            text = text.replace("{" + key + "}", str(value))
        path = os.path.join(self.tmp, f"{port}-{template}")
        with open(path, "w") as out:
            out.write(text)
        return path


def sxe(ctx, backend, path, *args):
    """An sxe program on one backend, whatever the environment says."""
    return lambda port: ["env", f"SXE_BACKEND={backend}", ctx.program(path),
                         *[a.format(port=port) for a in args]]


def nginx(ctx, workers=1, reuseport=False, log=None, cpus="0", gzip=""):
    name = f"nginx {workers} workers" + (" reuseport" if reuseport else "") if workers > 1 \
        else "nginx"
    log_line = f"access_log {log} combined buffer=64k flush=1s;" if log else "access_log off;"
    return Spec(name, lambda p: ["nginx", "-p", ctx.tmp, "-c", ctx.config(
        "nginx.conf", p, workers=workers, reuseport="reuseport" if reuseport else "",
        log=log_line, gzip=gzip)], cpus=cpus, packages=("nginx-light",))


def h2o(ctx, threads=1, log=None, cpus="0", compress=""):
    name = f"h2o {threads} threads" if threads > 1 else "h2o"
    log_line = f"access-log: {log}" if log else ""
    return Spec(name, lambda p: ["h2o", "-c", ctx.config("h2o.conf", p, threads=threads,
                                                         log=log_line, compress=compress)],
                cpus=cpus, packages=("h2o",))


def sxe_httpd(ctx, backend="epoll", workers=1, extra=(), cpus="0", name=None):
    name = name or ("sxe-httpd" + (f" {workers} workers" if workers > 1 else "") +
                    (" io_uring" if backend == "io_uring" else ""))
    return Spec(name, sxe(ctx, backend, "tools/sxe-httpd", "--root", ctx.root, "--listen",
                          "127.0.0.1:{port}", "--workers", str(workers), "--connections",
                          "19000", *extra), cpus=cpus)


def canned(ctx):
    """Servers of a canned Hello World: the floors, sxe's examples/hello, libuv, node's net."""
    specs = [
        Spec("epoll floor", lambda p: [ctx.program("bench/epoll-floor"), str(p)]),
        Spec("uring floor", lambda p: [ctx.program("bench/uring-floor"), str(p)]),
        Spec("sxe hello", sxe(ctx, "epoll", "examples/hello", "{port}")),
        Spec("sxe hello io_uring", sxe(ctx, "io_uring", "examples/hello", "{port}")),
        Spec("libuv", lambda p: [os.path.join(ctx.tmp, "libuv-hello"), str(p)],
             packages=("libuv1-dev",)),
        Spec("node.js net", lambda p: ["node", os.path.join(ctx.peers, "node-net.js"), str(p)],
             packages=("nodejs",)),
    ]
    return [s for s in specs if s.name != "uring floor" or
            os.path.exists(ctx.program("bench/uring-floor"))]


def http(ctx):
    """HTTP frameworks answering Hello World from code."""
    return [
        Spec("sxe http-hello", sxe(ctx, "epoll", "examples/http-hello", "127.0.0.1:{port}")),
        Spec("sxe http-hello io_uring", sxe(ctx, "io_uring", "examples/http-hello",
                                            "127.0.0.1:{port}")),
        Spec("nginx return 200", nginx(ctx).command, packages=("nginx-light",)),
        Spec("nginx+Lua", lambda p: ["nginx", "-p", ctx.tmp, "-c", ctx.config("nginx-lua.conf", p)],
             packages=("nginx-light", "libnginx-mod-http-lua")),
        Spec("node.js http", lambda p: ["node", os.path.join(ctx.peers, "node-hello.js"), str(p)],
             packages=("nodejs",)),
    ]


def files(ctx):
    """Static-file servers: the static floor, sxe-httpd on each backend, nginx, h2o."""
    return [
        Spec("static floor", lambda p: [ctx.program("bench/epoll-floor"), str(p), ctx.root]),
        sxe_httpd(ctx),
        sxe_httpd(ctx, "io_uring"),
        nginx(ctx),
        h2o(ctx),
    ]


def two_cores(ctx):
    """Static-file servers on both cores, each as its users spread it over two."""
    both = "0,1"
    return [
        Spec("static floor 2", lambda p: [ctx.program("bench/epoll-floor"), str(p), ctx.root,
                                          "2"], cpus=both),
        sxe_httpd(ctx, workers=2, cpus=both),
        sxe_httpd(ctx, workers=2, extra=("--threads",), cpus=both,
                  name="sxe-httpd 2 worker threads"),
        nginx(ctx, workers=2, cpus=both),
        nginx(ctx, workers=2, reuseport=True, cpus=both),
        h2o(ctx, threads=2, cpus=both),
    ]
