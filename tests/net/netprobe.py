#!/usr/bin/env python3
"""Network probes run INSIDE a sandbox by tests/e2e/100-network.sh
(stdlib only; `warren cp` puts it at /usr/local/bin/netprobe).

  netprobe resolve NAME [--family 4|6|any]
      getaddrinfo; one address a line, or "error ..." and exit 1.
  netprobe dns NAME [--type A|AAAA] [--server ADDR] [--port 53]
      One raw DNS query over UDP; prints "rcode N" then "answer ADDR"
      lines, or "timeout" (exit 1).
  netprobe tcp HOST PORT [--proxy H:P] [--send TEXT] [--read-first]
               [--timeout S]
      Connects (directly, or through CONNECT on the proxy), optionally
      reads what the server says first, sends TEXT and reads it back.
      "ok ..." and exit 0, or "fail ..." and exit 1.
  netprobe raw HOST PORT --data ESCAPED [--wait S]
      Sends bytes (Python escapes: \\r\\n, \\x00) and prints all that came
      back, then "<<EOF>>" (closed) or "<<OPEN>>" (still open after S).
  netprobe tls HOST PORT --sni NAME [--proxy H:P --target T:P]
               [--cafile F | --insecure] [--request ESCAPED]
      TLS to HOST:PORT (or through CONNECT T:P on the proxy) with SNI
      NAME; prints "issuer CN", "subject CN", then the response.
  netprobe hold HOST PORT [--proxy H:P] [--seconds S]
      Opens a connection to an echo server, prints "open" once a round
      trip worked, then pings every 0.2 s: prints "cut after N.Ns" and
      exits 0 when the connection dies, "still open" and 1 after S.
  netprobe udp HOST PORT [--count N]
      Sends datagrams; prints "sent N" or "error ...".
  netprobe icmp HOST
      Tries ping (ICMP datagram) and raw ICMP sockets; prints per kind
      "socket error ...", "send error ...", "no reply" or "reply".
  netprobe cert-cn FILE
      The subject CN of the first CA certificate in a PEM file.
  netprobe scan --prefix P --sha256 H --length L
      Looks for a secret without knowing it: every place where P occurs
      and the L bytes there hash to H. Searches every regular file under /
      (not /proc, /sys, /dev, but /dev/shm), every process's environ and
      cmdline, and the readable memory of every process it may read.
      Prints "found WHERE" lines and "scanned F files B bytes P processes
      R regions M memory-bytes".
"""

import argparse
import codecs
import hashlib
import os
import random
import select
import socket
import ssl
import stat
import struct
import sys
import time


def unescape(s):
    return codecs.escape_decode(s.encode("latin-1"))[0]


