#!/usr/bin/env python3
"""Scores fabricscope's answers on a world_om world, as eval_fabric scores them
(tests/eval/eval_pod_history.sh; evaluation code, never shipped).

  score_pod_history.py --truth T --correlate C --incidents I --query-time S --range-end S
                       [--correlate-s S] [--incidents-s S] [--wall-s S]
      prints one JSON line: the run's scores (EVAL_VERBOSE=1: the detail on stderr)
  score_pod_history.py --header | --row RESULTS.jsonl | --summary RESULTS.jsonl --prefix P
      the table's header, the last run's row, the tables per stamping and EVAL lines

Per stall window (each slow host event overlapping a stall, a second of slack either
side): the origin (any member of a bundle) is the first suspect; the origin ranks above
every victim listed (a port of the stall's PFC spread). Per unrelated window (a slow event
starting within 2 s of one): its first suspect is the origin (blamed). Per run: the origin
first in the summary; the origin's recurring group found, first in /incidents, its period
within 1% and its next stall within 2% of the period (against the world's next scheduled
stall, or the later one of its grid nearest the prediction: the answer predicts after the
time it was asked, which may be past the world's next); recurring groups naming
no port with a periodic process (a job's origin or victims, the backup): false.

Where the departures fell (EVAL_VERBOSE=1): how late the history stamps the origin's
first sample after each stall's onset (truth.json's stamp_delay_s), where /correlate
placed the origin's peaks (per kind, when it lists the origin), and the offsets of the
origin's recurring group (first and last occurrence, next expected) from the stalls.
"""
import argparse
import json
import math
import os
import statistics
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def port(x):
    return (x.get("target"), x.get("interface"))


