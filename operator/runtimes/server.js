'use strict';
// sless Node.js runtime server (Node 20, no dependencies).
//
// Serve mode:    node server.js
// One-shot mode: node server.js --once INPUT_FILE OUTPUT_FILE
//
// Implements docs/runtime-protocol.md (operator <-> runtime) and
// docs/handler-contract.md (what a function receives and returns).

const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { pathToFileURL } = require('node:url');

const EXIT_LOAD_FAILED = 3;

function failLoad(message, err) {
  if (err) {
    process.stderr.write(`${(err && err.stack) || String(err)}\n`);
  }
  process.stderr.write(`sless: cannot load entrypoint: ${message}\n`);
  process.exit(EXIT_LOAD_FAILED);
}

// Resolves `src/app` to src/app.js, src/app.mjs or src/app.cjs under the code dir.
function resolveModule(codeDir, modulePath) {
  const tried = [];
  for (const ext of ['.js', '.mjs', '.cjs']) {
    const file = path.resolve(codeDir, modulePath + ext);
    tried.push(path.relative(codeDir, file));
    try {
      if (fs.statSync(file).isFile()) return { file, tried };
    } catch (_) {
      // not this one
    }
  }
  return { file: null, tried };
}

// The "type" of the nearest package.json above `file` (Node's own rule).
function packageType(file) {
  let dir = path.dirname(file);
  for (;;) {
    try {
      const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
      return pkg && typeof pkg.type === 'string' ? pkg.type : 'commonjs';
    } catch (err) {
      if (!err || err.code !== 'ENOENT') return 'commonjs';
    }
    const parent = path.dirname(dir);
    if (parent === dir) return 'commonjs';
    dir = parent;
  }
}

// Loads a module: ES modules (.mjs, or .js under a package.json with
// "type": "module") through import() of a file URL, CommonJS through require.
async function loadModule(file) {
  const esm = file.endsWith('.mjs') || (file.endsWith('.js') && packageType(file) === 'module');
  if (esm) {
    return import(pathToFileURL(file).href);
  }
  try {
    return require(file);
  } catch (err) {
    // ES module syntax in a file Node treats as CommonJS.
    if (err && (err.code === 'ERR_REQUIRE_ESM' || err.code === 'ERR_REQUIRE_ASYNC_MODULE')) {
      return import(pathToFileURL(file).href);
    }
    throw err;
  }
}

async function loadHandler() {
  const entrypoint = process.env.SLESS_ENTRYPOINT || '';
  const dot = entrypoint.lastIndexOf('.');
  if (dot <= 0 || dot === entrypoint.length - 1) {
    failLoad(`SLESS_ENTRYPOINT ${JSON.stringify(entrypoint)} is not of the form module.function`);
  }
  const modulePath = entrypoint.slice(0, dot);
  const fnName = entrypoint.slice(dot + 1);
  const codeDir = process.env.SLESS_CODE_DIR || process.cwd();
  const { file, tried } = resolveModule(codeDir, modulePath);
  if (!file) {
    failLoad(
      `entrypoint ${JSON.stringify(entrypoint)}: module ${JSON.stringify(modulePath)} not found (tried ${tried.join(', ')})`,
    );
  }
  let mod;
  try {
    mod = await loadModule(file);
  } catch (err) {
    failLoad(
      `entrypoint ${JSON.stringify(entrypoint)}: module ${JSON.stringify(modulePath)} cannot be loaded: ${err && err.message}`,
      err,
    );
  }
  let fn = mod == null ? undefined : mod[fnName];
  if (fn === undefined && mod && mod.default != null && typeof mod.default === 'object') {
    fn = mod.default[fnName];
  }
  if (fn === undefined) {
    failLoad(
      `entrypoint ${JSON.stringify(entrypoint)}: module ${JSON.stringify(modulePath)} has no export ${JSON.stringify(fnName)}`,
    );
  }
  if (typeof fn !== 'function') {
    failLoad(
      `entrypoint ${JSON.stringify(entrypoint)}: ${modulePath}.${fnName} is a ${typeof fn}, not a function`,
    );
  }
  return fn;
}

function makeContext(requestId) {
  const t = parseInt(process.env.SLESS_TIMEOUT_SEC || '', 10);
  return {
    function: process.env.SLESS_FUNCTION || '',
    namespace: process.env.SLESS_NAMESPACE || '',
    requestId,
    timeoutSec: Number.isFinite(t) ? t : null,
  };
}