def split_hostport(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


def connect(host, port, proxy, timeout):
    """A socket to host:port, through CONNECT on proxy when given."""
    if not proxy:
        s = socket.create_connection((host, port), timeout=timeout)
        s.settimeout(timeout)
        return s
    ph, pp = split_hostport(proxy)
    s = socket.create_connection((ph, pp), timeout=timeout)
    s.settimeout(timeout)
    target = "[%s]:%d" % (host, port) if ":" in host else "%s:%d" % (host, port)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise ConnectionError("proxy closed: %r" % head[:200])
        head += b
    status = head.split(b" ", 2)[1:2]
    if status != [b"200"]:
        raise ConnectionError("proxy answered %r" % head.split(b"\r\n")[0])
    return s


# ---- resolve / dns ------------------------------------------------------------------


def cmd_resolve(a):
    fam = {"4": socket.AF_INET, "6": socket.AF_INET6, "any": 0}[a.family]
    try:
        infos = socket.getaddrinfo(a.name, 80, fam, socket.SOCK_STREAM)
    except socket.gaierror as e:
        print("error gaierror %s" % e)
        return 1
    seen = []
    for info in infos:
        if info[4][0] not in seen:
            seen.append(info[4][0])
    for addr in seen:
        print(addr)
    return 0


def dns_query(name, qtype):
    qid = random.randint(0, 65535)
    q = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack("!HH", {"A": 1, "AAAA": 28}[qtype], 1)
    return qid, q


def skip_name(msg, i):
    while True:
        n = msg[i]
        if n == 0:
            return i + 1
        if n & 0xC0 == 0xC0:
            return i + 2
        i += 1 + n


def cmd_dns(a):
    qid, q = dns_query(a.name, a.type)
    fam = socket.AF_INET6 if ":" in a.server else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    s.settimeout(a.timeout)
    s.sendto(q, (a.server, a.port))
    try:
        while True:
            msg, _ = s.recvfrom(4096)
            if len(msg) >= 12 and struct.unpack("!H", msg[:2])[0] == qid:
                break
    except socket.timeout:
        print("timeout")
        return 1
    _, flags, qd, an, _, _ = struct.unpack("!HHHHHH", msg[:12])
    print("rcode %d" % (flags & 0xF))
    i = 12
    for _ in range(qd):
        i = skip_name(msg, i) + 4
    for _ in range(an):
        i = skip_name(msg, i)
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[i:i + 10])
        i += 10
        rdata = msg[i:i + rdlen]
        i += rdlen
        if rtype == 1 and rdlen == 4:
            print("answer %s" % socket.inet_ntop(socket.AF_INET, rdata))
        elif rtype == 28 and rdlen == 16:
            print("answer %s" % socket.inet_ntop(socket.AF_INET6, rdata))
        else:
            print("answer type %d" % rtype)
    return 0


# ---- tcp / raw / tls / hold ---------------------------------------------------------


def cmd_tcp(a):
    try:
        s = connect(a.host, a.port, a.proxy, a.timeout)
        got = b""
        if a.read_first:
            got = s.recv(4096)
            if not got:
                print("fail closed before the server spoke")
                return 1
            print("banner %s" % got.decode("latin-1").strip())
        if a.send:
            data = a.send.encode()
            s.sendall(data)
            back = b""
            while len(back) < len(data):
                b = s.recv(65536)
                if not b:
                    break
                back += b
            if back != data:
                print("fail sent %r, got back %r" % (data, back))
                return 1
        s.close()
    except (OSError, ConnectionError) as e:
        print("fail %s: %s" % (type(e).__name__, e))
        return 1
    print("ok")
    return 0


def cmd_raw(a):
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_STREAM)
    s.settimeout(a.wait)
    s.connect((a.host, a.port))
    try:
        s.sendall(unescape(a.data))
    except OSError:
        pass
    out, end = b"", b"<<OPEN>>"
    try:
        while len(out) < (1 << 20):
            b = s.recv(65536)
            if not b:
                end = b"<<EOF>>"
                break
            out += b
    except (ConnectionResetError, BrokenPipeError):
        end = b"<<EOF>>"
    except OSError:
        pass
    sys.stdout.write((out + end).decode("latin-1") + "\n")
    return 0


def cert_cn(name_seq):
    for rdn in name_seq or ():
        for k, v in rdn:
            if k == "commonName":
                return v
    return "?"


def cmd_tls(a):
    try:
        if a.proxy:
            th, tp = split_hostport(a.target)
            s = connect(th, tp, a.proxy, a.timeout)
        else:
            s = socket.create_connection((a.host, a.port), timeout=a.timeout)
        ctx = ssl.create_default_context(cafile=a.cafile)
        if a.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = False  # SNI and the name checked may differ
        t = ctx.wrap_socket(s, server_hostname=a.sni)
        cert = t.getpeercert()
        if cert:
            print("issuer %s" % cert_cn(cert.get("issuer")))
            print("subject %s" % cert_cn(cert.get("subject")))
        if a.request:
            t.sendall(unescape(a.request))
            out = b""
            try:
                while len(out) < (1 << 20):
                    b = t.recv(65536)
                    if not b:
                        break
                    out += b
            except (OSError, ssl.SSLError):
                pass
            sys.stdout.write(out.decode("latin-1") + "\n")
        t.close()
    except (OSError, ConnectionError, ssl.SSLError) as e:
        print("fail %s: %s" % (type(e).__name__, e))
        return 1
    return 0


