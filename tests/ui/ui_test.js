// ui_test.js -- the status page (/ui/) in a real browser: Debian's chromium
// driven by playwright-core, against a real redis-server and gateway that
// this test starts on free loopback ports (in a temporary directory) and
// stops.  It acquires locks itself, loads the page, sees them, filters by
// prefix, force-releases one (accepting the confirmation) and sees it go;
// it also checks a phone-sized screen.  Screenshots: docs/ui.png (wide) and
// docs/ui-phone.png.  Run by `make ui-test`; closing line "ui: N passed, N failed".
"use strict";

const { chromium } = require("playwright-core");
const { spawn, execFileSync } = require("child_process");
const fs = require("fs");
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

async function api(base, method, p, body) {
  const r = await fetch(base + p, { method, body: body ? JSON.stringify(body) : undefined });
  return { status: r.status, body: await r.json().catch(() => null) };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lockgate-ui-"));
  const rport = await freePort(), gport = await freePort();
  start("redis-server", ["--port", String(rport), "--bind", "127.0.0.1", "--save", "",
                         "--dir", dir], path.join(dir, "redis.log"));
  await waitPort(rport, 10000);
  start(path.join(ROOT, BUILD, "lockgate"), ["--listen", "127.0.0.1:" + gport,
        "--redis", "redis://127.0.0.1:" + rport], path.join(dir, "gw.log"));
  await waitPort(gport, 10000);
  const base = "http://127.0.0.1:" + gport;

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
    const names = async () => page.$$eval("#held tbody tr", (rows) => rows.map((r) => r.dataset.name));
    let shown = await names();
    check(held.every((n) => shown.includes(n)), "the page lists every lock the test acquired");
    const owner = await page.textContent(`#held tr[data-name="ui.orders:2"] .owner`);
    check(owner === "ui-test ui.orders:2", "a holder's owner is shown");
    await page.waitForSelector("#ids td", { timeout: 10000 }).catch(() => {});
    check((await page.textContent("#ids")).includes("ui.invoices"), "the id namespaces in use are listed");

    // Filter by prefix.
    await page.fill("#prefix", "ui.orders");
    await page.click("#filter button[type=submit]");
    await page.waitForFunction(() => !document.querySelector('#held tr[data-name="other.cron"]'), null, { timeout: 10000 }).catch(() => {});
    shown = await names();
    check(shown.length === 3 && shown.every((n) => n.startsWith("ui.orders")), "filtering by prefix shows only those names");

    // Charts fill in after two scrapes of /metrics.
    await page.waitForFunction(() => document.querySelector("#c-rate polyline"), null, { timeout: 10000 }).catch(() => {});
    check(!!(await page.$("#c-rate polyline")), "the request-rate chart is drawn from /metrics");
    await page.screenshot({ path: path.join(ROOT, "docs", "ui.png"), fullPage: true });

    // Force-release one, accepting the confirmation, and see it go.
    await page.click(`#held tr[data-name="ui.orders:2"] button.danger`);
    await page.waitForFunction(() => !document.querySelector('#held tr[data-name="ui.orders:2"]'), null, { timeout: 10000 }).catch(() => {});
    check(dialogs.length === 1 && dialogs[0].includes("ui.orders:2"), "force release asks for confirmation first");
    shown = await names();
    check(!shown.includes("ui.orders:2") && shown.length === 2, "the force-released lock is gone from the page");
    const gone = await api(base, "GET", "/v1/locks/ui.orders:2");
    check(gone.status === 404, "the gateway agrees: nobody holds it");
    check((await page.textContent("#status")).includes("Force-released"), "the page says what it did");

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
    check((await names()).includes("ui.pool"), "semaphores are listed");
    check(errors.length === 0, "no script errors in the page" + (errors.length ? ": " + errors.join("; ") : ""));

    // A phone: nothing wider than the screen, the button big enough to hit.
    const phone = await browser.newPage({ viewport: { width: 360, height: 740 }, isMobile: true, hasTouch: true });
    await phone.goto(base + "/ui/");
    await phone.waitForSelector('#held tr[data-name="ui.orders:1"]', { timeout: 10000 }).catch(() => {});
    const width = await phone.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 360, "a 360 px screen needs no sideways scrolling (" + width + " px)");
    const box = await phone.locator('#held tr[data-name="ui.orders:1"] button.danger').boundingBox();
    check(box && box.height >= 40, "the force-release button is large enough to tap on a phone");
    await phone.screenshot({ path: path.join(ROOT, "docs", "ui-phone.png"), fullPage: false });
  } finally {
    await browser.close();
    stopAll();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => { failed++; console.error("not ok - " + e.stack); }).finally(() => {
  console.log(`ui: ${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
});
