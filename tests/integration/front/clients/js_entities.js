// The `openwhisk` npm client through every entity kind: sequences, packages (bindings, packages
// shared with another namespace), triggers and rules, activation list filters, namespaces.
// Prints one JSON object of observations; tests/integration/front/clients/test_clients_entities.py asserts on it.
// Usage: OW_APIHOST=http://127.0.0.1:3233 OW_AUTH=uuid:key OW_SYSTEM_AUTH=uuid:key \
//        NODE_PATH=.cache/node/node_modules node js_entities.js
const openwhisk = require("openwhisk");

const ow = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_AUTH });
// The stock whisk.system identity, another namespace: it uses what the guest publishes.
const sys = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_SYSTEM_AUTH });

const KIND = "nodejs:20";
const INC = "function main(p) { return { n: (p.n || 0) + (p.step || 1) }; }";
const DOUBLE = "function main(p) { return { n: p.n * 2 }; }";
const FAIL = "function main(p) { return { error: 'boom at ' + p.n }; }";
const GREET = "function main(p) { return { greeting: p.greeting, punct: p.punct, lang: p.lang, name: p.name }; }";
const ONEVENT = "function main(p) { return { from: p.from, both: p.both, fired: p.fired }; }";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function attempt(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { status: e.statusCode, error: e.error };
  }
}

// Polls until fn() returns something truthy (activations are written asynchronously).
async function until(fn, what, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await fn().catch(() => null);
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(200);
  }
}

// The HTTP status a call ends with (200 when it succeeds).
async function statusOf(promise) {
  const r = await attempt(promise);
  return r.status || (r.ok === undefined ? null : 200);
}

const activation = (id) => until(() => ow.activations.get({ name: id }), `activation ${id}`);

async function names(promise) {
  return (await promise).map((e) => e.name).sort();
}

