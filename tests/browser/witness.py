#!/usr/bin/env python3
"""A web server on another loopback port, run by another user: it records
what a browser that used `tickbox inspect`'s page sends to a red team's
server (cli/tests/it/inspect.rs makes the assertions).

    witness.py

Started as root, it becomes the user nobody before it listens, as another
local user's server would be (root could read the token anyway). It prints
one JSON line {"port": P, "uid": U, "gid": G} once it listens, then one line
per request, {"method", "path", "headers": [[name, value], ...]}, written
and flushed before the answer goes out: a page the browser finished loading
has been recorded. It serves until it is killed (the test kills it).
"""
import json, os, pwd, socketserver, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
# Loaded now: once it is nobody, the interpreter's own library may be out
# of reach (a Python installed under /root), and these load lazily.
import encodings.idna, email.parser, email.utils, html  # noqa: F401

PAGE = b"<!doctype html><meta charset=utf-8><title>witness</title><p>another user's server</p>\n"
out = threading.Lock()


def say(record):
    with out:
        sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()


def become_nobody():
    # Groups first: after setuid there is no right left to change them.
    if os.geteuid() != 0:
        return
    nobody = pwd.getpwnam("nobody")
    os.setgroups([])
    os.setgid(nobody.pw_gid)
    os.setuid(nobody.pw_uid)


class Witness(BaseHTTPRequestHandler):
    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20)).decode("utf-8", "replace") if length else ""
        say({"method": self.command, "path": self.path,
             "headers": [[k, v] for k, v in self.headers.items()], "body": body})
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(PAGE)

    do_GET = do_POST = do_HEAD = do_PUT = do_OPTIONS = answer

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # HTTPServer's would look its own name up (getfqdn): a DNS query
        # for nothing.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    become_nobody()
    server = Server(("127.0.0.1", 0), Witness)
    say({"port": server.server_address[1], "uid": os.getuid(), "gid": os.getgid()})
    server.serve_forever()


main()
