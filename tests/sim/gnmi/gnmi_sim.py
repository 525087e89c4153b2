#!/usr/bin/python3
"""A gNMI target (test code, never shipped) serving the shared scenario over real gRPC.

Runs on Debian's python3-grpcio and python3-protobuf. The Python message module is
generated at start from schemas/gnmi/gnmi.proto with `protoc --python_out` into --gen-dir
(the test's scratch dir), and the service is registered with a generic handler.

Serves Capabilities and Subscribe (STREAM with SAMPLE / ON_CHANGE / TARGET_DEFINED,
heartbeats and suppress_redundant; ONCE; POLL), PROTO, JSON and JSON_IETF encodings,
plaintext or TLS (optionally requiring a client certificate), and a username/password
check on the call metadata. Counters come from tests/sim/scenario.py, and so does the
openconfig-lldp state (/lldp/state, /lldp/interfaces/.../neighbors/neighbor/state, from
the scenario's lldp_local and lldp_neighbors; a test removes a neighbour with
`delete /lldp/interfaces/interface[name=X]/neighbors/neighbor[id=Y]`); notification
timestamps are the device clock (scenario clock_offset_ms) in ns, and every value of a
notification is computed at exactly the time its timestamp states, so a checker can
recompute it (see sample_time()).

Fault injection: write a command into the --control file (it is consumed):
  reset         end every open Subscribe with UNAVAILABLE
  stall SECS    send nothing (no updates, no heartbeats) for SECS on every open stream
  malformed N   the next N notifications carry values of the wrong type / broken JSON
  huge BYTES    the next notification batch carries one more update, a string of BYTES
                bytes at an unknown path (/fabricscope-test/padding): a message too large
  delete PATH   every open stream sends a Notification deleting PATH (e.g.
                /interfaces/interface[name=Eth1/3]); from then on no stream sends values
                under it (until the process restarts)
  deepjson N    the next batch carries one more update: a JSON_IETF value nested N deep
  bigjson BYTES the next batch carries one more update: a JSON_IETF object of about BYTES
                bytes (many small members)
  paths N       every open stream sends N distinct unknown paths (long names, 4000
                updates per Notification) at once, then goes on as before
  flood SECS    for SECS seconds every open stream sends, as fast as it can, Notifications
                of 1000 updates at unknown paths (the same 1000 each time)
  skew SECS N   the next N batches are stamped SECS (may be negative or huge) off the
                device clock; their values are those of the true time
(malformed N in PROTO cycles through the wrong types: a string, a negative integer, a
fraction, a boolean, bytes; an enum leaf gets an integer.)
Option --bench-replay (benchmarks): a STREAM's SAMPLE subscriptions are each served as
one Notification of every selected leaf (full paths, values of the subscription's start),
encoded once and re-sent every interval with a fresh timestamp: the target costs the
simulator a few microseconds a round, so one process can feed many collector streams.
With --bench-replay-groups, one Notification a group instead (an interface's counters,
a queue's), prefix and relative paths, as the live stream and real devices send them.
Option --clamp-interval SECS serves any requested sample interval shorter than SECS at
SECS, as devices do that have a minimum ("clamp" logged).
Option --bind ADDR (default 127.0.0.1) is the address to listen on: 0.0.0.0 (or ::) in
a container, where the collector runs in another one (docker/compose.yaml).
A server restart is a real one: the test kills the process and starts it again.

Log lines (stderr) a test may wait for: "listening PORT", "subscribe mode=.. enc=..",
"poll", "auth-failed", "stream-end", "sent-delete PATH".
"""
import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent import futures

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/sim: scenario.py
import scenario as scn  # noqa: E402

import grpc  # noqa: E402

g = None  # the generated gnmi_pb2 module


_log_lock = threading.Lock()


def log(*a):
    # One write per line under a lock: the streams' threads log at once, and
    # print() writes each argument separately, so lines would interleave.
    line = " ".join(str(x) for x in a) + "\n"
    with _log_lock:
        sys.stderr.write(line)
        sys.stderr.flush()


