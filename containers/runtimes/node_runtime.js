'use strict';
/*
 * An OpenWhisk-compatible Node.js action runtime for the process backend (no dependencies).
 *
 * The zygote (python_runtime.py) prepares the container process (session, cgroup, working
 * directory, private /tmp, minimal environment, fd 1/2 on pipes it drains into the
 * container's json-file log) and then execs `node - node_runtime.js --listen-fd 3` with this
 * file on stdin (opened before it switches to the action's user). Output is
 * therefore captured at the file-descriptor level: console.*, process.stdout.write, native
 * addons and child processes all land in the log, and nothing is lost if node crashes.
 * Standalone use: `node node_runtime.js --port 8080`.
 *
 * POST /init  {"value": {name, main, binary, code, env}}: plain source (CommonJS: exports.main,
 *             module.exports, or a global `function main`) or a base64 zip (package.json
 *             "main" or index.js; a `main` of `file.fn` loads file.js), unpacked into the
 *             working directory, refusing unsafe paths.
 * POST /run   {"value": params, ...context}: context keys become __OW_<KEY> variables; main may
 *             return a value or a Promise; a rejected Promise is an application error
 *             (200 {"error": ...}) as in the stock runtime, a thrown exception a 502.
 * After every /run (and a failed /init) the sentinel goes to both stdout and stderr.
 * Differences from the stock runtime: docs/runtimes.md (tests/compat holds the corpus).
 */

