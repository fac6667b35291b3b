# shellcheck shell=bash
# Security: root inside a sandbox cannot open a route out of its network
# namespace, or take over the ports where warrend polices it.
#
# The namespace belongs to the host's user namespace (docs/network.md), so
# every change to it needs a capability that root inside lacks: routes,
# filter rules, links, sysctls, raw and packet sockets. Each attempt is
# made by root inside with the kernel's own interfaces (netlink from
# Python), and each must fail with EPERM while the filter stays in place.
# Sourced by tests/run-e2e.
# shellcheck disable=SC2016 # scripts in single quotes run in the sandbox

# Send one netlink message and print the kernel's answer: "ok" or the
# errno name. Runs inside the sandbox as root.
netlink_probe='
import errno, os, socket, struct, sys
NETLINK_NETFILTER = 12
def ack(s):
    data = s.recv(65536)
    while data:
        ln, typ = struct.unpack("=IH", data[:6])
        if typ == 2:  # NLMSG_ERROR
            e = struct.unpack("=i", data[16:20])[0]
            return "ok" if e == 0 else errno.errorcode[-e]
        data = data[(ln + 3) & ~3:]
    return "no answer"
def msg(typ, flags, payload, seq=1):
    return struct.pack("=IHHII", 16 + len(payload), typ, flags, seq, 0) + payload
def attr(typ, data):
    a = struct.pack("=HH", 4 + len(data), typ) + data
    return a + b"\0" * ((4 - len(a) % 4) % 4)
what = sys.argv[1]
REQ, ACK = 1, 4
if what == "delroute":  # ip route del default (IPv4)
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    rt = struct.pack("=BBBBBBBBI", socket.AF_INET, 0, 0, 0, 254, 0, 0, 1, 0)
    s.send(msg(25, REQ | ACK, rt))  # RTM_DELROUTE
elif what == "addroute":  # a route to 10.0.0.0/8 through lo
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    rt = struct.pack("=BBBBBBBBI", socket.AF_INET, 8, 0, 0, 254, 3, 253, 1, 0)
    body = rt + attr(1, socket.inet_aton("10.0.0.0")) + attr(4, struct.pack("=i", 1))
    s.send(msg(24, REQ | ACK | 0x400, body))  # RTM_NEWROUTE, NLM_F_CREATE
elif what == "linkdown":  # ip link set lo down
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    ifi = struct.pack("=BBHiII", 0, 0, 0, 1, 0, 1)  # index 1, change IFF_UP
    s.send(msg(16, REQ | ACK, ifi))  # RTM_NEWLINK
elif what == "deltable":  # nft delete table inet warren
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    nfgen = lambda fam, res: struct.pack("=BBH", fam, 0, socket.htons(res))
    batch = msg(0x10, REQ, nfgen(0, 10), 1)  # NFNL_MSG_BATCH_BEGIN
    batch += msg((10 << 8) | 2, REQ | ACK, nfgen(1, 0) + attr(1, b"warren\0"), 2)
    batch += msg(0x11, REQ, nfgen(0, 10), 3)  # NFNL_MSG_BATCH_END
    s.send(batch)
print(ack(s))
'

test_root_inside_cannot_change_routes_links_or_filter() {
  local what out
  new_sandbox sec-net-admin
  for what in delroute addroute linkdown deltable; do
    out=$("$WARREN" exec sec-net-admin -- python3 -c "$netlink_probe" "$what" 2>&1)
    assert_eq "EPERM" "$out" "root inside: $what"
  done
  # The route and the filter are still there: an outside address is still
  # redirected to the proxy (which answers), not unreachable.
  out=$("$WARREN" exec sec-net-admin -- cat /proc/net/route)
  assert_contains "$out" "lo	00000000" "default route through lo"
  out=$("$WARREN" exec sec-net-admin -- python3 -c '
import socket
s = socket.create_connection(("192.0.2.10", 80), timeout=5)
print("connected")' 2>&1)
  assert_eq "connected" "$out" "a TCP connect to an outside address reaches the proxy"
}

test_root_inside_cannot_open_raw_or_packet_sockets() {
  local out
  new_sandbox sec-net-raw
  out=$("$WARREN" exec sec-net-raw -- python3 -c '
import socket
for name, args in [("raw", (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)),
                   ("raw6", (socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)),
                   ("packet", (socket.AF_PACKET, socket.SOCK_RAW, 0x0300)),
                   ("ping", (socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP))]:
    try:
        socket.socket(*args); print(name, "opened")
    except OSError as e:
        print(name, e.errno)
' 2>&1)
  # EPERM (1) for raw and packet sockets, EACCES (13) for ping sockets
  # (ping_group_range is empty in the namespace).
  assert_eq "raw 1
raw6 1
packet 1
ping 13" "$out" "raw, packet and ping sockets"
}

test_root_inside_cannot_change_network_sysctls() {
  local out
  new_sandbox sec-net-sysctl
  out=$("$WARREN" exec sec-net-sysctl -- sh -c '
for f in /proc/sys/net/ipv4/ip_forward /proc/sys/net/ipv4/ping_group_range \
         /proc/sys/net/ipv4/conf/all/route_localnet; do
  if echo 1 >"$f" 2>/dev/null; then echo "$f written"; fi
done; echo done')
  assert_eq "done" "$out" "network sysctls are read-only inside"
}

test_sandbox_cannot_take_the_proxy_or_dns_ports() {
  local out
  new_sandbox sec-net-ports
  out=$("$WARREN" exec sec-net-ports -- python3 -c '
import socket
for opt in [None, socket.SO_REUSEADDR, socket.SO_REUSEPORT]:
    for fam, typ, addr in [(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 3128)),
                           (socket.AF_INET6, socket.SOCK_STREAM, ("::1", 3128)),
                           (socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 53)),
                           (socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 53))]:
        s = socket.socket(fam, typ)
        if opt is not None:
            s.setsockopt(socket.SOL_SOCKET, opt, 1)
        try:
            s.bind(addr); print(addr[1], "bound")
        except OSError as e:
            print(addr[1], e.errno)
' 2>&1)
  # EADDRINUSE (98) every time, sharing options or not: warrend bound them
  # (the DNS port over UDP and TCP) before the first process ran, without
  # SO_REUSEADDR on the UDP one (which would let a second UDP socket share
  # the port).
  assert_eq "$(for _ in 1 2 3; do printf '3128 98\n3128 98\n53 98\n53 98\n'; done)" \
    "$out" "the proxy and DNS ports are warrend's"
}

test_other_udp_and_icmp_do_not_leave() {
  local out
  new_sandbox sec-net-udp
  out=$("$WARREN" exec sec-net-udp -- python3 -c '
import socket
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for dst in [("192.0.2.10", 123), ("10.0.0.1", 5353)]:
    try:
        u.sendto(b"x", dst); print(dst[1], "sent")
    except OSError as e:
        print(dst[1], e.errno)
' 2>&1)
  # EPERM (1): the filter drops them on the way out.
  assert_eq "123 1
5353 1" "$out" "UDP to outside addresses"
}
