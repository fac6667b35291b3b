#!/usr/bin/env python3
"""Bulk transfers through warren's tunnels, for tests/e2e/103-tunnels.sh
(stdlib only).

  tunnels.py serve --addr ADDR --ready FILE
      One TCP server; each connection starts with a line saying what it is:
        u              read to EOF, answer "LENGTH SHA256\\n", close
                       (the client has half-closed: the answer must still
                       reach it)
        d N SEED       send the N bytes of stream(SEED), then FIN; close
                       when the client does
        s              a slow reader: 4 KiB every 50 ms until EOF
        r N            read N bytes, then reset the connection
        e              echo everything until EOF
      (lower case: a redirected connection that starts like an HTTP
      request line is handled as one)
      --ready FILE gets {"port": PORT} once it listens.

  tunnels.py up|down|slow|reset|hold HOST PORT [--proxy ADDR:PORT]
                 [--bytes N] [--parallel K] [--seconds S]
      The client, inside a sandbox: with --proxy through a CONNECT tunnel,
      without it a plain connect() (transparently redirected). up and down
      check every byte by SHA-256 (K connections at once); slow pushes for
      S seconds and prints how many bytes the tunnel took; reset prints
      how the connection ended; hold opens K tunnels, all before using
      any, then has each echo a line of its own. Exit status 0 when all
      went as expected.
"""

import argparse
import hashlib
import json
import os
import random
import socket
import struct
import sys
import threading
import time

CHUNK = 1 << 20


def stream(seed, n):
    """The same N pseudo-random bytes for one seed on both ends."""
    rng = random.Random(seed)
    while n > 0:
        k = min(n, CHUNK)
        yield rng.randbytes(k)
        n -= k


def read_line(sock):
    line = b""
    while not line.endswith(b"\n") and len(line) < 256:
        b = sock.recv(1)
        if not b:
            break
        line += b
    return line.decode().split()


def serve_conn(sock):
    try:
        words = read_line(sock)
        if not words:
            return
        if words[0] == "u":
            h, total = hashlib.sha256(), 0
            while True:
                b = sock.recv(CHUNK)
                if not b:
                    break
                h.update(b)
                total += len(b)
            sock.sendall(b"%d %s\n" % (total, h.hexdigest().encode()))
        elif words[0] == "d":
            for part in stream(int(words[2]), int(words[1])):
                sock.sendall(part)
            sock.shutdown(socket.SHUT_WR)
            while sock.recv(CHUNK):
                pass
        elif words[0] == "e":
            while True:
                b = sock.recv(CHUNK)
                if not b:
                    break
                sock.sendall(b)
        elif words[0] == "s":
            while sock.recv(4096):
                time.sleep(0.05)
        elif words[0] == "r":
            left = int(words[1])
            while left > 0:
                b = sock.recv(min(left, CHUNK))
                if not b:
                    return
                left -= len(b)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
    except OSError:
        pass
    finally:
        sock.close()


def cmd_serve(a):
    fam = socket.AF_INET6 if ":" in a.addr else socket.AF_INET
    srv = socket.socket(fam, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.addr, 0))
    srv.listen(512)
    tmp = a.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"port": srv.getsockname()[1]}, f)
    os.rename(tmp, a.ready)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve_conn, args=(conn,), daemon=True).start()


def open_conn(a):
    if not a.proxy:
        return socket.create_connection((a.host, a.port), timeout=60)
    phost, pport = a.proxy.rsplit(":", 1)
    sock = socket.create_connection((phost, int(pport)), timeout=60)
    target = "%s:%d" % (a.host, a.port)
    sock.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n"
                  % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = sock.recv(1)
        if not b:
            raise OSError("the proxy closed before answering")
        head += b
    if not head.startswith(b"HTTP/1.1 200"):
        raise OSError("the proxy answered %r" % head.split(b"\r\n")[0])
    return sock


