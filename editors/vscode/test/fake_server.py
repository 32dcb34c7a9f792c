"""A stand-in language server for test/smoke.js: speaks just enough LSP on stdio (initialize,
shutdown, exit) and writes each method it receives to the file named by its argument, so the
smoke test can see that the extension started it and talked to it."""
import json
import sys

log = open(sys.argv[1], "a")
def read():
    headers = {}
    while True:
        line = sys.stdin.buffer.readline()
        if not line: sys.exit(0)
        line = line.decode().strip()
        if not line: break
        k, v = line.split(":", 1); headers[k.lower()] = v.strip()
    return json.loads(sys.stdin.buffer.read(int(headers["content-length"])))
def send(msg):
    body = json.dumps(msg).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body); sys.stdout.buffer.flush()
while True:
    msg = read()
    log.write(msg.get("method", "?") + "\n"); log.flush()
    if msg.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"capabilities": {"textDocumentSync": 1, "hoverProvider": True}, "serverInfo": {"name": "fake"}}})
    elif msg.get("method") == "shutdown":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
    elif msg.get("method") == "exit":
        sys.exit(0)