def score(a):
    truth = load(a.truth)
    corr = load(a.correlate)["data"]
    inc = load(a.incidents)["data"]
    verbose = bool(os.environ.get("EVAL_VERBOSE"))
    origin = {tuple(p) for p in truth["origin"]}
    victims = {tuple(p) for p in truth["victims"]}
    periodic = {tuple(p) for p in truth["periodic"]}
    stalls = truth["stalls"]
    period = truth["period_s"]
    r = {
        "family": truth["family"], "seed": truth["seed"], "stamp": truth["stamp"],
        "period_s": period, "stalls": len(stalls), "series": truth["series"],
        "stall_windows": 0, "origin_first": 0, "origin_above": 0, "unrelated": 0, "blamed": 0,
        "summary_first": False, "recurring": False, "group_first": False,
        "period_err": None, "next_err": None, "false_groups": 0,
        "correlate_ms": round(a.correlate_s * 1000), "incidents_ms": round(a.incidents_s * 1000),
        "wall_s": a.wall_s, "history": inc.get("history"),
        "history_error": (corr.get("history") or {}).get("error") or (inc.get("history") or {}).get("error"),
    }
    summary = corr.get("summary") or []
    r["summary_first"] = bool(summary) and port(summary[0]) in origin
    # Per stall window.
    peak_off = {}  # kind -> offsets (s) of the origin suspect's peak from the stall onset
    missed = {}  # stall -> its windows whose first suspect is not the origin
    for ev in corr.get("events") or []:
        s, e = ev["start_ns"] / 1e9, ev["end_ns"] / 1e9
        sus = ev.get("suspects") or []
        k = next((i for i, (st, ln) in enumerate(stalls) if s < st + ln + 1 and e > st - 1), -1)
        if k >= 0:
            r["stall_windows"] += 1
            fo = next((i for i, x in enumerate(sus) if port(x) in origin), -1)
            fv = next((i for i, x in enumerate(sus) if port(x) in victims), -1)
            r["origin_first"] += fo == 0
            r["origin_above"] += fo >= 0 and (fv < 0 or fo < fv)
            for x in sus:
                if port(x) in origin and x.get("peak_time") is not None:
                    peak_off.setdefault(x["kind"], []).append(x["peak_time"] - stalls[k][0])
            if verbose and fo != 0:
                missed.setdefault(k, []).append((fo, fv, sus))
        elif any(abs(s - u) < 2 for u in truth["unrelated"]):
            r["unrelated"] += 1
            if sus and port(sus[0]) in origin:
                r["blamed"] += 1
                if verbose:
                    near = min((x - s for x in truth.get("strays", [])), key=abs, default=None)
                    print("  %s seed %s unrelated window %.1f blamed on the origin%s" % (
                        truth["stamp"], truth["seed"], s,
                        "" if near is None else "; the origin's nearest stray %+.1f s from it" % near),
                        file=sys.stderr)
    for k, ws in sorted(missed.items()):
        fo, fv, sus = ws[0]
        print("  %s seed %s stall %d (%.1f): %d windows without the origin first; the first: "
              "origin at %d, first victim at %d, top: %s" % (
                  truth["stamp"], truth["seed"], k, stalls[k][0], len(ws), fo, fv,
                  "; ".join("%s %s %s%s peak %+.1f s z %.1f ev %.3f lag %.0f ms" % (
                      x["target"], x["interface"], x["kind"],
                      " " + x["direction"] if x.get("direction") else "",
                      x["peak_time"] - stalls[k][0], x["z"], x["evidence"], x["lag_ms"])
                      for x in sus[:3])), file=sys.stderr)
    r["origin_peak_offset_s"] = {k: round(statistics.median(v), 2) for k, v in peak_off.items()}
    # /incidents.
    for i, g in enumerate(inc.get("recurring") or []):
        names = {port(s) for s in g.get("series") or []}
        if not names & origin:
            if not names & periodic:
                r["false_groups"] += 1
                if verbose:
                    print("  %s seed %s false recurrence: %s (confidence %s)" % (
                        truth["stamp"], truth["seed"], g.get("text"), g.get("confidence")),
                        file=sys.stderr)
            continue
        if r["recurring"]:
            continue
        r["recurring"] = True
        r["group_first"] = i == 0
        r["group_period_s"] = g["period_s"]
        r["period_err"] = abs(g["period_s"] - period) / period
        # The answer predicts after the later of the range's end and the time it was
        # asked, which may be past the world's next scheduled stall: the prediction is set
        # against the scheduled stall nearest it (the world's next or a later one of its
        # grid; next_k says which).
        k = max(0, round((g["next_expected"] - truth["next"]) / period))
        nx = truth["next"] + k * period
        r["next_k"] = k
        r["asked_after_next"] = a.query_time > truth["next"]
        r["next_err"] = abs(g["next_expected"] - nx) / period
        r["next_off_s"] = round(g["next_expected"] - nx, 2)
        r["first_off_s"] = round(g["first"] - stalls[0][0], 2) if stalls else None
        r["last_off_s"] = round(g["last"] - stalls[-1][0], 2) if stalls else None
        if verbose:
            print("  %s seed %s origin group %d: %s; first %+.1f s from the first stall, last "
                  "%+.1f s from the last, next %+.1f s from the schedule (%.2f%% of the period)" % (
                      truth["stamp"], truth["seed"], i, g.get("text"), r["first_off_s"],
                      r["last_off_s"], r["next_off_s"], 100 * r["next_err"]), file=sys.stderr)
    # How late the history stamps the origin's first sample covering each stall's onset
    # (world_om: the poll after the onset, or the scrape after that poll).
    delays = [x for x in truth.get("stamp_delay_s") or [] if x is not None]
    if delays:
        r["stamp_delay_s"] = {"median": round(statistics.median(delays), 2),
                              "min": round(min(delays), 2), "max": round(max(delays), 2)}
    if verbose:
        print("  %s seed %s the origin's first sample after each stall's onset is stamped %s s "
              "after it; /correlate placed the origin's peaks (median per kind) %s s after it" % (
                  truth["stamp"], truth["seed"], r.get("stamp_delay_s"),
                  r["origin_peak_offset_s"]), file=sys.stderr)
    print(json.dumps(r))


HEAD = "%-7s %-6s %8s %7s %6s %6s %7s %6s %6s %8s %8s %5s %8s %8s %6s"


def header():
    print(HEAD % ("stamp", "seed", "period_s", "windows", "first", "above", "blamed", "recur",
                  "gfirst", "period_e", "next_e", "false", "corr_ms", "inc_ms", "wall_s"))


def fmt_err(e):
    return "nan" if e is None else "%.4f" % e


def row(path):
    with open(path) as f:
        r = json.loads(f.readlines()[-1])
    print(HEAD % (r["stamp"], r["seed"], "%.0f" % r["period_s"], r["stall_windows"],
                  r["origin_first"], r["origin_above"], "%d/%d" % (r["blamed"], r["unrelated"]),
                  int(r["recurring"]), int(r["group_first"]), fmt_err(r["period_err"]),
                  fmt_err(r["next_err"]), r["false_groups"], r["correlate_ms"], r["incidents_ms"],
                  r["wall_s"]))
    if r.get("history_error"):
        print("  history error: %s" % r["history_error"])


