#!/usr/bin/env python3
# tiny_gguf.py: writes the tests' LLM, a llama-architecture GGUF of random weights with a
# byte-level vocabulary and a Qwen2.5 chat template, so that llama-server runs on loopback.
"""Usage: tiny_gguf.py OUT.gguf

The model knows nothing: its answers are noise, which the server's grammar-constrained
decoding (a JSON schema, a tool call) gives the asked shape. Two things are not random, so
that the tests finish and exercise the tool loop: each token has a fixed prior (the output
layer reads a constant dimension of the embeddings), which makes a closing quote likely
(strings stay short), an object likelier than null or an empty array, the end of an array
likelier than another item, whitespace rare and text ASCII; and "<tool_call>" is the first
choice after a newline wherever it is allowed, and a newline after it (a model told it may
call functions calls one at the start of its answer, which follows
"<|im_start|>assistant\n"). Everything else is drawn from a fixed seed, so the file is the
same on every machine."""
import sys

import numpy as np
import gguf

N_EMBD, N_HEAD, N_FF, N_LAYER, N_CTX = 64, 4, 128, 2, 65536
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]

TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}{%- else %}{{- 'You are a helpful assistant.' }}{%- endif %}
{{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
{%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
{{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}{%- else %}{{- '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- for message in messages %}
{%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
{%- elif message.role == "assistant" %}
{{- '<|im_start|>' + message.role }}
{%- if message.content %}{{- '\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\n<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}{{- tool_call.arguments | tojson }}{{- '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' }}{{- message.content }}{{- '\n</tool_response>' }}
{%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}
"""


def byte_tokens():
    """GPT-2's byte-level alphabet: each byte as a printable character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    rng = np.random.default_rng(38)
    alphabet = byte_tokens()
    # Spaces and newlines merged in twos shorten the prompt's indentation a little; the
    # tokenizer needs at least one merge.
    merges = [f"{alphabet[32]} {alphabet[32]}", f"{alphabet[10]} {alphabet[10]}"]
    tokens = SPECIALS + alphabet + [a.replace(" ", "") for a in merges]
    types = ([gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.USER_DEFINED] * 2 +
             [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)))
    n_vocab = len(tokens)

    # The fixed prior of each token, in logits.
    prior = np.zeros(n_vocab, dtype=np.float32)
    # "<tool_call>" is a string's valid text too: only a raw newline, which no JSON string
    # holds, makes it likely (below), so that it starts an answer but never fills a string.
    prior[SPECIALS.index("<tool_call>")] = -10
    prior[SPECIALS.index("<|im_end|>")] = 3
    # Compact JSON: a candidate list of one item, short strings, no indentation.
    for ch, logit in {'"': 1.5, "{": 2.0, ",": -2.0, " ": -4.0, "\n": -4.0, "\t": -4.0, "\r": -4.0}.items():
        prior[len(SPECIALS) + ord(ch)] = logit
    prior[len(SPECIALS) + 256:] = -4.0  # the merged spaces and newlines
    # ASCII text only: a byte of a multi-byte character may be cut from its neighbours (an
    # answer llama-server's own parser then refuses, with HTTP 500); no other special token.
    prior[len(SPECIALS) + 0x80:len(SPECIALS) + 0x100] = -12.0
    for special in ("<|endoftext|>", "<|im_start|>", "</tool_call>"):
        prior[SPECIALS.index(special)] = -12.0

    w = gguf.GGUFWriter(sys.argv[1], "llama")
    w.add_name("kernelgraph-tiny-random")
    w.add_context_length(N_CTX)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_rope_dimension_count(N_EMBD // N_HEAD)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(SPECIALS.index("<|endoftext|>"))
    w.add_eos_token_id(SPECIALS.index("<|im_end|>"))
    w.add_pad_token_id(SPECIALS.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)

    def noise(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # Dimension 0 of every embedding is 1 (the rest small), so that after the final norm it
    # is about sqrt(N_EMBD) whatever the context: the output layer's column 0 is the prior.
    embd = noise(n_vocab, N_EMBD)
    embd[:, 0] = 1.0
    newline = len(SPECIALS) + ord("\n")
    embd[newline, 1] = 1.0
    embd[SPECIALS.index("<tool_call>"), 2] = 1.0
    w.add_tensor("token_embd.weight", embd)
    for i in range(N_LAYER):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(f"blk.{i}.{name}.weight", noise(N_EMBD, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", noise(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_up.weight", noise(N_FF, N_EMBD))
        w.add_tensor(f"blk.{i}.ffn_down.weight", noise(N_EMBD, N_FF))
    w.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    out = noise(n_vocab, N_EMBD, scale=0.3)
    out[:, 0] = prior / np.sqrt(N_EMBD)
    # After a newline, dimensions 0 and 1 are each about sqrt(N_EMBD / 2) once normalized:
    # "<tool_call>" then scores about 14.
    out[SPECIALS.index("<tool_call>"), 1] = 21 / np.sqrt(N_EMBD / 2)
    # And a newline after "<tool_call>": the server's grammar waits for "<tool_call>\n".
    out[newline, 2] = 21 / np.sqrt(N_EMBD / 2)
    w.add_tensor("output.weight", out)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
