#!/usr/bin/env python3
"""A TSDB that hangs: accepts connections, reads nothing back, never answers.

Usage: hung_tsdb.py PORT LOG RELEASE
Appends a line to LOG per connection accepted (so a test knows when a read of its
history is in progress); closes every connection and exits once the file RELEASE exists.
"""
import os
import socket
import sys

port, log, release = int(sys.argv[1]), sys.argv[2], sys.argv[3]
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", port))
s.listen(16)
s.settimeout(0.1)
conns = []
while not os.path.exists(release):
    try:
        c, _ = s.accept()
        conns.append(c)
        with open(log, "a") as f:
            f.write("connection\n")
    except socket.timeout:
        pass
for c in conns:
    c.close()