(async () => {
  const out = {};
  // A rerun on the same platform starts clean (deletes in dependency order, errors ignored).
  for (const r of ["jsrule", "jsseqrule"]) await attempt(ow.rules.delete({ name: r }));
  await attempt(ow.triggers.delete({ name: "jstrig" }));
  for (const a of ["jsseq", "jsseqfail", "jsinc", "jsdouble", "jsfail", "jsonevent", "jspkg/greet"]) {
    await attempt(ow.actions.delete({ name: a }));
  }
  await attempt(ow.rules.delete({ name: "jsrulebad" }));
  for (const p of ["jsbindshared", "jsbindprivate"]) await attempt(sys.packages.delete({ name: p }));
  for (const a of ["jsshared/greet", "jsprivate/greet"]) await attempt(ow.actions.delete({ name: a }));
  for (const p of ["jsbind", "jsbindnone", "jspkg", "jsshared", "jsprivate"]) {
    await attempt(ow.packages.delete({ name: p }));
  }

  // -- sequences --
  await ow.actions.create({ name: "jsinc", action: INC, kind: KIND });
  await ow.actions.create({ name: "jsdouble", action: DOUBLE, kind: KIND });
  await ow.actions.create({ name: "jsfail", action: FAIL, kind: KIND });
  // Components as a CLI sends them: fully qualified, with `_` for the caller's namespace.
  out.seqCreated = await ow.actions.create({ name: "jsseq", sequence: ["/_/jsinc", "/_/jsdouble"] });
  const seq = await ow.actions.get({ name: "jsseq" });
  out.seqExec = { kind: seq.exec.kind, components: seq.exec.components };
  out.seqResult = await ow.actions.invoke({ name: "jsseq", blocking: true, result: true, params: { n: 3 } });
  const seqRecord = await ow.actions.invoke({ name: "jsseq", blocking: true, params: { n: 5, step: 2 } });
  out.seqRecord = {
    result: seqRecord.response.result,
    success: seqRecord.response.success,
    logs: seqRecord.logs,
    annotations: seqRecord.annotations,
  };
  out.seqComponents = [];
  for (const id of seqRecord.logs) {
    const c = await activation(id);
    out.seqComponents.push({
      name: c.name,
      result: c.response.result,
      cause: c.cause,
      causedBy: (c.annotations.find((a) => a.key === "causedBy") || {}).value,
    });
  }
  out.seqId = seqRecord.activationId;
  // A component that returns {error} stops the sequence: the third never runs.
  await ow.actions.create({ name: "jsseqfail", sequence: ["/_/jsinc", "/_/jsfail", "/_/jsdouble"] });
  const failed = await attempt(ow.actions.invoke({ name: "jsseqfail", blocking: true, params: { n: 1 } }));
  out.seqFail = {
    status: failed.status,
    result: failed.error && failed.error.response && failed.error.response.result,
    success: failed.error && failed.error.response && failed.error.response.success,
    logs: failed.error && failed.error.logs,
  };
  const nb = await ow.actions.invoke({ name: "jsseq", params: { n: 10 } });
  out.seqNonBlocking = (await activation(nb.activationId)).response.result;
  // A sequence of sequences.
  await attempt(ow.actions.delete({ name: "jsseq2" }));
  await ow.actions.create({ name: "jsseq2", sequence: ["/_/jsseq", "/_/jsinc"] });
  out.seqOfSeq = await ow.actions.invoke({ name: "jsseq2", blocking: true, result: true, params: { n: 1 } });
  await ow.actions.delete({ name: "jsseq2" });

  // -- packages and bindings --
  out.pkgCreated = await ow.packages.create({
    name: "jspkg",
    package: { parameters: [{ key: "greeting", value: "Hello" }, { key: "punct", value: "." }, { key: "lang", value: "en" }] },
  });
  await ow.actions.create({ name: "jspkg/greet", action: GREET, kind: KIND, params: { punct: "!" } });
  // Parameters: package < action < invocation.
  out.pkgInvoke = await ow.actions.invoke({ name: "jspkg/greet", blocking: true, result: true, params: { name: "JS" } });
  const pkg = await ow.packages.get({ name: "jspkg" });
  out.pkgGet = { actions: (pkg.actions || []).map((a) => a.name), binding: pkg.binding };
  await ow.packages.create({
    name: "jsbind",
    package: { binding: { namespace: "_", name: "jspkg" }, parameters: [{ key: "greeting", value: "Howdy" }] },
  });
  // Parameters: package < binding < action < invocation.
  out.bindInvoke = await ow.actions.invoke({ name: "jsbind/greet", blocking: true, result: true, params: { name: "B" } });
  out.bindInvokeOverride = await ow.actions.invoke({
    name: "jsbind/greet", blocking: true, result: true, params: { name: "B", greeting: "Yo" },
  });
  const bind = await ow.packages.get({ name: "jsbind" });
  out.bindGet = {
    binding: bind.binding,
    parameters: Object.fromEntries((bind.parameters || []).map((p) => [p.key, p.value])),
    actions: (bind.actions || []).map((a) => a.name),
  };
  const pkgs = await ow.packages.list();
  out.pkgList = Object.fromEntries(pkgs.map((p) => [p.name, Boolean(p.binding)]));
  out.bindMissing = await attempt(ow.packages.create({
    name: "jsbindnone", package: { binding: { namespace: "_", name: "nosuchpkg" } },
  }));
  out.pkgNotEmptyDelete = await attempt(ow.packages.delete({ name: "jspkg" }));
  out.actionsInList = await names(ow.actions.list({ limit: 0 }));

  // -- packages shared across namespaces: the guest publishes one and keeps one private;
  //    whisk.system (another namespace) reads, lists, invokes and binds what is published --
  await ow.packages.create({
    name: "jsshared",
    package: { publish: true, parameters: [{ key: "greeting", value: "Shared" }] },
  });
  await ow.actions.create({ name: "jsshared/greet", action: GREET, kind: KIND, params: { punct: "?" } });
  await ow.packages.create({ name: "jsprivate", package: { publish: false } });
  await ow.actions.create({ name: "jsprivate/greet", action: GREET, kind: KIND });
  const shared = await attempt(sys.packages.get({ name: "/guest/jsshared" }));
  out.sharedGet = shared.ok
    ? { publish: shared.ok.publish, actions: (shared.ok.actions || []).map((a) => a.name) }
    : shared;
  out.sharedList = await attempt(names(sys.packages.list({ namespace: "guest" })));
  out.privateGet = await statusOf(sys.packages.get({ name: "/guest/jsprivate" }));
  out.sharedInvoke = await attempt(sys.actions.invoke({
    name: "/guest/jsshared/greet", blocking: true, result: true, params: { name: "G" },
  }));
  out.privateInvoke = await statusOf(sys.actions.invoke({ name: "/guest/jsprivate/greet", blocking: true }));
  out.sharedBind = await attempt(sys.packages.create({
    name: "jsbindshared",
    package: { binding: { namespace: "guest", name: "jsshared" }, parameters: [{ key: "greeting", value: "Mine" }] },
  }));
  out.sharedBindInvoke = await attempt(sys.actions.invoke({
    name: "jsbindshared/greet", blocking: true, result: true, params: { name: "G" },
  }));
  out.privateBind = await statusOf(sys.packages.create({
    name: "jsbindprivate", package: { binding: { namespace: "guest", name: "jsprivate" } },
  }));

  // -- triggers and rules --
  await ow.actions.create({ name: "jsonevent", action: ONEVENT, kind: KIND });
  out.triggerCreated = await ow.triggers.create({
    name: "jstrig",
    trigger: { parameters: [{ key: "from", value: "trigger" }, { key: "both", value: "trigger" }] },
  });
  out.ruleCreated = await ow.rules.create({ name: "jsrule", trigger: "jstrig", action: "jsonevent" });
  await ow.rules.create({ name: "jsseqrule", trigger: "jstrig", action: "jsseq" });
  const rule = await ow.rules.get({ name: "jsrule" });
  out.ruleGet = { status: rule.status, trigger: rule.trigger, action: rule.action };
  out.rulesList = await names(ow.rules.list());
  out.ruleBadAction = await statusOf(ow.rules.create({ name: "jsrulebad", trigger: "jstrig", action: "nosuchaction" }));
  const fired = await ow.triggers.invoke({ name: "jstrig", params: { fired: 1, both: "fire", n: 2 } });
  out.fireId = fired.activationId;
  const triggerActivation = await until(async () => {
    const a = await ow.activations.get({ name: fired.activationId });
    return a.logs && a.logs.length === 2 ? a : null;
  }, "the trigger activation with two rule results");
  out.triggerActivation = {
    name: triggerActivation.name,
    result: triggerActivation.response.result,
    logs: triggerActivation.logs.map((l) => JSON.parse(l)),
  };
  out.ruleResults = {};
  for (const entry of out.triggerActivation.logs) {
    out.ruleResults[entry.rule] = (await activation(entry.activationId)).response.result;
  }
  out.oneventListed = await until(async () => {
    const list = await ow.activations.list({ name: "jsonevent", limit: 50 });
    return list.length ? list.map((a) => a.activationId) : null;
  }, "jsonevent in the activation list");

  // Disabled: firing runs nothing (stock answers 204, no trigger activation).
  out.disable = await ow.rules.disable({ name: "jsrule" });
  await ow.rules.disable({ name: "jsseqrule" });
  out.ruleDisabled = (await ow.rules.get({ name: "jsrule" })).status;
  const trig = await ow.triggers.get({ name: "jstrig" });
  out.triggerRules = Object.fromEntries(Object.entries(trig.rules || {}).map(([k, v]) => [k, v.status]));
  const before = (await ow.activations.list({ name: "jsonevent", limit: 50 })).length;
  out.firedDisabled = await attempt(ow.triggers.invoke({ name: "jstrig", params: { fired: 2 } }));
  await sleep(3000);
  out.afterDisabledFire = (await ow.activations.list({ name: "jsonevent", limit: 50 })).length - before;
  // Enabled again: runs again with the trigger's parameters updated.
  await ow.triggers.update({ name: "jstrig", trigger: { parameters: [{ key: "from", value: "updated" }] } });
  out.enable = await ow.rules.enable({ name: "jsrule" });
  out.ruleEnabled = (await ow.rules.get({ name: "jsrule" })).status;
  const fired3 = await ow.triggers.invoke({ name: "jstrig", params: { fired: 3 } });
  const t3 = await until(async () => {
    const a = await ow.activations.get({ name: fired3.activationId });
    return a.logs && a.logs.length ? a : null;
  }, "the third trigger activation");
  const t3logs = t3.logs.map((l) => JSON.parse(l));
  out.thirdFire = {
    rules: t3logs.filter((l) => l.success).map((l) => l.rule).sort(),
    result: (await activation(t3logs.find((l) => l.success).activationId)).response.result,
  };

  // -- activation list filters (newest first) --
  const mine = [];
  for (let i = 0; i < 3; i++) {
    mine.unshift((await ow.actions.invoke({ name: "jsinc", blocking: true, params: { n: 100 + i } })).activationId);
    await sleep(20);
  }
  // Records are stored after the blocking answer (as stock does): wait until all three are listed.
  const all = await until(async () => {
    const list = await ow.activations.list({ name: "jsinc", limit: 200 });
    return mine.every((id) => list.some((a) => a.activationId === id)) ? list : null;
  }, "the three jsinc activations in the list");
  out.mine = mine;
  out.incTotal = all.length;
  out.incNames = [...new Set(all.map((a) => a.name))];
  out.incNewestFirst = all.every((a, i) => i === 0 || all[i - 1].start >= a.start);
  out.limit1 = (await ow.activations.list({ name: "jsinc", limit: 1 })).map((a) => a.activationId);
  out.newestId = all[0].activationId;
  out.skip1 = (await ow.activations.list({ name: "jsinc", skip: 1, limit: 200 })).map((a) => a.activationId);
  out.allIds = all.map((a) => a.activationId);
  // Bounds between two starts, so that inclusive or exclusive bounds give the same answer.
  const since = Math.floor((all[2].start + all[1].start) / 2);
  const upto = Math.floor((all[1].start + all[0].start) / 2);
  out.since = (await ow.activations.list({ name: "jsinc", since, limit: 200 })).map((a) => a.activationId);
  out.upto = (await ow.activations.list({ name: "jsinc", upto, limit: 200 })).map((a) => a.activationId);
  out.starts = all.slice(0, 3).map((a) => a.start);
  const docs = await ow.activations.list({ name: "jsinc", limit: 1, docs: true });
  out.docsResult = docs[0].response && docs[0].response.result;
  const summary = await ow.activations.list({ name: "jsinc", limit: 1 });
  out.summaryKeys = Object.keys(summary[0]).sort();
  out.count = await ow.activations.list({ name: "jsinc", count: true });

  // -- namespaces --
  out.namespaces = await ow.namespaces.list();
  const ns = await ow.namespaces.get();
  out.namespaceGet = {
    actions: ns.actions.map((a) => a.name).sort(),
    packages: ns.packages.map((p) => p.name).sort(),
    triggers: ns.triggers.map((t) => t.name).sort(),
    rules: ns.rules.map((r) => r.name).sort(),
  };

  // -- deletes (rules, trigger, actions, packages) --
  out.deleted = [];
  for (const r of ["jsrule", "jsseqrule"]) out.deleted.push((await ow.rules.delete({ name: r })).name);
  out.deleted.push((await ow.triggers.delete({ name: "jstrig" })).name);
  out.firedDeleted = await statusOf(ow.triggers.invoke({ name: "jstrig" }));
  for (const a of ["jsseq", "jsseqfail", "jsinc", "jsdouble", "jsfail", "jsonevent", "jspkg/greet"]) {
    out.deleted.push((await ow.actions.delete({ name: a })).name);
  }
  for (const p of ["jsbindshared", "jsbindprivate"]) await attempt(sys.packages.delete({ name: p }));
  for (const a of ["jsshared/greet", "jsprivate/greet"]) out.deleted.push((await ow.actions.delete({ name: a })).name);
  for (const p of ["jsbind", "jspkg", "jsshared", "jsprivate"]) {
    out.deleted.push((await ow.packages.delete({ name: p })).name);
  }
  // (whatever a wrong answer above may have created)
  await attempt(ow.packages.delete({ name: "jsbindnone" }));
  await attempt(ow.rules.delete({ name: "jsrulebad" }));
  const left = await ow.namespaces.get();
  out.leftover = [...left.actions, ...left.packages, ...left.triggers, ...left.rules]
    .map((e) => e.name)
    .filter((n) => n.startsWith("js"));
  console.log(JSON.stringify(out));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e, e && e.error ? JSON.stringify(e.error) : "");
  process.exit(1);
});
