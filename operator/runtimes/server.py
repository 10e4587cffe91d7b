"""sless Python runtime server (standard library only).

Serve mode:    python3 -u server.py
One-shot mode: python3 -u server.py --once INPUT_FILE OUTPUT_FILE

Implements docs/runtime-protocol.md (operator <-> runtime) and
docs/handler-contract.md (what a function receives and returns).
"""

import asyncio
import base64
import importlib
import inspect
import json
import os
import signal
import socketserver
import sys
import threading
import traceback
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

EXIT_LOAD_FAILED = 3


class Context(dict):
    """The handler's context: a dict (context["requestId"]) whose keys can also be
    read as attributes (context.requestId)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def fail_load(message):
    sys.stderr.write("sless: cannot load entrypoint: %s\n" % message)
    sys.stderr.flush()
    sys.exit(EXIT_LOAD_FAILED)


def load_handler():
    """Imports SLESS_ENTRYPOINT (`module.function`) or exits with status 3."""
    entrypoint = os.environ.get("SLESS_ENTRYPOINT", "")
    module_name, _, func_name = entrypoint.rpartition(".")
    if not module_name or not func_name:
        fail_load("SLESS_ENTRYPOINT %r is not of the form module.function" % entrypoint)
    code_dir = os.environ.get("SLESS_CODE_DIR") or os.getcwd()
    if code_dir not in sys.path:
        sys.path.insert(0, code_dir)
    try:
        module = importlib.import_module(module_name)
    except BaseException:  # noqa: BLE001 - report anything the import raised
        traceback.print_exc()
        fail_load(
            "entrypoint %r: module %r cannot be imported (see the traceback above)"
            % (entrypoint, module_name)
        )
    if not hasattr(module, func_name):
        fail_load(
            "entrypoint %r: module %r has no attribute %r"
            % (entrypoint, module_name, func_name)
        )
    func = getattr(module, func_name)
    if not callable(func):
        fail_load(
            "entrypoint %r: %s.%s is a %s, not a function"
            % (entrypoint, module_name, func_name, type(func).__name__)
        )
    return func


def takes_one_argument(func):
    """True when the handler should be called as handler(event)."""
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [
        p
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    has_varargs = any(p.kind == p.VAR_POSITIONAL for p in params)
    return len(positional) == 1 and not has_varargs


class Invoker:
    """Calls the handler, sync or async. Coroutines run on one shared event loop
    in a background thread so that concurrent async invocations interleave."""

    def __init__(self, func):
        self.func = func
        self.one_arg = takes_one_argument(func)
        self._loop = None
        self._lock = threading.Lock()

    def _event_loop(self):
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                t = threading.Thread(target=loop.run_forever, name="sless-asyncio", daemon=True)
                t.start()
                self._loop = loop
            return self._loop

    def call(self, event, context):
        result = self.func(event) if self.one_arg else self.func(event, context)
        if inspect.isawaitable(result):
            async def wrap(aw):
                return await aw

            future = asyncio.run_coroutine_threadsafe(wrap(result), self._event_loop())
            result = future.result()
        return result


def make_context(request_id):
    timeout = os.environ.get("SLESS_TIMEOUT_SEC", "")
    return Context(
        function=os.environ.get("SLESS_FUNCTION", ""),
        namespace=os.environ.get("SLESS_NAMESPACE", ""),
        requestId=request_id,
        timeoutSec=int(timeout) if timeout.isdigit() else None,
    )


def is_json_type(content_type):
    if content_type is None:
        return True
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def decode_body(raw, content_type):
    """Returns (body, isBase64Encoded) per the handler contract."""
    if not raw:
        return None, False
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii"), True
    if is_json_type(content_type):
        try:
            return json.loads(text), False
        except ValueError:
            pass
    return text, False


def error_body(exc):
    return {"error": str(exc), "type": type(exc).__name__}


def header_lookup(headers, name):
    for k, v in headers.items():
        if str(k).lower() == name:
            return v
    return None


def to_json_bytes(value):
    return json.dumps(value, allow_nan=False).encode("utf-8")


def encode_response(result):
    """Turns a handler's return value into (status, [(name, value)], body bytes)."""
    if isinstance(result, dict) and "statusCode" in result:
        status = result["statusCode"]
        if isinstance(status, bool) or not isinstance(status, int) or not 100 <= status <= 599:
            raise ValueError("statusCode must be an integer between 100 and 599, got %r" % (status,))
        raw_headers = result.get("headers") or {}
        if not isinstance(raw_headers, dict):
            raise ValueError("headers must be a map of strings")
        headers = [(str(k), str(v)) for k, v in raw_headers.items()]
        body = result.get("body")
        content_type = header_lookup(raw_headers, "content-type")
        if body is None:
            data = b""
        elif result.get("isBase64Encoded") is True:
            if not isinstance(body, str):
                raise ValueError("isBase64Encoded is true but body is not a base64 string")
            data = base64.b64decode(body, validate=True)
            if content_type is None:
                headers.append(("Content-Type", "application/octet-stream"))
        elif isinstance(body, str):
            data = body.encode("utf-8")
            if content_type is None:
                headers.append(("Content-Type", "text/plain; charset=utf-8"))
        elif isinstance(body, (bytes, bytearray)):
            data = bytes(body)
            if content_type is None:
                headers.append(("Content-Type", "application/octet-stream"))
        else:
            data = to_json_bytes(body)
            if content_type is None:
                headers.append(("Content-Type", "application/json"))
        return status, headers, data
    return 200, [("Content-Type", "application/json")], to_json_bytes(result)


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}

