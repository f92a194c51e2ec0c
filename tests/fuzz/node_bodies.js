// Feeds /init and /run bodies to the Node.js runtime's parsers, for the fuzz tests: one
// request per stdin line, `init <base64>` or `run <base64>`; one JSON answer per line:
// {"ok":true} (accepted), {"refused":status} (a BadBody, as designed) or {"crash":"..."}.
'use strict';
const readline = require('readline');
const path = require('path');
const runtime = require(path.join(__dirname, '..', '..', 'containers', 'runtimes', 'node_runtime.js'));

const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  const [which, data] = line.split(' ');
  const body = Buffer.from(data || '', 'base64');
  let answer;
  try {
    if (which === 'init') runtime.parseInit(body);
    else runtime.parseRun(body);
    answer = { ok: true };
  } catch (e) {
    answer = e instanceof runtime.BadBody && [400, 403].includes(e.status) && e.message
      ? { refused: e.status }
      : { crash: `${e && e.name}: ${e && e.message}` };
  }
  process.stdout.write(`${JSON.stringify(answer)}\n`);
});
