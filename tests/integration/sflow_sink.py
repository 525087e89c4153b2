#!/usr/bin/env python3
"""A minimal sFlow collector for tests: receives UDP datagrams and keeps each as a file.

  sflow_sink.py --bind ADDR --port PORT --dir DIR [--ready-file F]

Every datagram becomes DIR/dgram_NNNNNN.bin (written under a temporary name and renamed,
so a test that counts the files never sees half a datagram); DIR/senders.txt lists the
source address of each. F is written once the socket is bound, so a test starts the
agent only then. Runs until SIGTERM.
"""
import argparse
import os
import signal
import socket
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bind", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--ready-file")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    fam = socket.AF_INET6 if ":" in a.bind else socket.AF_INET
    s = socket.socket(fam, socket.SOCK_DGRAM)
    # a burst of datagrams must wait in the kernel, not be lost, while files are written
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((a.bind, a.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if a.ready_file:
        with open(a.ready_file + ".tmp", "w") as f:
            f.write("%d\n" % a.port)
        os.rename(a.ready_file + ".tmp", a.ready_file)
    n = 0
    with open(os.path.join(a.dir, "senders.txt"), "w") as senders:
        while True:
            data, src = s.recvfrom(65535)
            path = os.path.join(a.dir, "dgram_%06d.bin" % n)
            with open(path + ".tmp", "wb") as f:
                f.write(data)
            os.rename(path + ".tmp", path)
            senders.write("%s\n" % src[0])
            senders.flush()
            n += 1


if __name__ == "__main__":
    main()
