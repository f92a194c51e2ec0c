// The `openwhisk` npm client (Apache's JS client library) through one user flow.
// Usage: OW_APIHOST=http://127.0.0.1:3233 OW_AUTH=uuid:key NODE_PATH=... node js_flow.js ZIP_PATH
const fs = require("fs");
const openwhisk = require("openwhisk");

const ow = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_AUTH });
const code = 'def main(a):\n    print("js-flow log")\n    return {"msg": a.get("greeting", "Hi") + " " + a.get("name", "x")}\n';

async function attempt(promise) {
  try { return { ok: await promise }; } catch (e) { return { status: e.statusCode, error: e.message }; }
}

(async () => {
  const out = {};
  await attempt(ow.actions.delete({ name: "jshello" }));
  await attempt(ow.actions.delete({ name: "jszip" }));
  out.created = await ow.actions.create({ name: "jshello", action: code, kind: "python:3.11",
    params: { greeting: "Hello" } });
  out.result = await ow.actions.invoke({ name: "jshello", blocking: true, result: true,
    params: { name: "JS" } });
  const full = await ow.actions.invoke({ name: "jshello", blocking: true, params: { name: "B" } });
  out.blockingStatus = full.response.status;
  const nb = await ow.actions.invoke({ name: "jshello", params: { name: "NB" } });
  out.nonBlockingId = nb.activationId;
  let activation = null;
  for (let i = 0; i < 100 && !activation; i++) {
    const got = await attempt(ow.activations.get({ name: nb.activationId }));
    if (got.ok) activation = got.ok; else await new Promise((r) => setTimeout(r, 100));
  }
  out.activationResult = activation.response.result;
  out.logs = (await ow.activations.logs({ name: nb.activationId })).logs;
  out.resultOnly = (await ow.activations.result({ name: nb.activationId })).result;
  out.list = (await ow.actions.list()).map((a) => a.name).sort();
  out.activations = (await ow.activations.list({ name: "jshello", limit: 50 })).length;
  await ow.actions.update({ name: "jshello", params: { greeting: "Hey" } });
  out.updated = await ow.actions.invoke({ name: "jshello", blocking: true, result: true,
    params: { name: "U" } });
  const zip = fs.readFileSync(process.argv[2]);
  await ow.actions.create({ name: "jszip", action: zip, kind: "python:3.11" });
  out.zip = await ow.actions.invoke({ name: "jszip", blocking: true, result: true });
  out.missing = await attempt(ow.actions.invoke({ name: "nope", blocking: true }));
  out.badKind = await attempt(ow.actions.create({ name: "bad", action: "x", kind: "cobol:1" }));
  out.deleted = (await ow.actions.delete({ name: "jshello" })).name;
  out.afterDelete = await attempt(ow.actions.get({ name: "jshello" }));
  console.log(JSON.stringify(out));
})().catch((e) => { console.error(e); process.exit(1); });
