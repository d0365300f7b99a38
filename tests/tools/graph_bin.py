#!/usr/bin/env python3
"""graph_bin.py FILE [FIELD VALUE]...: sets fields of the checkpoint of a kg-select graph.bin
(version 4, this machine's byte order) and writes its checksum again, so that a test can
make a file that passes the checksum but holds what a bug could write.
graph_bin.py FILE --delta [FIELD VALUE]...: the same for the last delta after the checkpoint:
FIELD is a field of its header (nnodes, nedges, rollout_len, ...) or changed_nodes and
changed_edges, the counts of records it holds.

FIELD is a field of the header (builds, iter, incumbent, ...), params.NAME, or nodes[I].F /
edges[I].F for F a field of struct mcgs_node or mcgs_edge (lib/mcgs.h). VALUE is a number
("nan" and "-1e300" work for doubles); an integer field takes an integer. The layout is
read from tools/select/snapshot.c by hand: a change there must change this too."""
import re
import struct
import sys

FILE_HEAD = "<8s4I4I4Q4QQQ"  # magic, version, byte order, head size, params, sizes, offset, cap, path offset, checksum
HEAD_FIELDS = [("nnodes", "Q"), ("nedges", "Q"), ("rollout_len", "Q"), ("incumbent", "Q"), ("rng", "Q"),
               ("events_len", "Q"), ("iter", "q"), ("builds", "q"), ("last_improvement", "q"),
               ("rollout_active", "q"), ("rollout_node", "q"), ("rollout_steps_left", "q"), ("rollout_step", "q"),
               ("baseline_ms", "d"), ("rollout_best", "d"), ("kernel_off", "Q"), ("kernel_len", "Q"),
               ("regraph_off", "Q"), ("regraph_len", "Q")]
PARAMS = ["c_init", "c_base", "fpu_reduction", "root_fpu_reduction", "widen_k", "widen_alpha", "reward_clip",
          "failure_reward", "cycle_penalty", "noise_epsilon", "noise_alpha", "improve_pct", "converge_iters",
          "budget_builds", "rollout_epsilon", "rollout_lambda", "rollout_depth", "backup_max"]
NODE_FIELDS = [("u", "d"), ("n", "d"), ("q", "d"), ("rank", "q"), ("first_out", "Q"), ("last_out", "Q"), ("nout", "Q")]
EDGE_FIELDS = [("from", "Q"), ("to", "Q"), ("next_out", "Q"), ("n", "d"), ("prior", "d")]
KIND_MNODE, KIND_MEDGE = 0, 2


def fnv1a64(data):
    """lib/fnv1a.c's fnv1a64: FNV-1a over bytes (a delta's checksum)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def fnv1a64_words(data, h=0xCBF29CE484222325):
    """lib/fnv1a.c's fnv1a64_words: FNV-1a steps over 8-byte words, then the bytes left."""
    whole = len(data) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", data[:whole]):
        h = ((h ^ w) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    for b in data[whole:]:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def field_at(fields, name):
    at = 0
    for f, fmt in fields:
        if f == name:
            return at, fmt
        at += struct.calcsize("<" + fmt)
    sys.exit("graph_bin.py: no field '%s'" % name)


def set_delta(path, data, fh, pairs):
    """Sets fields of the last delta (delta_head, then head_rec, then the two counts of
    changed records) and writes its checksum (FNV-1a of its payload) again."""
    head_fmt = "<" + "".join(f for _, f in HEAD_FIELDS)
    rollout_len = struct.unpack_from(head_fmt, data, struct.calcsize(FILE_HEAD))[2]
    pos, last = fh[17] + 8 * rollout_len, None
    while pos + 24 <= len(data):
        magic, payload_len, _ = struct.unpack_from("<8sQQ", data, pos)
        if magic != b"KGDELTA\0" or payload_len > len(data) - pos - 24:
            break
        last, pos = pos, pos + 24 + payload_len
    if last is None:
        sys.exit("graph_bin.py: %s: no delta after the checkpoint" % path)
    payload_len = struct.unpack_from("<Q", data, last + 8)[0]
    counts_at = last + 24 + fh[3]
    for name, value in zip(pairs[::2], pairs[1::2]):
        if name in ("changed_nodes", "changed_edges"):
            at, fmt = counts_at + (8 if name == "changed_edges" else 0), "Q"
        else:
            at, fmt = field_at(HEAD_FIELDS, name)
            at += last + 24
        struct.pack_into("<" + fmt, data, at, float(value) if fmt == "d" else int(value))
    struct.pack_into("<Q", data, last + 16, fnv1a64(data[last + 24:last + 24 + payload_len]))
    open(path, "wb").write(data)


def main():
    path, pairs = sys.argv[1], sys.argv[2:]
    data = bytearray(open(path, "rb").read())
    fh_size = struct.calcsize(FILE_HEAD)
    fh = struct.unpack_from(FILE_HEAD, data)
    if fh[0] != b"KGGRAPH\0" or fh[1] != 4:
        sys.exit("graph_bin.py: %s: not a version 4 graph.bin" % path)
    if pairs[:1] == ["--delta"]:
        set_delta(path, data, fh, pairs[1:])
        return
    offsets, path_offset = fh[9:13], fh[17]
    for name, value in zip(pairs[::2], pairs[1::2]):
        m = re.fullmatch(r"(nodes|edges)\[(\d+)\]\.(\w+)", name)
        if m:
            fields, kind = (NODE_FIELDS, KIND_MNODE) if m.group(1) == "nodes" else (EDGE_FIELDS, KIND_MEDGE)
            at, fmt = field_at(fields, m.group(3))
            size = sum(struct.calcsize("<" + f) for _, f in fields)
            at += offsets[kind] + int(m.group(2)) * size
        elif name.startswith("params."):
            at, fmt = fh_size + sum(struct.calcsize("<" + f) for _, f in HEAD_FIELDS) + 8 * PARAMS.index(name[7:]), "d"
        else:
            at, fmt = field_at(HEAD_FIELDS, name)
            at += fh_size
        struct.pack_into("<" + fmt, data, at, float(value) if fmt == "d" else int(value))
    head = dict(zip([f for f, _ in HEAD_FIELDS], struct.unpack_from("<" + "".join(f for _, f in HEAD_FIELDS), data, fh_size)))
    # The checksum: the file head with it 0, the head, the records up to the counts, the path.
    struct.pack_into("<Q", data, fh_size - 8, 0)
    head_size = fh[3]
    sizes = fh[5:9]
    counts = [head["nnodes"], head["nnodes"], head["nedges"], head["nedges"]]
    h = fnv1a64_words(data[:fh_size + head_size])
    for k in range(4):
        h = fnv1a64_words(data[offsets[k]:offsets[k] + counts[k] * sizes[k]], h)
    h = fnv1a64_words(data[path_offset:path_offset + 8 * head["rollout_len"]], h)
    struct.pack_into("<Q", data, fh_size - 8, h)
    open(path, "wb").write(data)


main()
