#!/usr/bin/env python3
"""graph_bin.py FILE [FIELD VALUE]...: sets fields of the checkpoint of a kg-select graph.bin
(version 5, this machine's byte order) and writes its checksum again, so that a test can
make a file that passes the checksum but holds what a bug could write.
graph_bin.py FILE --delta [FIELD VALUE]...: the same for the last delta after the checkpoint:
FIELD is a field of its header (nnodes, nedges, rollout_len, ...) or changed_nodes and
changed_edges, the counts of records it holds.
graph_bin.py FILE --version-4: rewrites a graph.bin that is a checkpoint alone as version 4
wrote it (its node and edge records without the fields version 5 appended), for the test of
an older file.

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
# What version 5 appended: to struct gnode its build (8 bytes), status and reason (two blobs of
# 16), to struct gedge its build (8), transposition and spare (4 each).
APPENDED = [0, 40, 0, 16]
PAGE = 4096


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


def checksum(data, fh_size):
    """Writes the checkpoint's checksum again: the file head with it 0, the head, the records
    up to the counts, the rollout path."""
    fh = struct.unpack_from(FILE_HEAD, data)
    head = dict(zip([f for f, _ in HEAD_FIELDS], struct.unpack_from("<" + "".join(f for _, f in HEAD_FIELDS), data, fh_size)))
    struct.pack_into("<Q", data, fh_size - 8, 0)
    offsets, sizes, path_offset = fh[9:13], fh[5:9], fh[17]
    counts = [head["nnodes"], head["nnodes"], head["nedges"], head["nedges"]]
    h = fnv1a64_words(data[:fh_size + fh[3]])
    for k in range(4):
        h = fnv1a64_words(data[offsets[k]:offsets[k] + counts[k] * sizes[k]], h)
    h = fnv1a64_words(data[path_offset:path_offset + 8 * head["rollout_len"]], h)
    struct.pack_into("<Q", data, fh_size - 8, h)


def to_version_4(path, data, fh):
    """The checkpoint again, each record cut to what version 4 stored, each array at a page
    boundary with the room it had."""
    fh_size = struct.calcsize(FILE_HEAD)
    nnodes, nedges, rollout_len = struct.unpack_from("<3Q", data, fh_size)
    sizes, offsets, caps, path_offset = list(fh[5:9]), fh[9:13], fh[13:17], fh[17]
    if len(data) != path_offset + 8 * rollout_len:
        sys.exit("graph_bin.py: %s: deltas follow its checkpoint" % path)
    old = [sizes[k] - APPENDED[k] for k in range(4)]
    out = bytearray(data[:fh_size + fh[3]])
    new_offsets = []
    for k in range(4):
        out += bytes(-len(out) % PAGE)
        new_offsets.append(len(out))
        count = nnodes if k < KIND_MEDGE else nedges
        for i in range(count):
            at = offsets[k] + i * sizes[k]
            out += data[at:at + old[k]]
        out += bytes((caps[k] - count) * old[k])
    new_path = len(out)
    out += data[path_offset:path_offset + 8 * rollout_len]
    fields = list(fh)
    fields[1], fields[5:9], fields[9:13], fields[17] = 4, old, new_offsets, new_path
    struct.pack_into(FILE_HEAD, out, 0, *fields)
    checksum(out, fh_size)
    open(path, "wb").write(out)


def main():
    path, pairs = sys.argv[1], sys.argv[2:]
    data = bytearray(open(path, "rb").read())
    fh_size = struct.calcsize(FILE_HEAD)
    fh = struct.unpack_from(FILE_HEAD, data)
    if fh[0] != b"KGGRAPH\0" or fh[1] != 5:
        sys.exit("graph_bin.py: %s: not a version 5 graph.bin" % path)
    if pairs[:1] == ["--version-4"]:
        to_version_4(path, data, fh)
        return
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
    checksum(data, fh_size)
    open(path, "wb").write(data)


main()
