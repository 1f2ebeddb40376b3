// The status page: reads the gateway's own API (listings and their prefix
// streams, force release, /metrics) and nothing else.  No framework, no build step: this file is
// embedded in the binary as it is (handlers/ui.c).
"use strict";

const PAGE = 50;          // names shown per page
const MAX_CALLS = 20;     // list calls to fill one page (a SCAN page may be empty)
const POINTS = 60;        // chart points kept (2 s apart: 2 minutes)
const KEY = "lockgate.key";

const $ = (id) => document.getElementById(id);
const state = { kind: "locks", prefix: "", cursors: [""], page: 0, next: "", note: "" };

function setStatus(text, error) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("error", !!error);
}

// Every call carries the key when one was given (auth on); a 401 asks for
// one.  A 401 to a call that carried a key means the gateway refused it
// (a wrong secret, or a key since removed from its file): the key is
// forgotten and the prompt says so, rather than asking again in silence.
async function api(path, opts) {
  opts = opts || {};
  const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
  const key = sessionStorage.getItem(KEY);
  if (key) headers.Authorization = "Bearer " + key;
  const r = await fetch(path, Object.assign({}, opts, { headers }));
  if (r.status === 401) {
    if (key && sessionStorage.getItem(KEY) === key) sessionStorage.removeItem(KEY);
    askKey(key ? "the gateway refused this API key (401): enter another"
               : "this gateway needs an API key");
  }
  return r;
}

// Show the key prompt (refreshing pauses while it is open) and stop the caller.
function askKey(why) {
  const form = $("auth");
  if (form.hidden) {
    form.hidden = false;
    $("key").focus();
  }
  throw new Error(why);
}

