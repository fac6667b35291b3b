#!/usr/bin/env python3
"""A minimal WebSocket (RFC 6455) echo server and client, stdlib only.

The server runs inside a sandbox (`warren cp` it in, then `warren exec -d
... python3 /tmp/ws.py server --port 8000`); the client runs on the host
against the published port.

  ws.py server [--addr 0.0.0.0] [--port 8000]
      Echoes every text and binary message; answers pings; the text
      message "__whoami__" is answered with the host name (inside a
      sandbox: its name), so a client can tell who answered.

  ws.py client --url ws://HOST:PORT/PATH [--message TEXT] [--size N]
               [--count N] [--timeout S]
      Handshakes (checking Sec-WebSocket-Accept), sends masked text
      frames and prints each reply on its own line (for --size, a random
      text of N bytes is sent and "ok N" printed when it came back whole).
      Exit 0 when every reply matched (or, for __whoami__, came back at
      all); 1 on a mismatch, a bad handshake or a timeout.
"""

import argparse
import base64
import hashlib
import os
import random
import socket
import string
import struct
import sys
import threading
import urllib.parse

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10
MAX_MESSAGE = 16 << 20


def accept_key(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("connection closed")
        buf += chunk
    return buf


def read_head(sock):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            raise EOFError("connection closed during the handshake")
        head += chunk
        if len(head) > 65536:
            raise ValueError("handshake too large")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return lines[0], headers


def send_frame(sock, opcode, payload, mask):
    head = bytes([0x80 | opcode])
    n = len(payload)
    bit = 0x80 if mask else 0
    if n < 126:
        head += bytes([bit | n])
    elif n < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", n)
    if mask:
        key = os.urandom(4)
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        head += key
    sock.sendall(head + payload)


def read_frame(sock):
    b0, b1 = recv_exact(sock, 2)
    fin, opcode = b0 & 0x80, b0 & 0x0F
    masked, n = b1 & 0x80, b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(sock, 8))[0]
    if n > MAX_MESSAGE:
        raise ValueError("frame too large")
    key = recv_exact(sock, 4) if masked else None
    payload = recv_exact(sock, n)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bool(fin), opcode, bool(masked), payload


def read_message(sock, mask_replies):
    """The next data message as (opcode, payload); pings are answered."""
    parts, first_op = [], None
    while True:
        fin, op, _, payload = read_frame(sock)
        if op == OP_PING:
            send_frame(sock, OP_PONG, payload, mask_replies)
            continue
        if op == OP_PONG:
            continue
        if op == OP_CLOSE:
            return OP_CLOSE, payload
        if op != OP_CONT:
            first_op = op
        parts.append(payload)
        if fin:
            return first_op, b"".join(parts)


# ---- server ---------------------------------------------------------------------


def serve_client(conn):
    try:
        line, headers = read_head(conn)
        key = headers.get("sec-websocket-key")
        if not line.startswith("GET ") or headers.get("upgrade", "").lower() != "websocket" \
                or not key:
            conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n"
                         b"Connection: close\r\n\r\n")
            return
        conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                      "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n"
                      % accept_key(key)).encode())
        while True:
            op, payload = read_message(conn, False)
            if op == OP_CLOSE:
                send_frame(conn, OP_CLOSE, payload[:2], False)
                return
            if op == OP_TEXT and payload == b"__whoami__":
                payload = socket.gethostname().encode()
            send_frame(conn, op, payload, False)
    except (OSError, EOFError, ValueError):
        pass
    finally:
        conn.close()


def server(args):
    fam = socket.AF_INET6 if ":" in args.addr else socket.AF_INET
    ls = socket.socket(fam, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((args.addr, args.port))
    ls.listen(64)
    print("listening on %s:%d" % (args.addr, ls.getsockname()[1]), flush=True)
    while True:
        conn, _ = ls.accept()
        threading.Thread(target=serve_client, args=(conn,), daemon=True).start()


# ---- client ---------------------------------------------------------------------


def client(args):
    url = urllib.parse.urlsplit(args.url)
    if url.scheme != "ws":
        sys.exit("ws.py: only ws:// URLs")
    host, port = url.hostname, url.port or 80
    path = (url.path or "/") + ("?" + url.query if url.query else "")
    sock = socket.create_connection((host, port), timeout=args.timeout)
    sock.settimeout(args.timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    hostport = ("[%s]" % host if ":" in host else host) + ":%d" % port
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\n"
                  "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                  "Sec-WebSocket-Version: 13\r\n\r\n" % (path, hostport, key)).encode())
    line, headers = read_head(sock)
    if line.split(" ")[1:2] != ["101"]:
        print("ws.py: handshake refused: %s" % line, file=sys.stderr)
        return 1
    if headers.get("sec-websocket-accept") != accept_key(key):
        print("ws.py: bad Sec-WebSocket-Accept", file=sys.stderr)
        return 1
    ok = True
    for _ in range(args.count):
        if args.size:
            msg = "".join(random.choice(string.ascii_letters) for _ in range(args.size))
        else:
            msg = args.message
        send_frame(sock, OP_TEXT, msg.encode(), True)
        op, reply = read_message(sock, True)
        if op != OP_TEXT:
            print("ws.py: expected a text message, got opcode %s" % op, file=sys.stderr)
            return 1
        text = reply.decode("utf-8", "replace")
        if args.size:
            good = text == msg
            print("ok %d" % len(reply) if good else "mismatch %d" % len(reply))
        else:
            good = msg == "__whoami__" or text == msg
            print(text)
        ok = ok and good
    send_frame(sock, OP_CLOSE, struct.pack("!H", 1000), True)
    try:
        read_message(sock, True)
    except (OSError, EOFError, ValueError):
        pass
    sock.close()
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description="WebSocket echo server and client")
    sub = ap.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("server")
    s.add_argument("--addr", default="0.0.0.0")
    s.add_argument("--port", type=int, default=8000)
    c = sub.add_parser("client")
    c.add_argument("--url", required=True)
    c.add_argument("--message", default="hello")
    c.add_argument("--size", type=int, default=0)
    c.add_argument("--count", type=int, default=1)
    c.add_argument("--timeout", type=float, default=10)
    args = ap.parse_args()
    if args.mode == "server":
        server(args)
        return 0
    try:
        return client(args)
    except (OSError, EOFError, ValueError) as e:
        print("ws.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
