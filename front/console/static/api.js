// The REST API as the page uses it: the same routes and basic auth as `wsk` and the npm client.

const ACTIONS = "/api/v1/namespaces/_/actions";

/** An action name ("a" or "package/a") as a path, each segment escaped. */
function actionPath(name) {
  return `${ACTIONS}/${name.split("/").map(encodeURIComponent).join("/")}`;
}

export class Api {
  constructor() {
    this.key = "";
  }

  headers() {
    const headers = { "Content-Type": "application/json" };
    if (this.key) headers.Authorization = `Basic ${btoa(this.key)}`;
    return headers;
  }

  /** {status, ok, data}: never throws for an HTTP error, only for a network failure. */
  async request(method, path, body) {
    const response = await fetch(path, {
      method,
      headers: this.headers(),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let data = text;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, ok: response.ok, data };
  }

  config() {
    return this.request("GET", "/console/api/config");
  }

  scheduler() {
    return this.request("GET", "/console/api/scheduler?limit=50");
  }

  listActions() {
    return this.request("GET", `${ACTIONS}?limit=200`);
  }

  getAction(name) {
    return this.request("GET", `${actionPath(name)}?code=true`);
  }

  saveAction(name, kind, code, parameters) {
    const body = { exec: { kind, code }, parameters };
    return this.request("PUT", `${actionPath(name)}?overwrite=true`, body);
  }

  deleteAction(name) {
    return this.request("DELETE", actionPath(name));
  }

  invoke(name, params, blocking) {
    return this.request("POST", `${actionPath(name)}?blocking=${blocking}`, params);
  }
}
