#!/usr/bin/env python3
"""A DNS server on UDP that answers slowly, for tests: the resolver a slow fabric has.

    slow_dns.py --listen ADDR --log FILE NAME=SECONDS[=ADDRESS] ...

Each NAME's A query is answered after SECONDS with ADDRESS (default 127.0.0.1); its AAAA
query after the same delay with no record. Any other name is NXDOMAIN at once. Every query
is appended to FILE as "query NAME TYPE UNIXTIME" when it arrives and "answer NAME TYPE
UNIXTIME" when it is answered, so a test can tell a lookup in flight from one done. Port 53 (glibc's resolver
has no port setting): needs root. Answers come from one thread per query, so a slow
answer never holds up another.
"""
import argparse
import socket
import struct
import threading
import time

A, AAAA = 1, 28


def qname(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    slow = {}
    for spec in a.names:
        parts = spec.split("=")
        slow[parts[0].lower().rstrip(".")] = (float(parts[1]), parts[2] if len(parts) > 2 else "127.0.0.1")
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((a.listen, 53))
    lock = threading.Lock()

    def log(line):
        with lock, open(a.log, "a") as f:
            f.write(line + "\n")

    def answer(msg, peer):
        qid, flags, qd = struct.unpack(">HHH", msg[:6])
        if qd != 1:
            return
        name, off = qname(msg, 12)
        qtype, _qclass = struct.unpack(">HH", msg[off:off + 4])
        question = msg[12:off + 4]
        tname = {A: "A", AAAA: "AAAA"}.get(qtype, str(qtype))
        log("query %s %s %.6f" % (name, tname, time.time()))
        rd = flags & 0x0100
        if name not in slow:
            sock.sendto(struct.pack(">HHHHHH", qid, 0x8083 | rd, 1, 0, 0, 0) + question, peer)
            return
        delay, addr = slow[name]
        time.sleep(delay)  # the fault itself: a resolver that takes this long
        records = b""
        if qtype == A:
            records = b"\xc0\x0c" + struct.pack(">HHIH", A, 1, 0, 4) + socket.inet_aton(addr)
        sock.sendto(struct.pack(">HHHHHH", qid, 0x8080 | rd, 1, 1 if records else 0, 0, 0) +
                    question + records, peer)
        log("answer %s %s %.6f" % (name, tname, time.time()))

    log("ready")
    while True:
        msg, peer = sock.recvfrom(4096)
        threading.Thread(target=answer, args=(msg, peer), daemon=True).start()


if __name__ == "__main__":
    main()
