// The console's entry point: pick the API key, then start the playground and the scheduler view.

import { Actions } from "./actions.js";
import { Api } from "./api.js";
import { $ } from "./dom.js";
import { Scheduler } from "./scheduler.js";

const KEY_STORE = "ow-console-key";

async function main() {
  const api = new Api();
  const { ok, data: config } = await api.config();
  if (!ok) {
    $("#status").textContent = "the console's configuration could not be read";
    return;
  }
  // A key the user chose here before, else the one the front offers a browser on its own
  // machine (the guest key of the standalone), else none until the user gives one.
  api.key = localStorage.getItem(KEY_STORE) || config.auth || "";
  $("#auth").value = api.key;
  const actions = new Actions(api);
  actions.setKinds(config.kinds);
  actions.edit(null);
  $("#auth-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    api.key = $("#auth").value.trim();
    localStorage.setItem(KEY_STORE, api.key);
    await actions.refresh();
  });
  if (!api.key) {
    actions.say("give your API key (UUID:KEY, as `wsk property get --auth` prints it) above", true);
  } else {
    await actions.refresh();
  }
  new Scheduler(api).start(config.charts, config.chartsHint);
}

main();
