#!/usr/bin/env python3
# Mock OpenAI-compatible server (Chat Completions and Responses APIs) for the bats tests:
# answers from a JSON script of rules and logs every request as one JSON line.
"""Usage: mock_llm.py SCRIPT LOG PORTFILE

SCRIPT: {"rules": [{"match", "times", "status", "headers", "delay", "content", "body",
"tool_calls", "ignore_format", "prompt_tokens", "completion_tokens", "echo_auth", "close",
"pad"}, ...]}; the first rule whose "match" is a substring of the request body (a list: each
is) and whose "times" is not used up answers. "tool_calls": [{"name", "arguments"}, ...]
answers with those function calls instead of content (Chat's "tool_calls", the Responses API's
"function_call" items; "arguments" a JSON value, or a string sent as it is), so that a script
of rules, each matching what the previous call's result must hold, plays a tool loop. As
llama-server does, a Chat Completions request that asks for an answer format (response_format)
gets no function calls: its answer is the rule's content (the server's grammar holds the whole
answer to the format), unless the rule has "ignore_format" (a server that ignores the format).
An answer longer than the request's max_completion_tokens (max_output_tokens), at 4 characters
a token, is cut there and ends with finish_reason "length" (status "incomplete"), as a server's
does. As llama-server does, a Responses API request whose input holds an assistant message
without "type": "message" is refused (HTTP 400). "echo_auth" puts the Authorization header in
place of "{auth}" in "body" or "content" (or after the content), with every character
JSON-escaped (\\uXXXX) in place of "{auth_u}" and with the second half escaped in place of
"{auth_half_u}"; "{split}" in a Responses API content splits it into output_text parts there
(joined again by the client). "pad" appends that many spaces to the content (an answer too
large)."""
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
counter = 0
rules = []
log_file = None


def envelope(api, n, model, content, prompt_tokens, completion_tokens, tool_calls=None, cut=False):
    total = prompt_tokens + completion_tokens
    calls = []
    for k, call in enumerate(tool_calls or []):
        args = call.get("arguments", {})
        calls.append((f"call_{n}_{k}", call["name"],
                      args if isinstance(args, str) else json.dumps(args)))
    if api == "chat":
        message = {"role": "assistant", "content": None if calls else content}
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function",
                                      "function": {"name": name, "arguments": args}}
                                     for i, name, args in calls]
        return {"id": f"chatcmpl-mock-{n}", "object": "chat.completion",
                "created": int(time.time()), "model": model,
                "choices": [{"index": 0, "message": message,
                             "finish_reason": ("tool_calls" if calls else
                                               "length" if cut else "stop")}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": total}}
    output = [{"type": "function_call", "id": f"fc_{i}", "call_id": i, "name": name,
               "arguments": args, "status": "completed"} for i, name, args in calls]
    if not calls:
        output = [{"type": "message", "id": f"msg-mock-{n}", "status": "completed",
                   "role": "assistant",
                   "content": [{"type": "output_text", "text": part, "annotations": []}
                               for part in content.split("{split}")]}]
    done = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}} if cut \
        else {"status": "completed"}
    return {"id": f"resp-mock-{n}", "object": "response", "created_at": int(time.time()),
            **done, "model": model, "output": output,
            "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens,
                      "total_tokens": total}}


def matches(rule, text):
    match = rule.get("match", "")
    return all(m in text for m in (match if isinstance(match, list) else [match]))


def asks_format(request):
    """Whether a Chat Completions request asks for an answer format (response_format; the
    Responses API's text.format llama-server ignores)."""
    return isinstance(request, dict) and "response_format" in request


def untyped_assistant(request):
    """Whether a Responses API input holds an assistant message without "type": "message"."""
    items = request.get("input") if isinstance(request, dict) else None
    return isinstance(items, list) and any(
        isinstance(i, dict) and i.get("role") == "assistant" and i.get("type") != "message"
        for i in items)