def one_up(a, seed):
    sock = open_conn(a)
    want = hashlib.sha256()
    sock.sendall(b"u\n")
    for part in stream(seed, a.bytes):
        want.update(part)
        sock.sendall(part)
    # Half-close: the server's answer comes after our FIN.
    sock.shutdown(socket.SHUT_WR)
    words = read_line(sock)
    sock.close()
    expect = [str(a.bytes), want.hexdigest()]
    if words != expect:
        return "sent %s, the server got %s" % (expect, words)
    return None


def one_down(a, seed):
    sock = open_conn(a)
    got, total = hashlib.sha256(), 0
    sock.sendall(b"d %d %d\n" % (a.bytes, seed))
    while True:
        b = sock.recv(CHUNK)
        if not b:
            break
        got.update(b)
        total += len(b)
    sock.close()
    want = hashlib.sha256()
    for part in stream(seed, a.bytes):
        want.update(part)
    if (total, got.hexdigest()) != (a.bytes, want.hexdigest()):
        return "got %d bytes %s, want %d %s" % (
            total, got.hexdigest(), a.bytes, want.hexdigest())
    return None


def cmd_transfer(a, one):
    errors = []

    def run(seed):
        try:
            why = one(a, seed)
        except OSError as e:
            why = "connection %d: %s" % (seed, e)
        if why:
            errors.append(why)

    threads = [threading.Thread(target=run, args=(i + 1,))
               for i in range(a.parallel)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for e in errors:
        print("FAIL " + e)
    if not errors:
        print("ok %d x %d bytes" % (a.parallel, a.bytes))
    return 1 if errors else 0


def cmd_slow(a):
    sock = open_conn(a)
    sock.sendall(b"s\n")
    sock.setblocking(False)
    buf, sent, end = b"s" * 65536, 0, time.monotonic() + a.seconds
    while time.monotonic() < end:
        try:
            sent += sock.send(buf)
        except BlockingIOError:
            time.sleep(0.01)
    print(sent)
    sock.close()
    return 0


def cmd_hold(a):
    """Open --parallel tunnels, all of them before the first is used, then
    have each echo a line of its own: every tunnel was admitted at once."""
    socks = []
    try:
        for i in range(a.parallel):
            socks.append(open_conn(a))
    except OSError as e:
        print("FAIL tunnel %d of %d: %s" % (len(socks) + 1, a.parallel, e))
        return 1
    for i, sock in enumerate(socks):
        sock.sendall(b"e\n%d\n" % i)
    bad = 0
    for i, sock in enumerate(socks):
        try:
            got = read_line(sock)
        except OSError:
            got = None
        if got != [str(i)]:
            bad += 1
    for sock in socks:
        sock.close()
    if bad:
        print("FAIL %d of %d tunnels did not echo" % (bad, a.parallel))
        return 1
    print("ok %d held" % a.parallel)
    return 0


def cmd_reset(a):
    sock = open_conn(a)
    sock.sendall(b"r %d\n" % a.bytes)
    buf, end = b"r" * 65536, time.monotonic() + 20
    try:
        while time.monotonic() < end:
            sock.sendall(buf)
        print("never ended")
        return 1
    except ConnectionResetError:
        print("reset")
    except BrokenPipeError:
        print("broken pipe")
    except OSError as e:
        print("error %s" % e)
        return 1
    return 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--addr", required=True)
    s.add_argument("--ready", required=True)
    for name in ("up", "down", "slow", "reset", "hold"):
        c = sub.add_parser(name)
        c.add_argument("host")
        c.add_argument("port", type=int)
        c.add_argument("--proxy")
        c.add_argument("--bytes", type=int, default=1 << 20)
        c.add_argument("--parallel", type=int, default=1)
        c.add_argument("--seconds", type=float, default=3)
    a = p.parse_args()
    if a.cmd == "serve":
        cmd_serve(a)
        return 0
    if a.cmd == "up":
        return cmd_transfer(a, one_up)
    if a.cmd == "down":
        return cmd_transfer(a, one_down)
    if a.cmd == "slow":
        return cmd_slow(a)
    if a.cmd == "hold":
        return cmd_hold(a)
    return cmd_reset(a)


if __name__ == "__main__":
    sys.exit(main())
