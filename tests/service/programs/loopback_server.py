"""Run in the sandbox: serve HTTP on the port read from stdin (every address of the run's own
loopback), then ask it by address and by name, and print what it answered."""

import http.server
import socketserver
import sys
import threading
import urllib.request

PORT = int(sys.stdin.read())


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"served on {PORT}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


with socketserver.TCPServer(("", PORT), Handler) as server:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    for host in ("127.0.0.1", "localhost"):
        with urllib.request.urlopen(f"http://{host}:{PORT}/", timeout=5) as response:
            print(host, response.status, response.read().decode())
    server.shutdown()
