"""Each program of a whole-model bundle equals the single-layer bundle of
its layer up to kernel names: the same manifest, every kernel the same PTX
text on every target (its own name and block-label numbers aside).

    whole_model.py WHOLE.moeb L0.moeb L1.moeb ...   (program i vs Li.moeb)
"""
import re
import struct
import sys


def sections(path):
    b = open(path, "rb").read()
    assert b[:8] == b"MOEBNDL\0", path
    version, n = struct.unpack_from("<II", b, 8)
    sec = {}
    for i in range(n):
        e = 64 + 64 * i
        name = b[e:e + 32].rstrip(b"\0").decode()
        off, size = struct.unpack_from("<QQ", b, e + 32)
        sec[name] = b[off:off + size]
    return version, sec


def programs(path):
    """[(name, manifest text)] of a bundle."""
    version, sec = sections(path)
    man = sec["manifest"].decode()
    if version == 1:
        return [("main", man)], sec
    out = []
    for line in sec["programs"].decode().splitlines()[1:]:
        _, name, m, _w = line.split(" ")
        off, n = map(int, m.split("=")[1].split(","))
        out.append((name, sec["manifest"][off:off + n].decode()))
    return out, sec


def step_kernels(manifest):
    return [l.split(" ")[1] for l in manifest.splitlines() if l.split(" ")[0] in ("init", "launch")]


def renamed(manifest, names):
    """The manifest with kernels renamed; a kernel line whose new name an
    earlier line has is dropped (two kernels the merge made one)."""
    out, seen = [], set()
    for l in manifest.splitlines():
        w = l.split(" ")
        if w[0] in ("kernel", "init", "launch"):
            w[1] = names[w[1]]
            if w[0] == "kernel":
                if w[1] in seen:
                    continue
                seen.add(w[1])
        out.append(" ".join(w))
    return "\n".join(out)


def entries(ptx):
    """{entry name: text} of a PTX module (bodies to their closing brace)."""
    res, lines, i = {}, ptx.decode().split("\n"), 0
    while i < len(lines):
        m = re.match(r"\.visible \.entry (\w+)\(", lines[i])
        if not m:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while True:
            depth += lines[j].count("{") - lines[j].count("}")
            opened = opened or "{" in lines[j]
            j += 1
            if opened and depth == 0:
                break
        res[m.group(1)] = "\n".join(lines[i:j])
        i = j
    return res


def norm(name, text):
    text = re.sub(r"\b%s(_param_\d+)?\b" % re.escape(name), lambda m: "@" + (m.group(1) or ""), text)
    return re.sub(r"\$L__BB\d+_", "$L__BB_", text)


def main():
    whole, wsec = programs(sys.argv[1])
    assert len(whole) == len(sys.argv) - 2, "programs: %d" % len(whole)
    targets = [s for s in wsec if s.startswith("ptx:")]
    went = {t: entries(wsec[t]) for t in targets}
    for (name, man), single in zip(whole, sys.argv[2:]):
        [(_, sman)], ssec = programs(single)
        kw, ks = step_kernels(man), step_kernels(sman)
        assert len(kw) == len(ks), name
        names = dict(zip(ks, kw))       # single's kernel -> the whole bundle's
        if renamed(sman, names) != man.rstrip("\n"):
            sys.exit("FAIL: %s: the manifest is not %s's" % (name, single))
        for t in targets:
            sent = entries(ssec[t])
            for b, a in names.items():
                if (a in went[t]) != (b in sent):   # a kernel of some targets only (NAME_ws)
                    sys.exit("FAIL: %s: kernel %s on %s: in one bundle's PTX, not the other's" % (name, a, t))
                if b in sent and norm(a, went[t][a]) != norm(b, sent[b]):
                    sys.exit("FAIL: %s: kernel %s on %s is not %s's %s" % (name, a, t, single, b))
        print("%s: the manifest and %d kernels on %s are %s's" % (name, len(names), ", ".join(targets),
                                                                   single))


main()
