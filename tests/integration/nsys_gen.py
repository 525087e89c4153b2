#!/usr/bin/env python3
"""Writes an Nsight Systems-shaped SQLite export (the 2026.4 columns of
tests/unit/test_import_nsys.c) for import tests (test code, never shipped):
  - CUPTI_ACTIVITY_KIND_KERNEL: --kernels rows over 60 s, every other one an NCCL kernel
    (ncclDevKernel_<Coll>_..., four collectives) and the rest GEMM kernels whose names are
    all distinct, so StringIds holds more than --kernels / 2 strings;
  - NVTX_EVENTS: the NCCL domain's creation row, then --nvtx push/pop ranges, every other
    one in the NCCL domain (ncclAllReduce, ...) and the rest application ranges; each
    has an eventId, and DYNAMIC_NVTXPAYLOAD_1 a "Message size" for every NCCL range.
The capture ends --end-ago seconds before now (session start = its start). Prints the
number of NCCL events an importer should find (kernels plus NCCL ranges)."""
import argparse
import os
import sqlite3
import time

COLLS = ["AllReduce", "AllGather", "ReduceScatter", "SendRecv"]
SCHEMA = """
CREATE TABLE StringIds(id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE META_DATA_EXPORT(name TEXT, value TEXT);
INSERT INTO META_DATA_EXPORT VALUES('EXPORT_SCHEMA_VERSION','3.28.1');
CREATE TABLE TARGET_INFO_SESSION_START_TIME(utcEpochNs INTEGER, utcTime TEXT, localTime TEXT,
  systemClockNs INTEGER, sessionStartCntVctNs INTEGER);
CREATE TABLE TARGET_INFO_SYSTEM_ENV(globalVid INTEGER, devStateName TEXT, name TEXT,
  nameEnum INTEGER, value TEXT);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start INTEGER NOT NULL, end INTEGER NOT NULL,
  deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER,
  streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER,
  demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER);
CREATE TABLE NVTX_EVENTS(start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
  rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
  endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
  int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
  floatValue REAL, jsonTextId INTEGER, jsonText TEXT, eventId INTEGER);
CREATE TABLE DYNAMIC_NVTXPAYLOAD_1(eventId INTEGER, "Message size (bytes)" INTEGER);
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernels", type=int, default=600000)
    ap.add_argument("--nvtx", type=int, default=200000)
    ap.add_argument("--end-ago", type=float, default=1.0)
    ap.add_argument("--host", default="gpu-node-5")
    a = ap.parse_args()
    if os.path.exists(a.out):
        os.unlink(a.out)
    span = 60 * 10**9
    session = int((time.time() - a.end_ago) * 1e9) - span - 10**9
    db = sqlite3.connect(a.out)
    db.executescript(SCHEMA)
    db.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES(?, '', '', 0, 0)", (session,))
    db.execute("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES(1, '', 'Hostname', 0, ?)", (a.host,))
    # String ids: 1..4 the NCCL kernels, 5 the NCCL domain, 6..9 the NCCL ranges, 10 an
    # application range; the GEMM kernels' distinct names from 100 on.
    strings = [(i + 1, "ncclDevKernel_%s_Sum_f32_RING_LL" % c) for i, c in enumerate(COLLS)]
    strings += [(5, "NCCL")] + [(6 + i, "nccl" + c) for i, c in enumerate(COLLS)]
    strings += [(10, "train_step")]
    db.executemany("INSERT INTO StringIds VALUES(?, ?)", strings)
    db.executemany("INSERT INTO StringIds VALUES(?, ?)",
                   ((100 + i, "void gemm_kernel<%d>(float const*, float*)" % i)
                    for i in range(a.kernels // 2)))

    def kernels():
        for i in range(a.kernels):
            t = span * i // a.kernels
            name = 1 + (i // 2) % 4 if i % 2 == 0 else 100 + i // 2
            yield (t, t + 20000, i % 8, 1, None, 7 + i % 4, i, 1, name, name, None)

    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                   kernels())
    db.execute("INSERT INTO NVTX_EVENTS(start, end, eventType, textId, domainId, eventId) "
               "VALUES(1000, NULL, 75, 5, 3, 0)")

    def ranges():
        for i in range(a.nvtx):
            t = span * i // a.nvtx
            nccl = i % 2 == 0
            yield (t, t + 30000, 6 + (i // 2) % 4 if nccl else 10, 3 if nccl else 0, i + 1)

    db.executemany("INSERT INTO NVTX_EVENTS(start, end, eventType, textId, domainId, eventId) "
                   "VALUES(?, ?, 59, ?, ?, ?)", ranges())
    db.executemany("INSERT INTO DYNAMIC_NVTXPAYLOAD_1 VALUES(?, ?)",
                   ((i + 1, 1 << (10 + i % 12)) for i in range(0, a.nvtx, 2)))
    db.commit()
    db.close()
    print((a.kernels + 1) // 2 + (a.nvtx + 1) // 2)


if __name__ == "__main__":
    main()