def load_messages(gen_dir, proto_dir):
    global g
    os.makedirs(gen_dir, exist_ok=True)
    subprocess.run(["protoc", "--python_out=" + gen_dir, "-I" + proto_dir,
                    os.path.join(proto_dir, "gnmi.proto")], check=True)
    sys.path.insert(0, gen_dir)
    import gnmi_pb2
    g = gnmi_pb2


# ---- the data tree: leaves of the scenario ----

class Leaf:
    """One leaf: its notification group (prefix), relative path, and value function."""
    __slots__ = ("group", "rel", "full", "fn", "kind")

    def __init__(self, group, rel, fn, kind):
        self.group = group  # (prefix string, prefix elems)
        self.rel = rel      # list of (name, {keys})
        self.full = group[1] + rel
        self.fn = fn        # t -> value
        self.kind = kind    # "u64", "gauge", "enum"


def elems(s):
    out = []
    for part in s.strip("/").split("/"):
        name, _, rest = part.partition("[")
        keys = {}
        if rest:
            for kv in ("[" + rest).strip("[]").split("]["):
                k, v = kv.split("=", 1)
                keys[k] = v
        out.append((name, keys))
    return out


def build_leaves(sc):
    leaves = []
    for p in range(1, sc.ports + 1):
        ifn = sc.port_name(p)
        grp = ("/interfaces/interface[name=%s]/state" % ifn,
               [("interfaces", {}), ("interface", {"name": ifn}), ("state", {})])
        for rel, fn, kind in [
            ("counters/in-octets", lambda t, p=p: sc.port_octets(p, t), "u64"),
            ("counters/out-octets", lambda t, p=p: sc.port_octets(p, t), "u64"),
            ("counters/in-pkts", lambda t, p=p: sc.port_ucast_pkts(p, t), "u64"),
            ("counters/out-pkts", lambda t, p=p: sc.port_ucast_pkts(p, t), "u64"),
            ("counters/ecn-marked-pkts", lambda t, p=p: sc.port_ecn_marked(p, t), "u64"),
            ("oper-status", lambda t: "UP", "enum"),
        ]:
            leaves.append(Leaf(grp, elems(rel), fn, kind))
        qgrp = ("/qos/interfaces/interface[interface-id=%s]/output/queues" % ifn,
                [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": ifn}),
                 ("output", {}), ("queues", {})])
        for tc in range(8):
            for leaf, fn, kind in [
                ("transmit-pkts", lambda t, p=p, tc=tc: sc.tc_tx_pkts(p, tc, t), "u64"),
                ("transmit-octets", lambda t, p=p, tc=tc: sc.tc_tx_octets(p, tc, t), "u64"),
                ("ecn-marked-pkts", lambda t, p=p, tc=tc: sc.tc_ecn_marked(p, tc, t), "u64"),
                ("wred-dropped-pkts", lambda t, p=p, tc=tc: sc.tc_wred_dropped(p, tc, t), "u64"),
                ("no-buffer-uc-dropped-pkts",
                 lambda t, p=p, tc=tc: sc.tc_no_buffer_dropped(p, tc, t), "u64"),
                ("instant-queue-len", lambda t, p=p, tc=tc: sc.queue_depth_bytes(p, tc, t),
                 "gauge"),
            ]:
                leaves.append(Leaf(qgrp, [("queue", {"name": str(tc)}), ("state", {}),
                                          (leaf, {})], fn, kind))
        pgrp = ("/qos/interfaces/interface[interface-id=%s]" % ifn,
                [("qos", {}), ("interfaces", {}), ("interface", {"interface-id": ifn})])
        for prio in range(8):
            sp = ("switch-priority", {"priority": str(prio)})
            leaves.append(Leaf(pgrp, [sp, ("state", {}), ("counters", {}), ("in-pause-pkts", {})],
                               lambda t, p=p, pr=prio: sc.pfc_rx_pause_frames(p, pr, t), "u64"))
            leaves.append(Leaf(pgrp, [sp, ("state", {}), ("in-pause-duration", {})],
                               lambda t, p=p, pr=prio: sc.pfc_rx_pause_us(p, pr, t), "u64"))
    # Cumulus nvidia-wjh: one buffer-group aggregate (WRED, id 1, severity Notice) per
    # port, its `drop` leaf a JSON string (the layout fabricscope assumes, map.h).
    if sc.wjh is not None:
        for p in range(1, sc.ports + 1):
            ifn = sc.port_name(p)
            wgrp = ("/interfaces/interface[name=%s]/wjh/aggregate/buffer" % ifn,
                    [("interfaces", {}), ("interface", {"name": ifn}), ("wjh", {}),
                     ("aggregate", {}), ("buffer", {})])

            def drop(t, p=p):
                s, e = sc.wjh_window(t)
                ns = lambda x: int(round((sc.boot_epoch_s + x) * 1e9))  # noqa: E731
                return json.dumps({"count": sc.wjh_count(p, t), "reason": "WRED",
                                   "window_start": ns(s), "window_end": ns(e)})
            leaves.append(Leaf(wgrp, [("reasons", {}), ("reason", {"id": "1", "severity": "Notice"}),
                                      ("drop", {})], drop, "str"))
    # The scenario's ACL entries (openconfig-acl): one group per set, each entry's
    # description (config and state) and its counters.
    for e in sc.acl_entries:
        agrp = ("/acl/acl-sets/acl-set[name=%s][type=ACL_IPV4]" % e["set"],
                [("acl", {}), ("acl-sets", {}), ("acl-set", {"name": e["set"], "type": "ACL_IPV4"})])
        ent = [("acl-entries", {}), ("acl-entry", {"sequence-id": str(e["seq"])})]
        for rel, fn, kind in [
            ("config/description", lambda t, e=e: e["description"], "str"),
            ("state/description", lambda t, e=e: e["description"], "str"),
            ("state/matched-packets", lambda t, e=e: sc.acl_matched_pkts(e, t), "u64"),
            ("state/matched-octets", lambda t, e=e: sc.acl_matched_octets(e, t), "u64"),
        ]:
            leaves.append(Leaf(agrp, ent + elems(rel), fn, kind))
    # openconfig-lldp: the scenario's identity and neighbours (string leaves).
    if sc.lldp_local:
        lgrp = ("/lldp/state", [("lldp", {}), ("state", {})])
        for leaf, key in (("chassis-id", "chassis_id"), ("system-name", "system_name")):
            if key in sc.lldp_local:
                leaves.append(Leaf(lgrp, [(leaf, {})], lambda t, v=sc.lldp_local[key]: v, "str"))
    for e in sc.lldp_neighbors:
        ngrp = ("/lldp/interfaces/interface[name=%s]/neighbors/neighbor[id=%s]/state"
                % (e["port"], e.get("id", "1")),
                [("lldp", {}), ("interfaces", {}), ("interface", {"name": e["port"]}),
                 ("neighbors", {}), ("neighbor", {"id": str(e.get("id", "1"))}), ("state", {})])
        for leaf, key in (("chassis-id", "chassis_id"), ("port-id", "port_id"),
                          ("port-id-type", "port_id_type"), ("port-description", "port_descr"),
                          ("system-name", "sys_name")):
            if key in e:
                leaves.append(Leaf(ngrp, [(leaf, {})], lambda t, v=e[key]: v, "str"))
    return leaves


