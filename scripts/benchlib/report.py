"""The report: the table of rows, the density table, the raw JSON."""

import statistics

from .common import stats


def render_density(d):
    lines = ["== density"]
    lines.append("%d idle sandboxes: %d created in %.1f s (4 parallel clients)%s"
                 % (d["n"], d["created"], d["create_s"],
                    "; %d failed, e.g. %s" % (d["create_error_count"], d["create_errors"][:1])
                    if d["create_error_count"] else ""))
    if "pss_per_sandbox_mib" in d:
        lines.append("  PSS supervisors + inits: %.1f MiB total, %.3f MiB per sandbox "
                     "(supervisor %.0f KiB, init %.0f KiB)%s   (target <= 1 MiB)"
                     % (d["pss_total_mib"], d["pss_per_sandbox_mib"], d["pss_supervisor_kib"],
                        d["pss_init_kib"],
                        ", %d not measured" % d["pss_missing"] if d["pss_missing"] else ""))
    lines.append("  /health answered by %d of %d (%.2f s); MemAvailable with all alive: %.0f MiB"
                 % (d.get("healthy", 0), d["created"], d.get("health_s", 0),
                    d.get("mem_available_mib", 0)))
    lines.append("  hutch rm --all: %.1f s, %d sandbox dirs left" % (d["rm_all_s"],
                                                                  d["left_after_rm"]))
    lines.append("100 creates from 10 parallel clients: cold %.2f s (%d ok)%s   (target <= 1 s)"
                 % (d["cold100_s"], d["cold100_ok"],
                    ", e.g. %s" % d["cold100_errors"][:1] if d["cold100_errors"] else ""))
    if "warm100_s" in d:
        lines.append("  from a warm pool of 100 (filled in %.1f s; the keeper refills meanwhile): "
                     "%.2f s (%d ok)%s" % (d["pool_fill_s"], d["warm100_s"], d["warm100_ok"],
                                           ", e.g. %s" % d["warm100_errors"][:1]
                                           if d["warm100_errors"] else ""))
    if "warm100_py_s" in d:
        lines.append("  from a warm pool of 100, Python client claims (no CLI process): "
                     "%.2f s (%d found a pooled sandbox)" % (d["warm100_py_s"], d["warm100_py_ok"]))
    return "\n".join(lines)


# --------------------------------------------------------------------------
# output

def render(res, args, unavailable):
    lines = []
    w = 60
    lines.append("%-*s %9s %9s %9s %4s" % (w, "variant", "median ms", "min ms", "max ms", "n"))
    for g in res.items:
        lines.append("")
        lines.append("== " + g["item"])
        for name in g["order"]:
            s = g["variants"].get(name) or []
            if s:
                md, mn, mx = stats(s)
                lines.append("%-*s %9.2f %9.2f %9.2f %4d" % (w, name, md, mn, mx, len(s)))
            elif name in g["errors"]:
                lines.append("%-*s  not measured: %s" % (w, name, g["errors"][name][:300]))
        for a, b, target in g["pairs"]:
            sa, sb = g["variants"].get(a), g["variants"].get(b)
            if sa and sb:
                r = statistics.median(sa) / statistics.median(sb)
                lines.append("   ratio %s / %s = %.2fx%s" % (
                    a.split(" (")[0], b, r, ("   (target %sx)" % target) if target else ""))
        for name, err in g["errors"].items():
            if name not in g["order"]:
                lines.append("   %s not measured: %s" % (name, err[:300]))
    if res.memory:
        lines.append("")
        lines.append("== host memory per idle sandbox (PSS from /proc/PID/smaps_rollup, N=%d)"
                     % args.sandboxes)
    href = None
    for name, kib, detail in res.memory:
        if kib is None:
            lines.append("%-*s  not measured: %s" % (w, name, detail))
            continue
        if name.startswith("hutch"):
            href = kib
        ratio = ""
        if href and not name.startswith("hutch"):
            ratio = "   hutch/this = %.2fx" % (href / kib)
        lines.append("%-*s %9.2f MiB %s%s" % (w, name, kib / 1024, detail and "(%s)" % detail, ratio))
    if unavailable:
        lines.append("")
        lines.append("not measured here:")
        for u in unavailable:
            lines.append("  - " + u)
    if res.notes:
        lines.append("")
        lines.append("notes:")
        for u in res.notes:
            lines.append("  - " + u)
    return "\n".join(lines)


def raw(res, args, meta):
    return {
        "meta": meta,
        "iterations": args.iterations,
        "items": [{
            "item": g["item"],
            "variants": {k: {"samples_ms": [x * 1000 for x in v],
                             "median_ms": stats(v)[0] if v else None,
                             "min_ms": stats(v)[1] if v else None,
                             "max_ms": stats(v)[2] if v else None}
                         for k, v in g["variants"].items()},
            "errors": g["errors"],
            "ratios": [{"a": a, "b": b, "target": t,
                        "ratio": statistics.median(g["variants"][a]) /
                        statistics.median(g["variants"][b])}
                       for a, b, t in g["pairs"]
                       if g["variants"].get(a) and g["variants"].get(b)],
        } for g in res.items],
        "memory_per_sandbox_kib": [{"variant": n, "pss_kib": k, "detail": d}
                                   for n, k, d in res.memory],
        "density": res.density,
        "notes": res.notes,
    }