# As http.client's limits: longest header line, most header lines.
MAX_HEADER_LINE = 65536
MAX_HEADERS = 100


class Headers:
    """A request's headers in arrival order, names as sent, looked up without
    regard to case: the two methods of http.client's HTTPMessage that the
    handler and http.server call (get, items), read without the email
    package's parser (that parser was a fifth of the CPU a hello request
    costs)."""

    __slots__ = ("_items", "_first")

    def __init__(self, items):
        self._items = items
        self._first = {}
        for name, value in items:
            self._first.setdefault(name.lower(), value)

    def get(self, name, default=None):
        return self._first.get(name.lower(), default)

    def items(self):
        return list(self._items)


class HeaderError(Exception):
    """A header block past http.client's limits (the answer is a 431)."""


def read_headers(rfile):
    """Reads header lines up to the empty line. A line starting with a space
    or a tab continues the previous value (obsolete folding: joined with a
    space); a line without a colon is skipped."""
    items = []
    while True:
        line = rfile.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            raise HeaderError("Line too long", "header line")
        if line in (b"\r\n", b"\n", b""):
            return Headers(items)
        if len(items) >= MAX_HEADERS:
            raise HeaderError("Too many headers", "got more than %d headers" % MAX_HEADERS)
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t"):
            if items:
                name, value = items[-1]
                items[-1] = (name, (value + " " + text.strip()).strip())
            continue
        name, colon, value = text.partition(":")
        if colon:
            items.append((name.strip(), value.strip(" \t")))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; with Nagle's algorithm on, the
    # body waits for the client's delayed ACK (~40 ms per keep-alive request).
    disable_nagle_algorithm = True
    server_version = "sless-python"
    invoker = None  # set in serve()

    def log_message(self, format, *args):  # noqa: A002 - no access log in the run log
        pass

    def parse_request(self):
        """BaseHTTPRequestHandler.parse_request's checks (request line, HTTP
        version, keep-alive, Expect: 100-continue), with the headers read by
        read_headers. Returns False when an error answer was sent (or the
        line was empty)."""
        self.command = None
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) >= 3:
            version = words[-1]
            number = version[5:].split(".") if version.startswith("HTTP/") else []
            if len(number) != 2 or not all(n.isdigit() and len(n) <= 10 for n in number):
                self.send_error(HTTPStatus.BAD_REQUEST, "Bad request version (%r)" % version)
                return False
            number = (int(number[0]), int(number[1]))
            if number >= (2, 0):
                self.send_error(
                    HTTPStatus.HTTP_VERSION_NOT_SUPPORTED,
                    "Invalid HTTP version (%s)" % version[5:],
                )
                return False
            if number >= (1, 1):
                self.close_connection = False
            self.request_version = version
        if not 2 <= len(words) <= 3:
            self.send_error(HTTPStatus.BAD_REQUEST, "Bad request syntax (%r)" % self.requestline)
            return False
        self.command, self.path = words[0], words[1]
        if len(words) == 2:
            self.close_connection = True
            if self.command != "GET":
                self.send_error(
                    HTTPStatus.BAD_REQUEST, "Bad HTTP/0.9 request type (%r)" % self.command
                )
                return False
        if self.path.startswith("//"):
            # As http.server: a path of //host would read as a URL elsewhere.
            self.path = "/" + self.path.lstrip("/")
        try:
            self.headers = read_headers(self.rfile)
        except HeaderError as err:
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, err.args[0], err.args[1])
            return False
        connection = self.headers.get("Connection", "").lower()
        if connection == "close":
            self.close_connection = True
        elif connection == "keep-alive":
            self.close_connection = False
        if (
            self.headers.get("Expect", "").lower() == "100-continue"
            and self.request_version >= "HTTP/1.1"
            and not self.handle_expect_100()
        ):
            return False
        return True

    def read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks = []
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    # trailers until an empty line
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def build_event(self, raw):
        parts = urlsplit(self.path)
        query = {}
        for key, values in parse_qs(parts.query, keep_blank_values=True).items():
            query[key] = values[0] if len(values) == 1 else values
        headers = {}
        for key, value in self.headers.items():
            k = key.lower()
            headers[k] = headers[k] + ", " + value if k in headers else value
        body, is_b64 = decode_body(raw, headers.get("content-type"))
        return {
            "method": self.command,
            "path": parts.path or "/",
            "query": query,
            "headers": headers,
            "body": body,
            "isBase64Encoded": is_b64,
        }, headers

    def send(self, status, headers, data):
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        # end_headers() with the body in the same write: one segment and one
        # wake-up of the reader per answer instead of two.
        if self.request_version != "HTTP/0.9":
            self._headers_buffer.append(b"\r\n")
            if self.command != "HEAD":
                self._headers_buffer.append(data)
            self.flush_headers()
        elif self.command != "HEAD":
            self.wfile.write(data)

    def handle_any(self):
        try:
            raw = self.read_body()
        except (ValueError, OSError) as exc:
            self.close_connection = True
            self.send(400, [("Content-Type", "application/json")], to_json_bytes(error_body(exc)))
            return
        event, headers = self.build_event(raw)
        context = make_context(headers.get("x-request-id") or str(uuid.uuid4()))
        try:
            result = self.invoker.call(event, context)
            status, out_headers, data = encode_response(result)
        except BaseException as exc:  # noqa: BLE001 - the contract: any exception (even SystemExit) is a 500
            sys.stderr.write(
                "sless: invocation %s failed:\n%s" % (context["requestId"], traceback.format_exc())
            )
            sys.stderr.flush()
            status, out_headers, data = 500, [("Content-Type", "application/json")], to_json_bytes(error_body(exc))
        self.send(status, out_headers, data)

    def __getattr__(self, name):
        # Every HTTP method (do_GET, do_POST, do_PATCH, ...) goes to the handler.
        if name.startswith("do_"):
            return self.handle_any
        raise AttributeError(name)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


