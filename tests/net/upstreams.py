#!/usr/bin/env python3
"""Local upstream servers for warren's network tests (stdlib only).

CI has no outside network, so the tests reach these instead, through
policy rules that name them. One process serves, on every --addr, with the
same port per service on each address:

  http          HTTP/1.1 (keep-alive, chunked and Content-Length bodies):
                  /redirect?to=URL[&code=N]  answers N (302) with Location
                  /big?n=BYTES               streams BYTES bytes
                  /quiet, /quiet/ANYTHING    "ok" (nothing echoed back)
                  /status/N                  answers status N
                  anything else              echoes the request as JSON:
                                             method, path, version, every
                                             header in order, body length
  https         the same over TLS, with a certificate for every test name
                (tests/net/mkca.sh) and the client's SNI recorded
  echo          raw TCP echo
  banner        raw TCP: sends "220 warren-banner\\r\\n" first, then echoes
                (a server-speaks-first protocol, like SMTP or MySQL)
  udp           records every datagram it receives
  registry      a mock npm registry: GET /NAME is the packument (one
                version, 1.0.0) whose dist.tarball is on this server, and
                GET /NAME/-/BASE-1.0.0.tgz is a valid tarball made on the
                fly (package/package.json, package/index.js)
  registry_tls  the same registry over TLS

Everything received is appended to --log as JSON lines, one per HTTP
request, raw TCP connection (on open and on close), TLS failure and UDP
datagram, so tests assert what the upstream saw. Each line has "server",
"local" and "peer" ("ADDR:PORT"; IPv6 as "[ADDR]:PORT"), "path" and
"host" ("" unless an HTTP request had them); HTTP lines also "method",
"target", "query", "version", "headers" ([[name, value], ...] as
received), "host" (the first Host header), "sni" (TLS, or null),
"body_len" and "body".

--ready FILE is written (atomically) when every listener is up, as JSON:
{"pid": N, "addrs": [...], "http": PORT, "https": PORT, ...}.

  upstreams.py --addr 127.0.0.2 [--addr ADDR...] --certs DIR \\
      --log FILE --ready FILE [--services http,https,...]
"""

import argparse
import base64
import errno
import gzip
import hashlib
import io
import json
import os
import signal
import socket
import ssl
import sys
import tarfile
import threading
import time
import urllib.parse

SERVICES = ["http", "https", "echo", "banner", "udp", "registry", "registry_tls"]
MAX_LINE = 65536
MAX_HEADERS = 256
MAX_BODY = 64 << 20

_log_lock = threading.Lock()
_log_file = None


def log(entry):
    entry.setdefault("time", round(time.time(), 3))
    # Every line has these, so filters need no null checks.
    entry.setdefault("path", "")
    entry.setdefault("host", "")
    line = json.dumps(entry, sort_keys=True) + "\n"
    with _log_lock:
        _log_file.write(line)
        _log_file.flush()


def fmt_addr(sa):
    host, port = sa[0], sa[1]
    if ":" in host:
        return "[%s]:%d" % (host, port)
    return "%s:%d" % (host, port)


def family_of(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


# ---- listeners ----------------------------------------------------------------


def bind_one(addr, port, kind):
    fam = family_of(addr)
    s = socket.socket(fam, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
    try:
        if fam == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        if kind != "udp":
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, port))
        if kind != "udp":
            s.listen(512)
    except OSError:
        s.close()
        raise
    return s


def bind_all(addrs, kind, want_port=0):
    """One socket per address, all on one port (picked on the first)."""
    for _ in range(100):
        socks = []
        try:
            first = bind_one(addrs[0], want_port, kind)
            socks.append(first)
            port = first.getsockname()[1]
            for a in addrs[1:]:
                socks.append(bind_one(a, port, kind))
            return port, socks
        except OSError as e:
            for s in socks:
                s.close()
            if want_port or e.errno != errno.EADDRINUSE:
                raise
    raise OSError(errno.EADDRINUSE, "no port free on every address")


