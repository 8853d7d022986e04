"""Servers under test: each cell starts one afresh (pinned, on a free port), checks that the
process started is the one listening and that it answers right, loads it, and stops it by its
pid."""
import http.client
import ssl
import os

from . import load, procs


class Spec:
    """A server: how to start it on a port (command(port) gives the command line), the CPUs it
    may run on, what to ask of it and what the answer's body must be, the Debian packages it
    needs, and the environment it runs in."""

    def __init__(self, name, command, cpus="0", path="/", body=None, packages=(), env=None,
                 ready=None):
        self.name, self.command, self.cpus, self.path = name, command, cpus, path
        self.body, self.packages, self.env, self.ready = body, packages, env, ready


class Running:
    """A started server; leaving a with block stops it."""

    def __init__(self, spec):
        self.spec = spec
        self.port = procs.free_port()
        env = None
        if spec.env:
            env = dict(os.environ)
            env.update(spec.env)
        self.process = procs.start(spec.command(self.port), spec.cpus, env=env)
        self.load_extra = []  # more of sxe-http's options, as the ready hook finds them
        try:
            procs.wait_for_port(self.port, self.process.pid)
            if spec.ready:
                spec.ready(self)
        except BaseException:
            procs.stop(self.process)
            raise

    def pids(self):
        return procs.tree(self.process.pid)

    def cpu_ns(self):
        return procs.tree_cpu_ns(self.pids())

    def memory_kb(self, field="VmRSS"):
        return procs.tree_kb(self.pids(), field)

    def check(self, path=None, body=None, method="GET", tls=False):
        """One request, over its own connection (TLS, checking no certificate, if tls): the answer
        must be 200 with the expected body."""
        path = path or self.spec.path
        body = body if body is not None else self.spec.body
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, timeout=5, context=ssl._create_unverified_context()) \
            if tls else http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        if response.status != 200 or (body is not None and data != body):
            raise RuntimeError(f"{self.spec.name} answered {response.status} with "
                               f"{len(data)} bytes for {path}, not 200 with "
                               f"{len(body) if body is not None else 'any'} bytes")

    def load(self, build, **options):
        """sxe-http against it (load.sxe_http's options), sampled over the window."""
        return load.sxe_http(build, self.port, self.pids, **options)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        procs.stop(self.process)
