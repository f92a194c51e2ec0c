// The playground: list, edit, create, invoke and delete actions through the REST API.

import { $, h, seconds } from "./dom.js";

const TEMPLATES = {
  python: 'def main(args):\n    name = args.get("name", "world")\n    return {"greeting": f"Hello {name}!"}\n',
  nodejs: 'function main(args) {\n  const name = args.name || "world";\n  return { greeting: `Hello ${name}!` };\n}\n',
};

function template(kind) {
  return TEMPLATES[kind.split(":")[0]] || "";
}

export class Actions {
  constructor(api) {
    this.api = api;
    this.selected = null;
    $("#editor").addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
    $("#new-action").addEventListener("click", () => this.edit(null));
    $("#invoke").addEventListener("click", () => this.invokeOnce());
    $("#invoke-many").addEventListener("click", () => this.invokeMany());
    $("#delete").addEventListener("click", () => this.remove());
    $("#action-kind").addEventListener("change", () => {
      if (!this.selected && !$("#action-code").value.trim()) $("#action-code").value = template($("#action-kind").value);
    });
  }

  setKinds(kinds) {
    const select = $("#action-kind");
    select.replaceChildren(...kinds.map((k) => h("option", { value: k }, k)));
    // The newest python, else the first kind.
    const python = kinds.filter((k) => /^python:3\.\d+$/.test(k)).sort((a, b) => Number(a.split(".")[1]) - Number(b.split(".")[1]));
    select.value = python.pop() || kinds[0] || "";
    if (!$("#action-code").value) $("#action-code").value = template(select.value);
  }

  say(text, error = false) {
    const el = $("#message");
    el.textContent = text;
    el.className = error ? "error" : "muted";
  }

  async refresh() {
    const { ok, status, data } = await this.api.listActions();
    if (!ok) {
      this.say(`listing actions: HTTP ${status} ${data?.error ?? ""}`, true);
      return false;
    }
    const items = data.map((a) => {
      const name = a.namespace.includes("/") ? `${a.namespace.split("/").slice(1).join("/")}/${a.name}` : a.name;
      const kind = (a.annotations || []).find((x) => x.key === "exec")?.value ?? "";
      return h(
        "li",
        { "data-name": name, class: name === this.selected ? "selected" : "" },
        h("button", { type: "button", onclick: () => this.load(name) }, name, h("small", {}, kind)),
      );
    });
    $("#action-list").replaceChildren(...(items.length ? items : [h("li", { class: "muted" }, "no action yet")]));
    return true;
  }

  edit(action) {
    this.selected = action?.name ?? null;
    $("#action-name").value = action?.name ?? "";
    $("#action-name").readOnly = Boolean(action);
    if (action) $("#action-kind").value = action.kind;
    $("#action-code").value = action?.code ?? template($("#action-kind").value);
    $("#result").textContent = "";
    this.say(action ? `editing ${action.name}` : "a new action: name it, write main(args), save");
    for (const li of document.querySelectorAll("#action-list li")) {
      li.classList.toggle("selected", li.dataset.name === this.selected);
    }
  }

  async load(name) {
    const { ok, status, data } = await this.api.getAction(name);
    if (!ok) return this.say(`${name}: HTTP ${status} ${data?.error ?? ""}`, true);
    const pkg = data.namespace.includes("/") ? `${data.namespace.split("/").slice(1).join("/")}/` : "";
    this.edit({ name: pkg + data.name, kind: data.exec.kind, code: data.exec.code ?? "" });
  }

  params() {
    const text = $("#action-params").value.trim() || "{}";
    try {
      const value = JSON.parse(text);
      if (value && typeof value === "object" && !Array.isArray(value)) return value;
    } catch {
      // reported below
    }
    this.say("parameters must be a JSON object, e.g. {\"name\": \"you\"}", true);
    return null;
  }

  async save() {
    const name = $("#action-name").value.trim();
    if (!name) return this.say("the action needs a name", true);
    const { ok, status, data } = await this.api.saveAction(name, $("#action-kind").value, $("#action-code").value, []);
    if (!ok) return this.say(`saving ${name}: HTTP ${status} ${data?.error ?? ""}`, true);
    this.selected = name;
    $("#action-name").readOnly = true;
    this.say(`saved ${name} (version ${data.version})`);
    await this.refresh();
  }

  current() {
    const name = $("#action-name").value.trim();
    if (!name || name !== this.selected) {
      this.say("save the action first", true);
      return null;
    }
    return name;
  }

  async invokeOnce() {
    const name = this.current();
    const params = this.params();
    if (!name || !params) return;
    this.say(`invoking ${name}…`);
    const started = performance.now();
    const { status, data } = await this.api.invoke(name, params, true);
    const took = (performance.now() - started) / 1000;
    if (status === 202) {
      this.say(`${name} still runs (HTTP 202): activation ${data.activationId}`);
      return;
    }
    if (!data?.response) {
      this.say(`invoking ${name}: HTTP ${status} ${data?.error ?? ""}`, true);
      return;
    }
    const cold = (data.annotations || []).some((a) => a.key === "initTime");
    this.say(`${name}: ${data.response.status} in ${seconds(took)} (${cold ? "cold" : "warm"}, ran ${data.duration} ms)`, !data.response.success);
    $("#result").textContent = JSON.stringify({ result: data.response.result, logs: data.logs, activationId: data.activationId }, null, 2);
  }

  async invokeMany() {
    const name = this.current();
    const params = this.params();
    if (!name || !params) return;
    const n = Math.max(1, Math.min(100, Number($("#invoke-count").value) || 1));
    const answers = await Promise.all(Array.from({ length: n }, () => this.api.invoke(name, params, false)));
    const ids = answers.filter((a) => a.ok).map((a) => a.data.activationId);
    this.say(`sent ${ids.length} of ${n} calls of ${name}: watch them in the scheduler`, ids.length < n);
    $("#result").textContent = JSON.stringify({ activationIds: ids }, null, 2);
  }

  async remove() {
    const name = this.current();
    if (!name) return;
    const { ok, status, data } = await this.api.deleteAction(name);
    if (!ok) return this.say(`deleting ${name}: HTTP ${status} ${data?.error ?? ""}`, true);
    this.edit(null);
    this.say(`deleted ${name}`);
    await this.refresh();
  }
}