def cmd_cert_cn(a):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile=a.file)
    cas = ctx.get_ca_certs()
    if not cas:
        print("no CA certificate in %s" % a.file)
        return 1
    print(cert_cn(cas[0].get("subject")))
    return 0


def cmd_hold(a):
    try:
        s = connect(a.host, a.port, a.proxy, 5)
        s.sendall(b"ping-0")
        if s.recv(64) != b"ping-0":
            print("fail no echo")
            return 1
    except (OSError, ConnectionError) as e:
        print("fail %s: %s" % (type(e).__name__, e))
        return 1
    print("open", flush=True)
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < a.seconds:
        i += 1
        msg = b"ping-%d" % i
        try:
            s.settimeout(3)
            s.sendall(msg)
            back = s.recv(64)
        except OSError:
            back = b""
        if back != msg:
            print("cut after %.1fs" % (time.monotonic() - t0), flush=True)
            return 0
        time.sleep(0.2)
    print("still open")
    return 1


# ---- udp / icmp ---------------------------------------------------------------------


def cmd_udp(a):
    fam = socket.AF_INET6 if ":" in a.host else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    sent = 0
    err = None
    for i in range(a.count):
        try:
            s.sendto(b"warren-udp-%d" % i, (a.host, a.port))
            sent += 1
        except OSError as e:
            err = e
    if err is not None:
        print("error %s (%d sent)" % (err, sent))
    else:
        print("sent %d" % sent)
    return 0


def icmp_checksum(data):
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def is_echo_reply(data, v6, raw):
    """Whether a packet read from an ICMP socket is an echo reply (and not,
    say, our own request looping back)."""
    if raw and not v6:
        if len(data) < 20:
            return False
        data = data[(data[0] & 0x0F) * 4:]
    return len(data) >= 1 and data[0] == (129 if v6 else 0)


def cmd_icmp(a):
    v6 = ":" in a.host
    fam = socket.AF_INET6 if v6 else socket.AF_INET
    proto = socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP
    echo_type = 128 if v6 else 8
    for kind, stype in (("dgram", socket.SOCK_DGRAM), ("raw", socket.SOCK_RAW)):
        try:
            s = socket.socket(fam, stype, proto)
        except OSError as e:
            print("%s socket error %s" % (kind, e))
            continue
        pkt = struct.pack("!BBHHH", echo_type, 0, 0, 0x1234, 1) + b"warren-icmp"
        if not v6:
            pkt = pkt[:2] + struct.pack("!H", icmp_checksum(pkt)) + pkt[4:]
        try:
            s.sendto(pkt, (a.host, 0))
        except OSError as e:
            print("%s send error %s" % (kind, e))
            continue
        replied = False
        end = time.monotonic() + 2
        while not replied and time.monotonic() < end:
            r, _, _ = select.select([s], [], [], max(0, end - time.monotonic()))
            if not r:
                break
            data, peer = s.recvfrom(65536)
            if peer[0] == a.host and is_echo_reply(data, v6, kind == "raw"):
                replied = True
        print("%s %s" % (kind, "reply" if replied else "no reply"))
    return 0


# ---- scan ------------------------------------------------------------------------------


class Scanner:
    def __init__(self, prefix, digest, length):
        self.prefix = prefix.encode()
        self.digest = digest
        self.length = length
        self.found = []

    def search(self, buf, where):
        """Occurrences whose whole window is in buf (the caller carries
        length-1 bytes over between chunks)."""
        i = buf.find(self.prefix)
        while i >= 0:
            window = buf[i:i + self.length]
            if len(window) == self.length and \
                    hashlib.sha256(window).hexdigest() == self.digest:
                self.found.append(where)
                return True
            i = buf.find(self.prefix, i + 1)
        return False

    def stream(self, read, where, limit=None):
        carry, total = b"", 0
        while limit is None or total < limit:
            want = 1 << 20
            if limit is not None:
                want = min(want, limit - total)
            chunk = read(want)
            if not chunk:
                break
            total += len(chunk)
            buf = carry + chunk
            if self.search(buf, where):
                return total
            carry = buf[-(self.length - 1):] if self.length > 1 else b""
        return total


