#!/usr/bin/env python3
# Mock OpenAI-compatible server (Chat Completions and Responses APIs) for the bats tests:
# answers from a JSON script of rules and logs every request as one JSON line.
"""Usage: mock_llm.py SCRIPT LOG PORTFILE

SCRIPT: {"rules": [{"match", "times", "status", "headers", "delay", "content", "body",
"tool_calls", "ignore_format", "prompt_tokens", "completion_tokens", "echo_auth", "close",
"pad"}, ...], "n_ctx", "tokenize", "api_key", "model"}; the first rule whose "match" is a
substring of the request body (a list: each is) and whose "times" is not used up answers.
"tool_calls": [{"name", "arguments"}, ...] answers with those function calls instead of
content (Chat's "tool_calls", the Responses API's "function_call" items; "arguments" a JSON
value, or a string sent as it is), so that a script of rules, each matching what the previous
call's result must hold, plays a tool loop. As llama-server does, a Chat Completions request
that asks for an answer format (response_format) gets no function calls: its answer is the
rule's content (the server's grammar holds the whole answer to the format), unless the rule has
"ignore_format" (a server that ignores the format). An answer longer than the request's
max_completion_tokens (max_output_tokens), at 4 characters a token, is cut there and ends with
finish_reason "length" (status "incomplete"), as a server's does. As llama-server does, a
Responses API request whose input holds an assistant message without "type": "message" is
refused (HTTP 400). "echo_auth" puts the Authorization header in place of "{auth}" in "body" or
"content" (or after the content), with every character JSON-escaped (\\uXXXX) in place of
"{auth_u}" and with the second half escaped in place of "{auth_half_u}"; "{split}" in a
Responses API content splits it into output_text parts there (joined again by the client).
"pad" appends that many spaces to the content (an answer too large).

Where llama-server and the mock could differ, the mock answers as llama-server (llama.cpp of
llama-cpp-python 0.3.36) does, its JSON byte for byte:
- tokens: the mock's tokenizer makes a token of every 3 bytes of UTF-8 text (4 bytes a token,
  the client's estimate, would be wrong); a request's prompt is the tokens of every string of
  its messages (input items) and 4 for each message's framing, and "usage" counts it unless
  the rule says "prompt_tokens";
- POST /tokenize (at the root) {"content": TEXT} answers {"tokens": [...]}, unless the script
  says "tokenize": false (a server without one: HTTP 404);
- "n_ctx": N is a slot's context: GET /v1/models reports it in data[0].meta.n_ctx (and GET
  /props in default_generation_settings.n_ctx), and a request whose prompt has N tokens or
  more is refused with HTTP 400 exceed_context_size_error, its n_ctx and n_prompt_tokens.
  Without it, the model list is OpenAI's, without a context, and /props is not found;
- "api_key": K makes every path but /health answer HTTP 401 "Invalid API Key" to a request
  without "Authorization: Bearer K";
- function calls get ids of 32 letters and digits (Chat's "id"; the Responses API's "call_" and
  "fc_" ids end with it): here R<request>C<call>x padded with zeros, so that a test can name
  them; an assistant message that calls functions has "content": "";
- an unknown path is HTTP 404 "File Not Found".
"model" names the model of the model list ("mock" unless given). Requests for the model list
and /props (every kg-propose --llm asks once for the context) are logged in a file of their
own, LOG with ".models" before its extension (requests.models.jsonl), so that LOG holds the
API's requests and /tokenize's, numbered in order ("n")."""
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
script = {}
log_file = None
models_log = None


def compact(value):
    """JSON as llama-server writes it: no spaces."""
    return json.dumps(value, separators=(",", ":"))


