// ui_test.js -- the status page (/ui/) in a real browser: Debian's chromium
// driven by playwright-core, against a real redis-server and two gateways
// (one open, one with --auth-file and a key made by `lockgate keygen`) that
// this test starts on free loopback ports (in a temporary directory) and
// stops.  On the open gateway it acquires locks itself and checks that the
// page lists them with their owners and the id namespaces; that a lock
// acquired over HTTP from node after the page loaded appears without a
// reload; that the held names follow the prefix stream, not polling (with
// the 2 s sampling off, a lock taken and released shows within 1.5 s),
// and that when the gateway restarts the page says it is reconnecting,
// connects again by itself and follows changes again; that a held lock
// with two queued fair waiters shows its holder
// (owner, fence, lease left) and the count 2; that states are words and
// marks (every cell of a row has text, the force button a mark, columns
// named, the error status a sign, on a phone each value labelled); the
// prefix filter; that the request-rate, latency and error-rate charts all
// rise above their baseline (after some 501 answers) with figures shown;
// force release through the confirmation (the lock goes, the gateway
// agrees, the page says so) and a dismissed one releasing nothing;
// semaphores; paging over 60 names under one prefix (50 a page: the next
// page shows the other 10, the first comes back); no script error; a
// 360 px phone screen without sideways scrolling and a tappable button.
// With auth on: the page asks for a key on 401 and sends none before; a
// wrong key is refused in words, forgotten, and the prompt comes back; the
// right key is sent as "Authorization: Bearer" on every call (never in a
// URL), the page lists the names the key may read and no other, with the
// holder's key id; the key is in sessionStorage only (not localStorage,
// not a cookie), kept across a reload, not shared with another tab.
// Browsers and other origins: a page of another origin cannot take a lock
// (a fetch without preflight, a form post: both refused before anything is
// taken), while a page of an origin named by --cors-origin can, through
// fetch with its key (preflight, Lock-Token read back, released).
// Screenshots: docs/ui.png (wide) and docs/ui-phone.png.  Run by
// `make ui-test`; closing line "ui: N passed, N failed".
"use strict";

const { chromium } = require("playwright-core");
const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
const http = require("http");
const net = require("net");
const os = require("os");
const path = require("path");

const ROOT = path.resolve(__dirname, "..", "..");
const BUILD = process.env.BUILD || "build";
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
let passed = 0, failed = 0;
const procs = [];

function check(cond, what) {
  if (cond) { passed++; console.error("ok - " + what); }
  else { failed++; console.error("not ok - " + what); }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => { const p = s.address().port; s.close(() => resolve(p)); });
    s.on("error", reject);
  });
}

