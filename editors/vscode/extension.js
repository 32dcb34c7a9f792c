// TVMScript for VS Code: starts the tvms language server (`tvms lsp`) over stdio and hands
// .tvms documents to it. Plain JavaScript, loaded as it is (no build step): highlighting comes
// from syntaxes/tvmscript.tmLanguage.json and works even when the server cannot start.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

// The client id is the settings prefix: vscode-languageclient reads `tvms.trace.server`.
const CLIENT_ID = 'tvms';
const CLIENT_NAME = 'TVMScript Language Server';

let client = null;

/** The server's command line from `tvms.server.command`: [program, ...args], or null when empty. */
function serverCommand() {
  const command = vscode.workspace.getConfiguration('tvms').get('server.command', ['tvms', 'lsp']);
  if (!Array.isArray(command) || command.length === 0 || typeof command[0] !== 'string' || command[0] === '') {
    return null;
  }
  return { command: command[0], args: command.slice(1).map(String), transport: TransportKind.stdio };
}

/** A client for the configured server; null when the setting turns the server off. */
function createClient() {
  const executable = serverCommand();
  if (executable === null) {
    return null;
  }
  const serverOptions = { run: executable, debug: executable };
  const clientOptions = {
    documentSelector: [
      { scheme: 'file', language: 'tvmscript' },
      { scheme: 'untitled', language: 'tvmscript' },
    ],
    synchronize: { fileEvents: vscode.workspace.createFileSystemWatcher('**/*.tvms') },
  };
  return new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
}

/** Starts the server, telling the user how to install it when the command cannot be run. */
async function startClient() {
  client = createClient();
  if (client === null) {
    return;
  }
  try {
    await client.start();
  } catch (err) {
    const program = serverCommand().command;
    vscode.window.showErrorMessage(
      `TVMScript: could not start the language server '${program}' (${err && err.message ? err.message : err}). ` +
      "Install it with `pip install 'tvms[lsp]'`, or point the setting tvms.server.command at it.");
    client = null;
  }
}

async function stopClient() {
  if (client !== null) {
    const running = client;
    client = null;
    await running.stop().catch(() => undefined);
  }
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand('tvms.restartServer', async () => {
      await stopClient();
      await startClient();
    }),
    // A new server command takes effect without reloading the window.
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration('tvms.server.command')) {
        await stopClient();
        await startClient();
      }
    }),
  );
  await startClient();
}

function deactivate() {
  return stopClient();
}

module.exports = { activate, deactivate };