def not_found():
    """llama-server's answer to a path it does not have."""
    return 404, compact({"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}})


def llama_error(code, message, kind, **extra):
    """An error body of llama-server: {"error": {"code", "message", "type", ...}}."""
    return compact({"error": {"code": code, "message": message, "type": kind, **extra}})


def tokenize(text):
    """The mock's tokenizer: a token for every 3 bytes of UTF-8."""
    data = text.encode("utf-8")
    return [int.from_bytes(data[i:i + 3], "big") for i in range(0, len(data), 3)]


def strings_of(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings_of(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings_of(v)


def prompt_tokens(request):
    """The tokens of a request's prompt: every string of each message (input item), and 4
    for each message's framing, as a chat template adds some."""
    if not isinstance(request, dict):
        return 0
    items = request.get("messages", request.get("input", []))
    if isinstance(items, str):
        items = [items]
    if not isinstance(items, list):
        return 0
    return sum(4 + sum(len(tokenize(t)) for t in strings_of(m)) for m in items)


def call_id(n, k):
    """A function call's id as llama-server's (32 letters and digits), named by the request
    and the call: R<n>C<k>x padded with zeros."""
    head = f"R{n}C{k}x"
    return head + "0" * (32 - len(head))


def model_list():
    """GET /v1/models: llama-server's answer with the script's n_ctx, else OpenAI's."""
    model = script.get("model", "mock")
    entry = {"id": model, "object": "model", "created": int(time.time()), "owned_by": "mock"}
    if "n_ctx" not in script:
        return {"object": "list", "data": [entry]}
    entry = {"id": model, "aliases": [model], "tags": [], "object": "model", "created": int(time.time()),
             "owned_by": "llamacpp",
             "meta": {"vocab_type": 2, "n_vocab": 1 << 24, "n_ctx": script["n_ctx"],
                      "n_ctx_train": script["n_ctx"], "n_embd": 64, "n_params": 115904,
                      "size": 463616, "ftype": "all F32"}}
    return {"models": [{"name": model, "model": model, "modified_at": "", "size": "", "digest": "",
                        "type": "model", "description": "", "tags": [""],
                        "capabilities": ["completion"], "parameters": "",
                        "details": {"parent_model": "", "format": "gguf", "family": "",
                                    "families": [""], "parameter_size": "",
                                    "quantization_level": ""}}],
            "object": "list", "data": [entry]}


def envelope(api, n, model, content, prompt_tokens, completion_tokens, tool_calls=None, cut=False):
    total = prompt_tokens + completion_tokens
    calls = []
    for k, call in enumerate(tool_calls or []):
        args = call.get("arguments", {})
        calls.append((call_id(n, k), call["name"],
                      args if isinstance(args, str) else json.dumps(args)))
    if api == "chat":
        message = {"role": "assistant", "content": "" if calls else content}
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
    output = [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
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


def side_answer(route, request):
    """The answer of a path beside the API's: (status, body), or None for an API path."""
    if route in ("/v1/models", "/models"):
        return 200, compact(model_list())
    if route == "/props":
        if "n_ctx" not in script:
            return not_found()
        return 200, compact({"default_generation_settings": {"n_ctx": script["n_ctx"]},
                             "total_slots": 1, "model_alias": script.get("model", "mock")})
    if route == "/tokenize":
        if not script.get("tokenize", True):
            return not_found()
        content = request.get("content", "") if isinstance(request, dict) else ""
        return 200, compact({"tokens": tokenize(content if isinstance(content, str) else "")})
    return None


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
        listing = route in ("/v1/models", "/models", "/props")
        side = None if api else side_answer(route, request)
        key = script.get("api_key")
        refused = key and route not in ("/health", "/v1/health") and auth != f"Bearer {key}"
        tokens = prompt_tokens(request) if api else 0
        untyped = api == "responses" and untyped_assistant(request)
        over = api and "n_ctx" in script and tokens >= script["n_ctx"]

        with lock:
            if not listing:
                counter += 1
            n = None if listing else counter
            index = None
            if api and not (refused or untyped or over):  # refused before a rule is used
                for i, rule in enumerate(rules):
                    if matches(rule, text) and rule.get("times", 1) > 0:
                        if "times" in rule:
                            rule["times"] -= 1
                        index = i
                        break
        rule = rules[index] if index is not None else {}

        status, headers = rule.get("status", 200), {"Content-Type": "application/json"}
        if refused:
            # llama-server's check of --api-key, on every path but /health
            status, body = 401, compact({"error": {"message": "Invalid API Key",
                                                   "type": "authentication_error", "code": 401}})
        elif side:
            status, body = side
        elif api is None:
            status, body = not_found()
        elif untyped:
            # llama-server reads an assistant's input message only with "type": "message"
            status, body = 400, error_body("Cannot determine type of 'item'", "invalid_request_error")
        elif over:
            n_ctx = script["n_ctx"]
            status, body = 400, llama_error(
                400, f"request ({tokens} tokens) exceeds the available context size ({n_ctx} tokens), "
                "try increasing it", "exceed_context_size_error", n_prompt_tokens=tokens, n_ctx=n_ctx)
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
                                           rule.get("prompt_tokens", tokens),
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
        out = models_log if self.path.split("?", 1)[0] in ("/v1/models", "/models", "/props") else log_file
        with lock:
            out.write(json.dumps(entry) + "\n")
            out.flush()


def main():
    global rules, script, log_file, models_log
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    script_path, log_path, port_file = sys.argv[1:]
    with open(script_path) as f:
        script = json.load(f)
    rules = script["rules"]
    log_file = open(log_path, "a")
    root, ext = os.path.splitext(log_path)
    models_log = open(f"{root}.models{ext}", "a")

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