def cmd_scan(a):
    sc = Scanner(a.prefix, a.sha256, a.length)
    files = nbytes = procs = regions = mem = 0
    skip = {"/proc", "/sys", "/dev"}
    roots = [a.root] if a.root != "/" else ["/", "/dev/shm"]
    for root in roots:
        for d, dirs, names in os.walk(root):
            if d == "/":
                dirs[:] = [x for x in dirs if os.path.join(d, x) not in skip]
            for n in names:
                p = os.path.join(d, n)
                try:
                    st = os.lstat(p)
                    if not stat.S_ISREG(st.st_mode):
                        continue
                    with open(p, "rb") as f:
                        nbytes += sc.stream(f.read, "file " + p)
                    files += 1
                except OSError:
                    pass
    me = str(os.getpid())
    pids = a.pids.split(",") if a.pids else [x for x in os.listdir("/proc") if x.isdigit()]
    for pid in sorted(pids, key=int):
        procs += 1
        for what in ("environ", "cmdline"):
            try:
                with open("/proc/%s/%s" % (pid, what), "rb") as f:
                    sc.stream(f.read, "%s of pid %s" % (what, pid))
            except OSError:
                pass
        try:
            with open("/proc/%s/maps" % pid) as f:
                maps = f.read().splitlines()
            memf = open("/proc/%s/mem" % pid, "rb", buffering=0)
        except OSError:
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read(200).replace(b"\0", b" ").decode("latin-1").strip()
        except OSError:
            cmd = "?"
        with memf:
            for line in maps:
                parts = line.split()
                if len(parts) < 2 or parts[1][0] != "r":
                    continue
                path = parts[5] if len(parts) > 5 else ""
                if path in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                try:
                    memf.seek(start)
                    n = sc.stream(memf.read, "memory of pid %s%s (%s) [%s]" % (
                        pid, " (the scanner)" if pid == me else "", path or "anon",
                        cmd[:80]),
                        limit=min(end - start, 512 << 20))
                    regions += 1
                    mem += n
                except (OSError, ValueError, OverflowError):
                    pass
    for w in sc.found:
        print("found %s" % w)
    print("scanned %d files %d bytes %d processes %d regions %d memory-bytes"
          % (files, nbytes, procs, regions, mem))
    return 0


def main():
    ap = argparse.ArgumentParser(description="network probes for warren's tests")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("resolve")
    p.add_argument("name")
    p.add_argument("--family", default="any", choices=["4", "6", "any"])
    p = sub.add_parser("dns")
    p.add_argument("name")
    p.add_argument("--type", default="A", choices=["A", "AAAA"])
    p.add_argument("--server", default="127.0.0.1")
    p.add_argument("--port", type=int, default=53)
    p.add_argument("--timeout", type=float, default=3)
    p = sub.add_parser("tcp")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--proxy")
    p.add_argument("--send")
    p.add_argument("--read-first", action="store_true")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("raw")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--data", required=True)
    p.add_argument("--wait", type=float, default=5)
    p = sub.add_parser("tls")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--sni", required=True)
    p.add_argument("--proxy")
    p.add_argument("--target")
    p.add_argument("--cafile")
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--request")
    p.add_argument("--timeout", type=float, default=10)
    p = sub.add_parser("cert-cn")
    p.add_argument("file")
    p = sub.add_parser("hold")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--proxy")
    p.add_argument("--seconds", type=float, default=20)
    p = sub.add_parser("udp")
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, default=5)
    p = sub.add_parser("icmp")
    p.add_argument("host")
    p = sub.add_parser("scan")
    p.add_argument("--prefix", required=True)
    p.add_argument("--sha256", required=True)
    p.add_argument("--length", type=int, required=True)
    p.add_argument("--root", default="/", help="(to test the scanner)")
    p.add_argument("--pids", help="(to test the scanner) PID,PID,...")
    a = ap.parse_args()
    return globals()["cmd_" + a.cmd.replace("-", "_")](a)


if __name__ == "__main__":
    sys.exit(main())
