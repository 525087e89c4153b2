#!/usr/bin/python3
"""onyx_sim: a simulated NVIDIA Spectrum switch's ONYX CLI (test code, never shipped).

Runs as one interactive CLI session on stdin/stdout, e.g. as sshd's ForceCommand. Behaves
per /work/shared/reference/onyx-facts.md: the `Mellanox Switch` banner, prompts
`<host> [standalone: master] > ` / `# ` / `(config) # ` / `(config ipv4 access-list X) # `,
enable (with a password prompt when configured), configure terminal, exit, paging on until
`no cli session paging enable` (pager prompt `lines 1-24 `, last page `... (END) `),
`% Unrecognized command "x".` + `Type "?" for help.` for unknown commands, `| json-print`
in the layout of the configured release (before / from 3.6.6000).

Counters come from tests/sim/scenario.py (the scenario shared with the SNMP simulator), so
one simulated switch polled over SNMP and CLI gives the same numbers.

Usage: onyx_sim.py [SCENARIO.json [STATE.json]]   (or ONYX_SIM_SCENARIO=path)
STATE.json (optional) keeps the configuration (ACLs) across sessions, as a switch's
running configuration outlives an SSH session.

Scenario keys read here in addition to scenario.py's (all optional):
  hostname          default "switch-sim"
  onyx_release      default "3.8.2306"; below 3.6.6000 json-print uses the "header" layout
  enable_password   when set, `enable` asks for it
  page_lines        pager page size (default 24)
  flow_rules        rows of `show telemetry flows`: [{name, protocol, dst_lo, dst_hi, tc}]
                    (default one rule "nccl", udp 4791, tc = the congestion tc)
  lldp_neighbors    (scenario.py) answers `show lldp interfaces ethernet remote` in the layout
                    parse_assumed.c assumes (A7, NOT from a real device); a test removes a
                    neighbour by rewriting the scenario
  onyx_lacks        [CMD, ...]: commands this model lacks (answered `% Unrecognized command`)
  onyx_faults       {"hang": CMD, "drop": CMD, "malformed": CMD, "reject": CMD, "flood": CMD,
                    "slow": CMD, "error": CMD, "bloat": CMD}: a command starting with CMD never answers /
                    closes the connection halfway through its output / gets a garbled line
                    / (configuration) fails with a `%` line / prints without end / answers
                    after onyx_slow_s seconds (default 2) / (show) fails with a `%` line
                    although the command exists / ends its answer with onyx_bloat_lines
                    (10,000,000) blank lines: one large, finite answer.
                    Hostile peers (the same form, a command prefix each):
                    "drip": the answer one byte a second; "pages": pager prompts without
                    end, paging off or not (each key brings another page); "longline": a
                    single line of onyx_longline_bytes (default 1 GiB) before the answer;
                    "layout": the answer in a layout no parser knows (made up);
                    "noise": random binary bytes without end; "fake_prompt": the answer
                    carries lines that look like this CLI's prompts (with commands after
                    them) in its middle; "reset": half the answer, then the SSH connection
                    dies at once (the session's sshd process is killed: no channel close).
  onyx_no_shell     true: the login succeeds but no shell ever starts: no banner, no
                    prompt, input read and ignored (checked when the session starts).
  onyx_paging_sticky  true: `no cli session paging enable` leaves paging on
  onyx_echo         "cli" (default): the CLI echoes each command line when it reads it, so
                    an output starts on the line after `<prompt><command>`.
                    "typeahead": a pty with kernel echo: input is echoed the moment it
                    arrives, so commands sent together are echoed together before the
                    first output, and each later output starts on the prompt's line
                    (`sw [standalone: master] # [`, `sw [standalone: master] # Eth1/1`);
                    a command without output leaves two prompts on one line.
  onyx_typeahead    how the CLI mishandles type-ahead (commands sent before the previous
                    one's answer; the driver pipelines them), with the "cli" echo:
                    "interleave" (typeahead_interleave): the echo of the next typed-ahead
                    line lands in the middle of the running command's output, inside a
                    line (a number cut in two); that command is not echoed again when run.
                    "drop" (typeahead_drop): the CLI holds onyx_typeahead_bytes (256) of
                    type-ahead while a command runs; whole lines beyond them are dropped
                    silently (never echoed, never answered).
                    "pager" (typeahead_pager): paging stays on (as onyx_paging_sticky) and
                    the pager takes a whole typed-ahead line as its keystrokes: that
                    command is swallowed (no answer).
  onyx_delay_ms     input reaches the CLI this many ms after it arrives (a far switch: each
                    exchange costs a round trip; commands sent together share one)
  onyx_json_fails   {CMD: "unrecognized" | "layout"}: `CMD... | json-print` fails while the
                    text form works: `% Unrecognized command "json-print".`, or a JSON
                    document in a layout the driver does not know (a made-up "newer
                    release" layout: {"interfaces": [{"name": .., "counters": ..}]} /
                    {"interface": .., "traffic-classes": [..]}; NOT from a real device).
  onyx_wjh_window_s  the WJH table aggregates the drops of the last N seconds of device
                    time (its Sample Window line shows them) instead of all since boot.
The scenario file is re-read whenever it changes, so a test adds and removes faults (and
reboots the switch by moving boot_epoch_s) while sessions stay open.

Layouts that onyx-facts.md does not have (per-TC and PFC counters, show clock, telemetry
flows, WJH on ONYX) are the ones drivers/onyx/parse_assumed.c assumes (UNVERIFIED).
"""
import json
import os
import select
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from scenario import Scenario  # noqa: E402

