#!/usr/bin/env python3
"""DNS and proxy probes run inside a sandbox by tests/e2e/101-resolver.sh.

  dnsq query NAME [--type A|AAAA] [--tcp] [--edns SIZE] [--repeat N]
      ask warren's DNS server (127.0.0.1:53); print per answer
      "rcode R", "tc 0|1", "size BYTES", "opt 0|1", "count N", "ttl T",
      "answer ADDR" (with --tcp and --repeat, N queries on one connection)
  dnsq burst HOST PORT N
      open N connections at once through the proxy (CONNECT HOST:PORT)
      and print "ok K" for the K that got the upstream's "ok"
  dnsq flood TEMPLATE N
      send N UDP queries at once for TEMPLATE % 0, 1, ... ("a%d.test"),
      answers ignored
"""
import argparse
import random
import selectors
import socket
import struct
import sys
import time

SERVER = ("127.0.0.1", 53)


def question(name, qtype, edns):
    qid = random.randint(0, 65535)
    ar = 1 if edns else 0
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, ar)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", {"A": 1, "AAAA": 28}[qtype], 1)
    if edns:
        q += b"\x00" + struct.pack("!HHIH", 41, edns, 0, 0)
    return qid, q


def skip_name(msg, i):
    while True:
        n = msg[i]
        if n == 0:
            return i + 1
        if n & 0xC0 == 0xC0:
            return i + 2
        i += 1 + n


def show(msg):
    _, flags, qd, an, _, ar = struct.unpack("!HHHHHH", msg[:12])
    print("rcode %d" % (flags & 0xF))
    print("tc %d" % ((flags >> 9) & 1))
    print("size %d" % len(msg))
    print("count %d" % an)
    i = 12
    for _ in range(qd):
        i = skip_name(msg, i) + 4
    for _ in range(an):
        i = skip_name(msg, i)
        rtype, _, ttl, rdlen = struct.unpack("!HHIH", msg[i:i + 10])
        i += 10
        rdata = msg[i:i + rdlen]
        i += rdlen
        print("ttl %d" % ttl)
        fam = {1: socket.AF_INET, 28: socket.AF_INET6}.get(rtype)
        if fam:
            print("answer %s" % socket.inet_ntop(fam, rdata))
    opt = 0
    for _ in range(ar):
        i = skip_name(msg, i)
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[i:i + 10])
        i += 10 + rdlen
        opt |= rtype == 41
    print("opt %d" % opt)


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        part = s.recv(n - len(buf))
        if not part:
            raise EOFError("connection closed")
        buf += part
    return buf


def cmd_query(a):
    if a.tcp:
        s = socket.create_connection(SERVER, timeout=a.timeout)
        qs = [question(a.name, a.type, a.edns) for _ in range(a.repeat)]
        s.sendall(b"".join(struct.pack("!H", len(q)) + q for _, q in qs))
        for _ in qs:
            n = struct.unpack("!H", recv_exact(s, 2))[0]
            show(recv_exact(s, n))
        return 0
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(a.timeout)
    qid, q = question(a.name, a.type, a.edns)
    s.sendto(q, SERVER)
    try:
        while True:
            msg, _ = s.recvfrom(65535)
            if struct.unpack("!H", msg[:2])[0] == qid:
                break
    except socket.timeout:
        print("timeout")
        return 1
    show(msg)
    return 0


def cmd_burst(a):
    sel = selectors.DefaultSelector()
    req = ("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
           (a.host, a.port, a.host, a.port)).encode()
    for _ in range(a.n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", 3128))
        sel.register(s, selectors.EVENT_WRITE, b"")
    ok, left, deadline = 0, a.n, time.time() + a.timeout
    while left and time.time() < deadline:
        for key, ev in sel.select(1):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                try:
                    s.send(req)
                    sel.modify(s, selectors.EVENT_READ, b"")
                except OSError:
                    sel.unregister(s)
                    s.close()
                    left -= 1
                continue
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            data = key.data + chunk
            done = b"\r\n\r\nok\n" in data
            if chunk and not done and data.count(b"\n") < 4:
                sel.modify(s, selectors.EVENT_READ, data)
                continue
            ok += done
            sel.unregister(s)
            s.close()
            left -= 1
    print("ok %d" % ok)
    return 0


def cmd_flood(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for i in range(a.n):
        s.sendto(question(a.template % i, "A", 0)[1], SERVER)
    print("sent %d" % a.n)
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("query")
    q.add_argument("name")
    q.add_argument("--type", default="A")
    q.add_argument("--tcp", action="store_true")
    q.add_argument("--edns", type=int, default=0)
    q.add_argument("--repeat", type=int, default=1)
    q.add_argument("--timeout", type=float, default=5)
    b = sub.add_parser("burst")
    b.add_argument("host")
    b.add_argument("port", type=int)
    b.add_argument("n", type=int)
    b.add_argument("--timeout", type=float, default=40)
    f = sub.add_parser("flood")
    f.add_argument("template")
    f.add_argument("n", type=int)
    a = p.parse_args()
    return {"query": cmd_query, "burst": cmd_burst, "flood": cmd_flood}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
