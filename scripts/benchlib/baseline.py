"""A/B: two hutch binaries on hutch's own CLI and API items, interleaved (--baseline)."""


from .common import ApiClient, HutchError, interleave, log
from .streams import measure_memory


def measure_ab(args, res, old, new):
    """A/B of two hutch binaries (--baseline OLD, --hutch NEW): the same
    items as the main run, each variant interleaved with the other. A
    sandbox is always driven by the binary that created it."""
    n = args.iterations
    true = ["true"]
    pair = (("A", old), ("B", new))

    def name(tag, item):
        return "%s %s" % (tag, item)

    def ratios(g, item, target=None):
        g["pairs"].append((name("B", item), name("A", item), target))

    log("A/B: start + true + teardown")
    g = res.group("start + `true` + teardown (one shot)")
    interleave(g, [(name(t, "hutch run -- true"), lambda h=h: h.run(true)) for t, h in pair], n)
    ratios(g, "hutch run -- true")

    log("A/B: create-to-ready and close")
    gc = res.group("create-to-ready")
    gd = res.group("close")
    for t, _ in pair:
        for grp, item in ((gc, "hutch create"), (gd, "hutch rm")):
            grp["order"].append(name(t, item))
            grp["variants"][name(t, item)] = []
    for i in range(-1, n):  # round -1 is the warm-up
        for j in range(2):
            t, h = pair[(i + j) % 2]
            dt, sid = h.create()
            dd = h.rm(sid)
            if i >= 0:
                gc["variants"][name(t, "hutch create")].append(dt)
                gd["variants"][name(t, "hutch rm")].append(dd)
    ratios(gc, "hutch create")
    ratios(gd, "hutch rm")

    log("A/B: one command on a live sandbox, CLI start")
    g3 = res.group("one `true` on a live sandbox")
    sids, apis = {}, {}
    try:
        for t, h in pair:
            sids[t] = h.create()[1]
            apis[t] = ApiClient(h.socket(sids[t]))
        v = []
        for t, h in pair:
            v.append((name(t, "hutch exec ID -- true"),
                      lambda h=h, t=t: h.exec(sids[t], true)))
        for t, h in pair:
            v.append((name(t, "API POST /run (kept-open)"), lambda t=t: apis[t].run(true)))
        for t, h in pair:
            v.append((name(t, "hutch version (CLI start)"),
                      lambda h=h: h.r.timed([h.bin, "version"], HutchError)[0]))
        interleave(g3, v, n, warmup=2)
        for item in ("hutch exec ID -- true", "API POST /run (kept-open)",
                     "hutch version (CLI start)"):
            ratios(g3, item)
    finally:
        for t, h in pair:
            if t in apis:
                apis[t].close()
            if t in sids:
                h.rm(sids[t])

    for t, h in pair:
        log("A/B: host memory per idle sandbox, %s (N=%d)" % (t, args.sandboxes))
        before = len(res.memory)
        measure_memory(args, res, h, None, [])
        res.memory[before:] = [("%s %s" % (t, m[0]), m[1], m[2]) for m in res.memory[before:]]
