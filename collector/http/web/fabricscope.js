/*
 * The fabricscope web view. Everything it shows comes from this collector's own API
 * (/api/v1/targets, /api/v1/raw, /api/v1/incidents, /api/v1/topology,
 * /api/v1/correlate); it loads nothing else.
 *
 * Names from the network (LLDP system and port names, host names) reach the page only
 * as text: the topology and correlation panels build their nodes with createElement /
 * createElementNS and textContent, never markup.
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
    at: null,           /* the chosen time (unix s) of the topology's port states; null: latest */
    corr: null,         /* the last /api/v1/correlate answer's data (null: none yet) */
    corrAt: 0,          /* Date.now() of the last correlate fetch */
    corrExplicit: null, /* the result of "explain the chosen time", shown first */
    corrKey: null,      /* the key of the correlation result the user chose */
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
    const at = Number(p.get("at"));
    if (p.get("at") && Number.isFinite(at) && at > 0) state.at = at;
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
    if (state.at !== null) p.set("at", state.at.toFixed(3));
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
    state.corrAt = 0;
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
    if (state.at !== null && state.at >= model.start && state.at <= model.end) {
      const ax = (LABEL_W + ((state.at - model.start) / model.step) * cw).toFixed(1);
      parts.push("<line class=\"at-marker\" x1=\"" + ax + "\" x2=\"" + ax +
        "\" y1=\"0\" y2=\"" + ROW_H * model.rows.length + "\"/>");
    }
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
    /* The column's middle is the time the topology shows. */
    if (c.col >= 0 && c.col < state.heat.ncol)
      state.at = state.heat.start + (c.col + 0.5) * state.heat.step;
    writeFragment();
    drawHeatmap(state.heat);
    drillDown().catch(panelError("chart"));
    drawTopology().catch(panelError("topology"));
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

  /* ---- DOM building for API text (no markup from data) ---- */

  const SVG_NS = "http://www.w3.org/2000/svg";

  function svgEl(parent, tag, attrs, text) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const k of Object.keys(attrs || {})) e.setAttribute(k, String(attrs[k]));
    if (text !== undefined) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }

  function htmlEl(parent, tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    if (parent) parent.appendChild(e);
    return e;
  }

  /* ---- port states at the chosen time ---- */

  /*
   * A port is congested when its queue depth, ECN marks or queue drops depart at the
   * chosen time (above 0 and above twice their median over the minute before); paused
   * when it receives pause frames (or waits to send) then, pausing when it sends them;
   * quiet when it has series and none of that; no data when it has no series near the
   * time (a host's port, a switch not polled).
   */
  const STATE_SERIES = {
    depth: { names: ["fabric_queue_depth_bytes", "fabric_queue_depth_cells"], rate: false },
    ecn: { names: ["fabric_port_ecn_marked_packets_total",
                   "fabric_queue_ecn_marked_packets_total"], rate: true },
    drops: { names: ["fabric_queue_wred_dropped_packets_total",
                     "fabric_queue_no_buffer_dropped_packets_total"], rate: true },
    pause: { names: ["fabric_pfc_pause_frames_total", "fabric_pfc_pause_seconds_total",
                     "fabric_port_tx_wait_seconds_total"], rate: true },
  };
  const BASELINE_S = 60;
  const PORT_STATES = {
    congested: { color: "#f85149", text: "congested (queue, ECN or drops departing)" },
    paused: { color: "#d29922", text: "paused (pauses received rising)" },
    pausing: { color: "#bc8cff", text: "pausing (pauses sent rising)" },
    quiet: { color: "#3fb950", text: "quiet" },
    nodata: { color: "#56606b", text: "no data" },
  };

  function median(a) {
    if (!a.length) return 0;
    const b = a.slice().sort((x, y) => x - y);
    return b[b.length >> 1];
  }

  /*
   * One series at `at`: the value whose span holds it (a gauge's sample until the next
   * one, a counter's rate over the poll interval), and the median of the values before.
   * null when the series has no value within 2.5 polls of `at`.
   */
  function valueAt(series, rate, at) {
    const v = series.values;
    if (!v.length) return null;
    const spacing = v.length > 1 ? (v[v.length - 1][0] - v[0][0]) / (v.length - 1) : 1;
    const near = Math.max(5, 2.5 * spacing);
    const pts = points(series, rate);
    let cur = null;
    for (const p of pts) if (p[2] <= at) cur = p;
    if (!cur || at - cur[3] > near) return null;
    const before = pts.filter((p) => p !== cur && p[3] <= at && p[3] >= at - BASELINE_S)
      .map((p) => p[1]);
    return { value: cur[1], baseline: median(before) };
  }

  async function portStates(at) {
    const names = [];
    for (const k of Object.keys(STATE_SERIES)) names.push(...STATE_SERIES[k].names);
    const result = await raw(names, null, at - BASELINE_S - 5, at + 5);
    const kindOf = new Map();
    for (const k of Object.keys(STATE_SERIES))
      for (const n of STATE_SERIES[k].names) kindOf.set(n, k);
    const ports = new Map();
    for (const s of result) {
      const m = s.metric;
      if (m.interface === undefined || m.target === undefined) continue;
      const kind = kindOf.get(m.__name__);
      if (!kind) continue;
      const va = valueAt(s, STATE_SERIES[kind].rate, at);
      if (!va) continue;
      const k = portKey(m);
      if (!ports.has(k)) ports.set(k, { congested: false, paused: false, pausing: false, why: [] });
      const p = ports.get(k);
      if (kind === "pause") {
        if (va.value > 0) {
          if (m.direction === "tx") p.pausing = true;
          else p.paused = true;
          p.why.push(seriesName(m, true) + " " + fmt(va.value) + "/s");
        }
      } else if (va.value > 0 && va.value > 2 * va.baseline) {
        p.congested = true;
        p.why.push(seriesName(m, true) + " " + fmt(va.value) + (STATE_SERIES[kind].rate ? "/s" : "") +
          " (median before " + fmt(va.baseline) + ")");
      }
    }
    const out = new Map();
    for (const [k, p] of ports)
      out.set(k, { state: p.congested ? "congested" : p.paused ? "paused" :
                   p.pausing ? "pausing" : "quiet", why: p.why });
    return out;
  }

  /* ---- topology layout ---- */

  /*
   * Layers from the graph alone: hosts at the bottom (a node that reported its own link,
   * source "host", or a node not polled with one neighbour), leaves in the middle (a
   * switch with a host neighbour), spines at the top (switches linked only to switches).
   * Within a layer: the top by name, each lower layer by the mean position of its
   * neighbours above (then by name), so the same answer always draws the same picture.
   */
  function layoutTopology(data) {
    const nodes = new Map();
    const node = (name) => {
      if (!nodes.has(name))
        nodes.set(name, { name, kind: "remote", adj: new Set(), host: false, layer: 0, x: 0, y: 0 });
      return nodes.get(name);
    };
    for (const n of data.nodes || []) node(String(n.name)).kind = n.kind;
    const links = [];
    for (const l of data.links || []) {
      if (!l.a || !l.b) continue;
      const a = node(String(l.a.node)), b = node(String(l.b.node));
      a.adj.add(b.name);
      b.adj.add(a.name);
      for (const s of l.sources || [])
        if (s.source === "host" && (s.reported_by === a.name || s.reported_by === b.name))
          node(s.reported_by).host = true;
      links.push({ a: { node: a.name, port: String(l.a.port) },
                   b: { node: b.name, port: String(l.b.port) },
                   sources: (l.sources || []).map((s) => String(s.source)).join(", "),
                   age: l.age_s });
    }
    for (const n of nodes.values())
      if (n.kind !== "target" && n.adj.size === 1) n.host = true;
    for (const n of nodes.values()) {
      if (n.host) n.layer = 2;
      else n.layer = [...n.adj].some((o) => nodes.get(o).host) ? 1 : 0;
    }
    const layers = [0, 1, 2].map((i) => [...nodes.values()].filter((n) => n.layer === i))
      .filter((l) => l.length);
    const pos = new Map();
    const order = (layer, ref) => {
      for (const n of layer) {
        const xs = [...n.adj].filter((o) => ref.has(o)).map((o) => ref.get(o));
        n.bary = xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Infinity;
      }
      layer.sort((a, b) => (a.bary - b.bary) || collator.compare(a.name, b.name));
      layer.forEach((n, i) => pos.set(n.name, i / Math.max(1, layer.length - 1)));
    };
    layers.forEach((l, i) => {
      if (i === 0) {
        l.sort((a, b) => collator.compare(a.name, b.name));
        l.forEach((n, k) => pos.set(n.name, k / Math.max(1, l.length - 1)));
      } else order(l, pos);
    });
    const COL_W = 120, ROW_GAP = 140, TOP = 40;
    const widest = Math.max(1, ...layers.map((l) => l.length));
    const W = Math.max(600, widest * COL_W + 40);
    layers.forEach((l, i) => {
      const x0 = (W - l.length * COL_W) / 2;
      l.forEach((n, k) => {
        n.x = x0 + (k + 0.5) * COL_W;
        n.y = TOP + i * ROW_GAP;
        n.row = i;
      });
    });
    return { nodes, links, layers, W, H: TOP + (layers.length - 1) * ROW_GAP + 50 };
  }

  /* ---- correlation ---- */

  function seriesPort(s) {
    return s ? String(s.target) + " " + String(s.interface) : "";
  }

  function seriesRef(s) {
    const parts = [seriesPort(s)];
    if (s.tc) parts.push("tc " + s.tc);
    if (s.direction) parts.push(s.direction);
    if (s.priority) parts.push("prio " + s.priority);
    if (s.metric) parts.push(String(s.metric).replace(/^fabric_/, "").replace(/_total$/, ""));
    return parts.join(" ");
  }

  function eventKey(e) {
    return String(e.start) + "|" + String(e.host ?? "") + "|" + String(e.name ?? "");
  }

  /* The results listed: "explain the chosen time" first, then the slow events, newest first. */
  function corrResults() {
    const out = [];
    if (state.corrExplicit) out.push(state.corrExplicit);
    if (state.corr) out.push(...(state.corr.events || []).slice().reverse());
    return out;
  }

  /* The result drawn on the topology: the chosen one, else the newest with a tree. */
  function selectedResult() {
    const all = corrResults();
    if (state.corrKey !== null) {
      const e = all.find((r) => eventKey(r) === state.corrKey);
      if (e) return e;
    }
    return all.find((r) => (r.propagation || []).length) || null;
  }

  async function fetchCorrelation() {
    if (Date.now() - state.corrAt < INCIDENTS_MS) return;
    state.corrAt = Date.now();
    const win = Number($("window").value);
    const end = nowS();
    const q = new URLSearchParams({ start: (end - win).toFixed(3), end: end.toFixed(3), limit: "50" });
    try {
      const body = await api("/api/v1/correlate?" + q.toString());
      state.corr = body.data || {};
    } catch (e) {
      if (e.status === 404) {
        state.corr = { unavailable: true };
        return;
      }
      state.corrAt = 0;
      throw e;
    }
  }

  async function explainChosenTime() {
    const at = state.at ?? nowS();
    const q = new URLSearchParams();
    q.append("window", (at - 10).toFixed(3) + "," + (at + 10).toFixed(3));
    const body = await api("/api/v1/correlate?" + q.toString());
    const ev = ((body.data && body.data.events) || [])[0];
    if (ev) {
      ev.explicit = true;
      state.corrExplicit = ev;
      state.corrKey = eventKey(ev);
    }
    drawCorrelation();
    await drawTopology();
  }

  function drawCorrelation() {
    const box = $("correlation");
    box.textContent = "";
    const d = state.corr;
    if (d && d.unavailable) {
      box.dataset.state = "not-available";
      box.textContent = "Correlation: not available (this collector has no /api/v1/correlate).";
    } else {
      box.dataset.state = "available";
      const all = corrResults();
      const sel = selectedResult();
      $("correlation-summary").textContent = d ? (d.events_listed ?? 0) + " slow " +
        (d.kind ?? "") + " events in the window, " + (d.windows ?? 0) + " windows" : "";
      if (!all.length)
        htmlEl(box, "p", "hint", "No slow host event in the window: post host events, or " +
          "choose a time on the heatmap and explain it.");
      for (const r of all.slice(0, 30)) {
        const row = htmlEl(box, "div", "corr-event" + (r === sel ? " selected" : ""));
        row.dataset.key = eventKey(r);
        row.tabIndex = 0;
        const who = r.explicit ? "chosen time" :
          [r.host, r.name].filter((x) => x !== undefined && x !== "").join(" ");
        htmlEl(row, "span", "when", when(r.start) + "–" + when(r.end));
        htmlEl(row, "span", "who", " " + who);
        const top = (r.suspects || [])[0];
        htmlEl(row, "span", "suspect", top ? " · " + seriesRef(top) +
          (top.on_path === false ? " (off the slow ranks' paths)" : "") : " · no suspect");
        if (r.slow_ranks !== undefined)
          htmlEl(row, "span", "ranks", " · " + r.slow_ranks + " slow ranks, " +
            (r.path_ports ? r.path_ports + " ports on their paths" : "paths not known"));
        htmlEl(row, "span", "tree", " · tree of " + (r.propagation_total ?? 0) + " edges");
      }
    }
    drawPropagationList(selectedResult());
  }

  $("correlation").addEventListener("click", (ev) => {
    const row = ev.target.closest(".corr-event");
    if (!row) return;
    state.corrKey = row.dataset.key;
    const r = selectedResult();
    if (r) {
      /* The ports' states when the tree began. */
      const onsets = (r.propagation || []).map((e) => Number(e.onset)).filter(Number.isFinite);
      state.at = onsets.length ? Math.min(...onsets) : Number(r.start);
      writeFragment();
      if (state.heat) drawHeatmap(state.heat);
    }
    drawCorrelation();
    drawTopology().catch(panelError("topology"));
  });

  $("correlate-at").addEventListener("click", () => {
    explainChosenTime().catch(panelError("correlation"));
  });

  /* The tree's edges in onset order (then hop). */
  function treeEdges(r) {
    return (r ? r.propagation || [] : []).slice().sort((a, b) =>
      (Number(a.onset) - Number(b.onset)) || (a.hop - b.hop));
  }

  /* Its origin: a pauser that nothing paused (else the first suspect). */
  function treeOrigin(r) {
    if (!r) return null;
    const edges = r.propagation || [];
    const paused = new Set(edges.map((e) => portKey(e)));
    const root = edges.map((e) => e.paused_by).find((p) => p && !paused.has(portKey(p)));
    return root || (r.suspects || [])[0] || null;
  }

  function drawPropagationList(r) {
    const ol = $("propagation");
    ol.textContent = "";
    const edges = treeEdges(r);
    const origin = treeOrigin(r);
    $("propagation-summary").textContent = !r ? "no correlation result chosen" :
      edges.length ? "origin " + seriesRef(origin) + "; " + edges.length + " of " +
        (r.propagation_total ?? edges.length) + " edges by onset" :
      "no pause propagated" + (origin ? " (origin " + seriesRef(origin) + ")" : "");
    const t0 = edges.length ? Number(edges[0].onset) : 0;
    for (const e of edges) {
      const li = htmlEl(ol, "li", "prop-item");
      li.dataset.hop = String(e.hop);
      li.dataset.onset = String(e.onset);
      htmlEl(li, "span", "hop", "hop " + e.hop);
      htmlEl(li, "span", "onset", " +" + ((Number(e.onset) - t0) * 1000).toFixed(0) + " ms ");
      htmlEl(li, "span", "from", seriesRef(e.paused_by || {}));
      htmlEl(li, "span", "arrow", " paused ");
      htmlEl(li, "span", "to", seriesRef(e));
    }
  }

  /* ---- topology panel ---- */

  async function drawTopology() {
    const box = $("topology");
    const at = state.at ?? nowS();
    $("topology-at").textContent = state.at === null ? "the latest samples (" + clock(at) + ")" :
      new Date(at * 1000).toLocaleString([], { hour12: false });
    $("topology-latest").hidden = state.at === null;
    let body;
    try {
      body = await api("/api/v1/topology");
    } catch (e) {
      if (e.status === 404) {
        box.dataset.state = "not-available";
        box.textContent = "Topology: not available (this collector has no /api/v1/topology).";
        $("topology-summary").textContent = "";
        return;
      }
      throw e;
    }
    const g = layoutTopology(body.data || {});
    const states = g.links.length ? await portStates(at) : new Map();
    const r = selectedResult();
    box.textContent = "";
    box.dataset.state = "available";
    $("topology-summary").textContent = g.nodes.size + " nodes, " + g.links.length + " links";
    const legend = $("topology-legend");
    legend.textContent = "";
    for (const k of Object.keys(PORT_STATES)) {
      const sw = svgEl(legend, "svg", { class: "swatch", width: 10, height: 10 });
      svgEl(sw, "rect", { width: 10, height: 10, fill: PORT_STATES[k].color });
      legend.appendChild(document.createTextNode(PORT_STATES[k].text));
    }
    if (!g.nodes.size) {
      htmlEl(box, "p", "empty", "No links known: LLDP from the switches or hosts, or a " +
        "topology: block, gives them.").dataset.nodes = "0";
      return;
    }
    const svg = svgEl(box, "svg", { width: g.W.toFixed(0), height: g.H.toFixed(0),
                                    "data-nodes": g.nodes.size, "data-links": g.links.length,
                                    class: "topology" });
    const defs = svgEl(svg, "defs", {});
    const mk = svgEl(defs, "marker", { id: "prop-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5,
                                      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    svgEl(mk, "path", { d: "M0,0 L10,5 L0,10 z", class: "prop-head" });
    const linkLayer = svgEl(svg, "g", { class: "links" });
    const nodeLayer = svgEl(svg, "g", { class: "nodes" });
    const portLayer = svgEl(svg, "g", { class: "ports" });
    const propLayer = svgEl(svg, "g", { class: "propagation" });

    /* Parallel links between two nodes are drawn side by side. */
    const pairCount = new Map(), pairSeen = new Map();
    const pairKey = (l) => [l.a.node, l.b.node].sort().join("\u0000");
    for (const l of g.links) pairCount.set(pairKey(l), (pairCount.get(pairKey(l)) || 0) + 1);
    const portPos = new Map();
    const portDot = (nodeName, port, x, y, extra) => {
      const k = nodeName + "\u0000" + port;
      const st = states.get(k);
      const sname = st ? st.state : "nodata";
      const c = svgEl(portLayer, "circle", { class: "port " + sname + (extra || ""), cx: x.toFixed(1),
                                            cy: y.toFixed(1), r: 4.5, fill: PORT_STATES[sname].color,
                                            "data-node": nodeName, "data-port": port,
                                            "data-state": sname });
      svgEl(c, "title", {}, nodeName + " " + port + ": " + PORT_STATES[sname].text +
        (st && st.why.length ? "\n" + st.why.slice(0, 8).join("\n") : ""));
      portPos.set(k, { x, y, node: nodeName, el: c });
    };
    for (const l of g.links) {
      const a = g.nodes.get(l.a.node), b = g.nodes.get(l.b.node);
      const pk = pairKey(l), m = pairCount.get(pk), i = pairSeen.get(pk) || 0;
      pairSeen.set(pk, i + 1);
      const dx = b.x - a.x, dy = b.y - a.y, len = Math.hypot(dx, dy) || 1;
      const ux = dx / len, uy = dy / len;
      const off = (i - (m - 1) / 2) * 7;
      const ox = -uy * off, oy = ux * off;
      const line = svgEl(linkLayer, "line", { class: "link", x1: (a.x + ox).toFixed(1),
                                             y1: (a.y + oy).toFixed(1), x2: (b.x + ox).toFixed(1),
                                             y2: (b.y + oy).toFixed(1), "data-a": l.a.node,
                                             "data-b": l.b.node });
      svgEl(line, "title", {}, l.a.node + " " + l.a.port + " — " + l.b.node + " " + l.b.port +
        " (" + l.sources + (Number.isFinite(l.age) ? ", seen " + fmt(l.age) + " s ago" : "") + ")");
      const d = Math.min(22, len / 3);
      portDot(l.a.node, l.a.port, a.x + ox + ux * d, a.y + oy + uy * d);
      portDot(l.b.node, l.b.port, b.x + ox - ux * d, b.y + oy - uy * d);
    }
    for (const n of g.nodes.values()) {
      const grp = svgEl(nodeLayer, "g", { class: "topo-node " + (n.host ? "host" : "switch"),
                                         "data-name": n.name, "data-layer": n.row,
                                         "data-kind": n.kind });
      if (n.host) svgEl(grp, "circle", { cx: n.x.toFixed(1), cy: n.y.toFixed(1), r: 10 });
      else svgEl(grp, "rect", { x: (n.x - 14).toFixed(1), y: (n.y - 10).toFixed(1), width: 28,
                                height: 20, rx: 3 });
      const label = n.name.length > 18 ? n.name.slice(0, 17) + "…" : n.name;
      /* Above the top layer, below the bottom one, beside the middle one (its links
       * leave above and below). */
      const mid = n.row > 0 && n.row < g.layers.length - 1;
      svgEl(grp, "text", { class: "node-label", x: (mid ? n.x + 18 : n.x).toFixed(1),
                           y: (n.row === 0 ? n.y - 16 : mid ? n.y + 4 : n.y + 26).toFixed(1),
                           "text-anchor": mid ? "start" : "middle" }, label);
      svgEl(grp, "title", {}, n.name + " (" + (n.kind === "target" ? "polled target" :
        n.host ? "host" : "switch, not polled") + ", " + n.adj.size + " neighbours)");
    }

    /* The chosen correlation result's tree: origin ringed, an arrow per edge. */
    if (!r) return;
    const findPort = (s) => {
      if (!s) return null;
      const k = String(s.target) + "\u0000" + String(s.interface);
      if (portPos.has(k)) return portPos.get(k);
      const n = g.nodes.get(String(s.target));
      if (!n) return null;
      /* A port of a drawn node with no link on the map: beside its node. */
      const extra = [...portPos.values()].filter((p) => p.node === n.name && p.unlinked).length;
      portDot(n.name, String(s.interface), n.x + 22 + extra * 11, n.y, " unlinked");
      portPos.get(k).unlinked = true;
      return portPos.get(k);
    };
    const origin = treeOrigin(r);
    const op = findPort(origin);
    if (op) {
      op.el.classList.add("origin");
      svgEl(propLayer, "circle", { class: "origin-ring", cx: op.x.toFixed(1), cy: op.y.toFixed(1),
                                  r: 9, "data-node": op.node,
                                  "data-port": String(origin.interface) });
    }
    let drawn = 0;
    for (const e of treeEdges(r)) {
      const from = findPort(e.paused_by), to = findPort(e);
      if (!from || !to || from === to) continue;
      const dx = to.x - from.x, dy = to.y - from.y, len = Math.hypot(dx, dy) || 1;
      /* Bent to one side so that the arrow stays visible beside the link it follows. */
      const bend = from.node === to.node ? 26 : 14;
      const cx = (from.x + to.x) / 2 - (dy / len) * bend, cy = (from.y + to.y) / 2 + (dx / len) * bend;
      const path = svgEl(propLayer, "path", {
        class: "prop-edge", d: "M" + from.x.toFixed(1) + "," + from.y.toFixed(1) + " Q" +
          cx.toFixed(1) + "," + cy.toFixed(1) + " " + to.x.toFixed(1) + "," + to.y.toFixed(1),
        "marker-end": "url(#prop-arrow)", "data-hop": e.hop,
        "data-from": seriesPort(e.paused_by), "data-to": seriesPort(e) });
      svgEl(path, "title", {}, "hop " + e.hop + ": " + seriesRef(e.paused_by || {}) + " paused " +
        seriesRef(e));
      /* The label at the curve's middle (the quadratic's t = 0.5). */
      svgEl(propLayer, "text", { class: "prop-hop", x: ((from.x + 2 * cx + to.x) / 4).toFixed(1),
                                 y: ((from.y + 2 * cy + to.y) / 4).toFixed(1),
                                 "text-anchor": "middle" }, String(e.hop));
      drawn++;
    }
    svg.setAttribute("data-propagation", String(drawn));
  }

  $("topology-latest").addEventListener("click", () => {
    state.at = null;
    writeFragment();
    if (state.heat) drawHeatmap(state.heat);
    drawTopology().catch(panelError("topology"));
  });

  /* ---- refresh ---- */

  function panelError(where) {
    return (e) => {
      const box = where === "targets" ? $("targets").tBodies[0] : $(where);
      if (where !== "incidents") box.textContent = "";
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
        /* The topology draws the chosen correlation result's tree: correlation first. */
        fetchCorrelation().catch(panelError("correlation"))
          .then(() => drawCorrelation())
          .then(() => drawTopology()).catch(panelError("topology")),
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
      if (id === "window") state.corrAt = 0; /* the slow events of the new window */
      writeFragment();
      refresh();
    });

  readFragment();
  refresh();
  schedule();
})();