async function problem(r) {
  try {
    const p = await r.json();
    return p.detail || p.title || ("HTTP " + r.status);
  } catch (e) {
    return "HTTP " + r.status;
  }
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// A query string, each value percent-encoded (the gateway decodes them;
// a prefix's ':' goes as %3A, cursors are base64url and pass unchanged).
function query(params) {
  return Object.entries(params).map(([k, v]) => k + "=" + encodeURIComponent(v)).join("&");
}

function secs(ms) { return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s"; }

// ---- held names -------------------------------------------------------------------

// One page of the UI: list calls from the page's cursor until PAGE names
// are in or the listing ends (a page of Redis's SCAN may hold none).
async function fetchPage(kind, prefix, cursor) {
  let items = [], calls = 0;
  do {
    const r = await api("/v1/" + kind + "?" + query({ prefix, limit: String(PAGE - items.length), cursor }));
    if (!r.ok) throw new Error(await problem(r));
    const body = await r.json();
    items = items.concat(body[kind]);
    cursor = body.cursor;
  } while (cursor && items.length < PAGE && ++calls < MAX_CALLS);
  return { items, cursor };
}

function holderItem(h, sem) {
  const who = h.owner ? h.owner : "(no owner)";
  const parts = [];
  if (!sem) parts.push("fence " + h.fence);
  if (h.count > 1) parts.push("count " + h.count);
  parts.push(secs(h.ttl_ms) + " left");
  if (h.acquired_at) parts.push("since " + h.acquired_at.replace("T", " ").replace("Z", " UTC"));
  if (h.key_id) parts.push("key " + h.key_id);
  return el("li", {}, el("span", { class: "owner" }, who), " ", el("span", { class: "meta" }, parts.join(" · ")));
}

function row(item, kind) {
  const sem = kind === "semaphores";
  const holders = el("ul", { class: "holders" }, ...item.holders.map((h) => holderItem(h, sem)));
  const btn = el("button", { type: "button", class: "danger", "data-name": item.name }, "Force release");
  btn.addEventListener("click", () => forceRelease(kind, item.name));
  return el("tr", { "data-name": item.name },
    el("td", { class: "name", "data-label": "Name" }, item.name),
    el("td", { "data-label": "Mode" }, sem ? "semaphore, limit " + item.limit : item.mode),
    el("td", { "data-label": "Holders (" + item.holders.length + ")" }, holders),
    el("td", { "data-label": "Fair waiters" }, item.fair_waiters),
    el("td", { class: "act" }, btn));
}

async function loadHeld() {
  const { items, cursor } = await fetchPage(state.kind, state.prefix, state.cursors[state.page]);
  state.next = cursor;
  items.sort((a, b) => a.name.localeCompare(b.name)); // SCAN's order is none
  const tbody = $("held").tBodies[0];
  tbody.replaceChildren(...items.map((i) => row(i, state.kind)));
  $("empty").hidden = items.length > 0;
  $("page").textContent = "Page " + (state.page + 1);
  $("next").disabled = !cursor;
  $("first").disabled = state.page === 0;
  $("h-held").textContent = "Held " + state.kind + " (" + items.length + (cursor ? "+" : "") + " shown)";
}

async function forceRelease(kind, name) {
  const what = kind === "semaphores" ? "semaphore" : "lock";
  if (!window.confirm("Force-release " + what + " '" + name + "'?\n\nEvery holder loses it at once; " +
                      "their next extend or release is refused.")) return;
  const r = await api("/v1/" + kind + "/" + encodeURIComponent(name) + "?force=true", { method: "DELETE" });
  if (r.ok) {
    const body = await r.json();
    state.note = "Force-released " + what + " '" + name + "' (" + body.holders_ended + " hold(s) ended).";
  } else {
    state.note = "Force release of '" + name + "' failed: " + (await problem(r));
  }
  await refresh();
}

// ---- id namespaces -------------------------------------------------------------------

async function loadIds() {
  let cursor = "", items = [], calls = 0;
  do {
    const r = await api("/v1/ids?" + query({ limit: "100", cursor }));
    if (!r.ok) throw new Error(await problem(r));
    const body = await r.json();
    items = items.concat(body.namespaces);
    cursor = body.cursor;
  } while (cursor && ++calls < MAX_CALLS);
  items.sort((a, b) => a.namespace.localeCompare(b.namespace));
  $("ids").tBodies[0].replaceChildren(...items.map((n) =>
    el("tr", {}, el("td", { class: "name" }, n.namespace), el("td", {}, n.last_used_at), el("td", {}, n.last_sequence))));
}

// ---- charts from /metrics ------------------------------------------------------------

const series = { rate: [], lat: [], err: [] };
let last = null;

function parseMetrics(text) {
  const m = { requests: 0, errors: 0, buckets: [] };
  for (const line of text.split("\n")) {
    if (line.startsWith("lockgate_http_requests_total{")) {
      const v = Number(line.slice(line.lastIndexOf(" ") + 1));
      m.requests += v;
      if (/status="5\d\d"/.test(line)) m.errors += v;
    } else if (line.startsWith("lockgate_http_request_duration_seconds_bucket{")) {
      const le = line.match(/le="([^"]+)"/)[1];
      m.buckets.push([le === "+Inf" ? Infinity : Number(le), Number(line.slice(line.lastIndexOf(" ") + 1))]);
    }
  }
  m.t = performance.now();
  return m;
}

// The median of the requests between two scrapes, from the histogram's
// buckets (their upper bound: an estimate that never flatters).
function median(a, b) {
  const d = b.buckets.map(([le, n], i) => [le, n - (a.buckets[i] ? a.buckets[i][1] : 0)]);
  const total = d.length ? d[d.length - 1][1] : 0;
  if (total <= 0) return 0;
  for (const [le, n] of d) if (n >= total / 2) return isFinite(le) ? le * 1000 : NaN;
  return NaN;
}

function draw(id, values) {
  const svg = $(id);
  const max = Math.max(1e-9, ...values.filter(isFinite));
  const pts = values.map((v, i) => [(i * 120) / (POINTS - 1), 38 - (36 * (isFinite(v) ? v : 0)) / max]);
  const ns = "http://www.w3.org/2000/svg";
  const base = document.createElementNS(ns, "line");
  for (const [k, v] of Object.entries({ x1: 0, y1: 38, x2: 120, y2: 38 })) base.setAttribute(k, v);
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", pts.map((p) => p.join(",")).join(" "));
  svg.replaceChildren(base, line);
  svg.setAttribute("aria-label", svg.getAttribute("aria-label").split(":")[0] + ": peak " + max.toPrecision(3));
}

async function loadMetrics() {
  const r = await api("/metrics", { headers: { Accept: "text/plain" } });
  if (!r.ok) throw new Error(await problem(r));
  const now = parseMetrics(await r.text());
  if (last) {
    const dt = (now.t - last.t) / 1000;
    const push = (k, v) => { series[k].push(v); if (series[k].length > POINTS) series[k].shift(); };
    push("rate", (now.requests - last.requests) / dt);
    push("lat", median(last, now));
    push("err", (now.errors - last.errors) / dt);
    $("v-rate").textContent = series.rate[series.rate.length - 1].toFixed(1);
    const lat = series.lat[series.lat.length - 1];
    $("v-lat").textContent = isFinite(lat) ? "≤ " + lat.toPrecision(2) : "> 10 s";
    $("v-err").textContent = series.err[series.err.length - 1].toFixed(2);
    while (series.rate.length < POINTS) for (const k in series) series[k].unshift(0);
    draw("c-rate", series.rate);
    draw("c-lat", series.lat);
    draw("c-err", series.err);
  }
  last = now;
}

// ---- live: the prefix stream ---------------------------------------------------------

// The held names follow GET /v1/KIND?prefix= as an event stream: each
// change under the prefix re-reads the page shown (at most one read per
// SOON_MS).  It is read with fetch, not EventSource, so that the key goes in
// the Authorization header as on every other call.  When the stream drops
// (the gateway restarts, the network cuts) it connects again after
// RETRY_MS with Last-Event-ID, and re-reads the page, for what changed
// meanwhile.  document.body.dataset.live says "on" or "off".
const SOON_MS = 200, RETRY_MS = 1000;
let live = null;
let soon = null;

function refreshSoon() {
  if (soon) return;
  soon = setTimeout(() => { soon = null; refreshHeld(); }, SOON_MS);
}

function setLive(on) {
  document.body.dataset.live = on ? "on" : "off";
  $("live").textContent = on ? "Live" : "Reconnecting\u2026";
}

// One SSE block: its id is kept for Last-Event-ID; a state or gap event
// means the page may have changed.
function onBlock(me, block) {
  let changed = false;
  for (const line of block.split("\n")) {
    if (line.startsWith("id: ")) me.lastId = line.slice(4);
    else if (line === "event: state" || line === "event: gap") changed = true;
  }
  if (changed) refreshSoon();
}

function startLive() {
  if (live) live.ctl.abort();
  const me = { ctl: new AbortController(), kind: state.kind, prefix: state.prefix, lastId: "" };
  live = me;
  (async () => {
    let first = true;
    while (live === me) {
      try {
        const headers = { Accept: "text/event-stream" };
        const key = sessionStorage.getItem(KEY);
        if (key) headers.Authorization = "Bearer " + key;
        if (me.lastId) headers["Last-Event-ID"] = me.lastId;
        const r = await fetch("/v1/" + me.kind + "?" + query({ prefix: me.prefix }),
                              { headers, signal: me.ctl.signal });
        if (r.status === 401) return; // the listing's own 401 asks for a key
        if (!r.ok) throw new Error(await problem(r));
        setLive(true);
        if (!first) refreshSoon();
        first = false;
        const reader = r.body.getReader(), dec = new TextDecoder();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) onBlock(me, buf.slice(0, i));
        }
      } catch (e) {
        if (live !== me) return;
      }
      setLive(false);
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  })();
}