class UnixHandler(Handler):
    # TCP_NODELAY does not apply to a unix socket.
    disable_nagle_algorithm = False

    def address_string(self):
        return "unix"


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The sandboxed form: the operator connects over SLESS_SOCKET."""

    daemon_threads = True
    request_queue_size = 256

    def get_request(self):
        conn, _ = super().get_request()
        return conn, ("unix", 0)


def serve():
    invoker = Invoker(load_handler())
    Handler.invoker = invoker
    sock_path = os.environ.get("SLESS_SOCKET", "")
    if sock_path:
        try:
            os.unlink(sock_path)
        except FileNotFoundError:
            pass
        server = UnixServer(sock_path, UnixHandler)
        ready = "SLESS_READY socket=%s\n" % sock_path
    else:
        host = os.environ.get("SLESS_HOST", "127.0.0.1")
        port = int(os.environ.get("SLESS_PORT", "0") or 0)
        server = Server((host, port), Handler)
        ready = "SLESS_READY port=%d\n" % server.server_address[1]

    def on_term(signum, frame):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    sys.stdout.write(ready)
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    sys.stdout.flush()
    sys.stderr.flush()


def run_once(input_file, output_file):
    invoker = Invoker(load_handler())
    with open(input_file, "rb") as f:
        event = json.loads(f.read().decode("utf-8"))
    context = make_context(str(uuid.uuid4()))
    try:
        result = invoker.call(event, context)
        out = to_json_bytes({"ok": True, "result": result})
        code = 0
    except BaseException as exc:  # noqa: BLE001 - the contract: any exception is reported
        traceback.print_exc()
        out = to_json_bytes(dict(ok=False, **error_body(exc)))
        code = 1
    with open(output_file, "wb") as f:
        f.write(out)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main(argv):
    if len(argv) >= 1 and argv[0] == "--once":
        if len(argv) != 3:
            sys.stderr.write("usage: server.py --once INPUT_FILE OUTPUT_FILE\n")
            return 2
        return run_once(argv[1], argv[2])
    if argv:
        sys.stderr.write("usage: server.py [--once INPUT_FILE OUTPUT_FILE]\n")
        return 2
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
