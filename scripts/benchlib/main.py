"""Argument parsing and main: which groups of rows run, then the report."""

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time

from .baseline import measure_ab
from .bindings import measure_bindings, render_bindings
from .common import HutchError, loadavg, log, MountNs, NullNs, PeerError, REPO, Results, Runner
from .density import measure_density
from .egress import measure_egress_log, render_egress_log
from .executor import measure_executor
from .hotpath import measure
from .image import measure_image
from .peers import Bwrap, Hutch, Oci
from .ports import measure_ports
from .report import raw, render, render_density
from .snapshots import measure_snapshots
from .fullsnap import measure_fullsnap
from .streams import measure_streams
from .workspace import measure_changes


def main(doc):
    """doc: scripts/bench's docstring, the usage --help opens with."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hutch", default=os.path.join(REPO, "build", "hutch"),
                    help="hutch binary (default: build/hutch in the repository)")
    ap.add_argument("--quick", action="store_true",
                    help="3 samples per variant and 3 idle sandboxes: proves it works")
    ap.add_argument("--iterations", "-n", type=int, default=None,
                    help="samples per variant (default 30, --quick 3)")
    ap.add_argument("--sandboxes", type=int, default=None,
                    help="idle sandboxes for the memory figure (default 20, --quick 3)")
    ap.add_argument("--json", metavar="FILE", help="write raw results to FILE")
    ap.add_argument("--executor", action="store_true",
                    help="only the executor contract's /run against the native /run")
    ap.add_argument("--density", action="store_true",
                    help="density only: N idle sandboxes at once (PSS, /health, rm), then "
                    "100 creates from 10 parallel clients, cold and from a warm pool")
    ap.add_argument("--density-n", type=int, default=1000, metavar="N",
                    help="idle sandboxes for --density (default 1000)")
    ap.add_argument("--ports", action="store_true",
                    help="ports only: throughput and connection rate through a create -p "
                    "forward, side by side with socat doing the same relay")
    ap.add_argument("--image", action="store_true",
                    help="images only: create and run from an image next to the host root, "
                    "crun run of the same unpacked image, podman run of it, a warm pool of "
                    "it, and (without --quick) the disk 100 live sandboxes of it take")
    ap.add_argument("--fork-dir", metavar="DIR",
                    help="with --snapshots: the fork rows again with the runtime dir in DIR "
                    "(a file system with reflinks, XFS or btrfs: the fork clones the disk)")
    ap.add_argument("--full-snapshots", action="store_true",
                    help="full snapshots only: hutch snapshot --full of a Python process "
                    "holding 200 MB next to criu dump of the same program on the host, "
                    "then criu dump + restore of it")
    ap.add_argument("--snapshots", action="store_true",
                    help="snapshots only: a filesystem snapshot of 100 MB in 1,000 files next "
                    "to tar of them, a create from it next to a cold create, a fork, and the "
                    "store's disk after 100 snapshots of one image")
    ap.add_argument("--streams", action="store_true",
                    help="only the exec -i streams (1 GiB each way next to the peers, echo "
                    "round trips)")
    ap.add_argument("--bindings", action="store_true",
                    help="header bindings only: latency and throughput through a binding "
                    "next to a spliced connection to the same fake server")
    ap.add_argument("--egress-log", action="store_true",
                    help="egress log only: connections per second through network allow "
                    "with the log, with --net-log off, and with two commands (exact owner); "
                    "through network all with --nat-log on, without, and without again (the "
                    "noise); the client's wait for a CPU per connection")
    ap.add_argument("--changes", action="store_true",
                    help="change lists only: a command touching 10 files of a 10,000-file "
                    "workspace and one writing 1 GB, with change lists on and off")
    ap.add_argument("--run-true", action="store_true",
                    help="the first row only: hutch run -- true cold next to bwrap, crun and "
                    "runc (and the floors), the row issue 31's cold run is judged by")
    ap.add_argument("--baseline", metavar="OLD",
                    help="A/B mode: compare hutch binary OLD (A) with --hutch (B) on hutch's "
                    "own items, interleaved; no peers")
    ap.add_argument("--ab-store", metavar="STORE",
                    help="with --baseline: both binaries use image store STORE, so their "
                    "plain creates take its hutch-default (the default image's rows; the "
                    "store gets use records: give a copy)")
    args = ap.parse_args()
    if args.iterations is None:
        args.iterations = 3 if args.quick else 30
    if args.sandboxes is None:
        args.sandboxes = 3 if args.quick else 20
    if args.iterations < 1 or args.sandboxes < 1:
        ap.error("--iterations and --sandboxes must be >= 1")

    if os.geteuid() != 0:
        log("scripts/bench: must run as root (hutch create/run need root for now)")
        return 2
    if not (os.path.isfile(args.hutch) and os.access(args.hutch, os.X_OK)):
        log("scripts/bench: hutch binary not found at %s (build it, or pass --hutch PATH)"
            % args.hutch)
        return 1
    args.hutch = os.path.abspath(args.hutch)
    if args.bindings:
        try:
            b = measure_bindings(args, args.hutch)
        except (HutchError, subprocess.SubprocessError, RuntimeError) as e:
            log("scripts/bench: %s" % e)
            return 1
        print(render_bindings(b, 200 if args.quick else args.iterations * 100))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"bindings": b}, f, indent=1)
                f.write("\n")
        return 0
    if args.egress_log:
        try:
            e = measure_egress_log(args, args.hutch)
        except (HutchError, subprocess.SubprocessError, RuntimeError) as ex:
            log("scripts/bench: %s" % ex)
            return 1
        print(render_egress_log(e))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"egress_log": e}, f, indent=1)
                f.write("\n")
        return 0
    if args.baseline:
        if not (os.path.isfile(args.baseline) and os.access(args.baseline, os.X_OK)):
            log("scripts/bench: baseline binary not found at %s" % args.baseline)
            return 1
        args.baseline = os.path.abspath(args.baseline)
    if args.ab_store and not (args.baseline and
                              os.path.exists(os.path.join(args.ab_store, "images", "hutch-default"))):
        log("scripts/bench: --ab-store needs --baseline and a store holding hutch-default "
            "(HUTCH_IMAGE_STORE=%s hutch image build-default)" % args.ab_store)
        return 2

    unavailable = []
    have = {}
    peers = (("bwrap", "bubblewrap"), ("crun", "crun"), ("runc", "runc"),
             ("nsenter", "util-linux"), ("unshare", "util-linux"))
    for tool, pkg in (() if args.ports else peers):
        have[tool] = shutil.which(tool)
        if not have[tool]:
            unavailable.append("%s not found: apt-get install %s" % (tool, pkg))
    if args.ports and not shutil.which("socat"):
        unavailable.append("socat not found: apt-get install socat (scripts/install-deps --bench)")
    if have.get("bwrap") and not have.get("nsenter"):
        unavailable.append("nsenter into bwrap: needs nsenter (apt-get install util-linux)")

    tmpdir = tempfile.mkdtemp(prefix="hutch-bench-")
    os.chmod(tmpdir, 0o755)
    # the same small, clean environment for every variant (hutch gives its
    # commands a clean one too); PYTHON* variables or a pyenv PATH of the
    # caller must not make the host side slower or faster
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
           "HOME": "/root", "LANG": "C.UTF-8"}
    env["HUTCH_RUNTIME_DIR"] = os.path.join(tmpdir, "hutch-run")
    os.mkdir(env["HUTCH_RUNTIME_DIR"])
    # An empty store of the bench's own: with hutch-default in the machine's
    # (/var/lib/hutch), a plain create would take it as its root, so the
    # "host root" rows would measure the image, and use records be written
    # into the machine's store. The image rows name stores of their own.
    env["HUTCH_IMAGE_STORE"] = os.path.join(tmpdir, "empty-store")
    if args.ab_store:
        # A/B on the default image: a plain create takes the store's
        # hutch-default, for the old binary as for the new.
        env["HUTCH_IMAGE_STORE"] = os.path.abspath(args.ab_store)
    runner = Runner(tmpdir, env)

    # SIGTERM/SIGHUP: unwind through the finally blocks so everything is removed
    def on_signal(signum, frame):
        raise KeyboardInterrupt("signal %d" % signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    res = Results()
    hutch = Hutch(args.hutch, runner)
    bwrap = crun = runc = base = None
    nsobjs = []
    rc = 0
    try:
        # hutch must work: probe it first, fail clearly
        try:
            hutch.run(["true"])
        except HutchError as e:
            log("scripts/bench: hutch does not work: %s" % e)
            return 1
        if args.baseline:
            have = {}
            unavailable = []
            base = Hutch(args.baseline, runner)
            try:
                base.run(["true"])
            except HutchError as e:
                log("scripts/bench: baseline hutch does not work: %s" % e)
                return 1
        if have.get("bwrap"):
            bwrap = Bwrap(runner)
            try:
                bwrap.run(["true"])
            except PeerError as e:
                unavailable.append("bwrap cannot run here: %s" % e)
                bwrap = None
        for name in ("crun", "runc"):
            if not have.get(name):
                continue
            o = Oci(name, runner, tmpdir, NullNs())
            try:
                o.run(["true"])
            except PeerError as e:
                msg = str(e)
                if "hybrid mode not supported" in msg and have["unshare"]:
                    try:
                        ns = MountNs()
                        nsobjs.append(ns)
                        o = Oci(name, runner, tmpdir, ns)
                        o.run(["true"])
                        res.notes.append(
                            "%s refuses this host's hybrid cgroups (%s). It runs here in a "
                            "private mount namespace where /sys/fs/cgroup/unified is unmounted, "
                            "with --cgroup-manager=disabled: it creates no cgroup, so it does "
                            "less work than hutch (which creates and limits a cgroup per "
                            "sandbox)." % (name, msg.split(": ", 1)[-1]))
                    except PeerError as e2:
                        unavailable.append("%s cannot run here: %s; with the hybrid-cgroup "
                                           "workaround: %s" % (name, msg, e2))
                        o = None
                else:
                    unavailable.append("%s cannot run here: %s" % (name, msg))
                    o = None
            if name == "crun":
                crun = o
            else:
                runc = o

        load_before = loadavg()
        t0 = time.monotonic()
        if args.density:
            measure_density(args, res, hutch)
        elif args.ports:
            measure_ports(args, res, hutch, tmpdir)
        elif args.image:
            measure_image(args, res, hutch, crun, tmpdir)
        elif args.executor:
            measure_executor(args, res, hutch)
        elif args.changes:
            measure_changes(args, res, hutch)
        elif args.snapshots:
            measure_snapshots(args, res, hutch, tmpdir)
        elif args.full_snapshots:
            measure_fullsnap(args, res, hutch, tmpdir)
        elif args.baseline:
            measure_ab(args, res, base, hutch)
        elif args.streams:
            measure_streams(args, res, hutch, bwrap, [x for x in (crun, runc) if x is not None])
        else:
            measure(args, res, hutch, bwrap, crun, runc, tmpdir)
        elapsed = time.monotonic() - t0

        commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                text=True).stdout.strip() or "unknown"
        meta = {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": commit,
            "hutch": args.hutch,
            "baseline": args.baseline,
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "elapsed_s": round(elapsed, 1),
            "loadavg_before": load_before,
            "loadavg_after": loadavg(),
            "unavailable": unavailable,
        }
        print("hutch bench  %s  commit %s  kernel %s  %d CPUs  %d samples per variant "
              "(%.0f s)" % (meta["date"], commit, meta["kernel"], meta["cpus"],
                            args.iterations, elapsed))
        print("load average before %s, after %s (other load on the machine inflates "
              "every figure; ratios suffer less: variants are interleaved)"
              % (meta["loadavg_before"], meta["loadavg_after"]))
        if args.baseline:
            print("A/B mode: A = %s (baseline), B = %s" % (args.baseline, args.hutch))
        print()
        if args.density:
            print(render_density(res.density))
        else:
            print(render(res, args, unavailable))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(raw(res, args, meta), f, indent=1)
                f.write("\n")
    except HutchError as e:
        log("scripts/bench: hutch failed: %s" % e)
        rc = 1
    except KeyboardInterrupt as e:
        log("scripts/bench: interrupted (%s), cleaning up" % (e or "Ctrl-C"))
        rc = 130
    finally:
        hutch.cleanup()
        if base:
            base.cleanup()
        for o in (crun, runc):
            if o:
                o.cleanup()
        if bwrap:
            bwrap.cleanup()
        for ns in nsobjs:
            ns.close()
        shutil.rmtree(tmpdir, ignore_errors=True)
    return rc