async function waitPort(port, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const ok = await new Promise((res) => {
      const c = net.connect(port, "127.0.0.1", () => { c.destroy(); res(true); });
      c.on("error", () => res(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("port " + port + " did not open");
}

// The gateways stop at once when the test ends (no rolling-restart delay,
// --shutdown-delay-ms).
process.env.LOCKGATE_SHUTDOWN_DELAY_MS = process.env.LOCKGATE_SHUTDOWN_DELAY_MS || "0";

function start(cmd, args, log) {
  const out = fs.openSync(log, "w");
  const p = spawn(cmd, args, { stdio: ["ignore", out, out] });
  procs.push(p);
  return p;
}

function stopAll() {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGTERM");
}
process.on("exit", stopAll);

async function api(base, method, p, body, key) {
  const headers = key ? { Authorization: "Bearer " + key } : {};
  const r = await fetch(base + p, { method, headers, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, token: r.headers.get("lock-token"), body: await r.json().catch(() => null) };
}

// A fair waiter from node, left pending: the test never awaits it (the
// request is destroyed at the end).
const pending = [];
function fairWaiter(port, name, owner) {
  const body = JSON.stringify({ ttl_ms: 60000, wait_ms: 90000, fair: true, owner });
  const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/locks/" + name,
                             headers: { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) } });
  req.on("error", () => {});
  req.on("response", (r) => r.resume());
  req.end(body);
  pending.push(req);
}

// A request the gateway answers 501 (a transfer coding it does not
// support): a 5xx for the error-rate chart without disturbing Redis.
function send501(port) {
  return new Promise((resolve) => {
    const c = net.connect(port, "127.0.0.1", () =>
      c.end("POST /v1/locks/ui.x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"));
    let text = "";
    c.on("data", (d) => { text += d; });
    c.on("close", () => resolve(text.slice(0, 12)));
    c.on("error", () => resolve(""));
  });
}

// A key made with `lockgate keygen`, as an operator would: the secret from
// its "Bearer" line, the file entry from the JSON that follows.
function keygen(id, grants) {
  const args = ["keygen", id];
  for (const g of grants) args.push("--grant", g);
  const out = execFileSync(path.join(ROOT, BUILD, "lockgate"), args, { encoding: "utf8" });
  const key = out.match(/Bearer (\S+)/)[1];
  const entry = JSON.parse(out.slice(out.indexOf("{")));
  return { key, entry };
}

const rowsOf = (page) => page.$$eval("#held tbody tr", (rows) => rows.map((r) => r.dataset.name));

// The polyline's points that rise above the chart's baseline (y = 38).
const raised = (page, id) => page.$eval("#" + id, (svg) => {
  const l = svg.querySelector("polyline");
  if (!l) return -1;
  return l.getAttribute("points").split(" ").filter((p) => Number(p.split(",")[1]) < 37.99).length;
}).catch(() => -1);

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lockgate-ui-"));
  const rport = await freePort(), gport = await freePort(), aport = await freePort();
  // Two pages of other origins (same host, other ports): one allowed.
  const goodPort = await freePort(), evilPort = await freePort();
  const good = "http://127.0.0.1:" + goodPort, evil = "http://127.0.0.1:" + evilPort;
  const pages = [goodPort, evilPort].map((p) => {
    const s = http.createServer((q, r) => { r.writeHead(200, { "Content-Type": "text/html" }); r.end("<!doctype html><title>other</title><p>other origin</p>"); });
    s.listen(p, "127.0.0.1");
    return s;
  });
  start("redis-server", ["--port", String(rport), "--bind", "127.0.0.1", "--save", "",
                         "--dir", dir], path.join(dir, "redis.log"));
  await waitPort(rport, 10000);
  const gwArgs = ["--listen", "127.0.0.1:" + gport, "--redis", "redis://127.0.0.1:" + rport,
                  "--cors-origin", good];
  let gw = start(path.join(ROOT, BUILD, "lockgate"), gwArgs, path.join(dir, "gw.log"));
  // A second gateway on the same Redis with access control on: one key
  // that may write locks under "ui." and read the rest the page needs.
  const op = keygen("ui-op", ["locks:ui.:write", "semaphores:ui.:read", "ids::read", "ops::read"]);
  const authFile = path.join(dir, "keys.json");
  fs.writeFileSync(authFile, JSON.stringify({ keys: [op.entry] }));
  start(path.join(ROOT, BUILD, "lockgate"), ["--listen", "127.0.0.1:" + aport,
        "--redis", "redis://127.0.0.1:" + rport, "--auth-file", authFile, "--cors-origin", good],
        path.join(dir, "gw-auth.log"));
  await waitPort(gport, 10000);
  await waitPort(aport, 10000);
  const base = "http://127.0.0.1:" + gport;
  const abase = "http://127.0.0.1:" + aport;

  // What the test itself holds.
  const held = ["ui.orders:1", "ui.orders:2", "ui.orders:3", "ui.billing:run", "other.cron"];
  for (const n of held) {
    const r = await api(base, "POST", "/v1/locks/" + n, { ttl_ms: 120000, owner: "ui-test " + n });
    if (r.status !== 201) throw new Error("could not acquire " + n + ": " + r.status);
  }
  await api(base, "POST", "/v1/semaphores/ui.pool", { ttl_ms: 120000, limit: 4 });
  await api(base, "POST", "/v1/ids/ui.invoices");

  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
    const dialogs = [];
    page.on("dialog", (d) => { dialogs.push(d.message()); d.accept(); });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

    await page.goto(base + "/ui/");
    for (const n of held)
      await page.waitForSelector(`#held tr[data-name="${n}"]`, { timeout: 10000 }).catch(() => {});
    let shown = await rowsOf(page);
    check(held.every((n) => shown.includes(n)), "the page lists every lock the test acquired");
    const owner = await page.textContent(`#held tr[data-name="ui.orders:2"] .owner`);
    check(owner === "ui-test ui.orders:2", "a holder's owner is shown");
    await page.waitForSelector("#ids td", { timeout: 10000 }).catch(() => {});
    check((await page.textContent("#ids")).includes("ui.invoices"), "the id namespaces in use are listed");

    // It refreshes by itself: a lock taken from here (not in the browser)
    // appears without a reload (every 2 s; up to 10 s allowed).
    await page.evaluate(() => { window.uiTestMark = 1; });
    check((await api(base, "POST", "/v1/locks/ui.late", { ttl_ms: 120000, owner: "ui-test late" })).status === 201,
          "a lock acquired over HTTP after the page loaded");
    const late = await page.waitForSelector('#held tr[data-name="ui.late"]', { timeout: 10000 }).catch(() => null);
    check(late && (await page.evaluate(() => window.uiTestMark)) === 1,
          "it appears on the page without a reload");

    // Live, not polled: the held names follow the prefix stream.  With the
    // 2 s sampling off, a lock taken and one released show within 1.5 s.
    await page.waitForSelector('body[data-live="on"]', { timeout: 5000 }).catch(() => {});
    check((await page.getAttribute("body", "data-live")) === "on", "the page's prefix stream is live");
    await page.uncheck("#auto");
    let t0 = Date.now();
    const lv = await api(base, "POST", "/v1/locks/ui.live", { ttl_ms: 120000, owner: "ui-test live" });
    const liveRow = await page.waitForSelector('#held tr[data-name="ui.live"]', { timeout: 1500 }).catch(() => null);
    check(liveRow !== null, "with sampling off, a new lock shows from the stream (" + (Date.now() - t0) + " ms)");
    t0 = Date.now();
    await fetch(base + "/v1/locks/ui.live", { method: "DELETE", headers: { "Lock-Token": lv.token } });
    const goneRow = await page.waitForFunction(() => !document.querySelector('#held tr[data-name="ui.live"]'),
                                               null, { timeout: 1500 }).catch(() => null);
    check(goneRow !== null, "and its release takes it off (" + (Date.now() - t0) + " ms)");

    // The gateway restarts: the page says so, connects again by itself
    // and follows changes again (sampling still off).
    gw.kill("SIGTERM");
    await new Promise((r) => (gw.exitCode !== null ? r() : gw.on("exit", r)));
    await page.waitForSelector('body[data-live="off"]', { timeout: 5000 }).catch(() => {});
    check((await page.textContent("#live")).startsWith("Reconnecting"), "a gateway gone: the page says it is reconnecting");
    gw = start(path.join(ROOT, BUILD, "lockgate"), gwArgs, path.join(dir, "gw-2.log"));
    await waitPort(gport, 10000);
    t0 = Date.now();
    await page.waitForSelector('body[data-live="on"]', { timeout: 10000 }).catch(() => {});
    check((await page.getAttribute("body", "data-live")) === "on",
          "after the gateway's restart the stream is live again (" + (Date.now() - t0) + " ms)");
    t0 = Date.now();
    await api(base, "POST", "/v1/locks/ui.after-restart", { ttl_ms: 120000, owner: "ui-test restart" });
    const again = await page.waitForSelector('#held tr[data-name="ui.after-restart"]', { timeout: 1500 }).catch(() => null);
    check(again !== null, "and a lock taken then shows from the stream (" + (Date.now() - t0) + " ms)");
    await page.check("#auto");

    // Holders and waiters: a held lock with two fair waiters queued behind it.
    check((await api(base, "POST", "/v1/locks/ui.queue", { ttl_ms: 120000, owner: "ui-test holder" })).status === 201,
          "the queued lock is held");
    fairWaiter(gport, "ui.queue", "ui-test waiter 1");
    fairWaiter(gport, "ui.queue", "ui-test waiter 2");
    const qrow = '#held tr[data-name="ui.queue"]';
    await page.waitForFunction((sel) => {
      const td = document.querySelector(sel + ' td[data-label="Fair waiters"]');
      return td && td.textContent === "2";
    }, qrow, { timeout: 10000 }).catch(() => {});
    check((await page.textContent(qrow + ' td[data-label="Fair waiters"]').catch(() => "")) === "2",
          "the lock's fair waiter count is shown (2)");
    const holders = await page.$$eval(qrow + " ul.holders li", (lis) => lis.map((li) => li.textContent));
    check(holders.length === 1 && holders[0].startsWith("ui-test holder") && /fence \d+/.test(holders[0]) &&
          / s left/.test(holders[0]), "its one holder is shown with owner, fence and lease left: " + holders[0]);

    // Readable without colour: every state is in words or marks.
    const cells = await page.$$eval(qrow + " td", (tds) => tds.map((td) => td.textContent.trim()));
    check(cells.length === 5 && cells.every((t) => t.length > 0) && cells[1] === "exclusive" &&
          cells[4] === "Force release", "a held row says its state in text: " + JSON.stringify(cells));
    const mark = await page.$eval(qrow + " button.danger", (b) => getComputedStyle(b, "::before").content);
    check(mark.includes("\u2716"), "the destructive button carries a mark besides its words");
    const heads = await page.$$eval("#held thead th", (ths) => ths.map((th) => th.textContent));
    check(heads.includes("Holders") && heads.includes("Fair waiters"), "the columns are named in words");

    // Filter by prefix.
    await page.fill("#prefix", "ui.orders");
    await page.click("#filter button[type=submit]");
    await page.waitForFunction(() => !document.querySelector('#held tr[data-name="other.cron"]'), null, { timeout: 10000 }).catch(() => {});
    shown = await rowsOf(page);
    check(shown.length === 3 && shown.every((n) => n.startsWith("ui.orders")), "filtering by prefix shows only those names");

    // Charts: the page has made requests every 2 s; add some 5xx answers
    // (501: an unsupported transfer coding) and wait for all three charts
    // to rise above their baseline.
    for (let i = 0; i < 5; i++) await send501(gport);
    await page.waitForFunction(() => ["c-rate", "c-lat", "c-err"].every((id) => {
      const l = document.querySelector("#" + id + " polyline");
      return l && l.getAttribute("points").split(" ").some((p) => Number(p.split(",")[1]) < 37.99);
    }), null, { timeout: 10000 }).catch(() => {});
    check((await raised(page, "c-rate")) > 0, "the request-rate chart is drawn with data from /metrics");
    check((await raised(page, "c-lat")) > 0, "the median-latency chart is drawn with data");
    check((await raised(page, "c-err")) > 0, "the error-rate chart shows the 5xx answers");
    const values = await page.$$eval(".charts figcaption b", (bs) => bs.map((b) => b.textContent));
    check(values.length === 3 && /^\d+\.\d$/.test(values[0]) && /^(≤ [\d.e+-]+|> 10 s)$/.test(values[1]) &&
          /^\d+\.\d\d$/.test(values[2]), "each chart shows its latest value in figures: " + values.join(", "));
    await page.screenshot({ path: path.join(ROOT, "docs", "ui.png"), fullPage: true });

    // Force-release one, accepting the confirmation, and see it go.
    await page.click(`#held tr[data-name="ui.orders:2"] button.danger`);
    await page.waitForFunction(() => !document.querySelector('#held tr[data-name="ui.orders:2"]'), null, { timeout: 10000 }).catch(() => {});
    check(dialogs.length === 1 && dialogs[0].includes("ui.orders:2"), "force release asks for confirmation first");
    shown = await rowsOf(page);
    check(!shown.includes("ui.orders:2") && shown.length === 2, "the force-released lock is gone from the page");
    const gone = await api(base, "GET", "/v1/locks/ui.orders:2");
    check(gone.status === 404, "the gateway agrees: nobody holds it");
    check((await page.textContent("#status")).includes("Force-released"), "the page says what it did, in words");

    // Dismissing the confirmation keeps the lock.
    page.removeAllListeners("dialog");
    page.on("dialog", (d) => d.dismiss());
    await page.click(`#held tr[data-name="ui.orders:3"] button.danger`);
    await page.waitForTimeout(500);
    check((await api(base, "GET", "/v1/locks/ui.orders:3")).status === 200, "a dismissed confirmation releases nothing");

    // Semaphores are listed too.
    await page.fill("#prefix", "ui.");
    await page.selectOption("#kind", "semaphores");
    await page.click("#filter button[type=submit]");
    await page.waitForSelector('#held tr[data-name="ui.pool"]', { timeout: 10000 }).catch(() => {});
    check((await rowsOf(page)).includes("ui.pool"), "semaphores are listed");

    // Paging: more names under a prefix than one page holds (app.js: 50).
    const paged = [];
    for (let i = 0; i < 60; i++) {
      const n = "ui.page:" + String(i).padStart(2, "0");
      const r = await api(base, "POST", "/v1/locks/" + n, { ttl_ms: 120000 });
      if (r.status === 201) paged.push({ n, token: r.token });
    }
    check(paged.length === 60, "60 locks acquired under ui.page:");
    await page.fill("#prefix", "ui.page:");
    await page.selectOption("#kind", "locks");
    await page.click("#filter button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll('#held tbody tr[data-name^="ui.page:"]').length === 50 &&
                               !document.getElementById("next").disabled, null, { timeout: 10000 }).catch(() => {});
    const first = await rowsOf(page);
    check(first.length === 50 && first.every((n) => n.startsWith("ui.page:")) &&
          !(await page.isDisabled("#next")), "the first page holds 50 names and offers the next (" + first.length + " shown)");
    await page.click("#next", { timeout: 5000 }).catch(() => {});
    await page.waitForFunction((f) => {
      const rows = [...document.querySelectorAll("#held tbody tr")].map((r) => r.dataset.name);
      return document.getElementById("page").textContent === "Page 2" && rows.length > 0 && rows.every((n) => !f.includes(n));
    }, first, { timeout: 10000 }).catch(() => {});
    const second = await rowsOf(page);
    check((await page.textContent("#page")) === "Page 2" && second.length > 0 && second.every((n) => !first.includes(n)),
          "the next page shows names not on the first (" + second.length + ")");
    const both = new Set(first.concat(second));
    check(paged.every((p) => both.has(p.n)) && (await page.isDisabled("#next")),
          "the two pages hold all 60 names and the listing ends there");
    await page.click("#first", { timeout: 5000 }).catch(() => {});
    await page.waitForFunction(() => document.getElementById("page").textContent === "Page 1", null, { timeout: 10000 }).catch(() => {});
    check((await rowsOf(page)).length === 50, "the first page comes back");
    for (const p of paged)
      await fetch(base + "/v1/locks/" + p.n, { method: "DELETE", headers: { "Lock-Token": p.token } });
    check(errors.length === 0, "no script errors in the page" + (errors.length ? ": " + errors.join("; ") : ""));

    // A phone: nothing wider than the screen, the button big enough to hit,
    // each value labelled in words (the column headings are hidden there).
    const phone = await browser.newPage({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
    await phone.goto(base + "/ui/");
    await phone.waitForSelector('#held tr[data-name="ui.orders:1"]', { timeout: 10000 }).catch(() => {});
    const width = await phone.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 360, "a 360 px screen needs no sideways scrolling (" + width + " px)");
    const box = await phone.locator('#held tr[data-name="ui.orders:1"] button.danger').boundingBox();
    check(box && box.height >= 40, "the force-release button is large enough to tap on a phone");
    const label = await phone.$eval('#held tr[data-name="ui.queue"] td[data-label="Fair waiters"]',
                                    (td) => getComputedStyle(td, "::before").content + td.textContent).catch(() => "");
    check(label === '"Fair waiters: "2', "on a phone the waiter count is labelled in words: " + label);
    await phone.screenshot({ path: path.join(ROOT, "docs", "ui-phone.png"), fullPage: false });
    await phone.close();

    await authChecks(browser, abase, op.key);
    await originChecks(browser, base, abase, op.key, good, evil);
  } finally {
    for (const p of pages) p.close();
    for (const r of pending) r.destroy();
    await browser.close();
    stopAll();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

// Auth on: the page asks for a key on 401, says so when a key is refused,
// sends the key as a Bearer header, shows only what the key may read, and
// keeps the key in this tab's sessionStorage and nowhere else.
async function authChecks(browser, abase, key) {
  check((await api(abase, "POST", "/v1/locks/ui.auth:1", { ttl_ms: 120000, owner: "ui-test auth" }, key)).status === 201,
        "a lock acquired with the key through the auth gateway");
  check((await api(abase, "GET", "/v1/locks")).status === 401, "the auth gateway refuses a listing without a key");
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  const page = await ctx.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const reqs = [];
  page.on("request", (r) => reqs.push(r));
  const auths = async (from) => Promise.all(reqs.slice(from).filter((r) => /\/(v1|metrics)/.test(r.url()))
                                            .map(async (r) => (await r.allHeaders()).authorization || ""));

  await page.goto(abase + "/ui/");
  await page.waitForSelector("#auth", { state: "visible", timeout: 10000 }).catch(() => {});
  check(await page.isVisible("#auth"), "with auth on, the page asks for a key");
  check((await page.textContent("#status")).includes("needs an API key"), "and says why: " + await page.textContent("#status"));
  const sent0 = await auths(0);
  check(sent0.length > 0 && sent0.every((a) => a === ""), "no Authorization is sent before a key is given");
  const errMark = await page.$eval("#status", (s) => s.classList.contains("error") && getComputedStyle(s, "::before").content);
  check(typeof errMark === "string" && errMark.includes("\u26A0"), "the error is marked with a sign, not only a colour");

  // A wrong secret: a clear message and the prompt again, the key not kept.
  const wrong = key.slice(0, key.indexOf(".") + 1) + "wrongWRONGwrongWRONGwrongWRONGwrongWRONG123";
  await page.fill("#key", wrong);
  await page.click("#auth button[type=submit]");
  await page.waitForFunction(() => document.getElementById("status").textContent.includes("refused"), null, { timeout: 10000 }).catch(() => {});
  const status = await page.textContent("#status");
  check(status.includes("refused") && (await page.isVisible("#auth")),
        "a wrong key is refused in words and the prompt comes back: " + status);
  check((await page.evaluate(() => sessionStorage.length)) === 0, "the refused key is not kept");
  check((await rowsOf(page)).length === 0, "nothing is listed with a refused key");

  // The right key.
  const from = reqs.length;
  await page.fill("#key", key);
  await page.click("#auth button[type=submit]");
  await page.waitForSelector('#held tr[data-name="ui.auth:1"]', { timeout: 10000 }).catch(() => {});
  const shown = await rowsOf(page);
  check(shown.includes("ui.auth:1") && shown.includes("ui.orders:1") && !(await page.isVisible("#auth")),
        "with the key the page lists the locks it may read");
  check(shown.length > 0 && shown.every((n) => n.startsWith("ui.")), "and no others (other.cron is not shown): " + shown.join(" "));
  const meta = await page.textContent('#held tr[data-name="ui.auth:1"] .meta').catch(() => "");
  check(meta.includes("key ui-op"), "a holder shows the key id that acquired it");
  const sent = await auths(from);
  check(sent.length >= 3 && sent.every((a) => a === "Bearer " + key), "every API call carries Authorization: Bearer <key> (" + sent.length + ")");
  check(reqs.every((r) => !r.url().includes(key.slice(key.indexOf(".") + 1))), "the secret is never in a URL");

  // Where the key is kept: this tab's sessionStorage, nowhere else.
  const store = await page.evaluate(() => ({
    session: Object.keys(sessionStorage).map((k) => sessionStorage.getItem(k)),
    local: localStorage.length, cookie: document.cookie }));
  check(store.session.length === 1 && store.session[0] === key, "sessionStorage holds the key");
  check(store.local === 0, "localStorage is empty");
  check(store.cookie === "" && (await ctx.cookies()).length === 0, "no cookie holds it");
  await page.reload();
  await page.waitForSelector('#held tr[data-name="ui.auth:1"]', { timeout: 10000 }).catch(() => {});
  check(!(await page.isVisible("#auth")) && (await rowsOf(page)).includes("ui.auth:1"), "a reload of the tab keeps using it");
  const tab = await ctx.newPage();
  await tab.goto(abase + "/ui/");
  await tab.waitForSelector("#auth", { state: "visible", timeout: 10000 }).catch(() => {});
  check(await tab.isVisible("#auth"), "another tab asks again (the key stays in its tab)");
  check(errors.length === 0, "no script errors in the page with auth on" + (errors.length ? ": " + errors.join("; ") : ""));
  await ctx.close();
}

// Other origins.  The evil page tries what a browser lets any site do
// without asking: a "simple" cross-site POST (no preflight), by fetch and by
// a form; the gateway must refuse both before acting (the page could not
// read the answer anyway, but the lock would be taken).  The good page's
// origin is named by --cors-origin: its fetch with a key and a JSON body
// is preflighted, allowed, and it can read the Lock-Token it got.
async function originChecks(browser, base, abase, key, good, evil) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  const responses = [];
  page.on("response", (r) => { if (r.url().includes("/v1/")) responses.push(r.status()); });
  await page.goto(evil + "/");
  await page.evaluate(async (u) => {
    await fetch(u, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" },
                     body: JSON.stringify({ ttl_ms: 86400000 }) }).catch(() => {});
  }, base + "/v1/locks/ui.evil-fetch");
  check((await api(base, "GET", "/v1/locks/ui.evil-fetch")).status === 404,
        "a page of another origin cannot take a lock with a simple fetch (no preflight)");
  check(responses.includes(403), "the gateway refused it (403): " + responses.join(" "));
  await page.setContent(`<form method="POST" enctype="text/plain" action="${base}/v1/locks/ui.evil-form">
    <input name='{"ttl_ms":86400000,"x":"' value='"}'></form>`);
  await Promise.all([page.waitForNavigation({ timeout: 10000 }).catch(() => {}),
                     page.evaluate(() => document.forms[0].submit())]);
  const formText = await page.textContent("body").catch(() => "");
  check((await api(base, "GET", "/v1/locks/ui.evil-form")).status === 404 && formText.includes("origin_forbidden"),
        "nor with a form post: " + formText.slice(0, 80));
  await page.goto(evil + "/"); /* the form's answer left the page on the gateway's origin */
  const evilCors = await page.evaluate(async (u) => {
    try { const r = await fetch(u, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
          return "status " + r.status; } catch (e) { return "blocked"; }
  }, base + "/v1/locks/ui.evil-cors").catch(() => "error");
  check(evilCors === "blocked" && (await api(base, "GET", "/v1/locks/ui.evil-cors")).status === 404,
        "a preflighted fetch from it is blocked too: " + evilCors);

  // The allowed origin, against the gateway with keys.
  await page.goto(good + "/");
  const got = await page.evaluate(async ([u, k]) => {
    const r = await fetch(u, { method: "POST", credentials: "include",
                               headers: { "Content-Type": "application/json", Authorization: "Bearer " + k },
                               body: JSON.stringify({ ttl_ms: 60000, owner: "cors page" }) });
    const body = await r.json();
    return { status: r.status, token: r.headers.get("Lock-Token"), body };
  }, [abase + "/v1/locks/ui.cors", key]).catch((e) => ({ status: 0, error: String(e) }));
  check(got.status === 201 && got.token && got.token === got.body.token,
        "a page of an origin named by --cors-origin takes a lock by fetch and reads its Lock-Token: " + JSON.stringify(got).slice(0, 120));
  const seen = await api(abase, "GET", "/v1/locks/ui.cors", null, key);
  check(seen.status === 200 && seen.body && seen.body.owner === "cors page" && seen.body.key_id === "ui-op",
        "the gateway holds it for that page");
  const rel = await page.evaluate(async ([u, k, t]) => {
    const r = await fetch(u, { method: "DELETE", headers: { Authorization: "Bearer " + k, "Lock-Token": t } });
    return r.status;
  }, [abase + "/v1/locks/ui.cors", key, got.token || ""]).catch(() => 0);
  check(rel === 200 && (await api(abase, "GET", "/v1/locks/ui.cors", null, key)).status === 404,
        "and releases it with its Lock-Token (" + rel + ")");
  await ctx.close();
}

main().catch((e) => { failed++; console.error("not ok - " + e.stack); }).finally(() => {
  console.log(`ui: ${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
});
