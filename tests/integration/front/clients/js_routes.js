// The `openwhisk` npm client's API gateway calls (ow.routes: create, list, get, delete) and a
// call through the gateway URL it answers. Prints one JSON object of observations;
// tests/integration/front/clients/test_clients_entities.py (test_js_routes) asserts on it.
// Usage: OW_APIHOST=http://127.0.0.1:3233 OW_AUTH=uuid:key OW_SYSTEM_AUTH=uuid:key \
//        NODE_PATH=.cache/node/node_modules node js_routes.js
const openwhisk = require("openwhisk");

const ow = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_AUTH });
// Another namespace: it must not see or change the guest's APIs.
const sys = openwhisk({ apihost: process.env.OW_APIHOST, api_key: process.env.OW_SYSTEM_AUTH });

const KIND = "nodejs:20";
const SHOP = `function main(p) {
  const seen = { method: p.__ow_method, path: p.__ow_path, name: p.name || null, qty: p.qty || null };
  return { statusCode: 201, headers: { "X-Shop": "yes" }, body: seen, seen };
}`;
const PLAIN = "function main() { return {}; }";

async function attempt(promise) {
  try {
    return { ok: await promise };
  } catch (e) {
    return { status: e.statusCode, error: e.error && e.error.error };
  }
}

// (base path, relative path, verb, action) of every operation in a getApi answer, sorted.
function operations(answer) {
  const out = [];
  for (const api of answer.apis || []) {
    const doc = api.value.apidoc;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [verb, op] of Object.entries(ops)) {
        if (verb !== "parameters") out.push([doc.basePath, path, verb, op["x-openwhisk"].action].join(" "));
      }
    }
  }
  return out.sort();
}

async function call(method, url, body) {
  const r = await fetch(url, {
    method,
    body: body === undefined ? undefined : JSON.stringify(body),
    headers: body === undefined ? {} : { "Content-Type": "application/json" },
  });
  const text = await r.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch (e) {}
  return { status: r.status, shop: r.headers.get("x-shop"), cors: r.headers.get("access-control-allow-origin"), body: parsed };
}

(async () => {
  const out = {};
  // A rerun on the same platform starts clean.
  await attempt(ow.routes.delete({ basepath: "/jsshop" }));
  for (const a of ["jsshop", "jsplain"]) await attempt(ow.actions.delete({ name: a }));

  await ow.actions.create({ name: "jsshop", action: SHOP, kind: KIND, annotations: { "web-export": true } });
  await ow.actions.create({ name: "jsplain", action: PLAIN, kind: KIND });

  const created = await ow.routes.create({
    basepath: "/jsshop", relpath: "/items", operation: "GET", action: "jsshop", name: "JS Shop",
  });
  out.created = { gwApiUrl: created.gwApiUrl, title: created.apidoc.info.title, basePath: created.apidoc.basePath };
  await ow.routes.create({
    basepath: "/jsshop", relpath: "/items", operation: "POST", action: "jsshop", responsetype: "http",
  });
  const withParam = await ow.routes.create({
    basepath: "/jsshop", relpath: "/items/{id}", operation: "GET", action: "/_/jsshop", responsetype: "http",
  });
  out.pathParameters = withParam.apidoc.paths["/items/{id}"].get.parameters.map((p) => [p.name, p.in]);
  out.nonWeb = await attempt(ow.routes.create({
    basepath: "/jsshop", relpath: "/plain", operation: "GET", action: "jsplain",
  }));
  out.missingAction = await attempt(ow.routes.create({
    basepath: "/jsshop", relpath: "/none", operation: "GET", action: "nosuchaction",
  }));

  out.list = operations(await ow.routes.list());
  out.listFiltered = operations(await ow.routes.list({ basepath: "/jsshop", relpath: "/items", operation: "POST" }));
  out.get = operations(await ow.routes.get({ basepath: "/jsshop" }));
  out.getByName = operations(await ow.routes.get({ name: "JS Shop" }));
  out.otherNamespaceList = operations(await sys.routes.list());
  out.otherNamespaceDelete = await attempt(sys.routes.delete({ basepath: "/jsshop" }));

  // Through the gateway URL the create answered, without credentials.
  const base = created.gwApiUrl;
  out.callJson = await call("GET", `${base}/items?name=pen`);
  out.callHttp = await call("POST", `${base}/items?name=ink`, { qty: 3 });
  out.callParam = await call("GET", `${base}/items/42`);
  out.callMissing = await call("GET", `${base}/nothing`);

  out.deleteOperation = await ow.routes.delete({ basepath: "/jsshop", relpath: "/items", operation: "POST" });
  out.afterDeleteOperation = operations(await ow.routes.get({ basepath: "/jsshop" }));
  out.callDeleted = await call("POST", `${base}/items`);
  out.deleteApi = await ow.routes.delete({ basepath: "/jsshop" });
  out.afterDelete = operations(await ow.routes.list());
  out.deleteAgain = await attempt(ow.routes.delete({ basepath: "/jsshop" }));
  out.callAfterDelete = await call("GET", `${base}/items`);

  for (const a of ["jsshop", "jsplain"]) await ow.actions.delete({ name: a });
  console.log(JSON.stringify(out));
})().catch((e) => {
  console.error(e && e.stack ? e.stack : e, e && e.error ? JSON.stringify(e.error) : "");
  process.exit(1);
});