def pct(a, b):
    return 100.0 * a / b if b else 0.0


def summary(path, prefix):
    with open(path) as f:
        rs = [json.loads(l) for l in f if l.strip()]
    stamps = []
    for r in rs:
        if r["stamp"] not in stamps:
            stamps.append(r["stamp"])
    cols = ("stamp", "runs", "windows", "first%", "above%", "blamed%", "summ%", "recur%",
            "gfirst%", "period1%", "next2%", "perr%", "nerr%", "false_g", "false%", "corr_ms",
            "inc_ms")
    print(("%-7s" + " %8s" * (len(cols) - 1)) % cols)
    lines = []
    for st in stamps:
        g = [r for r in rs if r["stamp"] == st]
        n = len(g)
        w = sum(r["stall_windows"] for r in g)
        un = sum(r["unrelated"] for r in g)
        rec = [r for r in g if r["recurring"]]
        v = {
            "runs": n,
            "stall_windows": w,
            "origin_first_windows": pct(sum(r["origin_first"] for r in g), w),
            "origin_above_victims_windows": pct(sum(r["origin_above"] for r in g), w),
            "unrelated_blamed_on_origin": pct(sum(r["blamed"] for r in g), un),
            "origin_first_summary": pct(sum(r["summary_first"] for r in g), n),
            "recurring_found": pct(len(rec), n),
            "recurring_group_first": pct(sum(r["group_first"] for r in g), n),
            "period_within_1pct": pct(sum(r["period_err"] <= 0.01 for r in rec), n),
            "next_within_2pct_of_period": pct(sum(r["next_err"] <= 0.02 for r in rec), n),
            "period_err_mean": 100 * statistics.mean([r["period_err"] for r in rec]) if rec else math.nan,
            "next_err_mean": 100 * statistics.mean([r["next_err"] for r in rec]) if rec else math.nan,
            "false_recurring_groups": sum(r["false_groups"] for r in g),
            "false_recurring_runs": pct(sum(r["false_groups"] > 0 for r in g), n),
            "correlate_ms_mean": statistics.mean([r["correlate_ms"] for r in g]),
            "incidents_ms_mean": statistics.mean([r["incidents_ms"] for r in g]),
            "correlate_ms_max": max(r["correlate_ms"] for r in g),
            "incidents_ms_max": max(r["incidents_ms"] for r in g),
        }
        print(("%-7s %8d %8d" + " %8.1f" * 8 + " %8.2f %8.2f %8d %8.1f %8.0f %8.0f") % (
            st, n, w, v["origin_first_windows"], v["origin_above_victims_windows"],
            v["unrelated_blamed_on_origin"], v["origin_first_summary"], v["recurring_found"],
            v["recurring_group_first"], v["period_within_1pct"], v["next_within_2pct_of_period"],
            v["period_err_mean"], v["next_err_mean"], v["false_recurring_groups"],
            v["false_recurring_runs"], v["correlate_ms_mean"], v["incidents_ms_mean"]))
        units = {"runs": "runs", "stall_windows": "windows", "false_recurring_groups": "groups"}
        for k, x in v.items():
            unit = units.get(k, "ms" if k.endswith("_ms_mean") or k.endswith("_ms_max") else "%")
            val = ("%d" % x) if isinstance(x, int) and not isinstance(x, bool) else (
                "%.0f" % x if unit == "ms" else "%.2f" % x if k.endswith("_err_mean") else "%.1f" % x)
            lines.append("EVAL %s%s_%s %s %s" % (prefix, st, k, val, unit))
    for l in lines:
        print(l)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--truth")
    ap.add_argument("--correlate")
    ap.add_argument("--incidents")
    ap.add_argument("--query-time", type=float, default=0)
    ap.add_argument("--range-end", type=float, default=0)
    ap.add_argument("--correlate-s", type=float, default=0)
    ap.add_argument("--incidents-s", type=float, default=0)
    ap.add_argument("--wall-s", type=int, default=0)
    ap.add_argument("--header", action="store_true")
    ap.add_argument("--row")
    ap.add_argument("--summary")
    ap.add_argument("--prefix", default="")
    a = ap.parse_args()
    if a.header:
        header()
    elif a.row:
        row(a.row)
    elif a.summary:
        summary(a.summary, a.prefix)
    else:
        score(a)


if __name__ == "__main__":
    main()
