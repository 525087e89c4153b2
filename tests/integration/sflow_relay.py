#!/usr/bin/env python3
"""A UDP relay between an sFlow agent and the collector that, while its chaos file exists,
duplicates and swaps datagrams (tests/integration/test_sflow_hsflowd.sh).

Every datagram received on --listen is sent on to --to from one socket (so from one
source address). In chaos mode every --dup-every'th datagram is sent twice in a row, and
every --swap-every'th is held back and sent right after the next one, when that comes
within --hold seconds (else alone when the hold ends). Counts are written as JSON to
--stats after each change: received, forwarded, duplicated, swapped (pairs sent in
reverse order), held_alone (held datagrams sent alone, not reordered).
"""
import argparse
import json
import os
import select
import socket
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True, help="HOST:PORT to receive on")
    ap.add_argument("--to", required=True, help="HOST:PORT to send to")
    ap.add_argument("--chaos-file", required=True)
    ap.add_argument("--stats", required=True)
    ap.add_argument("--dup-every", type=int, default=5)
    ap.add_argument("--swap-every", type=int, default=7)
    ap.add_argument("--hold", type=float, default=0.2)
    ap.add_argument("--save", help="directory to keep every received datagram in (NNNNN.bin)")
    a = ap.parse_args()
    lh, lp = a.listen.rsplit(":", 1)
    th, tp = a.to.rsplit(":", 1)
    dst = (th, int(tp))
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind((lh, int(lp)))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.bind((lh, 0))
    st = {"received": 0, "forwarded": 0, "duplicated": 0, "swapped": 0, "held_alone": 0}
    held, held_until = None, 0.0
    n_chaos = 0

    def save():
        tmp = a.stats + ".tmp"
        with open(tmp, "w") as f:
            json.dump(st, f)
        os.replace(tmp, a.stats)

    save()
    while True:
        timeout = max(0.0, held_until - time.monotonic()) if held is not None else None
        r, _, _ = select.select([rx], [], [], timeout)
        if not r:  # the hold ended with nothing behind it
            tx.sendto(held, dst)
            st["forwarded"] += 1
            st["held_alone"] += 1
            held = None
            save()
            continue
        d, _ = rx.recvfrom(65535)
        st["received"] += 1
        if a.save:
            with open(os.path.join(a.save, "%05d.bin" % st["received"]), "wb") as f:
                f.write(d)
        if held is not None:  # d overtakes the held one
            tx.sendto(d, dst)
            tx.sendto(held, dst)
            st["forwarded"] += 2
            st["swapped"] += 1
            held = None
            save()
            continue
        if os.path.exists(a.chaos_file):
            n_chaos += 1
            if n_chaos % a.swap_every == 0:
                held, held_until = d, time.monotonic() + a.hold
                save()  # received counts it: forwarded < received + duplicated while held
                continue
            if n_chaos % a.dup_every == 0:
                tx.sendto(d, dst)
                st["forwarded"] += 1
                st["duplicated"] += 1
        tx.sendto(d, dst)
        st["forwarded"] += 1
        save()


if __name__ == "__main__":
    main()
