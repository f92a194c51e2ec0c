// The scheduler view: the queue in policy order with priorities, the calls on each core with
// their CPU shares, the pool's memory, and per-function response-time and stretch histograms
// (Chart.js).

import { $, colour, h, priority, seconds, share, shortId } from "./dom.js";

// The controller's own probe of the invoker (stock: whisk.system/invokerHealthTestAction<N>).
const HEALTH_TEST = /^whisk\.system\/invokerHealthTestAction\d+$/;

function responseLabels(edges) {
  const fmt = (s) => (s < 1 ? `${Math.round(s * 1000)} ms` : `${s} s`);
  return [...edges.map((e) => `≤ ${fmt(e)}`), `> ${fmt(edges[edges.length - 1])}`];
}

function stretchLabels(edges) {
  return [...edges.map((e) => `≤ ${e}`), `> ${edges[edges.length - 1]}`];
}

function barChart(canvas, title) {
  return new window.Chart(canvas, {
    type: "bar",
    data: { labels: [], datasets: [] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      plugins: { title: { display: true, text: title }, legend: { position: "bottom" } },
      scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "calls" }, ticks: { precision: 0 } } },
    },
  });
}

function callItem(call, extra) {
  return h(
    "li",
    { class: "call", "data-function": call.function, "data-activation": call.activationId, style: { borderLeftColor: colour(call.function) } },
    h("strong", {}, call.function),
    h("code", { title: call.activationId }, shortId(call.activationId)),
    h("span", { title: "expected CPU share (+ measured overrun)" }, `share ${share(call.share)}${call.overrun ? ` +${share(call.overrun)}` : ""}`),
    h("span", {}, extra),
  );
}

export class Scheduler {
  constructor(api) {
    this.api = api;
    this.charts = null;
    this.timer = null;
  }

  start(chartsAvailable, hint) {
    if (chartsAvailable && window.Chart) {
      this.charts = {
        response: barChart($("#response-chart"), "response time R"),
        stretch: barChart($("#stretch-chart"), "stretch R / p"),
      };
      window.consoleCharts = this.charts; // for the browser test and the curious
    } else {
      const missing = $("#charts-missing");
      missing.textContent = hint || "Charts need Chart.js: run `scripts/install.sh console` and reload.";
      missing.hidden = false;
    }
    const tick = async () => {
      try {
        await this.refresh();
      } catch (e) {
        $("#status").textContent = `scheduler view: ${e}`;
      }
      this.timer = setTimeout(tick, 1000);
    };
    tick();
  }

  unavailable(text) {
    const el = $("#scheduler-unavailable");
    el.textContent = text;
    el.hidden = !text;
    $("#scheduler-view").hidden = Boolean(text);
  }

  async refresh() {
    const { status, data } = await this.api.scheduler();
    if (status !== 200 || !data?.available) {
      this.unavailable(data?.error || `HTTP ${status}`);
      return;
    }
    this.unavailable("");
    $("#policy").textContent = data.policy;
    $("#policy-description").textContent = `${data.policyDescription}; the smallest priority runs first${data.preemption ? "; preemptive" : ""}.`;
    this.renderCores(data);
    this.renderMemory(data.memory);
    this.renderQueue(data);
    this.renderFunctions(data);
    $("#status").textContent = `live · ${new Date().toLocaleTimeString()}`;
  }