// ---- wiring --------------------------------------------------------------------------

// One refresh at a time; one asked for meanwhile runs right after.
// refreshHeld: the held names only (a change on the prefix stream).
let busy = false, again = false;
async function refreshHeld() {
  try {
    await loadHeld();
    setStatus((state.note ? state.note + " " : "") + "Updated " + new Date().toLocaleTimeString() + ".");
  } catch (e) {
    setStatus("Cannot read the gateway: " + e.message, true);
  }
}

async function refresh() {
  if (busy) {
    again = true;
    return;
  }
  busy = true;
  try {
    await Promise.all([loadHeld(), loadIds(), loadMetrics()]);
    // The last act's outcome stays in view until the next filter.
    setStatus((state.note ? state.note + " " : "") + "Updated " + new Date().toLocaleTimeString() + ".");
  } catch (e) {
    setStatus("Cannot read the gateway: " + e.message, true);
  } finally {
    busy = false;
    if (again) {
      again = false;
      refresh();
    }
  }
}

$("filter").addEventListener("submit", (ev) => {
  ev.preventDefault();
  state.prefix = $("prefix").value.trim();
  state.kind = $("kind").value;
  state.cursors = [""];
  state.page = 0;
  state.note = "";
  startLive();
  refresh();
});
$("next").addEventListener("click", () => {
  if (!state.next) return;
  state.cursors[state.page + 1] = state.next;
  state.page++;
  refresh();
});
$("first").addEventListener("click", () => { state.cursors = [""]; state.page = 0; refresh(); });
$("auth").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(KEY, $("key").value);
  $("key").value = "";
  $("auth").hidden = true;
  startLive();
  refresh();
});
// The charts and id namespaces are sampled every 2 s (a rate needs
// samples); the held names follow the prefix stream.  No refresh while the
// key prompt is open: each would be one more 401.
setInterval(() => {
  if (!$("auto").checked || document.hidden || !$("auth").hidden) return;
  Promise.all([loadIds(), loadMetrics()]).catch((e) => setStatus("Cannot read the gateway: " + e.message, true));
}, 2000);
setLive(false);
startLive();
refresh();
