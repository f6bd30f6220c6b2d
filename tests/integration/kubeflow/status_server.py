"""A stand-in for Kubeflow Trainer's status server (pkg/statusserver in kubeflow/trainer): HTTPS on
127.0.0.1:PORT with CERT and KEY; each request's method, path, Authorization and Content-Type
headers and JSON body go to LOG, one JSON object a line. MODE "ok" answers 200 with the request's
body, as the real server does; "refuse" answers 403 with a metav1.Status body. Writes READY once
it listens. Runs until killed.
Usage: status_server.py PORT CERT KEY LOG READY MODE"""
import http.server
import json
import ssl
import sys


def main():
    port, cert, key, log, ready, mode = sys.argv[1:7]

    class Handler(http.server.BaseHTTPRequestHandler):
        def record_and_answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace")
            with open(log, "a") as out:
                out.write(json.dumps({
                    "method": self.command, "path": self.path,
                    "authorization": self.headers.get("Authorization"),
                    "content_type": self.headers.get("Content-Type"), "body": body}) + "\n")
            if mode == "ok":
                self.answer(200, body)
            else:
                self.answer(403, json.dumps({"kind": "Status", "apiVersion": "v1",
                                             "status": "Failure", "message": "Forbidden",
                                             "reason": "Forbidden", "code": 403}))

        def answer(self, code, text):
            data = text.encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_POST = do_PUT = do_PATCH = do_GET = record_and_answer

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    open(ready, "w").close()
    server.serve_forever()


if __name__ == "__main__":
    main()
