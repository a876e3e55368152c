"""The egress log (--egress-log): connections per second through allow's proxy and all's NAT."""

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .bindings import cpu_seconds_ns, gc_until_clean
from .common import HutchError, loadavg, log, REPO

# Besides the rate, per connection: the median connect() (the SYN and
# its answer: what the NAT log's first packet passes), what the client
# waited for a CPU (schedstat's run delay) and how often it was taken off
# one (involuntary switches): a wake-up on the connection's path shows
# there first.
EGRESS_CLIENT = r"""
import json, resource, socket, ssl, statistics, sys, time
host, n = sys.argv[1], int(sys.argv[2])
ctx = ssl.create_default_context(cafile="/workspace/ca.pem")
def sched():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]), resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw
w0, i0 = sched()
connect = []
t = time.perf_counter()
for _ in range(n):
    addr = socket.getaddrinfo(host, 443, socket.AF_INET, socket.SOCK_STREAM)[0][4]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(20)
        c = time.perf_counter()
        s.connect(addr)
        connect.append(time.perf_counter() - c)
        with ctx.wrap_socket(s, server_hostname=host):
            pass
t = time.perf_counter() - t
w1, i1 = sched()
print(json.dumps({"rate": n / t, "wait_ms": (w1 - w0) / 1e6 / n, "ivcsw": (i1 - i0) / n,
                  "connect_ms": statistics.median(connect) * 1000}))
"""


def measure_egress_log(args, hutch_bin):
    """Connections per second through network allow's proxy with the egress
    log, with --net-log off, and with the log while a second command runs
    (then every connection's owner is looked up in /proc), rounds
    interleaved, against the tests' fake internet (netfake.py, namespaces
    of its own). Returns {variant: {"rates": [...], "sup_cpu_ms_per_conn":
    [...]}}."""
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    try:
        import pytest  # noqa: F401 (netfake's fixture decorators)
    except ImportError:  # the bench needs none of them: a stand-in
        import types
        stub = types.ModuleType("pytest")
        stub.fixture = lambda *a, **k: (lambda f: f) if not (a and callable(a[0])) else a[0]
        sys.modules["pytest"] = stub
    import netfake  # noqa: E402 (the fake internet of the network tests)
    tmp = tempfile.mkdtemp(prefix="hutch-bench-egress-")
    net = netfake.FakeNet(tmp)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HUTCH_RUNTIME_DIR": os.path.join(tmp, "rt"),
           "HUTCH_IMAGE_STORE": os.path.join(tmp, "empty-store"),
           "HUTCH_RESOLVER": netfake.RESOLVER}
    sids = {}
    inside = contextlib.ExitStack()
    allow = ("--network", "allow:api.test.example")
    variants = (("log", allow), ("off", allow + ("--net-log", "off")), ("log+exact", allow),
                # network all: the same TLS connections leave through NAT,
                # with --nat-log on (the kernel's log of each first packet,
                # conntrack's end) and without (the default).
                ("all-log", ("--network", "all", "--nat-log", "on")),
                ("all-off", ("--network", "all")),
                # the same as all-off: what two identical sandboxes differ
                # by, paired the same way (the noise of the ratios)
                ("all-off2", ("--network", "all")))
    try:
        net.start()
        inside.enter_context(net.inside())
        ca = net.ca_pem().decode()
        for name, opts in variants:
            r = subprocess.run([hutch_bin, "create", *opts], env=env, capture_output=True,
                               text=True, timeout=120)
            if r.returncode != 0:
                raise HutchError("hutch create: " + r.stderr.strip())
            sid = sids[name] = r.stdout.strip()
            subprocess.run([hutch_bin, "exec", "-i", sid, "--", "sh", "-c",
                            "cat > /workspace/ca.pem"], env=env, input=ca, text=True,
                           check=True, timeout=60)
        # A second command for the whole run: each connection then has two
        # candidates, and the supervisor looks its owner up.
        subprocess.run([hutch_bin, "exec", "-d", sids["log+exact"], "--", "sleep", "100000"],
                       env=env, check=True, capture_output=True, timeout=60)
        sups = {k: json.loads(subprocess.run([hutch_bin, "inspect", sid], env=env, check=True,
                                             capture_output=True, text=True).stdout)
                ["supervisor_pid"] for k, sid in sids.items()}
        per = 25 if args.quick else 100
        rounds = 3 if args.quick else max(3, args.iterations)
        out = {k: {"rates": [], "sup_cpu_ms_per_conn": [], "wait_ms": [], "ivcsw": [],
                   "connect_ms": []} for k, _ in variants}
        for i in range(rounds + 1):  # the first round warms up
            order = [k for k, _ in variants]
            if i % 2:
                order.reverse()
            for k in order:
                c0 = cpu_seconds_ns(sups[k])
                r = subprocess.run([hutch_bin, "exec", sids[k], "--", "python3", "-c",
                                    EGRESS_CLIENT, "api.test.example", str(per)],
                                   env=env, capture_output=True, text=True, timeout=1200)
                if r.returncode != 0:
                    raise HutchError("egress client: " + r.stderr.strip()[-2000:])
                cpu = cpu_seconds_ns(sups[k]) - c0
                if i:
                    j = json.loads(r.stdout)
                    out[k]["rates"].append(j["rate"])
                    out[k]["wait_ms"].append(j["wait_ms"])
                    out[k]["ivcsw"].append(j["ivcsw"])
                    out[k]["connect_ms"].append(j["connect_ms"])
                    out[k]["sup_cpu_ms_per_conn"].append(cpu * 1000 / per)
        out["per_round"] = per
        out["create_ms"] = measure_nat_log_create(args, hutch_bin, env)
        out["load"] = loadavg()
        return out
    finally:
        for step in [lambda s=s: subprocess.run([hutch_bin, "rm", s], env=env,
                                                 capture_output=True, timeout=120)
                     for s in sids.values()] + \
                [lambda: gc_until_clean(hutch_bin, env)]:
            try:
                step()
            except Exception as e:  # noqa: BLE001 (cleanup goes on)
                log("scripts/bench: cleanup: %s" % e)
        inside.close()
        problems = net.stop()
        if problems:
            log("scripts/bench: fake internet teardown: %s" % "; ".join(problems))
        shutil.rmtree(tmp, ignore_errors=True)


