// The live console in a real headless Chromium (Debian's, driven by playwright-core): create
// two CPU-bound actions in the browser, invoke them, send bursts on one action core and watch
// the calls wait in the queue view with their priorities, then run on the core; the
// histograms fill in. Prints what the page showed, as JSON, for tests/integration/front/console/test_console.py.
//
// Usage: CONSOLE_URL=http://127.0.0.1:PORT/console OUT_DIR=... PROFILE_DIR=...
//        NODE_PATH=.cache/browser/node_modules node console_flow.js
const path = require("path");
const { chromium } = require("playwright-core");

const SPIN = [
  "import time",
  "",
  "",
  "def main(args):",
  "    end = time.time() + float(args.get('seconds', 1))",
  "    spins = 0",
  "    while time.time() < end:",
  "        spins += 1",
  "    return {'spins': spins}",
  "",
].join("\n");
const ACTIONS = { slow: 1.2, quick: 0.3 };
const BURST = 3;

const out = { created: {}, invoked: {}, bursts: [], queued: {}, onCore: {}, errors: [] };

function log(...args) {
  process.stderr.write(`[console_flow ${new Date().toISOString()}] ${args.join(" ")}\n`);
}

async function select(page, name) {
  await page.click(`#action-list li[data-name="${name}"] button`);
  await page.waitForFunction((n) => document.querySelector("#action-name").value === n, name);
}

async function burst(page) {
  // All of it at once: the first slow call takes the core, the rest wait.
  const ids = {};
  for (const [name, seconds] of Object.entries(ACTIONS)) {
    await select(page, name);
    await page.fill("#action-params", JSON.stringify({ seconds }));
    await page.fill("#invoke-count", String(BURST));
    await page.click("#invoke-many");
    await page.waitForFunction((n) => document.querySelector("#message").textContent.includes(`calls of ${n}`), name);
    ids[name] = JSON.parse(await page.textContent("#result")).activationIds;
  }
  return ids;
}

/** What the scheduler view shows now: queued rows, the calls on each core, the memory line. */
function view(page) {
  return page.evaluate(() => ({
    queue: [...document.querySelectorAll("#queue tbody tr")].map((tr) => ({
      id: tr.dataset.activation,
      function: tr.dataset.function,
      rank: tr.children[0].textContent,
      priority: tr.querySelector("td.priority").textContent,
    })),
    cores: [...document.querySelectorAll("#cores .core")].map((c) => ({
      core: c.dataset.core,
      calls: [...c.querySelectorAll(".call")].map((li) => ({ id: li.dataset.activation, function: li.dataset.function, text: li.textContent })),
    })),
    memory: { ...document.querySelector("#memory").dataset, text: document.querySelector("#memory-totals").textContent },
    functions: Object.fromEntries(
      [...document.querySelectorAll("#functions tbody tr")].map((tr) => [tr.dataset.function, Number(tr.querySelector("td.calls").textContent)]),
    ),
  }));
}

/** Watch the view until every call of the burst has been seen finishing; ``onQueue`` runs
 * once, the first time at least ``BURST`` calls wait. */
async function watch(page, total, onQueue) {
  const deadline = Date.now() + 90_000;
  let called = false;
  for (;;) {
    const v = await view(page);
    for (const row of v.queue) out.queued[row.id] = row;
    for (const core of v.cores) for (const c of core.calls) out.onCore[c.id] = { core: core.core, function: c.function, text: c.text };
    if (!called && v.queue.length >= BURST && onQueue) {
      called = true;
      await onQueue(v);
    }
    const done = Object.keys(ACTIONS).every((n) => (v.functions[`guest/${n}`] || 0) >= total);
    if (done && v.queue.length === 0) return v;
    if (Date.now() > deadline) throw new Error(`the calls did not all finish: ${JSON.stringify(v)}`);
    await page.waitForTimeout(100);
  }
}

(async () => {
  const browser = await chromium.launchPersistentContext(process.env.PROFILE_DIR, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1500, height: 1000 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  try {
    const page = browser.pages()[0] || (await browser.newPage());
    page.on("pageerror", (e) => out.errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && out.errors.push(m.text()));
    await page.goto(process.env.CONSOLE_URL);
    await page.waitForSelector("#cores .core", { timeout: 30_000 }); // live data arrived
    out.policy = await page.textContent("#policy");
    out.keyPrefilled = (await page.inputValue("#auth")).length > 0;
    out.chartsMissing = !(await page.isHidden("#charts-missing"));

    for (const [name, seconds] of Object.entries(ACTIONS)) {
      await page.click("#new-action");
      await page.fill("#action-name", name);
      await page.selectOption("#action-kind", "python:3.11");
      await page.fill("#action-code", SPIN);
      await page.click("#save");
      await page.waitForSelector(`#action-list li[data-name="${name}"]`);
      out.created[name] = await page.textContent("#message");
      await page.fill("#action-params", JSON.stringify({ seconds }));
      await page.click("#invoke");
      await page.waitForFunction(() => document.querySelector("#result").textContent.includes("spins"), null, { timeout: 60_000 });
      out.invoked[name] = { message: await page.textContent("#message"), result: JSON.parse(await page.textContent("#result")) };
    }
    log("actions created and invoked; first burst");
    out.bursts.push(await burst(page));
    await watch(page, 1 + BURST);
    log("second burst");
    out.bursts.push(await burst(page));
    const shot = path.join(process.env.OUT_DIR, "console.png");
    await watch(page, 1 + 2 * BURST, async (v) => {
      out.whileQueued = v;
      await page.screenshot({ path: shot, fullPage: true });
      out.screenshot = shot;
    });
    out.final = await view(page);
    out.charts = await page.evaluate(() => {
      const c = window.consoleCharts;
      if (!c) return null;
      const sum = (chart) => Object.fromEntries(chart.data.datasets.map((d) => [d.label, d.data.reduce((a, b) => a + b, 0)]));
      return { response: sum(c.response), stretch: sum(c.stretch), responseLabels: c.response.data.labels, stretchLabels: c.stretch.data.labels };
    });
    out.finalScreenshot = path.join(process.env.OUT_DIR, "console-final.png");
    await page.screenshot({ path: out.finalScreenshot, fullPage: true });
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.stdout.write(JSON.stringify(out));
  process.exit(1);
});
