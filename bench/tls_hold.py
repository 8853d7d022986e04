#!/usr/bin/env python3
"""Holds idle keep-alive connections for bench/tls.py's memory case: opens N connections to
127.0.0.1:PORT (TLS, checking nothing, or plain), 200 at a time, sends each one GET /hello.txt and
reads its 200 answer whole, then prints {"held": N} and keeps them all, idle, until its standard
input closes; then it checks that every one is still open and prints {"lost": K}.

    bench/tls_hold.py --port PORT --connections N [--tls]
"""
import argparse
import asyncio
import json
import ssl
import sys

REQUEST = b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\n\r\n"
ANSWER = b"Hello World\n"


async def one(port, context, gate):
    async with gate:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=context, server_hostname="localhost" if context else None)
        writer.write(REQUEST)
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = await reader.readexactly(length)
        if not head.startswith(b"HTTP/1.1 200 ") or body != ANSWER:
            raise RuntimeError(f"answer {head[:40]!r}, {len(body)} bytes")
        return reader, writer


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--connections", type=int, required=True)
    parser.add_argument("--tls", action="store_true")
    args = parser.parse_args()
    context = None
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the server's memory is measured, not its name
    gate = asyncio.Semaphore(200)
    held = []
    for start in range(0, args.connections, 1000):
        count = min(1000, args.connections - start)
        held += await asyncio.gather(*(one(args.port, context, gate) for _ in range(count)))
        print(f"tls_hold: {len(held)}/{args.connections} connected and answered", file=sys.stderr,
              flush=True)
    print(json.dumps({"held": len(held)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    lost = sum(1 for reader, _ in held if reader.at_eof())
    print(json.dumps({"lost": lost}), flush=True)
    for _, writer in held:
        writer.close()


if __name__ == "__main__":
    asyncio.run(main())