def measure_nat_log_create(args, hutch_bin, env):
    """hutch create --network all with the NAT path's log (--nat-log on:
    init adds the log's nftables table in the sandbox's netns) and without
    (the default), interleaved, each removed after; wall ms per create."""
    n = 5 if args.quick else max(5, args.iterations)
    out = {"all-log": [], "all-off": []}
    opts = {"all-log": ("--network", "all", "--nat-log", "on"), "all-off": ("--network", "all")}
    for i in range(n + 1):  # the first round warms up
        order = list(out) if i % 2 == 0 else list(reversed(out))
        for k in order:
            t = time.perf_counter()
            r = subprocess.run([hutch_bin, "create", *opts[k]], env=env, capture_output=True,
                               text=True, timeout=120)
            ms = (time.perf_counter() - t) * 1000
            if r.returncode != 0:
                raise HutchError("hutch create: " + r.stderr.strip())
            subprocess.run([hutch_bin, "rm", r.stdout.strip()], env=env, capture_output=True,
                           timeout=120)
            if i:
                out[k].append(ms)
    return out


def paired_ratio(e, k, base):
    """The median of each round's rate of k over base's of the same round:
    both ran back to back, so a change of the machine's load between
    rounds cancels (the ratio of the medians does not cancel it)."""
    return statistics.median(a / b for a, b in zip(e[k]["rates"], e[base]["rates"]))


def render_egress_log(e):
    def med(k, what):
        v = e[k].get(what)
        return statistics.median(v) if v else float("nan")  # (a --json of before: none)

    lines = ["egress log: TLS connections per second through network allow's proxy (and all's NAT), %d per "
             "round, %d rounds interleaved (load %s)" % (e["per_round"], len(e["log"]["rates"]),
                                                         e["load"]),
             "(vs off: the ratio of the medians; paired: the median of each round's ratio; "
             "supervisor ms/conn from schedstat; the client's connect() (its round's median), "
             "wait for a CPU and involuntary switches per connection, medians of the rounds)",
             "%-46s %8s %8s %8s %11s %10s %8s %6s" % ("", "conn/s", "vs off", "paired",
                                                      "sup ms/conn", "connect ms", "wait ms",
                                                      "ivcsw")]
    rows = [("off", "off", "--net-log off"), ("off", "log", "log (one command: by time)"),
            ("off", "log+exact", "log, two commands (exact owner look-up)")]
    if "all-log" in e:  # network all: through NAT, the kernel's log and conntrack
        rows += [("all-off", "all-off", "network all (default: no NAT log)"),
                 ("all-off", "all-log", "network all, --nat-log on (kernel, conntrack)")]
    if "all-off2" in e:  # two identical sandboxes: the noise of a paired ratio
        rows.append(("all-off", "all-off2", "network all again (the same: noise)"))
    for base, k, what in rows:
        lines.append("%-46s %8.1f %7.3fx %7.3fx %11.3f %10.3f %8.3f %6.2f"
                     % (what, med(k, "rates"), med(k, "rates") / med(base, "rates"),
                        paired_ratio(e, k, base), med(k, "sup_cpu_ms_per_conn"),
                        med(k, "connect_ms"), med(k, "wait_ms"), med(k, "ivcsw")))
    if "create_ms" in e:  # what the log's table in the sandbox's netns costs a create
        c = {k: statistics.median(v) for k, v in e["create_ms"].items()}
        lines.append("%-44s %12s %10s" % ("hutch create --network all (each rm'd)", "median ms",
                                          "vs off"))
        for k, what in (("all-off", "  default (no NAT log)"),
                        ("all-log", "  --nat-log on (init adds its table)")):
            lines.append("%-44s %12.1f %9.3fx   (n %d, %.1f-%.1f)"
                         % (what, c[k], c[k] / c["all-off"], len(e["create_ms"][k]),
                            min(e["create_ms"][k]), max(e["create_ms"][k])))
    return "\n".join(lines)