try:
    import termios
    import tty
except ImportError:  # pragma: no cover
    termios = None

NTC = 8


def release_tuple(r):
    out = []
    for x in r.split("."):
        try:
            out.append(int(x))
        except ValueError:
            break
    return tuple(out)


class Sim:
    def __init__(self, path, state_path=None):
        self.path = path
        self.state_path = state_path
        self.mtime = None
        self.default_boot = time.time()
        self.raw = {}
        self.sc = None
        self.load()
        self.mode = "user"
        self.submode = None  # ACL name in `(config ipv4 access-list X)`
        self.paging = True
        self.acls = {}  # name -> {seq: rule text}
        self.bindings = {}  # port "1/N" -> ACL name (`ipv4 port access-group`)
        if state_path and os.path.exists(state_path):
            with open(state_path) as f:
                d = json.load(f)
            self.acls = {n: {int(k): v for k, v in r.items()} for n, r in d.get("acls", {}).items()}
            self.bindings = dict(d.get("bindings", {}))
        self.inbuf = b""
        self.tty = False
        self.echo_off = False  # a password is being read: the terminal does not echo it
        self.echoed_ahead = 0  # inbuf's first bytes already echoed (onyx_typeahead interleave)

    # ---- scenario ----
    def load(self):
        if not self.path:
            if self.sc is None:
                self.sc = Scenario(boot_epoch_s=self.default_boot)
            return
        try:
            m = os.stat(self.path).st_mtime_ns
            open(self.path).close()
        except OSError as e:
            if self.sc is None:  # never answer with made-up numbers
                sys.stderr.write("onyx_sim: cannot read the scenario %s: %s\n" % (self.path, e))
                sys.exit(1)
            return
        if m == self.mtime:
            return
        self.mtime = m
        with open(self.path) as f:
            try:
                d = json.load(f)
            except ValueError:
                return  # being rewritten: keep the previous one
        self.raw = d
        over = {} if "boot_epoch_s" in d else {"boot_epoch_s": self.default_boot}
        self.sc = Scenario(self.path, **over)

    def opt(self, key, default):
        return self.raw.get(key, default)

    def fault(self, kind, cmd):
        f = self.raw.get("onyx_faults") or {}
        pref = f.get(kind)
        return bool(pref) and cmd.startswith(pref)

    # ---- I/O ----
    def write(self, s):
        data = s.replace("\r\n", "\n").replace("\n", "\r\n").encode()
        while data:
            n = os.write(1, data)
            data = data[n:]

    def read_more(self, timeout=None):
        r, _, _ = select.select([0], [], [], timeout)
        if not r:
            return True
        delay = float(self.opt("onyx_delay_ms", 0)) / 1000.0
        if delay > 0:
            time.sleep(delay)
        chunk = os.read(0, 4096)
        if not chunk:
            sys.exit(0)
        self.inbuf += chunk
        if self.typeahead() and not self.echo_off:  # kernel echo: as it arrives
            self.write(chunk.decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n"))
        return True

    def typeahead(self):
        return self.opt("onyx_echo", "cli") == "typeahead"

    def typeahead_fault(self):
        return self.opt("onyx_typeahead", None)

    def take_available(self):
        """Reads all input already sent, without echoing it."""
        while select.select([0], [], [], 0)[0]:
            chunk = os.read(0, 4096)
            if not chunk:
                sys.exit(0)
            self.inbuf += chunk

    def take_typeahead(self):
        """Reads (and so, with kernel echo, echoes) all input already sent, as a pty echoes
        type-ahead before the program reads it."""
        while select.select([0], [], [], 0)[0]:
            self.read_more(0)

    def read_line(self, echo=True):
        while True:
            for i, c in enumerate(self.inbuf):
                if c in (0x0d, 0x0a):
                    line = self.inbuf[:i]
                    rest = self.inbuf[i + 1:]
                    if c == 0x0d and rest[:1] == b"\n":
                        rest = rest[1:]
                    ahead = self.echoed_ahead
                    self.echoed_ahead = max(0, ahead - (len(self.inbuf) - len(rest)))
                    self.inbuf = rest
                    text = line.decode(errors="replace")
                    if self.typeahead_fault() == "drop":
                        # the command runs: type-ahead past the CLI's small buffer is lost
                        self.take_available()
                        cap = int(self.opt("onyx_typeahead_bytes", 256))
                        if len(self.inbuf) > cap:
                            cut = self.inbuf.rfind(b"\n", 0, cap)
                            self.inbuf = self.inbuf[:cut + 1] if cut >= 0 else b""
                    if ahead > 0:
                        pass  # echoed inside the previous output (interleave)
                    elif self.typeahead() and not self.echo_off:
                        pass  # echoed on arrival (read_more)
                    elif echo:
                        self.write(text + "\n")
                    else:
                        self.write("\n")
                    return text
            self.read_more()

    def read_key(self):
        while not self.inbuf:
            self.read_more()
        nl = self.inbuf.find(b"\n")
        if self.typeahead_fault() == "pager" and nl >= 0:
            # a typed-ahead command line taken as the pager's keystrokes: swallowed
            c = self.inbuf[:1]
            self.inbuf = self.inbuf[nl + 1:]
            return c
        c = self.inbuf[:1]
        self.inbuf = self.inbuf[1:]
        if c == b"\r" and self.inbuf[:1] == b"\n":
            self.inbuf = self.inbuf[1:]
        return c

    def hang(self):
        while True:  # until the client goes away
            self.read_more(1.0)
            self.inbuf = b""

    # ---- prompts ----
    def prompt(self):
        host = self.opt("hostname", "switch-sim")
        if self.mode == "user":
            suf = ">"
        elif self.mode == "enable":
            suf = "#"
        elif self.submode:
            suf = "(config ipv4 access-list %s) #" % self.submode
        else:
            suf = "(config) #"
        return "%s [standalone: master] %s " % (host, suf)

    def out(self, text, cmd):
        """Prints a command's output, through the pager when paging is on."""
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        if self.fault("drip", cmd):  # one byte a second
            for ch in "\n".join(lines) + "\n":
                self.write(ch)
                time.sleep(1.0)
            return
        if self.fault("pages", cmd):  # a pager that never reaches the end
            n = 0
            while True:
                self.write("".join("  %-20d page line\n" % (n + k) for k in range(24)))
                self.write("\x1b[7mlines %d-%d \x1b[27m" % (n + 1, n + 24))
                n += 24
                self.read_key()
                self.write("\r\x1b[K")
        if self.fault("longline", cmd):  # one line of a GiB, then the answer
            left = int(self.opt("onyx_longline_bytes", 1 << 30))
            chunk = b"x" * (1 << 20)
            while left > 0:
                data = chunk[:min(left, len(chunk))]
                left -= len(data)
                while data:
                    data = data[os.write(1, data):]
            self.write("\n")
        if self.fault("noise", cmd):  # binary noise without end
            while True:
                data = os.urandom(65536)
                while data:
                    data = data[os.write(1, data):]
        if self.fault("fake_prompt", cmd) and lines:
            fake = [self.prompt() + "show clock", "Time: 00:00:00", "Date: 1970/01/01",
                    self.prompt() + "show version", self.prompt()]
            lines[len(lines) // 2:len(lines) // 2] = fake
        if self.fault("reset", cmd):
            self.write("\n".join(lines[: len(lines) // 2]) + "\n")
            os.kill(os.getppid(), 9)  # the session's sshd: the connection drops, no goodbye
            os._exit(0)
        if self.fault("layout", cmd) and lines:
            # another release's layout (made up, NOT from a real device): one line per port
            lines = ["Port       Traffic-Class  Tx-Pkts      Tx-Bytes",
                     "---------  -------------  -----------  -----------"] + [
                     "1/%-7d  3              %-11d  %d" % (p, 1000 * p, 64000 * p)
                     for p in range(1, 5)]
        if self.fault("malformed", cmd) and lines:
            lines.insert(len(lines) // 2, "  12x34\x07\x00 ]]} packets %%% \x1b[7m")
        if self.fault("bloat", cmd):  # one large but finite answer (blank lines after it)
            lines += [""] * int(self.opt("onyx_bloat_lines", 10000000))
        if self.fault("flood", cmd):  # a runaway output: never ends
            line = "  0                    flood packets\n" * 1000
            while True:
                self.write(line)
        if self.fault("drop", cmd):
            self.write("\n".join(lines[: len(lines) // 2]) + "\n")
            os._exit(0)
        if self.typeahead_fault() == "interleave" and lines:
            lines = self.interleave(lines)
        page = int(self.opt("page_lines", 24))
        if not self.paging or len(lines) <= page:
            if lines:
                self.write("\n".join(lines) + "\n")
            return
        i = 0
        total = len(lines)
        while i < total:
            chunk = lines[i:i + page]
            self.write("\n".join(chunk) + "\n")
            j = i + len(chunk)
            if j >= total:
                self.write("\x1b[7mlines %d-%d/%d (END) \x1b[27m" % (i + 1, j, total))
            else:
                self.write("\x1b[7mlines %d-%d \x1b[27m" % (i + 1, j))
            k = self.read_key()
            self.write("\r\x1b[K")
            if k in (b"q", b"Q") or j >= total:
                return
            i = j

    def interleave(self, lines):
        """The echo of the next typed-ahead line, not echoed yet, put in the middle of this
        output: inside a number where one follows the middle (split in two)."""
        self.take_available()
        nl = self.inbuf.find(b"\n", self.echoed_ahead)
        if nl < 0:
            return lines
        echo = self.inbuf[self.echoed_ahead:nl].decode(errors="replace").rstrip("\r") + "\n"
        self.echoed_ahead = nl + 1
        text = "\n".join(lines) + "\n"
        at = len(text) // 2
        k = at
        while k + 1 < len(text) and not (text[k].isdigit() and text[k + 1].isdigit()):
            k += 1
        if k + 1 < len(text):
            at = k + 1
        text = text[:at] + echo + text[at:]
        return text[:-1].split("\n")

    # ---- main loop ----
    def run(self):
        if termios and os.isatty(0):
            try:
                tty.setraw(0)
                self.tty = True
            except termios.error:
                pass
        if self.opt("onyx_no_shell", False):  # logged in, but the shell never starts
            self.hang()
        self.write("Mellanox Switch\n\n")
        while True:
            self.write(self.prompt())
            if self.typeahead():
                self.take_typeahead()
            line = self.read_line()
            self.load()
            cmd = " ".join(line.split())
            if not cmd:
                continue
            if self.fault("hang", cmd):
                self.hang()
            if self.fault("slow", cmd):  # a slow but healthy CLI: answers late
                time.sleep(float(self.opt("onyx_slow_s", 2.0)))
            if self.fault("error", cmd):  # the command exists but fails this time
                self.write("% Internal error: the command failed (simulated)\n")
                continue
            lacking = [p for p in self.opt("onyx_lacks", []) if cmd.startswith(p)]
            if lacking:  # a command this model does not have
                words = cmd.split()
                self.unrecognized(" ".join(words[1:]) if words[0] == "show" else cmd)
                continue
            try:
                self.dispatch(cmd)
            except SystemExit:
                raise
            except Exception as e:  # a simulator bug must not look like a device answer
                self.write("%% Internal simulator error: %s\n" % e)

    def unrecognized(self, cmd):
        self.write('%% Unrecognized command "%s".\nType "?" for help.\n' % cmd.split()[0])

    def json_fails(self, cmd):
        """How `cmd | json-print` fails in this scenario (onyx_json_fails), or None."""
        for pref, how in (self.opt("onyx_json_fails", {}) or {}).items():
            if cmd.startswith(pref):
                return how
        return None

    def dispatch(self, cmd):
        json_print = False
        if cmd.endswith("| json-print"):
            json_print = True
            cmd = cmd[: -len("| json-print")].strip()
            how = self.json_fails(cmd)
            if how == "unrecognized":
                return self.unrecognized("json-print")
            if how == "layout":
                json_print = "layout"
        w = cmd.split()
        if w[0] in ("enable", "ena", "en"):
            if self.mode == "user":
                pw = self.opt("enable_password", None)
                if pw:
                    self.write("Password: ")
                    self.echo_off = True
                    try:
                        got = self.read_line(echo=False)
                    finally:
                        self.echo_off = False
                    if got != pw:
                        self.write("% Authentication failed\n")
                        return
                self.mode = "enable"
            return
        if w[0] == "disable":
            self.mode = "user"
            self.submode = None
            return
        if w[0] == "exit":
            if self.submode:
                self.submode = None
            elif self.mode == "config":
                self.mode = "enable"
            else:
                sys.exit(0)
            return
        if w[0] in ("configure", "config", "conf") and len(w) == 2 and "terminal".startswith(w[1]):
            if self.mode == "user":
                return self.unrecognized(cmd)
            self.mode = "config"
            return
        if cmd == "no cli session paging enable":
            # onyx_paging_sticky: a CLI that keeps paging anyway (the pager must be handled)
            self.paging = bool(self.opt("onyx_paging_sticky", False)) or \
                self.typeahead_fault() == "pager"
            return
        if cmd == "cli session paging enable":
            self.paging = True
            return
        if w[0] == "terminal" and len(w) == 3 and w[1] in ("length", "width"):
            if w[1] == "length" and int(w[2]) >= 999:
                self.paging = False
            return
        if w[0] == "show":
            if len(w) == 1:
                self.write("% Incomplete command\n")  # wording not in the facts
                return
            return self.show(w[1:], " ".join(w[1:]), json_print)
        if self.mode == "config":
            if self.fault("reject", cmd):
                self.write("% Command rejected (simulated failure)\n")
                return
            return self.config(w, cmd)
        return self.unrecognized(cmd)

    # ---- configuration (ACLs) ----
    def save(self):
        if not self.state_path:
            return
        tmp = self.state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"acls": self.acls, "bindings": self.bindings}, f)
        os.replace(tmp, self.state_path)

    def config(self, w, cmd):
        before = json.dumps([self.acls, self.bindings], sort_keys=True)
        try:
            return self.config_cmd(w, cmd)
        finally:
            if json.dumps([self.acls, self.bindings], sort_keys=True) != before:
                self.save()

    def config_cmd(self, w, cmd):
        if self.submode:
            if w[0] == "seq-number" and len(w) >= 3:
                self.acls[self.submode][int(w[1])] = " ".join(w[2:])
                return
            if w[:2] == ["no", "seq-number"] and len(w) == 3:
                if self.acls[self.submode].pop(int(w[2]), None) is None:
                    self.write("%% Rule %s does not exist\n" % w[2])
                return
        if w[:2] == ["ipv4", "access-list"] and len(w) >= 3:
            name = w[2]
            self.acls.setdefault(name, {})
            if len(w) == 3:
                self.submode = name
                return
            if w[3] == "seq-number" and len(w) >= 6:  # flat (prefix-mode) form
                self.acls[name][int(w[4])] = " ".join(w[5:])
                return
        if w[:3] == ["no", "ipv4", "access-list"] and len(w) == 4:
            if self.acls.pop(w[3], None) is None:
                self.write("%% Access-list %s does not exist\n" % w[3])
            return
        if w[:2] == ["interface", "ethernet"] and len(w) >= 3 and "access-group" in w:
            port = w[2]
            if w[3:6] == ["ipv4", "port", "access-group"] and len(w) == 7:
                if w[6] not in self.acls:
                    self.write("%% Access-list %s does not exist\n" % w[6])
                    return
                self.bindings[port] = w[6]
                return
            if w[3:7] == ["no", "ipv4", "port", "access-group"]:
                if self.bindings.pop(port, None) is None:
                    self.write("%% No access-group is bound to ethernet %s\n" % port)
                return
        return self.unrecognized(cmd)

    # ---- show ----
    def show(self, w, cmd, js):
        sc = self.sc
        now = time.time()
        t = sc.since_boot(now)
        rel = self.opt("onyx_release", "3.8.2306")
        new_json = release_tuple(rel) >= (3, 6, 6000)
        bad = cmd
        cmd = "show " + cmd
        if w == ["version"]:
            return self.out(self.version(rel, t, js), cmd)
        if w == ["clock"]:
            dt = sc.device_time(now)
            tm = time.gmtime(dt)
            return self.out("Time:       %s\nDate:       %s\nTime zone:  UTC (Etc/UTC)\n"
                            "UTC offset: same as UTC\n" % (time.strftime("%H:%M:%S", tm),
                                                           time.strftime("%Y/%m/%d", tm)), cmd)
        if w[:2] == ["interfaces", "ethernet"] or w[:2] == ["interface", "ethernet"]:
            rest = w[2:]
            if not rest:
                return self.out(self.interfaces(range(1, sc.ports + 1), t, js, new_json), cmd)
            if rest[0] == "counters" and len(rest) == 3 and rest[1] == "tc":
                return self.out(self.tc_counters(int(rest[2]), t), cmd)
            if rest[0] == "counters" and len(rest) == 4 and rest[1:3] == ["pfc", "prio"]:
                return self.out(self.pfc_counters(int(rest[3]), t), cmd)
            p = self.port_arg(rest[0])
            if p is None:
                self.write("%% Interface %s does not exist\n" % rest[0])
                return
            if len(rest) == 1:
                return self.out(self.interfaces([p], t, js, new_json), cmd)
            if rest[1:] == ["congestion-control"]:
                return self.out(self.congestion(p, t, js), cmd)
            return self.unrecognized(cmd)
        if w == ["telemetry", "flows"]:
            return self.out(self.flows(t), cmd)
        if w[:1] == ["what-just-happened"]:
            return self.out(self.wjh(t), cmd)
        if w[:2] == ["ipv4", "access-lists"] and len(w) == 3:
            if w[2] not in self.acls:
                self.write("%% Access-list %s does not exist\n" % w[2])
                return
            return self.out(self.acl_counters(w[2], t), cmd)
        if w == ["running-config"]:
            return self.out(self.running_config(), cmd)
        if w == ["lldp", "interfaces", "ethernet", "remote"]:
            return self.out(self.lldp_remote(), cmd)
        return self.unrecognized(bad)

    def port_arg(self, s):
        if s.startswith("Eth"):
            s = s[3:]
        parts = s.split("/")
        if len(parts) != 2 or parts[0] != "1" or not parts[1].isdigit():
            return None
        p = int(parts[1])
        return p if 1 <= p <= self.sc.ports else None

    def version(self, rel, t, js):
        product = "Onyx" if release_tuple(rel) >= (3, 7) else "MLNX-OS"
        d = int(t // 86400)
        h = int(t % 86400 // 3600)
        m = int(t % 3600 // 60)
        s = t % 60
        fields = [
            ("Product name", product), ("Product release", rel), ("Build ID", "#1-dev"),
            ("Build date", "2021-01-01 00:00:00"), ("Target arch", "x86_64"),
            ("Target hw", "x86_64"), ("Built by", "sim@fabricscope"),
            ("Version summary", "X86_64 %s 2021-01-01 00:00:00 x86_64" % rel), None,
            ("Product model", self.opt("model", "x86onie")), ("Host ID", "7CFE90F8E698"),
            ("System serial num", "MT0000X00000"),
            ("System UUID", "00000000-0000-0000-0000-000000000000"), None,
            ("Uptime", "%dd %dh %dm %.3fs" % (d, h, m, s)),
            ("CPU load averages", "0.10 / 0.10 / 0.10"), ("Number of CPUs", "4"),
            ("System memory", "2597 MB used / 5213 MB free / 7810 MB total"),
            ("Swap", "0 MB used / 0 MB free / 0 MB total"),
        ]
        if js:
            return json.dumps({k: v for f in fields if f for k, v in [f]}, indent=4) + "\n"
        return "".join("\n" if f is None else "%-19s%s\n" % (f[0] + ":", f[1]) for f in fields)

    def port_counters(self, p, t):
        sc = self.sc
        b = sc.counter_base
        c = {
            "packets": sc.port_ucast_pkts(p, t), "unicast packets": sc.port_ucast_pkts(p, t),
            "multicast packets": b, "broadcast packets": b, "bytes": sc.port_octets(p, t),
            "error packets": b, "discard packets": b,
        }
        return c, c

    def interfaces(self, ports, t, js, new_json):
        if js == "layout":  # made-up "newer release" layout (onyx_json_fails)
            items = []
            for p in ports:
                rx, tx = self.port_counters(p, t)
                items.append({"name": self.sc.port_name(p), "oper-state": "up",
                              "counters": {"rx": {k: v for k, v in rx.items()},
                                           "tx": {k: v for k, v in tx.items()}}})
            return json.dumps({"interfaces": items}, indent=4) + "\n"
        if js:
            items = []
            for p in ports:
                rx, tx = self.port_counters(p, t)
                tx = dict(tx)
                tx["hoq discard packets"] = str(self.sc.counter_base)
                d = {
                    "Admin state": "Enabled", "Operational state": "Up",
                    "Description": "N\\A", "Actual speed": "100 Gbps", "Fec": "auto",
                    "MTU": "9216 bytes(Maximum packet size 9238 bytes)",
                    "Telemetry sampling": "Disabled\t TCs: N\\A",
                    "Rx": {k: str(v) for k, v in rx.items()},
                    "Tx": {k: str(v) for k, v in tx.items()},
                }
                if new_json:
                    items.append({self.sc.port_name(p): [d]})
                else:
                    d["header"] = self.sc.port_name(p)
                    items.append(d)
            return json.dumps(items, indent=4) + "\n"
        out = []
        for p in ports:
            rx, tx = self.port_counters(p, t)
            out.append("%s\n  Admin state: Enabled\n  Operational state: Up\n"
                       "  Last change in operational status: Never\n  Description: N\\A\n"
                       "  Mac address: 7c:fe:90:f8:e6:%02x\n"
                       "  MTU: 9216 bytes(Maximum packet size 9238 bytes)\n  Fec: auto\n"
                       "  Flow-control: receive off send off\n  Actual speed: 100 Gbps\n"
                       "  Width reduction mode: Not supported\n  Switchport mode: access\n"
                       "  MAC learning mode: Enabled\n"
                       "  Last clearing of \"show interface\" counters : Never\n"
                       "  60 seconds ingress rate: 0 bits/sec, 0 bytes/sec, 0 packets/sec\n"
                       "  60 seconds egress rate: 0 bits/sec, 0 bytes/sec, 0 packets/sec\n\n"
                       % (self.sc.port_name(p), p % 256))
            for name, c in (("Rx", rx), ("Tx", tx)):
                out.append(name + "\n")
                for k, v in c.items():
                    out.append("  %-20d %s\n" % (v, k))
                out.append("\n")
            out.append("\n")
        return "".join(out)

    def tc_counters(self, tc, t):
        sc = self.sc
        out = []
        for p in range(1, sc.ports + 1):
            q = sc.queue_depth_bytes(p, tc, t)
            out.append("%s:\n  TC %d:\n    Tx\n" % (sc.port_name(p), tc))
            for v, name in ((sc.tc_tx_pkts(p, tc, t), "packets"),
                            (sc.tc_tx_octets(p, tc, t), "bytes"),
                            (sc.tc_no_buffer_dropped(p, tc, t), "unicast no buffer discard"),
                            (q, "queue depth (bytes)"), (q, "max queue depth (bytes)")):
                out.append("      %-20d %s\n" % (v, name))
            out.append("\n")
        return "".join(out)

    def pfc_counters(self, prio, t):
        sc = self.sc
        out = []
        for p in range(1, sc.ports + 1):
            out.append("%s:\n  PFC %d:\n" % (sc.port_name(p), prio))
            out.append("    Rx\n      %-20d pause packets\n      %-20d pause duration (usec)\n"
                       % (sc.pfc_rx_pause_frames(p, prio, t), sc.pfc_rx_pause_us(p, prio, t)))
            out.append("    Tx\n      %-20d pause packets\n      %-20d pause duration (usec)\n\n"
                       % (sc.counter_base, sc.counter_base))
        return "".join(out)

    def congestion(self, p, t, js):
        sc = self.sc
        items = [{"Interface ethernet": "1/%d" % p,
                  "ECN marked packets": str(sc.port_ecn_marked(p, t))}]
        for tc in range(NTC):
            if tc == sc.cong["tc"]:
                items.append({"header": "TC-%d" % tc, "Mode": "ECN", "Threshold mode": "absolute",
                              "Minimum threshold": "500 KB", "Maximum threshold": "1550 KB",
                              "RED dropped packets": str(sc.tc_wred_dropped(p, tc, t))})
            else:
                items.append({"header": "TC-%d" % tc, "Mode": "none"})
        if js == "layout":  # made-up "newer release" layout (onyx_json_fails)
            return json.dumps({"interface": items[0]["Interface ethernet"],
                               "traffic-classes": items[1:]}, indent=4) + "\n"
        if js:
            return json.dumps(items, indent=4) + "\n"
        # The text form is not in the facts: printed as Key: value blocks (unverified).
        out = []
        for it in items:
            out.append(it.get("header", "Interface ethernet %s" % it.get("Interface ethernet")) + "\n")
            for k, v in it.items():
                if k not in ("header", "Interface ethernet"):
                    out.append("  %s: %s\n" % (k, v))
        return "".join(out)

    def rules(self):
        return self.opt("flow_rules", [{"name": "nccl", "protocol": "udp", "dst_lo": 4791,
                                        "dst_hi": 4791, "tc": self.sc.cong["tc"]}])

    def flow_values(self, r, t):
        """Per-rule counters: the rule's TC traffic on every port; ECN marks and drops of
        the congested port when the rule's TC is the congested one."""
        sc = self.sc
        tc = int(r.get("tc", sc.cong["tc"]))
        pk = sum(sc.tc_tx_pkts(p, tc, t) - sc.counter_base for p in range(1, sc.ports + 1))
        by = sum(sc.tc_tx_octets(p, tc, t) - sc.counter_base for p in range(1, sc.ports + 1))
        cp = sc.cong["port"]
        ecn = sc.tc_ecn_marked(cp, tc, t) if tc == sc.cong["tc"] else sc.counter_base
        drop = sc.tc_wred_dropped(cp, tc, t) if tc == sc.cong["tc"] else sc.counter_base
        q = sc.queue_depth_bytes(cp, tc, t)
        return pk + sc.counter_base, by + sc.counter_base, ecn, drop, q

    def flows(self, t):
        out = ["%-16s %-20s %-20s %-20s %-20s %-12s\n" % ("Rule", "Packets", "Bytes",
                                                          "ECN-marked", "Dropped", "Queue-depth"),
               "%s %s %s %s %s %s\n" % ("-" * 16, "-" * 20, "-" * 20, "-" * 20, "-" * 20, "-" * 12)]
        for r in self.rules():
            pk, by, ecn, drop, q = self.flow_values(r, t)
            out.append("%-16s %-20d %-20d %-20d %-20d %-12d\n" % (r["name"], pk, by, ecn, drop, q))
        return "".join(out)

    def wjh(self, t):
        """Aggregated WJH buffer drops (the WJH library's table layout): WRED drops of the
        congested port's RoCE traffic (udp 4791), counted since boot, or over a rolling
        window of the last `onyx_wjh_window_s` seconds of device time when the scenario
        sets it (then the count shrinks as drops leave the window, as a real WJH buffer's
        does)."""
        sc = self.sc
        cp, tc = sc.cong["port"], sc.cong["tc"]
        count = sc.tc_wred_dropped(cp, tc, t) - sc.counter_base
        win = self.opt("onyx_wjh_window_s", None)
        window = "boot - now"
        if win:
            t0 = max(0.0, t - float(win))
            count -= sc.tc_wred_dropped(cp, tc, t0) - sc.counter_base

            def stamp(x):
                # the device stamps its table with its own clock
                e = sc.boot_epoch_s + x + sc.clock_offset_ms / 1000.0
                return time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(e)) + ".%03d" % (
                    int(round(e * 1000)) % 1000)
            window = "%s - %s" % (stamp(t0), stamp(t))
        hdr = ("#  sPort    VLAN  sMAC               dMAC               EthType  "
               "Src IP:Port          Dst IP:Port          IP Proto  Count     Severity  "
               "Drop reason - Recommended action\n")
        rule = ("-- -------- ----- ------------------ ------------------ -------- "
                "-------------------- -------------------- --------- --------- --------- "
                "-----------------------------------------------\n")
        out = ["Sample Window : %s\n\n" % window, hdr, rule]
        if count > 0:
            out.append("1  %-8s N/A   7c:fe:90:00:00:01  7c:fe:90:00:00:02  IPv4     "
                       "%-20s %-20s %-9s %-9d %-9s %s\n"
                       % (sc.port_name(cp), "10.0.0.1:49152", "10.0.1.1:4791", "udp", count,
                          "Warning", "WRED - Congestion on the egress queue"))
        return "".join(out)

    def acl_atoms(self, ports, t):
        """The traffic an ACL bound to these ports sees, as atoms a rule either matches
        whole or not at all: (proto, dst port, CE, packets, bytes). The model's
        incident class is RoCEv2 (udp 4791) on every port, its CE-marked part the
        congested port's ECN marks; the other classes are NCCL socket traffic (tcp 50000).
        The ports' egress counters stand for their ingress (a simulator's shortcut)."""
        sc = self.sc
        ctc = sc.cong["tc"]
        roce_pk = roce_by = other_pk = other_by = 0
        for p in ports:
            for tc in range(8):
                pk = sc.tc_tx_pkts(p, tc, t) - sc.counter_base
                by = sc.tc_tx_octets(p, tc, t) - sc.counter_base
                if tc == ctc:
                    roce_pk, roce_by = roce_pk + pk, roce_by + by
                else:
                    other_pk, other_by = other_pk + pk, other_by + by
        ce = 0
        if sc.cong["port"] in ports:
            ce = min(roce_pk, sc.tc_ecn_marked(sc.cong["port"], ctc, t) - sc.counter_base)
        ce_by = roce_by * ce // roce_pk if roce_pk else 0
        return [("udp", 4791, True, ce, ce_by),
                ("udp", 4791, False, roce_pk - ce, roce_by - ce_by),
                ("tcp", 50000, False, other_pk, other_by)]

    @staticmethod
    def entry_matches(text, atom):
        """Whether an ACL entry (the driver's assumed syntax) matches an atom."""
        w = text.split()
        if len(w) < 4 or w[0] != "permit":
            return False
        proto, dport, ce = atom[0], atom[1], atom[2]
        if w[1] not in ("ip", proto):
            return False
        if "dst-port-range" in w:
            i = w.index("dst-port-range")
            if not int(w[i + 1]) <= dport <= int(w[i + 2]):
                return False
        if "src-port-range" in w:
            return False  # the atoms' source ports are ephemeral: no range holds them all
        if "ecn" in w and not (ce and w[w.index("ecn") + 1] == "3"):
            return False
        return True

    def acl_counters(self, name, t):
        """`show ipv4 access-lists NAME` in the layout parse_assumed.c assumes (A5): each
        entry with the packets and bytes it matched first, over the ports it is bound to."""
        ports = sorted(int(p.split("/")[-1]) for p, a in self.bindings.items() if a == name)
        atoms = self.acl_atoms(ports, t)
        taken = [False] * len(atoms)
        out = ["ipv4 access-list %s\n" % name]
        for seq in sorted(self.acls[name]):
            text = self.acls[name][seq]
            pk = by = 0
            for i, a in enumerate(atoms):
                if not taken[i] and self.entry_matches(text, a):
                    taken[i] = True
                    pk += a[3]
                    by += a[4]
            out.append("  seq-number %d %s  (match: %d packets, %d bytes)\n" % (seq, text, pk, by))
        return "".join(out)

    def lldp_remote(self):
        """`show lldp interfaces ethernet remote` in the layout parse_assumed.c assumes
        (A7; NOT from a real device): a block per port that has neighbours (the scenario's
        lldp_neighbors, re-read when the file changes), `Remote Index` per neighbour."""
        by_port = {}
        for e in self.sc.lldp_neighbors:
            by_port.setdefault(e["port"], []).append(e)
        out = []
        for port in sorted(by_port, key=lambda p: [int(x) for x in p[3:].split("/")]):
            out.append(port)
            for i, e in enumerate(by_port[port], 1):
                sub = e.get("port_id_type", "Interface Name (5)")
                out += ["Remote Index               : %d" % i,
                        "Remote chassis id          : %s ; chassis id subtype : Mac Address (4)"
                        % e.get("chassis_id", "N/A"),
                        "Remote port-id             : %s ; port id subtype : %s"
                        % (e.get("port_id", "N/A"), sub),
                        "Remote port description    : %s" % e.get("port_descr", "N/A"),
                        "Remote system name         : %s" % e.get("sys_name", "N/A"),
                        "Remote system description  : simulated",
                        "Remote system capabilities : B, R",
                        "Remote system enabled capabilities : B, R"]
            out.append("")
        return "\n".join(out) + "\n"

    def running_config(self):
        host = self.opt("hostname", "switch-sim")
        out = ["##\n## Running database \"initial\"\n## Generated at %s\n## Hostname: %s\n##\n\n"
               % (time.strftime("%Y/%m/%d %H:%M:%S +0000", time.gmtime()), host),
               "##\n## Running-config temporary prefix mode setting\n##\n"
               "no cli default prefix-modes enable\n\n"]
        if self.acls:
            out.append("##\n## ACL configuration\n##\n")
            for name in sorted(self.acls):
                out.append("   ipv4 access-list %s\n" % name)
                for seq in sorted(self.acls[name]):
                    out.append("   ipv4 access-list %s seq-number %d %s\n"
                               % (name, seq, self.acls[name][seq]))
            out.append("\n")
        if self.bindings:
            out.append("##\n## ACL bindings\n##\n")
            for port in sorted(self.bindings, key=lambda p: [int(x) for x in p.split("/")]):
                out.append("   interface ethernet %s ipv4 port access-group %s\n"
                           % (port, self.bindings[port]))
            out.append("\n")
        out.append("##\n## Persistent prefix mode setting\n##\ncli default prefix-modes enable\n")
        return "".join(out)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("ONYX_SIM_SCENARIO")
    sim = Sim(path, sys.argv[2] if len(sys.argv) > 2 else None)
    try:
        sim.run()
    except (BrokenPipeError, OSError):
        pass


if __name__ == "__main__":
    main()