def serve_tcp(lsock, name, handler):
    def loop():
        while True:
            try:
                conn, peer = lsock.accept()
            except OSError:
                return
            threading.Thread(target=run_conn, args=(conn, peer, name, handler),
                             daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()


def run_conn(conn, peer, name, handler):
    try:
        local = fmt_addr(conn.getsockname())
        handler(conn, name, local, fmt_addr(peer))
    except (OSError, ValueError, ssl.SSLError):
        pass
    finally:
        try:
            conn.close()
        except OSError:
            pass


# ---- raw TCP ------------------------------------------------------------------


def handle_echo(conn, name, local, peer, banner=None):
    log({"server": name, "event": "connect", "local": local, "peer": peer})
    total = 0
    first = b""
    try:
        if banner:
            conn.sendall(banner)
        while True:
            data = conn.recv(65536)
            if not data:
                break
            if len(first) < 200:
                first += data[:200 - len(first)]
            total += len(data)
            conn.sendall(data)
    except OSError:
        pass
    log({"server": name, "event": "close", "local": local, "peer": peer,
         "bytes": total, "data": first.decode("latin-1")})


def handle_banner(conn, name, local, peer):
    handle_echo(conn, name, local, peer, banner=b"220 warren-banner\r\n")


def serve_udp(sock, name):
    def loop():
        local = fmt_addr(sock.getsockname())
        while True:
            try:
                data, peer = sock.recvfrom(65536)
            except OSError:
                return
            log({"server": name, "local": local, "peer": fmt_addr(peer),
                 "len": len(data), "data": data[:200].decode("latin-1")})

    threading.Thread(target=loop, daemon=True).start()


# ---- HTTP ---------------------------------------------------------------------


class BadRequest(Exception):
    pass


def read_line(f):
    line = f.readline(MAX_LINE + 1)
    if len(line) > MAX_LINE:
        raise BadRequest("line too long")
    return line


def read_body(f, headers):
    """The body as framed by the headers: chunked wins over
    Content-Length (RFC 9112 6.3), as a lenient server would read it."""
    te = [v for k, v in headers if k.strip().lower() == "transfer-encoding"]
    cl = [v for k, v in headers if k.strip().lower() == "content-length"]
    if te and "chunked" in te[-1].lower():
        body = b""
        while True:
            size_line = read_line(f)
            if not size_line:
                raise BadRequest("eof in chunk size")
            size = int(size_line.split(b";")[0].strip() or b"x", 16)
            if size == 0:
                while read_line(f).strip():  # trailers
                    pass
                return body
            if len(body) + size > MAX_BODY:
                raise BadRequest("body too large")
            body += f.read(size)
            read_line(f)
    if cl:
        try:
            n = int(cl[0].strip())
        except ValueError:
            raise BadRequest("bad content-length")
        if n < 0 or n > MAX_BODY:
            raise BadRequest("bad content-length")
        body = f.read(n)
        if len(body) < n:
            raise BadRequest("eof in body")
        return body
    return b""


def respond(conn, status, body=b"", ctype="application/json", extra=(), head=False,
            close=False):
    reason = {200: "OK", 302: "Found", 301: "Moved Permanently", 400: "Bad Request",
              404: "Not Found"}.get(status, "Status")
    lines = ["HTTP/1.1 %d %s" % (status, reason), "Content-Type: " + ctype,
             "Content-Length: %d" % len(body)]
    lines += ["%s: %s" % kv for kv in extra]
    if close:
        lines.append("Connection: close")
    out = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    conn.sendall(out if head else out + body)


def handle_http(conn, name, local, peer, tls_ctx=None, registry=False):
    sni = None
    if tls_ctx is not None:
        conn.settimeout(10)
        try:
            conn = tls_ctx.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as e:
            log({"server": name, "event": "tls_error", "local": local, "peer": peer,
                 "error": str(e)})
            return
        sni = getattr(conn, "warren_sni", None)
    conn.settimeout(60)
    f = conn.makefile("rb")
    scheme = "https" if tls_ctx is not None else "http"
    while True:
        try:
            line = read_line(f)
            while line in (b"\r\n", b"\n"):
                line = read_line(f)
            if not line:
                return
            parts = line.rstrip(b"\r\n").split(b" ")
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
                raise BadRequest("bad request line %r" % line[:200])
            method, target, version = (p.decode("latin-1") for p in parts)
            headers = []
            while True:
                h = read_line(f)
                if not h:
                    return
                if h in (b"\r\n", b"\n"):
                    break
                if b":" not in h or len(headers) >= MAX_HEADERS:
                    raise BadRequest("bad header %r" % h[:200])
                k, v = h.rstrip(b"\r\n").split(b":", 1)
                headers.append([k.decode("latin-1"), v.strip().decode("latin-1")])
            body = read_body(f, headers)
        except (BadRequest, ValueError) as e:
            log({"server": name, "event": "bad_request", "local": local, "peer": peer,
                 "sni": sni, "error": str(e)})
            respond(conn, 400, b'{"error":"bad request"}\n', close=True)
            return
        url = urllib.parse.urlsplit(target)
        host = next((v for k, v in headers if k.strip().lower() == "host"), "")
        entry = {"server": name, "local": local, "peer": peer, "sni": sni,
                 "method": method, "target": target, "path": url.path,
                 "query": url.query, "version": version, "headers": headers,
                 "host": host, "body_len": len(body),
                 "body": body[:1000].decode("latin-1")}
        log(entry)
        conn_hdr = [v.lower() for k, v in headers if k.strip().lower() == "connection"]
        close = version == "HTTP/1.0" or "close" in conn_hdr
        if registry:
            registry_answer(conn, scheme, host, method, url, close)
        else:
            http_answer(conn, entry, method, url, close)
        if close:
            return


def http_answer(conn, entry, method, url, close):
    q = urllib.parse.parse_qs(url.query)
    head = method == "HEAD"
    if url.path == "/redirect":
        code = int(q.get("code", ["302"])[0])
        to = q.get("to", ["/"])[0]
        respond(conn, code, b"", "text/plain", [("Location", to)], head, close)
    elif url.path == "/big":
        n = int(q.get("n", ["1048576"])[0])
        hdr = ("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: %d\r\n%s\r\n" % (n, "Connection: close\r\n" if close else ""))
        conn.sendall(hdr.encode())
        if not head:
            block = b"x" * 65536
            left = n
            while left > 0:
                conn.sendall(block[:min(left, len(block))])
                left -= min(left, len(block))
    elif url.path == "/quiet" or url.path.startswith("/quiet/"):
        respond(conn, 200, b"ok\n", "text/plain", (), head, close)
    elif url.path.startswith("/status/"):
        respond(conn, int(url.path[8:] or 200), b"status\n", "text/plain", (), head, close)
    else:
        body = json.dumps(entry, sort_keys=True).encode() + b"\n"
        respond(conn, 200, body, "application/json", (), head, close)


# ---- the mock npm registry ------------------------------------------------------

_tarballs = {}
_tar_lock = threading.Lock()


def package_tarball(name):
    """A deterministic .tgz for package NAME (same bytes every time, so the
    packument's integrity matches the tarball)."""
    with _tar_lock:
        if name in _tarballs:
            return _tarballs[name]
        files = {
            "package/package.json": json.dumps(
                {"name": name, "version": "1.0.0", "main": "index.js",
                 "description": "served by warren's mock registry",
                 "license": "MIT"}, indent=2).encode() + b"\n",
            "package/index.js": (
                "module.exports = { name: %s, marker: 'from-mock-registry' };\n"
                % json.dumps(name)).encode(),
        }
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            for path, data in files.items():
                info = tarfile.TarInfo(path)
                info.size = len(data)
                info.mode = 0o644
                info.mtime = 499162500  # npm's own fixed date, 1985-10-26
                tar.addfile(info, io.BytesIO(data))
        gz = io.BytesIO()
        with gzip.GzipFile(fileobj=gz, mode="wb", mtime=0) as g:
            g.write(raw.getvalue())
        tgz = gz.getvalue()
        _tarballs[name] = tgz
        return tgz


def valid_package_name(name):
    if not name or len(name) > 214:
        return False
    scope, _, base = name.rpartition("/")
    if scope and (not scope.startswith("@") or "/" in scope[1:]):
        return False
    ok = set("abcdefghijklmnopqrstuvwxyz0123456789-._~")
    return all(c in ok for c in base) and all(c in ok for c in scope[1:]) and \
        not base.startswith(".")


def registry_answer(conn, scheme, host, method, url, close):
    path = urllib.parse.unquote(url.path)
    head = method == "HEAD"
    if method not in ("GET", "HEAD"):
        respond(conn, 404, b'{"error":"not found"}\n', head=head, close=close)
        return
    if "/-/" in path:
        name, _, file = path[1:].partition("/-/")
        base = name.rpartition("/")[2]
        if valid_package_name(name) and file == "%s-1.0.0.tgz" % base:
            respond(conn, 200, package_tarball(name), "application/octet-stream",
                    (), head, close)
            return
    else:
        name = path[1:]
        if valid_package_name(name):
            tgz = package_tarball(name)
            base = name.rpartition("/")[2]
            tarball = "%s://%s/%s/-/%s-1.0.0.tgz" % (scheme, host or "localhost",
                                                     name, base)
            version = {
                "name": name, "version": "1.0.0", "main": "index.js",
                "license": "MIT", "_id": "%s@1.0.0" % name,
                "dist": {
                    "tarball": tarball,
                    "shasum": hashlib.sha1(tgz).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(
                        hashlib.sha512(tgz).digest()).decode(),
                },
            }
            doc = {"_id": name, "name": name, "dist-tags": {"latest": "1.0.0"},
                   "versions": {"1.0.0": version},
                   "time": {"created": "2024-01-01T00:00:00.000Z",
                            "modified": "2024-01-01T00:00:00.000Z",
                            "1.0.0": "2024-01-01T00:00:00.000Z"}}
            respond(conn, 200, json.dumps(doc).encode(), "application/json", (),
                    head, close)
            return
    respond(conn, 404, b'{"error":"not found"}\n', head=head, close=close)


# ---- main -------------------------------------------------------------------------


def tls_context(certs):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(certs, "server.crt"),
                        os.path.join(certs, "server.key"))
    ctx.set_alpn_protocols(["http/1.1"])

    def on_sni(sslsock, server_name, _ctx):
        sslsock.warren_sni = server_name

    ctx.sni_callback = on_sni
    return ctx