def split_path(s):
    """A path string -> [(name, {keys})]; '/' inside [k=v] is part of the value."""
    out, depth, cur = [], 0, ""
    for ch in s.strip("/"):
        if ch == "/" and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    if cur:
        out.append(cur)
    res = []
    for part in out:
        name, _, rest = part.partition("[")
        keys = {}
        if rest:
            for kv in ("[" + rest)[1:-1].split("]["):
                k, v = kv.split("=", 1)
                keys[k] = v
        res.append((name, keys))
    return res


def strip_module(n):
    return n.split(":", 1)[-1]


def path_matches(sub, full):
    """A subscription path (list of (name, keys)) selects leaves under it."""
    if len(sub) > len(full):
        return False
    for (sn, sk), (fn, fk) in zip(sub, full):
        if strip_module(sn) != fn and sn != "*":
            return False
        for k, v in sk.items():
            if v != "*" and fk.get(k) != v:
                return False
    return True


def proto_path_elems(p):
    return [(e.name, dict(e.key)) for e in p.elem] if p is not None else []


# ---- timing ----

def sample_time(sc, ts_ns):
    """Seconds since boot that a notification stamped ts_ns (device clock) describes.
    Integer arithmetic first, so a checker gets bit-identical floats."""
    offset_ns = int(round(sc.clock_offset_ms * 1e6))
    boot_ns = int(round(sc.boot_epoch_s * 1e9))
    return max(0.0, (ts_ns - offset_ns - boot_ns) / 1e9)


