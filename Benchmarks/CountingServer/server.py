#!/usr/bin/env python3
"""A loopback HTTP/1.1 server for workload G that counts requests in flight per host.

Listens on 127.0.0.1 .. 127.0.0.HOSTS at PORT. Every GET is answered after DELAY ms with SIZE
bytes (keep-alive). A request counts as in flight from its first byte until the last byte of
its answer has been handed to the kernel and drained, or until its connection closes (a client
that gives up mid-answer is counted until the server's write or read fails). The highest count
per host is written to REPORT (one "host max requests" line per host) when the server gets
SIGTERM.

    server.py PORT HOSTS DELAY_MS SIZE REPORT
"""
import asyncio, signal, sys

port, hosts, delay, size, report = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) / 1000, int(sys.argv[4]), sys.argv[5]
body = b"x" * size
head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n" % size
inflight, peak, served = {}, {}, {}


async def serve(host, reader, writer):
    try:
        while True:
            line = await reader.readline()
            if not line:
                return
            inflight[host] += 1
            peak[host] = max(peak[host], inflight[host])
            try:
                while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                await asyncio.sleep(delay)
                writer.write(head + body)
                await writer.drain()
                served[host] += 1
            finally:
                inflight[host] -= 1
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


def write_report():
    with open(report, "w") as out:
        for host in sorted(peak):
            out.write(f"{host} {peak[host]} {served[host]}\n")


async def main():
    servers = []
    for n in range(1, hosts + 1):
        host = f"127.0.0.{n}"
        inflight[host], peak[host], served[host] = 0, 0, 0
        servers.append(await asyncio.start_server(lambda r, w, h=host: serve(h, r, w), host, port, backlog=512))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("ready", flush=True)
    await stop.wait()
    write_report()


asyncio.run(main())