  renderCores(data) {
    const cards = data.cores.map((core) => {
      const used = Math.min(1, core.load / data.capacity);
      return h(
        "div",
        { class: `core${core.full ? " full" : ""}`, "data-core": core.core },
        h("div", { class: "core-head" }, h("strong", {}, `core ${core.core}`), h("span", {}, `load ${share(core.load)} / ${share(data.capacity)}${core.full ? " · full" : ""}`)),
        h("div", { class: "meter" }, h("div", { style: { width: `${(used * 100).toFixed(1)}%` } })),
        h("ul", {}, core.running.map((c) => callItem(c, `running ${seconds(c.runningS)}`))),
      );
    });
    if (data.unplaced.length) {
      cards.push(h("div", { class: "core" }, h("div", { class: "core-head" }, h("strong", {}, "shared CPU"), h("span", {}, "no core limit under this policy")), h("ul", {}, data.unplaced.map((c) => callItem(c, `running ${seconds(c.runningS)}`)))));
    }
    if (data.paused.length) {
      cards.push(h("div", { class: "core paused" }, h("div", { class: "core-head" }, h("strong", {}, "paused"), h("span", {}, "for a shorter call")), h("ul", {}, data.paused.map((c) => callItem(c, `paused ${seconds(c.pausedS)}`)))));
    }
    $("#cores").replaceChildren(...cards);
    $("#core-totals").textContent = `${data.runningTotal} running`;
  }

  // The pool's accounting: running calls at their limits, kept containers at their footprints.
  renderMemory(m) {
    const running = m.usedMemoryMB - m.keptMemoryMB;
    const width = (mb) => `${((100 * Math.min(mb, m.userMemoryMB)) / m.userMemoryMB).toFixed(1)}%`;
    const meter = $("#memory");
    Object.assign(meter.dataset, { used: m.usedMemoryMB, user: m.userMemoryMB, kept: m.keptMemoryMB, keptContainers: m.keptContainers });
    meter.querySelector(".running").style.width = width(running);
    meter.querySelector(".kept").style.width = width(m.keptMemoryMB);
    const kept = m.keepAlive === "limit" ? "at their limits" : "at their footprints";
    $("#memory-totals").textContent = `${m.usedMemoryMB} of ${m.userMemoryMB} MB · running calls ${running} MB · ${m.keptContainers} kept ${kept} ${m.keptMemoryMB} MB`;
  }

  renderQueue(data) {
    const rows = [...data.queue, ...data.gpuQueue.map((c) => ({ ...c, gpu: true }))].map((c) =>
      h(
        "tr",
        { "data-function": c.function, "data-activation": c.activationId },
        h("td", {}, c.gpu ? `gpu ${c.rank}` : c.rank),
        h("td", {}, h("span", { class: "dot", style: { background: colour(c.function) } }), c.function),
        h("td", {}, h("code", { title: c.activationId }, shortId(c.activationId))),
        h("td", { class: "priority" }, priority(c.priority)),
        h("td", {}, seconds(c.waitingS)),
        h("td", {}, seconds(c.expectedS)),
        h("td", {}, share(c.cpuShare)),
      ),
    );
    $("#queue tbody").replaceChildren(...rows);
    const total = data.queuedTotal + data.gpuQueuedTotal;
    $("#queue-empty").hidden = total > 0;
    $("#queue-totals").textContent = total > rows.length ? `${total} waiting, first ${rows.length} shown` : `${total} waiting`;
  }

  renderFunctions(data) {
    const fns = data.functions.filter((f) => !HEALTH_TEST.test(f.function));
    $("#functions tbody").replaceChildren(
      ...fns.map((f) =>
        h(
          "tr",
          { "data-function": f.function },
          h("td", {}, h("span", { class: "dot", style: { background: colour(f.function) } }), f.function),
          h("td", { class: "calls" }, f.calls),
          h("td", {}, seconds(f.meanResponseS)),
          h("td", {}, seconds(f.maxResponseS)),
          h("td", {}, f.meanStretch === null ? "–" : f.meanStretch.toFixed(2)),
          h("td", {}, seconds(f.expectedS)),
          h("td", {}, share(f.cpuShare)),
        ),
      ),
    );
    if (!this.charts) return;
    const shown = fns.slice(0, 8); // the most recently finished
    const datasets = (key) => shown.map((f) => ({ label: f.function, data: f[key], backgroundColor: colour(f.function) }));
    this.update(this.charts.response, responseLabels(data.responseEdgesS), datasets("response"));
    this.update(this.charts.stretch, stretchLabels(data.stretchEdges), datasets("stretch"));
  }

  update(chart, labels, datasets) {
    chart.data.labels = labels;
    chart.data.datasets = datasets;
    chart.update("none");
  }
}
