"""Header bindings (--bindings): latency and throughput through a binding next to a splice."""

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .common import HutchError, log, REPO

# --------------------------------------------------------------------------

BINDINGS_CLIENT = r"""
import http.client, json, ssl, subprocess, sys, time
mode, host = sys.argv[1], sys.argv[2]
if mode == "lat":
    n = int(sys.argv[3])
    ctx = ssl.create_default_context()              # the sandbox's bundle: its own CA
    ctx.load_verify_locations("/workspace/ca.pem")  # and the fake internet's
    c = http.client.HTTPSConnection(host, context=ctx)
    lat = []
    for i in range(n + 50):
        t = time.perf_counter()
        c.request("GET", "/x")
        r = c.getresponse()
        r.read()
        if i >= 50:
            lat.append((time.perf_counter() - t) * 1000)
    print(json.dumps(lat))
else:
    p = subprocess.run(["curl", "-sS", "--fail", "-o", "/dev/null", "--cacert",
                        "/workspace/all.pem", "-w", "%{speed_download} %{size_download}",
                        f"https://{host}:8443/big"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rate, size = p.stdout.split()
    print(json.dumps({"mb_s": float(rate) / 1e6, "bytes": int(size)}))
"""


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds_ns(pid):
    """A process's time on a CPU in seconds, to the nanosecond: the sum of
    its threads' schedstat (utime + stime count clock ticks: 10 ms, a
    tenth of a millisecond per connection over a round of 100)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that has just gone
    return total / 1e9


def measure_bindings(args, hutch_bin):
    """Header bindings against the tests' fake internet (tests/integration/
    netfake.py, wholly in namespaces of its own; hutch runs in its "host"
    netns): a sandbox in allow mode
    with a binding for bound.test.example; direct.test.example is the same
    server, listed and not bound (spliced). Returns the client's JSON."""
    sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
    try:
        import pytest  # noqa: F401 (netfake's fixture decorators)
    except ImportError:  # the bench needs none of them: a stand-in
        import types
        stub = types.ModuleType("pytest")
        stub.fixture = lambda *a, **k: (lambda f: f) if not (a and callable(a[0])) else a[0]
        sys.modules["pytest"] = stub
    import netfake  # noqa: E402 (the fake internet of the network tests)
    tmp = tempfile.mkdtemp(prefix="hutch-bench-bind-")
    net = netfake.FakeNet(tmp)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HUTCH_RUNTIME_DIR": os.path.join(tmp, "rt"),
           "HUTCH_IMAGE_STORE": os.path.join(tmp, "empty-store"),
           "HUTCH_RESOLVER": netfake.RESOLVER, "HUTCH_UPSTREAM_CA": os.path.join(tmp, "ca.pem"),
           "HB": "bench-" + os.urandom(8).hex()}
    sid = bulk = None
    inside = contextlib.ExitStack()
    try:
        net.start()
        inside.enter_context(net.inside())
        # Bulk bytes from openssl s_server -WWW (C, one connection at a
        # time): the fake internet's Python server tops out near the
        # figure under test.
        www = os.path.join(tmp, "www")
        os.mkdir(www)
        with open(os.path.join(www, "big"), "wb") as f:
            f.truncate(256 << 20)
        bulk = subprocess.Popen(["ip", "netns", "exec", netfake.NS, "openssl", "s_server",
                                 "-quiet", "-accept", f"{netfake.BOUND}:8443", "-cert",
                                 os.path.join(tmp, "server.pem"), "-key",
                                 os.path.join(tmp, "server.key"), "-WWW"], cwd=www,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        for _ in range(100):
            if netfake.listening(bulk.pid, "tcp", netfake.BOUND, 8443):
                break
            time.sleep(0.05)
        r = subprocess.run([hutch_bin, "create", "--network",
                            "allow:bound.test.example,direct.test.example,"
                            "bound.test.example:8443,direct.test.example:8443", "--header-binding",
                            "bound.test.example:Authorization=Bearer {secret}@env:HB"],
                           env=env, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise HutchError("hutch create: " + r.stderr.strip())
        sid = r.stdout.strip()
        ca = net.ca_pem().decode()
        for path, data in (("/workspace/ca.pem", ca),):
            subprocess.run([hutch_bin, "exec", "-i", sid, "--", "sh", "-c", f"cat > {path}"],
                           env=env, input=data, text=True, check=True, timeout=60)
        subprocess.run([hutch_bin, "exec", sid, "--", "sh", "-c",
                        "cat /workspace/ca.pem /etc/hutch/ca-certificates.crt > /workspace/all.pem"],
                       env=env, check=True, timeout=60)
        n = 200 if args.quick else args.iterations * 100
        sup = json.loads(subprocess.run([hutch_bin, "inspect", sid], env=env, check=True,
                                        capture_output=True, text=True).stdout)["supervisor_pid"]

        def client(*argv):
            r = subprocess.run([hutch_bin, "exec", sid, "--", "python3", "-c", BINDINGS_CLIENT,
                                *argv], env=env, capture_output=True, text=True, timeout=1200)
            if r.returncode != 0:
                raise HutchError("bindings client: " + r.stderr.strip()[-2000:])
            return json.loads(r.stdout)
        out = {}
        for host in ("direct.test.example", "bound.test.example"):
            lat = sorted(client("lat", host, str(n)))
            runs = []
            for _ in range(3):
                c0 = cpu_seconds(sup)
                b = client("bulk", host)
                b["proxy_cpu_s"] = cpu_seconds(sup) - c0
                runs.append(b)
            best = max(runs, key=lambda b: b["mb_s"])
            cpu = min(b["proxy_cpu_s"] for b in runs)
            out[host] = {"median_ms": statistics.median(lat),
                         "p99_ms": lat[max(0, int(len(lat) * 0.99) - 1)],
                         "mb_s": best["mb_s"], "bulk": runs,
                         # what the supervisor's one thread could carry
                         "proxy_mb_per_cpu_s": (best["bytes"] / 1e6 / cpu) if cpu > 0 else None}
        return out
    finally:
        # Every step, whatever the others do: a later run (or a test
        # session) needs the sandbox and the namespaces gone.
        steps = [lambda: sid and subprocess.run([hutch_bin, "rm", sid], env=env,
                                                capture_output=True, timeout=120),
                 lambda: gc_until_clean(hutch_bin, env),
                 lambda: bulk and (bulk.kill(), bulk.wait())]
        for step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 (cleanup goes on)
                log("scripts/bench: cleanup: %s" % e)
        inside.close()
        problems = net.stop()
        if problems:
            log("scripts/bench: fake internet teardown: %s" % "; ".join(problems))
        shutil.rmtree(tmp, ignore_errors=True)


def gc_until_clean(hutch_bin, env, timeout=15.0):
    """hutch gc until the runtime dir's lxcfs is gone: rm answers before
    its supervisor has exited, and a gc that still sees one keeps lxcfs
    (its mount then outlived the bench's rmtree: two were found left)."""
    lx = os.path.join(env["HUTCH_RUNTIME_DIR"], ".lxcfs")
    end = time.monotonic() + timeout
    while True:
        subprocess.run([hutch_bin, "gc"], env=env, capture_output=True, timeout=120)
        if not os.path.exists(lx) or time.monotonic() > end:
            return
        time.sleep(0.1)


def render_bindings(b, n):
    d, s = b["direct.test.example"], b["bound.test.example"]
    cap = s.get("proxy_mb_per_cpu_s")
    lines = ["header bindings: %d requests on one keep-alive connection each (the fake "
             "internet's Python server), then 256 MiB GET with curl from openssl s_server "
             "(best of 3)" % n,
             "%-34s %10s %10s %12s" % ("", "median ms", "p99 ms", "MB/s"),
             "%-34s %10.3f %10.3f %12.0f" % ("spliced (end-to-end TLS)", d["median_ms"],
                                             d["p99_ms"], d["mb_s"]),
             "%-34s %10.3f %10.3f %12.0f" % ("through a binding (TLS both ways)", s["median_ms"],
                                             s["p99_ms"], s["mb_s"]),
             "%-34s %+10.3f %+10.3f %11.2fx" % ("binding - spliced", s["median_ms"] - d["median_ms"],
                                                s["p99_ms"] - d["p99_ms"],
                                                s["mb_s"] / d["mb_s"] if d["mb_s"] else 0),
             "supervisor CPU for 256 MiB through the binding: %.2f s (its capacity: %s MB per "
             "CPU second, whatever the machine's load)"
             % (min(x["proxy_cpu_s"] for x in s["bulk"]), "%.0f" % cap if cap else "?")]
    return "\n".join(lines)