def error_body(message, kind):
    return json.dumps({"error": {"message": message, "type": kind}})


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so that clients sending "Expect: 100-continue" (libcurl does for big bodies)
    # get their 100 at once instead of stalling a second; every reply still closes.
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        global counter
        start = time.time()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        text = raw.decode("utf-8", errors="replace")
        auth = self.headers.get("Authorization")
        try:
            request = json.loads(text)
        except ValueError:
            request = text
        route = self.path.split("?", 1)[0]
        api = None
        if self.command == "POST":
            api = ("chat" if route.endswith("/chat/completions") else
                   "responses" if route.endswith("/responses") else None)

        with lock:
            counter += 1
            n = counter
            index = None
            if api:
                for i, rule in enumerate(rules):
                    if matches(rule, text) and rule.get("times", 1) > 0:
                        if "times" in rule:
                            rule["times"] -= 1
                        index = i
                        break
        rule = rules[index] if index is not None else {}

        status, headers = rule.get("status", 200), {"Content-Type": "application/json"}
        if api == "responses" and untyped_assistant(request):
            # llama-server reads an assistant's input message only with "type": "message"
            status, body = 400, error_body("Cannot determine type of 'item'", "invalid_request_error")
        elif api is None:
            status, body = 404, error_body(f"mock: no such endpoint {self.path}",
                                           "invalid_request_error")
        elif index is None:
            status, body = 500, error_body("mock: no rule matches", "server_error")
        else:
            time.sleep(rule.get("delay", 0))
            escaped = lambda t: "".join(f"\\u{ord(ch):04x}" for ch in t)
            a = auth or ""
            fill = (lambda s: s.replace("{auth}", a).replace("{auth_u}", escaped(a))
                    .replace("{auth_half_u}", a[:len(a) // 2] + escaped(a[len(a) // 2:]))) \
                if rule.get("echo_auth") else str
            if rule.get("close"):
                # A network error as the client sees it: the connection ends, no reply at all.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.write_log(n, start, None, index, request)
                return
            if "body" in rule:
                body = fill(rule["body"])
            elif "content" in rule or "tool_calls" in rule or status == 200:
                content = rule.get("content", "")
                if rule.get("echo_auth") and "{auth}" not in content:
                    content += " " + (auth or "")
                content = fill(content) + " " * rule.get("pad", 0)
                model = request.get("model", "mock") if isinstance(request, dict) else "mock"
                # As a server does, an answer longer than the request's output token limit
                # (4 characters a token here) stops there: finish_reason "length".
                limit = request.get("max_completion_tokens", request.get("max_output_tokens")) \
                    if isinstance(request, dict) else None
                cut = isinstance(limit, int) and len(content) > 4 * limit
                if cut:
                    content = content[:4 * limit]
                tool_calls = rule.get("tool_calls")
                if tool_calls and asks_format(request) and not rule.get("ignore_format"):
                    tool_calls = None
                body = json.dumps(envelope(api, n, model, content,
                                           rule.get("prompt_tokens", len(raw) // 4),
                                           rule.get("completion_tokens", len(content) // 4),
                                           tool_calls, cut))
            else:
                message = f"mock: status {status}"
                if rule.get("echo_auth"):
                    message += f" (key {auth})"
                body = error_body(message, "mock_error")
            headers.update(rule.get("headers", {}))

        data = body.encode("utf-8")
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout); the request is still logged
        self.write_log(n, start, status, index, request)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST

    def write_log(self, n, start, status, index, request):
        entry = {"n": n, "start": start, "end": time.time(), "path": self.path,
                 "authorization": self.headers.get("Authorization"), "rule": index,
                 "status": status, "body": request}
        with lock:
            log_file.write(json.dumps(entry) + "\n")
            log_file.flush()


def main():
    global rules, log_file
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    script, log_path, port_file = sys.argv[1:]
    with open(script) as f:
        rules = json.load(f)["rules"]
    log_file = open(log_path, "a")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True

    def stop(signum, frame):
        raise SystemExit(0)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    # Written atomically so that a test polling for the file never reads half a number.
    with open(port_file + ".tmp", "w") as f:
        f.write(f"{server.server_address[1]}\n")
    os.replace(port_file + ".tmp", port_file)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