function isJsonType(contentType) {
  if (contentType === undefined) return true;
  const media = contentType.split(';')[0].trim().toLowerCase();
  return media === 'application/json' || media.endsWith('+json');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeBody(raw, contentType) {
  if (raw.length === 0) return [null, false];
  let text;
  try {
    text = utf8.decode(raw);
  } catch (_) {
    return [raw.toString('base64'), true];
  }
  if (isJsonType(contentType)) {
    try {
      return [JSON.parse(text), false];
    } catch (_) {
      // not JSON: the text as is
    }
  }
  return [text, false];
}

function buildEvent(req, raw) {
  const url = new URL(req.url || '/', 'http://localhost');
  const query = {};
  for (const key of new Set(url.searchParams.keys())) {
    const values = url.searchParams.getAll(key);
    query[key] = values.length === 1 ? values[0] : values;
  }
  const headers = {};
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    const k = req.rawHeaders[i].toLowerCase();
    const v = req.rawHeaders[i + 1];
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  const [body, isBase64Encoded] = decodeBody(raw, headers['content-type']);
  return {
    event: {
      method: req.method,
      path: url.pathname || '/',
      query,
      headers,
      body,
      isBase64Encoded,
    },
    headers,
  };
}

function errorBody(err) {
  if (err instanceof Error) {
    return { error: err.message, type: err.name || (err.constructor && err.constructor.name) || 'Error' };
  }
  return { error: String(err), type: typeof err };
}

function toJson(value) {
  const s = JSON.stringify(value === undefined ? null : value);
  // Functions and symbols stringify to undefined.
  return Buffer.from(s === undefined ? 'null' : s, 'utf8');
}

function hasHeader(headers, name) {
  return Object.keys(headers).some((k) => k.toLowerCase() === name);
}

// Turns a handler's result into { status, headers, data }.
function encodeResponse(result) {
  if (result !== null && typeof result === 'object' && !Array.isArray(result) && 'statusCode' in result) {
    const status = result.statusCode;
    if (!Number.isInteger(status) || status < 100 || status > 599) {
      throw new TypeError(`statusCode must be an integer between 100 and 599, got ${JSON.stringify(status)}`);
    }
    const given = result.headers == null ? {} : result.headers;
    if (typeof given !== 'object' || Array.isArray(given)) {
      throw new TypeError('headers must be a map of strings');
    }
    const headers = {};
    for (const [k, v] of Object.entries(given)) headers[k] = String(v);
    const body = result.body;
    const typed = hasHeader(headers, 'content-type');
    let data;
    if (body === undefined || body === null) {
      data = Buffer.alloc(0);
    } else if (result.isBase64Encoded === true) {
      if (typeof body !== 'string') throw new TypeError('isBase64Encoded is true but body is not a base64 string');
      data = Buffer.from(body, 'base64');
      if (!typed) headers['content-type'] = 'application/octet-stream';
    } else if (typeof body === 'string') {
      data = Buffer.from(body, 'utf8');
      if (!typed) headers['content-type'] = 'text/plain; charset=utf-8';
    } else if (Buffer.isBuffer(body) || body instanceof Uint8Array) {
      data = Buffer.from(body);
      if (!typed) headers['content-type'] = 'application/octet-stream';
    } else {
      data = toJson(body);
      if (!typed) headers['content-type'] = 'application/json';
    }
    return { status, headers, data };
  }
  return { status: 200, headers: { 'content-type': 'application/json' }, data: toJson(result) };
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

function send(req, res, { status, headers, data }) {
  for (const [k, v] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(k.toLowerCase())) res.setHeader(k, v);
  }
  res.setHeader('content-length', String(data.length));
  res.writeHead(status);
  res.end(req.method === 'HEAD' ? undefined : data);
}

async function invoke(handler, event, context) {
  return handler(event, context);
}

// The request path: reads the body, builds the event, calls `handler`, answers.
function requestListener(handler) {
  return (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('error', () => res.destroy());
    req.on('end', async () => {
      const { event, headers } = buildEvent(req, Buffer.concat(chunks));
      const context = makeContext(headers['x-request-id'] || crypto.randomUUID());
      let out;
      try {
        out = encodeResponse(await invoke(handler, event, context));
      } catch (err) {
        process.stderr.write(
          `sless: invocation ${context.requestId} failed:\n${(err && err.stack) || String(err)}\n`,
        );
        out = { status: 500, headers: { 'content-type': 'application/json' }, data: toJson(errorBody(err)) };
      }
      send(req, res, out);
    });
  };
}

async function serve() {
  const handler = await loadHandler();
  const host = process.env.SLESS_HOST || '127.0.0.1';
  const port = parseInt(process.env.SLESS_PORT || '0', 10) || 0;
  const server = http.createServer(requestListener(handler));
  // The operator's proxy enforces the function timeout and owns connection
  // reuse: no server-side request timeout (Node's default is 300 s, less than
  // the longest timeout_sec) and no idle timeout that could race the proxy's
  // connection pool.
  server.requestTimeout = 0;
  server.keepAliveTimeout = 0;
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    server.close(() => process.exit(0));
    server.closeIdleConnections();
    // In-flight requests get a few seconds; then exit regardless.
    setTimeout(() => process.exit(0), 5000).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // Sandboxed, the operator connects over a unix socket (SLESS_SOCKET).
  const socketPath = process.env.SLESS_SOCKET || '';
  const where = socketPath || `${host}:${port}`;
  server.on('error', (err) => {
    process.stderr.write(`sless: cannot listen on ${where}: ${err.message}\n`);
    process.exit(1);
  });
  if (socketPath) {
    try {
      fs.unlinkSync(socketPath);
    } catch (_) {
      // not there: fine
    }
    server.listen(socketPath, () => {
      process.stdout.write(`SLESS_READY socket=${socketPath}\n`);
    });
  } else {
    server.listen(port, host, () => {
      process.stdout.write(`SLESS_READY port=${server.address().port}\n`);
    });
  }
}

async function runOnce(inputFile, outputFile) {
  const handler = await loadHandler();
  const event = JSON.parse(fs.readFileSync(inputFile, 'utf8'));
  const context = makeContext(crypto.randomUUID());
  let out;
  let code = 0;
  try {
    const result = await invoke(handler, event, context);
    out = toJson({ ok: true, result: result === undefined ? null : result });
  } catch (err) {
    process.stderr.write(`${(err && err.stack) || String(err)}\n`);
    out = toJson({ ok: false, ...errorBody(err) });
    code = 1;
  }
  fs.writeFileSync(outputFile, out);
  process.exitCode = code;
}

// Warm mode (`server.js --warm`): started ahead of need by the operator, this
// process waits for a function's environment on stdin (NUL-separated
// KEY=VALUE, then end of input), takes it and that function's working
// directory as a fresh start would have had them, and serves
// (docs/runtime-protocol.md, "Warm Node processes").
// Warm mode, before waiting: one request through the serving path (a
// throwaway server on a private socket, a stand-in handler), so that a cold
// start's first request finds that code loaded and compiled. Best effort.
async function rehearse() {
  const sock = path.join(require('node:os').tmpdir(), `sless-warm-${process.pid}.sock`);
  const server = http.createServer(requestListener(async () => ({ statusCode: 200, body: 'ok' })));
  try {
    await new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(sock, resolve);
    });
    await new Promise((resolve) => {
      const opts = { socketPath: sock, method: 'POST', path: '/', agent: false, headers: { 'content-type': 'application/json' } };
      const r = http.request(opts, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      r.on('error', resolve);
      r.end('{"warm":true}');
    });
  } catch (_) {
    // not rehearsed: the first request compiles it instead
  } finally {
    server.close();
    try {
      fs.unlinkSync(sock);
    } catch (_) {
      // already gone
    }
  }
}