class Control:
    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.reset_gen = 0
        self.stall_until = 0.0
        self.malformed = 0
        self.huge = 0  # bytes of padding for the next batch (0: none)
        self.deep = 0  # nesting of a JSON value for the next batch (0: none)
        self.bigjson = 0  # bytes of a JSON value for the next batch (0: none)
        self.paths_gen = 0  # bumped by "paths N": each stream sends paths_n paths once
        self.paths_n = 0
        self.flood_until = 0.0
        self.skew_ns = 0  # added to the stamps of the next skew_left batches
        self.skew_left = 0
        self.deletes = []  # (path string, elems), in order; never shrinks

    def poll(self):
        if not self.path or not os.path.exists(self.path):
            return
        with self.lock:
            try:
                with open(self.path) as f:
                    cmds = f.read().split("\n")
                os.unlink(self.path)
            except OSError:
                return
            for c in cmds:
                w = c.split()
                if not w:
                    continue
                log("control", c)
                if w[0] == "reset":
                    self.reset_gen += 1
                elif w[0] == "stall":
                    self.stall_until = time.time() + float(w[1])
                elif w[0] == "malformed":
                    self.malformed += int(w[1])
                elif w[0] == "huge":
                    self.huge = int(w[1])
                elif w[0] == "delete":
                    self.deletes.append((w[1], split_path(w[1])))
                elif w[0] == "deepjson":
                    self.deep = int(w[1])
                elif w[0] == "bigjson":
                    self.bigjson = int(w[1])
                elif w[0] == "paths":
                    self.paths_n = int(w[1])
                    self.paths_gen += 1
                elif w[0] == "flood":
                    self.flood_until = time.time() + float(w[1])
                elif w[0] == "skew":
                    self.skew_ns = int(float(w[1]) * 1e9)
                    self.skew_left = int(w[2])

    def deleted(self, leaf):
        return any(path_matches(d, leaf.full) for _, d in self.deletes)

    def take(self, attr):
        with self.lock:
            n = getattr(self, attr)
            setattr(self, attr, 0)
            return n

    def take_skew(self):
        with self.lock:
            if self.skew_left > 0:
                self.skew_left -= 1
                return self.skew_ns
            return 0

    def take_huge(self):
        with self.lock:
            n, self.huge = self.huge, 0
            return n

    def take_malformed(self):
        with self.lock:
            if self.malformed > 0:
                self.malformed -= 1
                return True
            return False


