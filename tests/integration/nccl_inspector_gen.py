#!/usr/bin/env python3
"""Appends NCCL Inspector plugin records (verbose form, one JSON object per line, as the
plugin writes them: see host-data-facts §4) to FILE: records with sequence numbers
--first .. --first+--count-1, each an AllReduce starting --step-us after the previous.
--torn writes the last record without its newline, then --complete-torn finishes it in a
later run, as a reader sees a line the plugin is in the middle of writing."""
import argparse
import json
import time


def record(sn, start_us, host):
    return json.dumps({
        "header": {"id": "0x7f3a", "comm_name": "dp", "rank": 3, "n_ranks": 16, "nnodes": 2},
        "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": start_us + 5000,
                     "hostname": host, "pid": 4242},
        "event_trace_ts": {"coll_start_ts": start_us, "coll_stop_ts": start_us + 2500},
        "coll_perf": {"coll": "AllReduce", "coll_sn": sn, "coll_msg_size_bytes": 1048576,
                      "coll_exec_time_us": 2500, "coll_timing_source": "kernel_gpu",
                      "coll_algobw_gbs": 41.9, "coll_busbw_gbs": 78.6}}, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--file", required=True)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=10)
    ap.add_argument("--step-us", type=int, default=10000)
    ap.add_argument("--rate", type=float, default=0, help="records per second (0: at once)")
    ap.add_argument("--host", default="gpu-node-3")
    ap.add_argument("--torn", action="store_true")
    ap.add_argument("--complete-torn", action="store_true")
    a = ap.parse_args()
    base = int(time.time() * 1e6) - a.count * a.step_us
    with open(a.file, "a") as f:
        if a.complete_torn:
            # The rest of the line a previous --torn run left: its tail is a fixed text.
            f.write(TORN_TAIL + "\n")
        for i in range(a.count):
            line = record(a.first + i, base + i * a.step_us, a.host)
            if a.torn and i == a.count - 1:
                f.write(line[:-len(TORN_TAIL)])
            else:
                f.write(line + "\n")
            f.flush()
            if a.rate:
                time.sleep(1.0 / a.rate)


TORN_TAIL = '"coll_busbw_gbs":78.6}}'

if __name__ == "__main__":
    main()