async function warm() {
  const { Module } = require('node:module');
  // What serving loads lazily on first use (net's listen asks the cluster
  // module), loaded now rather than during the cold start.
  require('node:cluster');
  await rehearse();
  const chunks = [];
  const input = process.stdin;
  for await (const chunk of input) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString('utf8');
  if (!text) process.exit(1); // the operator went away unassigned
  for (const k of Object.keys(process.env)) delete process.env[k];
  for (const kv of text.split('\0')) {
    if (!kv) continue;
    const i = kv.indexOf('=');
    if (i < 0) process.env[kv] = '';
    else process.env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  // NODE_PATH is read at start-up: read it again from the new environment.
  Module._initPaths();
  process.chdir(process.env.SLESS_CODE_DIR || '/');
  return serve();
}

function main(argv) {
  if (argv[0] === '--warm' && argv.length === 1) {
    return warm();
  }
  if (argv[0] === '--once') {
    if (argv.length !== 3) {
      process.stderr.write('usage: server.js --once INPUT_FILE OUTPUT_FILE\n');
      process.exit(2);
    }
    return runOnce(argv[1], argv[2]);
  }
  if (argv.length !== 0) {
    process.stderr.write('usage: server.js [--once INPUT_FILE OUTPUT_FILE | --warm]\n');
    process.exit(2);
  }
  return serve();
}

main(process.argv.slice(2)).catch((err) => {
  process.stderr.write(`sless: ${(err && err.stack) || String(err)}\n`);
  process.exit(1);
});
