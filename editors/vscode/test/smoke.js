// Smoke test of extension.js without VS Code: loads it with a stand-in `vscode` module,
// activates it (which starts the language server from `tvms.server.command` over stdio),
// waits, deactivates it, and prints what happened as one JSON line:
//   {"errors": [messages the extension showed the user], "methods": [what the stand-in server got]}
// Usage (after `npm install` in editors/vscode):
//   node test/smoke.js                 # the stand-in server test/fake_server.py
//   node test/smoke.js tvms lsp        # the real server: expect "errors": []
'use strict';

const Module = require('module');
const fs = require('fs');
const os = require('os');
const path = require('path');

const logFile = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'tvms-smoke-')), 'methods.txt');
const command = process.argv.length > 2
  ? process.argv.slice(2)
  : [process.env.PYTHON || 'python3', path.join(__dirname, 'fake_server.py'), logFile];
const settings = { 'server.command': command, 'trace.server': 'off' };
const errors = [];

/** Any API the client touches and this test does not care about: callable, constructible,
 * every property another stand-in; disposables dispose of nothing. */
function standIn(name) {
  const fn = function () { return standIn(`${name}()`); };
  return new Proxy(fn, {
    get(_, prop) {
      if (prop === 'then') return undefined; // not a promise
      if (prop === Symbol.iterator) return function* () {};
      if (prop === Symbol.toPrimitive) return () => name;
      if (prop === 'dispose') return () => {};
      return standIn(`${name}.${String(prop)}`);
    },
    construct() { return standIn(`new ${name}`); },
  });
}

const generic = standIn('vscode');
const overrides = {
  version: '1.90.0',
  env: { language: 'en', appName: 'smoke', machineId: 'smoke', sessionId: 'smoke' },
  workspace: new Proxy({}, {
    get(_, prop) {
      if (prop === 'getConfiguration') return () => ({ get: (key, fallback) => (key in settings ? settings[key] : fallback) });
      if (prop === 'workspaceFolders') return undefined;
      if (prop === 'textDocuments') return [];
      return generic.workspace[prop];
    },
  }),
  window: new Proxy({}, {
    get(_, prop) {
      if (prop === 'showErrorMessage') return async (message) => { errors.push(message); };
      return generic.window[prop];
    },
  }),
};
const vscode = new Proxy({}, { get: (_, prop) => (prop in overrides ? overrides[prop] : generic[prop]) });

const load = Module._load;
Module._load = function (request, ...rest) {
  return request === 'vscode' ? vscode : load.call(this, request, ...rest);
};

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

(async () => {
  const extension = require(path.join(__dirname, '..', 'extension.js'));
  await extension.activate({ subscriptions: [] });
  await sleep(500);
  await extension.deactivate();
  await sleep(300);
  const methods = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8').split('\n').filter(Boolean) : [];
  console.log(JSON.stringify({ errors, methods }));
  process.exit(0);
})().catch((err) => {
  console.error(err);
  process.exit(1);
});