def main():
    global _log_file
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--addr", action="append", required=True,
                    help="address to listen on (repeatable)")
    ap.add_argument("--certs", help="directory of tests/net/mkca.sh")
    ap.add_argument("--log", required=True, help="JSON lines of what arrived")
    ap.add_argument("--ready", required=True, help="written when listening")
    ap.add_argument("--services", default=",".join(SERVICES))
    ap.add_argument("--port", action="append", default=[],
                    help="SERVICE=PORT to use a fixed port")
    args = ap.parse_args()
    services = [s for s in args.services.split(",") if s]
    for s in services:
        if s not in SERVICES:
            ap.error("unknown service %s" % s)
    fixed = dict(p.split("=", 1) for p in args.port)
    tls = None
    if any(s in ("https", "registry_tls") for s in services):
        if not args.certs:
            ap.error("--certs is needed for https and registry_tls")
        tls = tls_context(args.certs)
    _log_file = open(args.log, "a", buffering=1)

    ready = {"pid": os.getpid(), "addrs": args.addr}
    for s in services:
        port, socks = bind_all(args.addr, "udp" if s == "udp" else "tcp",
                               int(fixed.get(s, 0)))
        ready[s] = port
        for sock in socks:
            if s == "udp":
                serve_udp(sock, s)
            elif s == "http":
                serve_tcp(sock, s, handle_http)
            elif s == "https":
                serve_tcp(sock, s, lambda c, n, l, p: handle_http(c, n, l, p, tls))
            elif s == "echo":
                serve_tcp(sock, s, handle_echo)
            elif s == "banner":
                serve_tcp(sock, s, handle_banner)
            elif s == "registry":
                serve_tcp(sock, s, lambda c, n, l, p: handle_http(
                    c, n, l, p, None, registry=True))
            elif s == "registry_tls":
                serve_tcp(sock, s, lambda c, n, l, p: handle_http(
                    c, n, l, p, tls, registry=True))

    tmp = args.ready + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
        f.write("\n")
    os.rename(tmp, args.ready)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(3600):
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