// One block: read from stdin (`node -`, see below) this file is a script, whose top-level
// declarations would be globals that action code sees (an action without a `main` found ours).
{
  const fs = require('fs');
  const http = require('http');
  const path = require('path');
  const vm = require('vm');
  const zlib = require('zlib');
  const Module = require('module');

  const SENTINEL = 'XXX_THE_END_OF_A_WHISK_ACTIVATION_XXX\n';
  const MAX_ARCHIVE_BYTES = 1024 * 1024 * 1024;
  const NOT_A_DICT = 'The action did not return a dictionary or array.';
  const MAIN_PATH = /^[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*$/;

  class UnsafeArchive extends Error {}

  /** Safe relative path of a zip entry, null for a directory; throws UnsafeArchive. */
  function memberPath(name, externalAttr) {
    if (((externalAttr >>> 16) & 0o170000) === 0o120000) {
      throw new UnsafeArchive(`archive entry ${JSON.stringify(name)} is a symbolic link`);
    }
    if (!name || name.includes('\0')) {
      throw new UnsafeArchive(`archive entry ${JSON.stringify(name)} has an invalid name`);
    }
    if (/^[\\/]/.test(name) || /^[A-Za-z]:/.test(name)) {
      throw new UnsafeArchive(`archive entry ${JSON.stringify(name)} has an absolute path`);
    }
    const parts = name.split(/[\\/]/).filter((p) => p !== '' && p !== '.');
    if (parts.includes('..')) {
      throw new UnsafeArchive(`archive entry ${JSON.stringify(name)} leaves the action directory`);
    }
    if (parts.length === 0 || /[\\/]$/.test(name)) return null;
    return parts.join('/');
  }

  /** Central-directory entries of a zip archive (no ZIP64, no encryption). */
  function readZip(buf) {
    let eocd = -1;
    for (let i = buf.length - 22; i >= Math.max(0, buf.length - 22 - 65535); i--) {
      if (buf.readUInt32LE(i) === 0x06054b50) { eocd = i; break; }
    }
    if (eocd < 0) throw new UnsafeArchive('not a zip archive');
    const count = buf.readUInt16LE(eocd + 10);
    let p = buf.readUInt32LE(eocd + 16);
    if (count === 0xffff || p === 0xffffffff) throw new UnsafeArchive('ZIP64 archives are not supported');
    const entries = [];
    for (let n = 0; n < count; n++) {
      if (p + 46 > buf.length || buf.readUInt32LE(p) !== 0x02014b50) {
        throw new UnsafeArchive('corrupt zip central directory');
      }
      const nameLen = buf.readUInt16LE(p + 28);
      const entry = {
        flags: buf.readUInt16LE(p + 8),
        method: buf.readUInt16LE(p + 10),
        compressedSize: buf.readUInt32LE(p + 20),
        size: buf.readUInt32LE(p + 24),
        externalAttr: buf.readUInt32LE(p + 38),
        offset: buf.readUInt32LE(p + 42),
        name: buf.toString('utf8', p + 46, p + 46 + nameLen),
      };
      entries.push(entry);
      p += 46 + nameLen + buf.readUInt16LE(p + 30) + buf.readUInt16LE(p + 32);
    }
    return entries;
  }

  /** Unpack a zip archive into dest; returns the relative paths of the files written. */
  function extractZip(buf, dest, maxBytes = MAX_ARCHIVE_BYTES) {
    const root = fs.realpathSync(dest);
    const entries = readZip(buf).map((e) => ({ ...e, rel: memberPath(e.name, e.externalAttr) }));
    let total = 0;
    for (const e of entries) {
      total += e.size;
      if (total > maxBytes) throw new UnsafeArchive(`archive expands beyond ${maxBytes} bytes`);
      if (e.flags & 1) throw new UnsafeArchive(`archive entry ${e.name} is encrypted`);
      if (e.rel !== null && e.method !== 0 && e.method !== 8) {
        throw new UnsafeArchive(`archive entry ${e.name} uses unsupported compression ${e.method}`);
      }
    }
    const written = [];
    for (const e of entries) {
      if (e.rel === null) {
        const dir = e.name.replace(/[\\/]+$/, '');
        if (dir && dir !== '.') fs.mkdirSync(path.join(root, dir), { recursive: true });
        continue;
      }
      const target = path.join(root, e.rel);
      fs.mkdirSync(path.dirname(target), { recursive: true });
      const parent = fs.realpathSync(path.dirname(target));
      if (parent !== root && !parent.startsWith(root + path.sep)) {
        throw new UnsafeArchive(`archive entry ${e.name} leaves the action directory`);
      }
      if (buf.readUInt32LE(e.offset) !== 0x04034b50) throw new UnsafeArchive('corrupt zip entry');
      const start = e.offset + 30 + buf.readUInt16LE(e.offset + 26) + buf.readUInt16LE(e.offset + 28);
      const raw = buf.subarray(start, start + e.compressedSize);
      const data = e.method === 0 ? raw : zlib.inflateRawSync(raw, { maxOutputLength: Math.max(e.size, 1) });
      if (data.length !== e.size) throw new UnsafeArchive(`archive entry ${e.name} has a wrong size`);
      const mode = (e.externalAttr >>> 16) & 0o111 ? 0o755 : 0o644;
      const c = fs.constants;
      const fd = fs.openSync(target, c.O_WRONLY | c.O_CREAT | c.O_TRUNC | c.O_NOFOLLOW, mode);
      try { fs.writeSync(fd, data); } finally { fs.closeSync(fd); }
      written.push(e.rel);
    }
    return written;
  }

  function describe(err) {
    if (err instanceof Error) return `${err.name}: ${err.message}`;
    return String(err);
  }

  /** A rejected value as the stock runtime reports it (like the serialize-error package). */
  function serializeError(err) {
    if (err === undefined || err === null) return {};
    if (err instanceof Error) {
      const out = { name: err.name, message: err.message, stack: err.stack };
      for (const k of Object.keys(err)) out[k] = err[k];
      return out;
    }
    return err;
  }

  function envText(v) {
    if (v === null || v === undefined) return '';
    return typeof v === 'string' ? v : JSON.stringify(v);
  }

  /** A /init or /run body refused before any action code runs; `spent`: it uses up the /init. */
  class BadBody extends Error {
    constructor(status, message, spent = false) {
      super(message);
      this.status = status;
      this.spent = spent;
    }
  }

  /** One environment variable, or BadBody naming what the OS would refuse or truncate. */
  function envEntry(name, value, what) {
    let text;
    try {
      text = envText(value);
    } catch (e) { // nested too deeply for JSON.stringify (RangeError)
      throw new BadBody(400, `The ${what} value of ${JSON.stringify(String(name).slice(0, 64))} cannot be written.`, true);
    }
    if (!name || name.includes('=') || name.includes('\0') || String(text).includes('\0')) {
      throw new BadBody(400, `The ${what} has an invalid variable name or value: ${JSON.stringify(String(name).slice(0, 64))}.`, true);
    }
    return [name, text];
  }

  /** {code, main, binary, env} of an /init body, or BadBody. */
  function parseInit(body) {
    let msg;
    try { msg = JSON.parse(body); } catch (e) { throw new BadBody(400, 'The /init body is not valid JSON.'); }
    const value = msg && typeof msg.value === 'object' && msg.value !== null ? msg.value : {};
    const main = value.main || 'main';
    if (typeof value.code !== 'string' || !value.code || typeof main !== 'string') {
      throw new BadBody(403, 'Missing main/no code to execute.');
    }
    const env = value.env && typeof value.env === 'object'
      ? Object.entries(value.env).map(([k, v]) => envEntry(k, v, '/init env'))
      : [];
    return { code: value.code, main, binary: Boolean(value.binary), env };
  }

  /** {value, env} of a /run body, or BadBody. */
  function parseRun(body) {
    let msg;
    try { msg = JSON.parse(body); } catch (e) { throw new BadBody(400, 'The /run body is not valid JSON.'); }
    if (!msg || typeof msg !== 'object' || Array.isArray(msg)) {
      throw new BadBody(400, 'The /run body is not a JSON object.');
    }
    const env = Object.entries(msg)
      .filter(([k]) => k !== 'value')
      .map(([k, v]) => envEntry(`__OW_${k.toUpperCase()}`, v, '/run context'));
    return { value: msg.value === undefined ? {} : msg.value, env };
  }

  function writeSentinels() {
    process.stdout.write(SENTINEL);
    process.stderr.write(SENTINEL);
  }

  class Runtime {
    constructor(cwd) {
      this.cwd = cwd;
      this.main = null;
      this.initAttempted = false;
    }

    init(body) {
      if (this.initAttempted) {
        const msg = 'Cannot initialize the action more than once.';
        console.error(msg); // as the stock runtime: logged, no sentinels
        return [403, { error: msg }];
      }
      let value;
      try {
        value = parseInit(body);
      } catch (e) {
        if (!(e instanceof BadBody)) throw e;
        if (e.spent) {
          this.initAttempted = true;
          writeSentinels();
        }
        return [e.status, { error: e.message }];
      }
      const main = value.main;
      this.initAttempted = true;
      for (const [k, v] of value.env) process.env[k] = v;
      try {
        const fn = value.binary ? this.loadZip(value.code, main) : this.loadSource(value.code, main);
        if (typeof fn !== 'function') throw new Error(`Action entrypoint '${main}' is not a function.`);
        this.main = fn;
        return [200, { ok: true }];
      } catch (e) {
        console.error(e);
        writeSentinels();
        return [502, { error: `Initialization has failed due to: ${describe(e)}` }];
      }
    }

    loadSource(code, main) {
      const filename = path.join(this.cwd, 'index.js');
      const local = MAIN_PATH.test(main) ? `try { return ${main}; } catch (e) { return undefined; }` : '';
      const src = `(function (exports, require, module, __filename, __dirname) {${code}\n;${local}\n})`;
      const wrapper = vm.runInThisContext(src, { filename });
      const mod = { exports: {} };
      const found = wrapper.call(mod.exports, mod.exports, Module.createRequire(filename), mod, filename, this.cwd);
      return pickMain(mod.exports, main) || found;
    }

    /**
     * As the stock runtime: `main` without a dot names a function of the package (package.json
     * "main", else index.js); `file.fn[.more]` names `fn[.more]` of the module `file`.
     */
    loadZip(code, main) {
      try {
        extractZip(Buffer.from(code, 'base64'), this.cwd);
      } catch (e) {
        throw new Error(`There was an error uncompressing the action archive: ${e.message}`);
      }
      const dot = main.indexOf('.');
      const file = dot > 0 ? main.slice(0, dot) : undefined;
      const hasPkg = fs.existsSync(path.join(this.cwd, 'package.json'));
      if (file === undefined && !hasPkg && !fs.existsSync(path.join(this.cwd, 'index.js'))) {
        throw new Error('Zipped actions must contain either package.json or index.js at the root.');
      }
      const req = Module.createRequire(path.join(this.cwd, 'noop.js'));
      if (file === undefined) return pickMain(req(this.cwd), main);
      return pickMain(req(path.join(this.cwd, file)), main.slice(dot + 1));
    }

    async run(body) {
      try {
        return await this.runAction(body);
      } finally {
        writeSentinels();
      }
    }

    async runAction(body) {
      if (!this.main) return [403, { error: 'System not initialized.' }]; // the stock answer
      let msg;
      try {
        msg = parseRun(body);
      } catch (e) {
        if (!(e instanceof BadBody)) throw e;
        return [e.status, { error: e.message }];
      }
      for (const [k, v] of msg.env) process.env[k] = v;
      let result;
      try {
        result = this.main(msg.value);
      } catch (e) {
        console.error(e);
        return [502, { error: `An error has occurred: ${String(e)}` }]; // the stock wording
      }
      if (result && typeof result.then === 'function') {
        try {
          result = await result;
        } catch (e) {
          result = { error: serializeError(e) };
        }
      }
      if (result === undefined) result = {};
      if (result === null || typeof result !== 'object') return [502, { error: NOT_A_DICT }];
      try {
        return [200, JSON.stringify(result)];
      } catch (e) {
        return [502, { error: `The action's result is not valid JSON: ${describe(e)}` }];
      }
    }
  }

  function pickMain(exported, main) {
    if (exported === null || exported === undefined) return undefined;
    let fn = exported;
    for (const part of main.split('.')) fn = fn === null || fn === undefined ? undefined : fn[part];
    if (typeof fn === 'function') return fn;
    if (main === 'main' && typeof exported === 'function') return exported;
    return undefined;
  }

  function serve(listen) {
    const runtime = new Runtime(process.cwd());
    const server = http.createServer((req, res) => {
      const chunks = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', async () => {
        const body = Buffer.concat(chunks);
        let answer;
        try {
          if (req.method === 'POST' && req.url === '/run') answer = await runtime.run(body);
          else if (req.method === 'POST' && req.url === '/init') answer = runtime.init(body);
          else answer = [404, { error: 'not found' }];
        } catch (e) { // the server outlives any one request
          console.error(e);
          answer = [500, { error: `The runtime failed: ${describe(e)}` }];
        }
        const text = typeof answer[1] === 'string' ? answer[1] : JSON.stringify(answer[1]);
        res.writeHead(answer[0], {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(text),
        });
        res.end(text);
      });
    });
    // The invoker keeps one connection per container open for as long as it likes.
    server.keepAliveTimeout = 0;
    server.requestTimeout = 0;
    server.headersTimeout = 0;
    server.timeout = 0;
    server.listen(listen);
    return server;
  }

  function main(argv) {
    const fdAt = argv.indexOf('--listen-fd');
    const portAt = argv.indexOf('--port');
    if (fdAt >= 0) serve({ fd: Number(argv[fdAt + 1]) });
    else serve({ port: portAt >= 0 ? Number(argv[portAt + 1]) : 8080, host: '127.0.0.1' });
  }

  module.exports = {
    memberPath, readZip, extractZip, Runtime, UnsafeArchive, SENTINEL, BadBody, parseInit, parseRun,
  };

  // Run as a script: `node node_runtime.js ...`, or `node - ...` with this file on stdin (how the
  // process backend starts it, so that an action user need not read the project's directory).
  if (require.main === module || module.id === '[stdin]') main(process.argv.slice(2));
}
