/*
 * The fabricscope web view. Everything it shows comes from this collector's own API
 * (/api/v1/targets, /api/v1/raw, /api/v1/incidents); it loads nothing else.
 *
 * Bearer token: when the collector wants one, the data requests answer 401 and the page
 * asks for it (or takes it from the URL fragment, /#token=..., which browsers never send
 * to the server); it is kept in sessionStorage for this tab and sent as
 * "Authorization: Bearer" with every request.
 *
 * Time: the window ends at the collector's "now" (from the Date header of its answers,
 * when the browser's clock is off by more than 2 s), so a browser with a wrong clock
 * still sees the latest samples.
 *
 * For tests: body[data-ready] becomes "1" once every panel has been drawn once.
 */
"use strict";

(function () {
  const TOKEN_KEY = "fabricscope.token";
  const REFRESH_MS = 5000;
  /* /api/v1/incidents scans the last hour of every series: not on every refresh. */
  const INCIDENTS_MS = 30000;
  const MAX_COLUMNS = 720; /* wider windows merge adjacent polls into one column */
  const MAX_CELLS = 200000; /* so do big fabrics: the browser stays responsive */

  /*
   * What the heatmap can show. Series of `names` are read from /api/v1/raw; `rate`
   * turns counters into per-second rates between consecutive ring samples. A port's
   * value is the sum (or max) over its series (queues, directions). `exclusive`: use only
   * the first name a port has (devices count ECN per port or per queue, not both).
   */
  const METRICS = {
    ecn: {
      label: "ECN marks/s",
      names: ["fabric_port_ecn_marked_packets_total", "fabric_queue_ecn_marked_packets_total"],
      rate: true, combine: "sum", exclusive: true, unit: "/s",
    },
    depth: {
      label: "queue depth",
      names: ["fabric_queue_depth_bytes", "fabric_queue_depth_cells"],
      rate: false, combine: "max", exclusive: true, unit: "B",
    },
    drops: {
      label: "queue drops/s",
      names: ["fabric_queue_wred_dropped_packets_total",
              "fabric_queue_no_buffer_dropped_packets_total"],
      rate: true, combine: "sum", exclusive: false, unit: "/s",
    },
    discards: {
      label: "port discards/s",
      names: ["fabric_port_discards_total"],
      rate: true, combine: "sum", exclusive: false, unit: "/s",
    },
    /* Per flow rule (sFlow estimates, ACL counters): rules may overlap (a CE-only rule
     * inside a wider one), so a port shows its hottest rule, not a sum. */
    rule_ecn: {
      label: "flow-rule ECN marks/s",
      names: ["fabric_flow_rule_ecn_marked_packets_total"],
      rate: true, combine: "max", exclusive: false, unit: "/s",
    },
    rule_depth: {
      label: "flow-rule queue depth",
      names: ["fabric_flow_rule_queue_depth_max_bytes"],
      rate: false, combine: "max", exclusive: false, unit: "B",
    },
    rule_drops: {
      label: "flow-rule drops/s",
      names: ["fabric_flow_rule_dropped_packets_total"],
      rate: true, combine: "max", exclusive: false, unit: "/s",
    },
  };
  const PALETTE = ["#58a6ff", "#3fb950", "#d29922", "#f85149", "#bc8cff", "#39c5cf",
                   "#ff7b72", "#e3b341", "#a5d6ff", "#7ee787"];

  const $ = (id) => document.getElementById(id);
  const state = {
    skewMs: 0,          /* collector clock minus browser clock */
    port: null,         /* {target, interface} shown in the drill-down */
    busy: false,
    timer: null,
    heat: null,         /* the last heatmap model, for tooltips and clicks */
    incidentsAt: 0,     /* Date.now() of the last incidents fetch */
  };

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /* ---- token ---- */

  /*
   * The URL fragment carries the view (#metric=drops&window=900&target=..&interface=..)
   * so it can be bookmarked, and once the token: that is taken out of the address bar
   * and the history at once.
   */
  function readFragment() {
    const p = new URLSearchParams(location.hash.slice(1));
    const token = p.get("token");
    if (token !== null) sessionStorage.setItem(TOKEN_KEY, token);
    const metric = p.get("metric"), win = p.get("window");
    if (metric && METRICS[metric]) $("metric").value = metric;
    if (win && [...$("window").options].some((o) => o.value === win)) $("window").value = win;
    if (p.get("target") && p.get("interface"))
      state.port = { target: p.get("target"), interface: p.get("interface") };
    writeFragment();
  }

  function writeFragment() {
    const p = new URLSearchParams();
    p.set("metric", $("metric").value);
    p.set("window", $("window").value);
    if (state.port) {
      p.set("target", state.port.target);
      p.set("interface", state.port.interface);
    }
    history.replaceState(null, "", location.pathname + location.search + "#" + p.toString());
  }

  function showTokenForm() {
    $("token-form").hidden = false;
  }

  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $("token-input").value.trim());
    $("token-input").value = "";
    $("token-form").hidden = true;
    state.incidentsAt = 0;
    refresh();
  });

  /* ---- API ---- */

  async function api(path) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = "Bearer " + token;
    const r = await fetch(path, { headers, cache: "no-store", credentials: "omit" });
    const date = Date.parse(r.headers.get("Date") || "");
    /* The header has whole seconds: only a larger difference is a wrong clock. */
    if (!Number.isNaN(date)) {
      const skew = date + 500 - Date.now();
      state.skewMs = Math.abs(skew) > 2000 ? skew : 0;
    }
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    if (r.status === 401) showTokenForm();
    if (!r.ok) throw new ApiError(r.status, (body && body.error) || r.statusText);
    return body;
  }

  function nowS() {
    return (Date.now() + state.skewMs) / 1000;
  }

  function quote(v) {
    return '"' + String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
  }

  /* One selector for all `names`, optionally narrowed to one port. */
  function selector(names, port) {
    let s = "{__name__=~" + quote(names.join("|"));
    if (port) s += ",target=" + quote(port.target) + ",interface=" + quote(port.interface);
    return s + "}";
  }

  async function raw(names, port, start, end) {
    const q = new URLSearchParams();
    q.append("match[]", selector(names, port));
    q.append("start", start.toFixed(3));
    q.append("end", end.toFixed(3));
    const body = await api("/api/v1/raw?" + q.toString());
    return body.data.result;
  }

  /* ---- numbers ---- */

  /* Counter differences stay exact past 2^53: integers go through BigInt. */
  function diff(a, b) {
    if (/^\d+$/.test(a) && /^\d+$/.test(b)) return Number(BigInt(b) - BigInt(a));
    return Number(b) - Number(a);
  }

  /*
   * [t, value, from, to] points of one series: gauges as sampled (holding until the
   * next sample), counters as rates over the interval since the previous sample.
   * [from, to] is the time the value stands for; the heatmap colours that span.
   */
  function points(series, rate) {
    const v = series.values;
    const out = [];
    if (!rate) {
      for (let i = 0; i < v.length; i++) {
        const n = Number(v[i][1]);
        const next = i + 1 < v.length ? v[i + 1][0] : v[i][0];
        if (Number.isFinite(n)) out.push([v[i][0], n, v[i][0], next]);
      }
      return out;
    }
    for (let i = 1; i < v.length; i++) {
      const dt = v[i][0] - v[i - 1][0];
      const dv = diff(v[i - 1][1], v[i][1]);
      if (dt > 0 && dv >= 0) out.push([v[i][0], dv / dt, v[i - 1][0], v[i][0]]);
    }
    return out;
  }

  function fmt(x) {
    if (!Number.isFinite(x)) return "–";
    const a = Math.abs(x);
    if (a >= 1e9) return (x / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (x / 1e6).toFixed(2) + "M";
    if (a >= 1e3) return (x / 1e3).toFixed(1) + "k";
    if (a >= 10 || a === 0) return x.toFixed(0);
    return x.toPrecision(2);
  }

  function clock(t) {
    return new Date(t * 1000).toLocaleTimeString([], { hour12: false });
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) =>
      ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }

  /* A colour key (an SVG square: the page's CSP allows no inline style attributes). */
  function swatch(c) {
    return "<svg class=\"swatch\" width=\"10\" height=\"10\"><rect width=\"10\" height=\"10\" fill=\"" +
      c + "\"/></svg>";
  }

  /* Natural order: Eth1/2 before Eth1/10. */
  const collator = new Intl.Collator(undefined, { numeric: true });

  /* ---- targets ---- */

  async function drawTargets() {
    const body = await api("/api/v1/targets");
    const rows = body.data.slice().sort((a, b) =>
      collator.compare(a.target, b.target) || collator.compare(a.source, b.source));
    const up = rows.filter((t) => t.state === "up").length;
    $("targets-summary").textContent = up + " of " + rows.length + " up";
    $("targets").tBodies[0].innerHTML = rows.map((t) =>
      "<tr data-target=\"" + esc(t.target) + "\">" +
      "<td>" + esc(t.target) + "</td><td>" + esc(t.source) + "</td>" +
      "<td class=\"health " + esc(t.state) + "\">" + esc(t.state) + "</td>" +
      "<td>" + (t.last_poll_unix ? clock(t.last_poll_unix) : "never") + "</td>" +
      "<td>" + esc(t.series) + "</td><td>" + esc(t.consecutive_failures ?? "") + "</td>" +
      "<td class=\"err\" title=\"" + esc(t.last_error || "") + "\">" +
      esc(t.last_error || "") + "</td></tr>").join("");
  }

  /* ---- heatmap ---- */

  function portKey(m) {
    return m.target + "\u0000" + m.interface;
  }

  /* Median spacing of consecutive samples: the ring's resolution. */
  function resolution(result) {
    const d = [];
    for (const s of result.slice(0, 32))
      for (let i = 1; i < s.values.length; i++) d.push(s.values[i][0] - s.values[i - 1][0]);
    if (!d.length) return 1;
    d.sort((a, b) => a - b);
    return Math.max(0.05, d[d.length >> 1]);
  }

  /* ports x columns of the chosen metric, from the ring's samples. */
  function heatModel(result, metric, start, end) {
    const step0 = resolution(result);
    const nports = new Set(result.map((s) => portKey(s.metric))).size || 1;
    const ncol = Math.max(1, Math.min(MAX_COLUMNS, Math.floor(MAX_CELLS / nports),
                                      Math.ceil((end - start) / step0)));
    const step = (end - start) / ncol;
    const ports = new Map();
    if (metric.exclusive) {
      /* Keep, per port, only the series of its first name in metric.names. */
      const best = new Map();
      for (const s of result) {
        const k = portKey(s.metric), r = metric.names.indexOf(s.metric.__name__);
        if (!best.has(k) || r < best.get(k)) best.set(k, r);
      }
      result = result.filter((s) =>
        metric.names.indexOf(s.metric.__name__) === best.get(portKey(s.metric)));
    }
    let max = 0;
    for (const s of result) {
      if (s.metric.interface === undefined) continue;
      const k = portKey(s.metric);
      if (!ports.has(k))
        ports.set(k, { target: s.metric.target, interface: s.metric.interface,
                       cells: new Array(ncol).fill(null) });
      /* Within one series a column keeps its largest value; across series combine. */
      const mine = new Map();
      for (const [t, v, from, to] of points(s, metric.rate)) {
        /* A value covers the columns of its span (polls do not fall on column edges),
         * unless the span is a gap in the data (a target away): then only its own. */
        let c0 = Math.floor((from - start) / step), c1 = Math.floor((to - start) / step) - 1;
        if (to - from > 3 * step0 || c1 < c0) c0 = c1 = Math.floor((t - start) / step);
        for (let c = Math.max(0, c0); c <= Math.min(ncol - 1, c1); c++)
          mine.set(c, Math.max(mine.get(c) ?? -Infinity, v));
      }
      const cells = ports.get(k).cells;
      for (const [c, v] of mine) {
        const old = cells[c];
        cells[c] = old === null ? v : metric.combine === "sum" ? old + v : Math.max(old, v);
      }
    }
    for (const p of ports.values())
      for (const v of p.cells) if (v !== null && v > max) max = v;
    const rows = [...ports.values()].sort((a, b) =>
      collator.compare(a.target, b.target) || collator.compare(a.interface, b.interface));
    /* Depth in buffer cells where the device has no byte count. */
    const unit = result.length && /_cells$/.test(result[0].metric.__name__) ? "cells" : metric.unit;
    return { rows, ncol, step, start, end, max, metric, unit, resolution: step0 };
  }

  /* Dark blue (nothing) through teal and yellow to red (the window's maximum). */
  function color(v, max) {
    if (!(max > 0) || v <= 0) return "#1f3347";
    const f = Math.sqrt(Math.min(1, v / max));
    const hue = 200 - 200 * f;
    return "hsl(" + hue.toFixed(0) + ",85%," + (30 + 25 * f).toFixed(0) + "%)";
  }

  const LABEL_W = 150, ROW_H = 11;

  function drawHeatmap(model) {
    state.heat = model;
    const box = $("heatmap");
    if (!model.rows.length) {
      box.innerHTML = "<p class=\"empty\" data-rows=\"0\">No " + esc(model.metric.label) +
        " series in this window.</p>";
      $("heatmap-legend").textContent = "";
      return;
    }
    const avail = Math.max(300, box.clientWidth - LABEL_W - 10);
    const cw = Math.max(1, Math.min(12, avail / model.ncol));
    const w = LABEL_W + cw * model.ncol;
    const h = ROW_H * model.rows.length + 16;
    const parts = [];
    parts.push("<svg width=\"" + w.toFixed(0) +
      "\" height=\"" + h + "\" data-rows=\"" + model.rows.length + "\" data-columns=\"" +
      model.ncol + "\">");
    let lastTarget = null;
    model.rows.forEach((p, i) => {
      const y = i * ROW_H;
      const name = p.target === lastTarget ? p.interface : p.target + " " + p.interface;
      lastTarget = p.target;
      parts.push("<g class=\"hm-row\" data-row=\"" + i + "\" data-target=\"" + esc(p.target) +
        "\" data-interface=\"" + esc(p.interface) + "\">");
      parts.push("<text class=\"label\" x=\"" + (LABEL_W - 4) + "\" y=\"" + (y + ROW_H - 1) +
        "\" text-anchor=\"end\">" + esc(name) + "</text>");
      p.cells.forEach((v, c) => {
        if (v === null) return;
        parts.push("<rect class=\"hm-cell\" x=\"" + (LABEL_W + c * cw).toFixed(1) + "\" y=\"" +
          y + "\" width=\"" + (cw + 0.3).toFixed(1) + "\" height=\"" + (ROW_H - 1) +
          "\" fill=\"" + color(v, model.max) + "\"/>");
      });
      parts.push("</g>");
      if (state.port && state.port.target === p.target && state.port.interface === p.interface)
        parts.push("<rect class=\"selected-row\" x=\"" + (LABEL_W - 0.5) + "\" y=\"" +
          (y - 0.5) + "\" width=\"" + (cw * model.ncol + 1).toFixed(1) + "\" height=\"" +
          ROW_H + "\"/>");
    });
    const ty = ROW_H * model.rows.length + 12;
    parts.push("<text class=\"label\" x=\"" + LABEL_W + "\" y=\"" + ty + "\">" +
      clock(model.start) + "</text>");
    parts.push("<text class=\"label\" x=\"" + w.toFixed(0) + "\" y=\"" + ty +
      "\" text-anchor=\"end\">" + clock(model.end) + "</text>");
    parts.push("</svg>");
    box.innerHTML = parts.join("");
    $("heatmap-legend").innerHTML = esc(model.rows.length) + " ports × " + model.ncol +
      " columns of " + model.step.toFixed(2) + " s (ring samples every " +
      model.resolution.toFixed(2) + " s)" +
      swatch(color(0, 1)) + "0" +
      swatch(color(1, 1)) +
      fmt(model.max) + " " + esc(model.unit);
  }

  /* The heatmap cell under a mouse event, or null. */
  function cellAt(ev) {
    const m = state.heat;
    const svg = $("heatmap").querySelector("svg");
    if (!m || !svg) return null;
    const r = svg.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    const row = Math.floor(y / ROW_H);
    if (row < 0 || row >= m.rows.length) return null;
    const cw = (r.width - LABEL_W) / m.ncol;
    const col = x < LABEL_W ? -1 : Math.floor((x - LABEL_W) / cw);
    return { port: m.rows[row], col };
  }

  $("heatmap").addEventListener("mousemove", (ev) => {
    const tip = $("heatmap-tip");
    const c = cellAt(ev);
    if (!c) {
      tip.hidden = true;
      return;
    }
    const m = state.heat;
    let text = c.port.target + " " + c.port.interface;
    if (c.col >= 0 && c.col < m.ncol) {
      const v = c.port.cells[c.col];
      text += "\n" + clock(m.start + c.col * m.step) + "  " +
        (v === null ? "no sample" : fmt(v) + " " + m.unit);
    }
    tip.textContent = text;
    tip.style.left = ev.clientX + 12 + "px";
    tip.style.top = ev.clientY + 12 + "px";
    tip.hidden = false;
  });
  $("heatmap").addEventListener("mouseleave", () => {
    $("heatmap-tip").hidden = true;
  });
  $("heatmap").addEventListener("click", (ev) => {
    const c = cellAt(ev);
    if (!c) return;
    state.port = { target: c.port.target, interface: c.port.interface };
    writeFragment();
    drawHeatmap(state.heat);
    drillDown().catch(panelError("chart"));
  });

  /* ---- drill-down chart ---- */

  /* The port with the largest value in the window: what an engineer looks at first. */
  function hottest(model) {
    let best = null, bv = -Infinity;
    for (const p of model.rows)
      for (const v of p.cells)
        if (v !== null && v > bv) {
          bv = v;
          best = p;
        }
    return best ? { target: best.target, interface: best.interface } : null;
  }

  function seriesName(m, withMetric) {
    const parts = [];
    if (m.tc !== undefined) parts.push("tc " + m.tc);
    if (m.direction !== undefined) parts.push(m.direction);
    if (m.priority !== undefined) parts.push("prio " + m.priority);
    if (m.rule !== undefined) parts.push("rule " + m.rule);
    if (m.reason !== undefined) parts.push(m.reason);
    if (m.rule !== undefined && m.source !== undefined) parts.push("(" + m.source + ")");
    const short = m.__name__.replace(/^fabric_/, "").replace(/_total$/, "");
    if (!withMetric && parts.length) return parts.join(" ");
    return (parts.length ? parts.join(" ") + " · " : "") + short;
  }

  async function drillDown() {
    const metric = METRICS[$("metric").value];
    const win = Number($("window").value);
    const end = nowS(), start = end - win;
    if (!state.port) {
      $("drill-port").textContent = "";
      $("chart").innerHTML = "<p class=\"empty\">No port to show.</p>";
      $("chart-legend").textContent = "";
      return;
    }
    $("drill-port").textContent = state.port.target + " " + state.port.interface + " · " +
      metric.label;
    const result = await raw(metric.names, state.port, start, end);
    /* The metric's name only where the port has several (WRED and no-buffer drops). */
    const several = new Set(result.map((s) => s.metric.__name__)).size > 1;
    const lines = result.map((s) => ({ name: seriesName(s.metric, several),
                                       pts: points(s, metric.rate) }))
      .filter((l) => l.pts.length)
      .sort((a, b) => collator.compare(a.name, b.name));
    const unit = result.some((s) => /_cells$/.test(s.metric.__name__)) ? "cells" : metric.unit;
    drawChart(lines, start, end, unit);
  }

  function drawChart(lines, start, end, unit) {
    const box = $("chart");
    const W = Math.max(320, box.clientWidth - 4), H = 220;
    const L = 56, R = 8, T = 8, B = 22;
    let max = 0;
    for (const l of lines) for (const p of l.pts) if (p[1] > max) max = p[1];
    if (max <= 0) max = 1;
    const x = (t) => L + ((t - start) / (end - start)) * (W - L - R);
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const parts = ["<svg width=\"" + W + "\" height=\"" + H +
      "\" data-series=\"" + lines.length + "\">"];
    for (let i = 0; i <= 4; i++) {
      const v = (max * i) / 4, yy = y(v).toFixed(1);
      parts.push("<line class=\"axis\" x1=\"" + L + "\" x2=\"" + (W - R) + "\" y1=\"" + yy +
        "\" y2=\"" + yy + "\"/><text class=\"label\" x=\"" + (L - 4) + "\" y=\"" +
        (Number(yy) + 3) + "\" text-anchor=\"end\">" + fmt(v) + "</text>");
    }
    parts.push("<text class=\"label\" x=\"" + L + "\" y=\"" + (H - 6) + "\">" + clock(start) +
      "</text><text class=\"label\" x=\"" + (W - R) + "\" y=\"" + (H - 6) +
      "\" text-anchor=\"end\">" + clock(end) + "</text>");
    lines.forEach((l, i) => {
      const pts = l.pts.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
      parts.push("<polyline class=\"series\" data-points=\"" + l.pts.length + "\" stroke=\"" +
        PALETTE[i % PALETTE.length] + "\" points=\"" + pts + "\"><title>" + esc(l.name) +
        "</title></polyline>");
    });
    parts.push("</svg>");
    box.innerHTML = parts.join("");
    $("chart-legend").innerHTML = lines.length
      ? lines.map((l, i) => swatch(PALETTE[i % PALETTE.length]) + esc(l.name)).join("") +
        " <span>(" + esc(unit) + ")</span>"
      : "no samples of this port in the window";
  }

  /* ---- incidents ---- */

  function when(t) {
    if (typeof t === "number") return clock(t);
    const d = Date.parse(t);
    return Number.isNaN(d) ? String(t) : clock(d / 1000);
  }

  async function drawIncidents() {
    if (Date.now() - state.incidentsAt < INCIDENTS_MS) return;
    state.incidentsAt = Date.now();
    const box = $("incidents");
    let body;
    try {
      body = await api("/api/v1/incidents");
    } catch (e) {
      if (e.status === 404) {
        box.dataset.state = "not-available";
        box.textContent = "Incidents: not available (this collector has no /api/v1/incidents).";
        return;
      }
      state.incidentsAt = 0; /* try again on the next refresh */
      throw e;
    }
    const d = body.data || {};
    const rec = d.recurring || [];
    const eps = (d.episodes || []).slice(-10).reverse();
    const parts = [];
    parts.push("<p class=\"hint\">" + esc(d.episodes_total ?? eps.length) + " episodes, " +
      esc(rec.length) + " recurring, " + esc(d.series_scanned ?? "?") +
      " series scanned since " + esc(when(d.start)) + "</p>");
    for (const g of rec) {
      const inS = Number(g.next_expected_in_s);
      parts.push("<div class=\"incident recurring\">" + esc(g.text || "") +
        "<br><span class=\"next\">next expected " + esc(when(g.next_expected)) +
        (Number.isFinite(inS) ? " (in " + fmt(Math.max(0, inS)) + " s)" : "") +
        "</span></div>");
    }
    for (const e of eps) {
      const who = (e.series || []).map((s) =>
        [s.target, s.interface, s.tc ? "tc " + s.tc : "", s.rule ? "rule " + s.rule : ""]
          .filter(Boolean).join(" ")).filter((w, i, all) => all.indexOf(w) === i).join(", ");
      parts.push("<div class=\"incident episode\">" + esc(when(e.start)) + "–" +
        esc(when(e.end)) + " " + esc((e.kinds || []).join(", ")) + " · " + esc(who) +
        (e.series_total > (e.series || []).length ? " …" : "") + "</div>");
    }
    box.dataset.state = "available";
    box.innerHTML = parts.join("");
  }

  /* ---- refresh ---- */

  function panelError(where) {
    return (e) => {
      const box = where === "targets" ? $("targets").tBodies[0] : $(where);
      if (where !== "incidents") box.innerHTML = "";
      if (where === "incidents") {
        box.dataset.state = "error";
        box.textContent = "Incidents: " + e.message;
      }
      const s = $("status");
      s.textContent = where + ": " + e.message + (e.status === 401 ? " (bearer token)" : "");
      s.className = "error";
    };
  }

  async function drawFabric() {
    const metric = METRICS[$("metric").value];
    const win = Number($("window").value);
    const end = nowS(), start = end - win;
    const result = await raw(metric.names, null, start, end);
    const model = heatModel(result, metric, start, end);
    if (!state.port || !model.rows.some((p) =>
      p.target === state.port.target && p.interface === state.port.interface))
      state.port = hottest(model);
    writeFragment();
    drawHeatmap(model);
    await drillDown().catch(panelError("chart"));
  }

  async function refresh() {
    if (state.busy) return;
    state.busy = true;
    const s = $("status");
    s.className = "";
    s.textContent = "updating…";
    try {
      /* Targets first: its Date header sets the clock skew the windows use. */
      await drawTargets().catch(panelError("targets"));
      await Promise.all([
        drawFabric().catch(panelError("heatmap")),
        drawIncidents().catch(panelError("incidents")),
      ]);
      if (s.className !== "error") s.textContent = "updated " + clock(nowS());
    } finally {
      state.busy = false;
      document.body.dataset.ready = "1";
    }
  }

  function schedule() {
    clearInterval(state.timer);
    state.timer = null;
    if ($("auto-refresh").checked)
      state.timer = setInterval(() => {
        if (!document.hidden) refresh();
      }, REFRESH_MS);
  }

  $("auto-refresh").addEventListener("change", schedule);
  for (const id of ["metric", "window"])
    $(id).addEventListener("change", () => {
      writeFragment();
      refresh();
    });

  readFragment();
  refresh();
  schedule();
})();