class Target:
    def __init__(self, args, sc):
        self.args = args
        self.sc = sc
        self.leaves = build_leaves(sc)
        self.replay_cache = {}
        self.ctl = Control(args.control)
        threading.Thread(target=self._control_loop, daemon=True).start()

    def _control_loop(self):
        while True:
            self.ctl.poll()
            time.sleep(0.05)

    def check_auth(self, context):
        if not self.args.username:
            return
        md = dict(context.invocation_metadata())
        if md.get("username") != self.args.username or md.get("password") != self.args.password:
            log("auth-failed")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "bad username or password")

    # ---- RPCs ----

    def capabilities(self, req, context):
        self.check_auth(context)
        r = g.CapabilityResponse(gNMI_version="0.10.0")
        for name in ("openconfig-interfaces", "openconfig-qos", "openconfig-acl"):
            r.supported_models.add(name=name, organization="OpenConfig working group",
                                   version="1.0.0")
        r.supported_encodings.extend(self.args.encodings_list)
        return r

    def value(self, leaf, t, enc, bad):
        v = leaf.fn(t)
        tv = g.TypedValue()
        if bad:
            if enc == g.PROTO and leaf.kind == "enum":
                tv.uint_val = 1
            elif enc == g.PROTO and leaf.kind == "gauge":
                tv.string_val = "high"
            elif enc == g.PROTO:
                k = bad % 5
                if k == 1:
                    tv.string_val = "not-a-number"
                elif k == 2:
                    tv.int_val = -7
                elif k == 3:
                    tv.double_val = 1.5
                elif k == 4:
                    tv.bool_val = True
                else:
                    tv.bytes_val = b"\x00\x01"
            else:
                tv.json_ietf_val = b'{"broken":'
            return tv
        if enc == g.PROTO:
            if leaf.kind in ("enum", "str"):
                tv.string_val = v
            else:
                tv.uint_val = v
        elif enc == g.JSON_IETF:
            # RFC 7951: 64-bit integers are strings; enums are module-qualified.
            tv.json_ietf_val = json.dumps(
                "openconfig-interfaces:" + v if leaf.kind == "enum" else str(v)).encode()
        else:
            tv.json_val = json.dumps(v).encode()
        return tv

    def notifications(self, sel, enc, only_changed=None):
        """Notifications (one per group) of the selected leaves, stamped now."""
        if not sel:
            # a subscription selecting nothing (e.g. the driver's LLDP ones against a
            # scenario without LLDP) must not take the injected faults meant for data
            return []
        ts_ns = time.time_ns() + int(round(self.sc.clock_offset_ms * 1e6))
        t = sample_time(self.sc, ts_ns)
        bad = self.ctl.take_malformed()
        skew = self.ctl.take_skew()
        out, cur = [], None
        for i, leaf in enumerate(sel):
            if self.ctl.deleted(leaf):
                continue
            if only_changed is not None:
                v = leaf.fn(t)
                if only_changed.get(id(leaf)) == v:
                    continue
                only_changed[id(leaf)] = v
            if cur is None or cur[0] is not leaf.group:
                n = g.Notification(timestamp=max(-2**63, min(2**63 - 1, ts_ns + skew)))
                for name, keys in leaf.group[1]:
                    n.prefix.elem.add(name=name, key=keys)
                cur = (leaf.group, n)
                out.append(n)
            u = cur[1].update.add()
            for name, keys in leaf.rel:
                u.path.elem.add(name=name, key=keys)
            u.val.CopyFrom(self.value(leaf, t, enc, bad and i + 1))
        pad = self.ctl.take_huge()
        if pad and out:
            u = out[0].update.add()
            u.path.elem.add(name="fabricscope-test")
            u.path.elem.add(name="padding")
            u.val.string_val = "x" * pad
            log("sent-huge %d" % out[0].ByteSize())
        deep = self.ctl.take("deep")
        if deep and out:
            u = out[0].update.add()
            u.path.elem.add(name="fabricscope-test")
            u.path.elem.add(name="deep")
            u.val.json_ietf_val = b"[" * deep + b"1" + b"]" * deep
            log("sent-deepjson %d" % deep)
        big = self.ctl.take("bigjson")
        if big and out:
            u = out[0].update.add()
            u.path.elem.add(name="fabricscope-test")
            u.path.elem.add(name="big")
            members = ['"m%d":%d' % (i, i) for i in range(big // 12 + 1)]
            u.val.json_ietf_val = ("{" + ",".join(members) + "}").encode()
            log("sent-bigjson %d" % len(u.val.json_ietf_val))
        if skew:
            log("sent-skew %d" % skew)
        return out

    def junk(self, first, count, stamp_ns):
        """Notifications of count updates at unknown paths first.. (4000 per message)."""
        out = []
        pad = "x" * 160
        for start in range(first, first + count, 4000):
            n = g.Notification(timestamp=stamp_ns)
            n.prefix.elem.add(name="fabricscope-test")
            for i in range(start, min(first + count, start + 4000)):
                u = n.update.add()
                u.path.elem.add(name="junk", key={"id": str(i)})
                u.path.elem.add(name="leaf-" + pad)
                u.val.uint_val = i
            out.append(n)
        return out

    def subscribe(self, request_iterator, context):
        self.check_auth(context)
        try:
            first = next(request_iterator)
        except StopIteration:
            return
        if first.WhichOneof("request") != "subscribe":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "first request must be subscribe")
        sl = first.subscribe
        enc = sl.encoding
        if enc not in self.args.encodings_list:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "encoding %d not supported" % enc)
        mode = g.SubscriptionList.Mode.Name(sl.mode)
        log("subscribe mode=%s enc=%s updates_only=%s paths=%s" % (
            mode, g.Encoding.Name(enc), sl.updates_only,
            ",".join("/".join(e.name for e in s.path.elem) + ":" +
                     g.SubscriptionMode.Name(s.mode) for s in sl.subscription)))
        prefix = proto_path_elems(sl.prefix) if sl.HasField("prefix") else []
        subs = []
        for s in sl.subscription:
            full = prefix + proto_path_elems(s.path)
            sel = [lf for lf in self.leaves if path_matches(full, lf.full)]
            subs.append((s, sel))
        every = [lf for _, sel in subs for lf in sel]
        if sl.mode == g.SubscriptionList.ONCE:
            for n in self.notifications(every, enc):
                yield g.SubscribeResponse(update=n)
            yield g.SubscribeResponse(sync_response=True)
            log("stream-end once")
            return
        if sl.mode == g.SubscriptionList.POLL:
            for n in self.notifications(every, enc):
                yield g.SubscribeResponse(update=n)
            yield g.SubscribeResponse(sync_response=True)
            for req in request_iterator:
                if req.WhichOneof("request") == "poll":
                    log("poll")
                    for n in self.notifications(every, enc):
                        yield g.SubscribeResponse(update=n)
                    yield g.SubscribeResponse(sync_response=True)
            log("stream-end poll")
            return
        yield from self.stream(context, subs, enc, sl.updates_only)

    def replay(self, context, subs, enc):
        """--bench-replay: each SAMPLE subscription as one pre-encoded Notification."""
        ts_ns = time.time_ns()
        t = sample_time(self.sc, ts_ns)
        bodies = []
        for s, sel in subs:
            key = (s.SerializeToString(), enc)
            with self.ctl.lock:
                body = self.replay_cache.get(key)
            if body is None:
                # One encoding for every stream with this subscription, made outside the
                # lock (notifications() takes it); a race encodes twice and keeps one.
                if self.args.bench_replay_groups:
                    # the live stream's notifications, their stamp left to framed()
                    body = []
                    for n in self.notifications(sel, enc):
                        n.ClearField("timestamp")
                        body.append(n.SerializeToString())
                else:
                    n = g.Notification()
                    for leaf in sel:
                        u = n.update.add()
                        for name, keys in leaf.full:
                            u.path.elem.add(name=name, key=keys)
                        u.val.CopyFrom(self.value(leaf, t, enc, False))
                    body = [n.SerializeToString()]
                with self.ctl.lock:
                    body = self.replay_cache.setdefault(key, body)
            interval = s.sample_interval / 1e9 if s.sample_interval else 1.0
            bodies.append([body, interval, time.time()])

        def varint(v):
            out = bytearray()
            while True:
                b = v & 0x7F
                v >>= 7
                if v:
                    out.append(b | 0x80)
                else:
                    out.append(b)
                    return bytes(out)

        def framed(body):
            # SubscribeResponse{update(1): Notification{timestamp(1), ...body}}
            notif = b"\x08" + varint(time.time_ns()) + body
            return b"\x0a" + varint(len(notif)) + notif

        for b in bodies:
            for body in b[0]:
                yield framed(body)
        yield g.SubscribeResponse(sync_response=True)
        while context.is_active():
            now = time.time()
            for b in bodies:
                if now >= b[2] + b[1]:
                    b[2] += b[1]
                    if b[2] < now - b[1]:
                        b[2] = now  # fell behind: no burst to catch up
                    for body in b[0]:
                        yield framed(body)
            wake = min(b[2] + b[1] for b in bodies)
            time.sleep(max(0.0, min(0.05, wake - time.time())))
        log("stream-end client")

    def stream(self, context, subs, enc, updates_only):
        if self.args.bench_replay:
            yield from self.replay(context, subs, enc)
            return
        gen = self.ctl.reset_gen
        now = time.time()
        state = []
        for s, sel in subs:
            m = s.mode
            interval = s.sample_interval / 1e9 if s.sample_interval else 1.0
            if m == g.SAMPLE and interval < self.args.clamp_interval:
                log("clamp %.3f -> %.3f" % (interval, self.args.clamp_interval))
                interval = self.args.clamp_interval
            if m == g.ON_CHANGE:
                interval = 0.1  # how often changes are looked for
            hb = s.heartbeat_interval / 1e9 if s.heartbeat_interval else 0.0
            last = {}
            state.append({"s": s, "sel": sel, "interval": interval, "hb": hb,
                          "next": now + interval, "next_hb": now + hb if hb else None,
                          "last": last,
                          "changes": m == g.ON_CHANGE or s.suppress_redundant})
            if not updates_only:
                for n in self.notifications(sel, enc, last):
                    yield g.SubscribeResponse(update=n)
        yield g.SubscribeResponse(sync_response=True)
        n_deletes = len(self.ctl.deletes)  # deletes from before this stream: data skips them
        paths_gen = self.ctl.paths_gen
        while context.is_active():
            if self.ctl.paths_gen != paths_gen:
                paths_gen = self.ctl.paths_gen
                n = self.ctl.paths_n
                t0 = time.time()
                for k in range(0, n, 100000):  # built in slices: bounded memory here too
                    for note in self.junk(k, min(100000, n - k), time.time_ns()):
                        yield g.SubscribeResponse(update=note)
                log("sent-paths %d in %.1f s" % (n, time.time() - t0))
            if time.time() < self.ctl.flood_until:
                notes = self.junk(0, 1000, time.time_ns())
                sent = 0
                while time.time() < self.ctl.flood_until and context.is_active():
                    for note in notes:
                        # Ends on time however slowly the collector reads (flow control).
                        if time.time() >= self.ctl.flood_until:
                            break
                        note.timestamp = time.time_ns()
                        yield g.SubscribeResponse(update=note)
                        sent += 1
                log("sent-flood %d notifications of 1000 updates" % sent)
            if self.ctl.reset_gen != gen:
                log("stream-end reset")
                context.abort(grpc.StatusCode.UNAVAILABLE, "injected stream reset")
            while n_deletes < len(self.ctl.deletes):
                path, el = self.ctl.deletes[n_deletes]
                n_deletes += 1
                n = g.Notification(timestamp=time.time_ns() +
                                   int(round(self.sc.clock_offset_ms * 1e6)))
                d = n.delete.add()
                for name, keys in el:
                    d.elem.add(name=name, key=keys)
                yield g.SubscribeResponse(update=n)
                log("sent-delete", path)
            now = time.time()
            if now < self.ctl.stall_until:
                time.sleep(0.02)
                continue
            for st in state:
                if st["next_hb"] is not None and now >= st["next_hb"]:
                    st["next_hb"] = now + st["hb"]
                    st["next"] = now + st["interval"]
                    st["last"].clear()  # a heartbeat resends every value
                    for n in self.notifications(st["sel"], enc, st["last"]):
                        yield g.SubscribeResponse(update=n)
                elif now >= st["next"]:
                    st["next"] += st["interval"]
                    if st["next"] < now:
                        st["next"] = now + st["interval"]
                    only = st["last"] if st["changes"] else None
                    for n in self.notifications(st["sel"], enc, only):
                        yield g.SubscribeResponse(update=n)
            wake = min([st["next"] for st in state] +
                       [st["next_hb"] for st in state if st["next_hb"]] + [now + 0.05])
            time.sleep(max(0.0, min(0.05, wake - time.time())))
        log("stream-end client")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1",
                    help="address to listen on (0.0.0.0 or :: in a container)")
    ap.add_argument("--port-file", help="write the bound port here once listening")
    ap.add_argument("--scenario", help="scenario JSON (tests/sim/scenario.py)")
    ap.add_argument("--gen-dir", required=True, help="scratch dir for gnmi_pb2.py")
    ap.add_argument("--proto-dir", default=os.path.join(HERE, "..", "..", "..", "schemas", "gnmi"))
    ap.add_argument("--tls-cert")
    ap.add_argument("--tls-key")
    ap.add_argument("--client-ca", help="require client certificates signed by this CA")
    ap.add_argument("--username")
    ap.add_argument("--password-file")
    ap.add_argument("--encodings", default="PROTO,JSON_IETF,JSON")
    ap.add_argument("--control", help="fault-injection command file (see above)")
    ap.add_argument("--bench-replay-groups", action="store_true",
                    help="with --bench-replay: one Notification a group")
    ap.add_argument("--bench-replay", action="store_true",
                    help="serve SAMPLE subscriptions as pre-encoded notifications (benchmarks)")
    ap.add_argument("--clamp-interval", type=float, default=0.0,
                    help="serve shorter sample intervals at this many seconds")
    ap.add_argument("--max-workers", type=int, default=64,
                    help="concurrent RPCs (each open stream holds one thread)")
    args = ap.parse_args()
    load_messages(args.gen_dir, os.path.abspath(args.proto_dir))
    args.encodings_list = [g.Encoding.Value(e) for e in args.encodings.split(",")]
    args.password = None
    if args.password_file:
        with open(args.password_file) as f:
            args.password = f.read().strip()
    sc = scn.Scenario(args.scenario)
    tgt = Target(args, sc)

    handler = grpc.method_handlers_generic_handler("gnmi.gNMI", {
        "Capabilities": grpc.unary_unary_rpc_method_handler(
            tgt.capabilities, request_deserializer=g.CapabilityRequest.FromString,
            response_serializer=g.CapabilityResponse.SerializeToString),
        "Subscribe": grpc.stream_stream_rpc_method_handler(
            tgt.subscribe, request_deserializer=g.SubscribeRequest.FromString,
            response_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString()),
    })
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.max_workers),
                         maximum_concurrent_rpcs=args.max_workers)
    server.add_generic_rpc_handlers((handler,))
    # An IPv6 address needs brackets before the port.
    host = "[%s]" % args.bind if ":" in args.bind else args.bind
    addr = "%s:%d" % (host, args.port)
    if args.tls_cert:
        with open(args.tls_key, "rb") as f:
            key = f.read()
        with open(args.tls_cert, "rb") as f:
            cert = f.read()
        ca = None
        if args.client_ca:
            with open(args.client_ca, "rb") as f:
                ca = f.read()
        creds = grpc.ssl_server_credentials([(key, cert)], root_certificates=ca,
                                            require_client_auth=ca is not None)
        port = server.add_secure_port(addr, creds)
    else:
        port = server.add_insecure_port(addr)
    if port == 0:
        log("cannot listen on", addr)
        sys.exit(1)
    server.start()
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write("%d\n" % port)
        os.rename(args.port_file + ".tmp", args.port_file)
    log("listening", port)
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
