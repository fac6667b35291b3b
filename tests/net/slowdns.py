#!/usr/bin/env python3
"""A slow DNS server for warren's resolver tests (tests/e2e/101-resolver.sh).

It listens on UDP and TCP at --listen ADDR:PORT and answers at most --rate
queries per second (the others wait their turn, as a busy resolver's
would), logging every query it receives to --log as one line,
"udp A name" or "tcp AAAA name". What it answers depends on the first
label of the name:

  hole...  never answered (a server that does not answer)
  nx...    NXDOMAIN
  many...  32 A records, 192.0.2.1 to 192.0.2.32 (more than fit 512 bytes)
  other    A: --addr; AAAA: no record (NOERROR, empty)

every record with TTL --ttl. With --sink, it also serves TCP on that
address (port chosen by the kernel): each connection gets "ok\\n". Once
listening it writes {"sink": PORT} to --ready.
"""
import argparse
import asyncio
import json
import socket
import struct


def parse_question(msg):
    """(id, flags, name, qtype, question end) of a query, or None."""
    if len(msg) < 12:
        return None
    qid, flags, qd = struct.unpack("!HHH", msg[:6])
    if qd != 1:
        return None
    i, labels = 12, []
    while i < len(msg) and msg[i] != 0:
        n = msg[i]
        labels.append(msg[i + 1:i + 1 + n].decode("ascii", "replace").lower())
        i += 1 + n
    if i + 5 > len(msg):
        return None
    qtype = struct.unpack("!H", msg[i + 1:i + 3])[0]
    return qid, flags, ".".join(labels), qtype, i + 5


def answer(msg, q, args):
    qid, flags, name, qtype, end = q
    first = name.split(".")[0]
    rcode, addrs = 0, []
    if first.startswith("nx"):
        rcode = 3
    elif first.startswith("many") and qtype == 1:
        addrs = [bytes([192, 0, 2, i]) for i in range(1, 33)]
    elif qtype == 1:
        addrs = [socket.inet_aton(args.addr)]
    out = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100) | rcode, 1,
                      len(addrs), 0, 0) + msg[12:end]
    for a in addrs:
        out += struct.pack("!HHHIH", 0xC00C, 1, 1, args.ttl, 4) + a
    return out


class Server:
    def __init__(self, args):
        self.args = args
        self.log = open(args.log, "a", buffering=1)
        self.queue = asyncio.Queue()

    def received(self, proto, msg, send):
        q = parse_question(msg)
        if q is None:
            return
        kind = {1: "A", 28: "AAAA"}.get(q[3], str(q[3]))
        self.log.write("%s %s %s\n" % (proto, kind, q[2]))
        if q[2].split(".")[0].startswith("hole"):
            return
        self.queue.put_nowait((answer(msg, q, self.args), send))

    async def answer_slowly(self):
        while True:
            reply, send = await self.queue.get()
            try:
                send(reply)
            except OSError:
                pass
            await asyncio.sleep(1.0 / self.args.rate)


class Udp(asyncio.DatagramProtocol):
    def __init__(self, server):
        self.server = server

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        self.server.received("udp", data,
                             lambda r: self.transport.sendto(r, addr))


async def tcp_client(server, reader, writer):
    def send(r):
        writer.write(struct.pack("!H", len(r)) + r)

    try:
        while True:
            head = await reader.readexactly(2)
            msg = await reader.readexactly(struct.unpack("!H", head)[0])
            server.received("tcp", msg, send)
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()


async def sink_client(reader, writer):
    try:
        writer.write(b"ok\n")
        await writer.drain()
        await reader.read()
    except ConnectionError:
        pass
    writer.close()


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--addr", default="192.0.2.1")
    p.add_argument("--ttl", type=int, default=60)
    p.add_argument("--rate", type=float, default=4.0)
    p.add_argument("--log", required=True)
    p.add_argument("--sink")
    p.add_argument("--ready", required=True)
    args = p.parse_args()
    host, port = args.listen.rsplit(":", 1)
    server = Server(args)
    loop = asyncio.get_running_loop()
    await loop.create_datagram_endpoint(lambda: Udp(server),
                                        local_addr=(host, int(port)))
    await asyncio.start_server(lambda r, w: tcp_client(server, r, w),
                               host, int(port))
    ready = {}
    if args.sink:
        sink = await asyncio.start_server(sink_client, args.sink, 0,
                                          backlog=2048)
        ready["sink"] = sink.sockets[0].getsockname()[1]
    with open(args.ready, "w") as f:
        json.dump(ready, f)
    await server.answer_slowly()


if __name__ == "__main__":
    asyncio.run(main())
