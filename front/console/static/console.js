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
  // A key given in the address's fragment (the standalone prints /console#auth=UUID:KEY:
  // the browser never sends a fragment, and no server hands a key to whoever asks), else
  // the one the user chose here before, else none until the user gives one.
  const given = new URLSearchParams(location.hash.slice(1)).get("auth");
  if (given) {
    localStorage.setItem(KEY_STORE, given);
    history.replaceState(null, "", location.pathname + location.search);
  }
  api.key = given || localStorage.getItem(KEY_STORE) || "";
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
