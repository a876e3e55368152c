#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A minimal agent-style loop: "model-written" Python runs in a local
sandbox, the output goes back into the loop, and a file is written back to
the host at the end. The model is scripted (no model call needed).

Run from the repository, after building (cmake -S . -B build && cmake --build build):

    sudo python3 examples/agent_loop.py
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
try:
    import hutch
except ImportError:  # used from the source tree
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    import hutch

# What a model might write, one step at a time. Each step sees the previous
# step's output (here only to decide whether to go on).
STEPS = [
    ("look around", "import os, sys\nprint(sys.version.split()[0], os.getcwd(), os.getuid())"),
    ("write some data", "import json, random\nrandom.seed(7)\n"
     "rows = [{'x': i, 'y': random.randint(0, 100)} for i in range(10)]\n"
     "json.dump(rows, open('data.json', 'w'))\nprint(len(rows), 'rows written')"),
    ("analyse it", "import json, statistics\nrows = json.load(open('data.json'))\n"
     "ys = [r['y'] for r in rows]\n"
     "open('report.md', 'w').write(f'# Report\\n\\nmean y: {statistics.mean(ys):.1f}\\n"
     "max y: {max(ys)}\\n')\nprint('mean', statistics.mean(ys))"),
    ("a mistake the agent should see", "print(undefined_name)"),
]


class Prepare(hutch.SandboxHook):
    """Runs once when the sandbox is ready, like a cloud on_create hook."""

    async def on_create(self, ctx):
        result = await ctx.sandbox.execute("mkdir -p /workspace/out && python3 --version")
        if result.exit_code != 0:
            raise RuntimeError(result.stderr)
        print(f"[hook] sandbox {ctx.sandbox_id} ready ({result.stdout.strip()})")


def main():
    out_path = os.path.join(os.getcwd(), "report.md")
    sandbox = hutch.LocalSandbox(instance_type="small", ttl_seconds=600, hooks=[Prepare()])
    with sandbox as sb:
        for i, (what, code) in enumerate(STEPS, 1):
            print(f"\n== step {i}: {what}")
            sb.write_file(f"step{i}.py", code)
            exit_code = None
            for item in sb.execute_stream(["python3", f"step{i}.py"], timeout=60):
                if isinstance(item, hutch.OutputChunk):
                    (sys.stdout if item.stream == "stdout" else sys.stderr).write(item.data)
                else:
                    exit_code = item.exit_code
            print(f"-> exit code {exit_code}"
                  + ("" if exit_code == 0 else " (the agent would read the error and try again)"))
        print("\nfiles in /workspace:", ", ".join(e.name for e in sb.list_dir()))
        sb.download("report.md", out_path)
    print(f"wrote {out_path}:\n")
    with open(out_path) as f:
        print(f.read())


if __name__ == "__main__":
    try:
        main()
    except hutch.SandboxError as e:
        sys.exit(f"agent_loop: {e}")
