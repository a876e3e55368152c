# SPDX-License-Identifier: Apache-2.0
"""hutch completion bash|zsh|fish: the scripts load in real shells and
complete verbs, options, option values and the ids of live sandboxes, as
the parser's own tables say (issue 17)."""
import os
import shutil
import subprocess

import pytest

from conftest import HUTCH

BIN = os.path.dirname(HUTCH)

BASH = r'''
source <(hutch completion bash) || exit 9
t() { COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _hutch; echo "${COMPREPLY[*]}"; }
t hutch ex
t hutch exec ""
t hutch exec "$ID" --cw
t hutch run --instance-type m
t hutch run --network a
t hutch pool s
t hutch pool start --si
t hutch exec --cwd /x ""
t hutch exec "$ID" -- ""
t hutch logs "$ID" ""
t hutch nosuchverb ""
t hutch im
t hutch image i
t hutch image pull --st
t hutch oci ""
t hutch oci st
t hutch completion ""
t hutch ls -f status=r
t hutch ls --format ""
t hutch stats --format t
t hutch run --progress a
t hutch create --image ""
t hutch kill "$ID" ""
t hutch events -
t hutch fo
t hutch fork ""
t hutch fork "$ID" --co
'''


def shell(hutch, argv, sid, script=None):
    env = dict(hutch.env, PATH=BIN + ":" + hutch.env["PATH"], ID=sid)
    r = subprocess.run(argv, input=script, capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_bash_completes_verbs_options_values_and_ids(hutch):
    sb = hutch.create("--instance-type", "nano")
    try:
        r = hutch("exec", "-d", sb.id, "--", "sleep", "600")
        assert r.returncode == 0 and r.stdout.decode().strip() == "p1", r
        out = shell(hutch, ["bash"], sb.id, BASH).split("\n")
        assert out[:27] == [
            "exec",                  # a verb
            sb.id,                   # exec's first positional is a sandbox id
            "--cwd",                 # exec's own option, after the id
            "micro medium",          # instance types from the table
            "all allow:",            # network modes
            "start stop",            # pool's subcommands
            "--size",                # pool start's own option
            sb.id,                   # an option's value is skipped when counting
            "",                      # after --: the sandbox's command, nothing local
            "p1",                    # logs ID PROC: the sandbox's processes
            "",                      # an unknown verb completes nothing
            "image",                 # a group of verbs, as pool is
            "import inspect",        # its subcommands
            "--store",               # a subcommand's own option
            "create start state kill delete features run ps exec pause resume update list "
            "checkpoint restore events",  # hutch oci's commands, from its dispatch table
            "start state",           # ... completed as any group's
            "bash zsh fish",         # a verb's positional values
            "status=running",        # ls -f: KEY=VALUE from the filters' table
            "table json",            # ls --format's words
            "table",                 # stats --format's
            "auto always",           # --progress WHEN
            "host",                  # --image: host and the store's images (none here)
            "p1",                    # kill ID PROC
            "--follow -f --help -h",  # events' options
            "fork",                  # fork ID [-n N]
            sb.id,                   # its positional is a sandbox id
            "--count",               # its own option
        ], out
    finally:
        sb.rm()


# As bash calls it: COMP_LINE whole, COMP_WORDS split at = and : too.
BASH_LINES = r'''
source <(hutch completion bash) || exit 9
rt() { COMP_LINE=$1; COMP_POINT=${#COMP_LINE}; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _hutch; echo "${COMPREPLY[*]}"; }
rt "hutch ls -f status=r" hutch ls -f status = r
rt "hutch ls -f status=" hutch ls -f status =
rt "hutch ls -f instance-type=n" hutch ls -f instance-type = n
rt "hutch exec --cwd=/x " hutch exec --cwd = /x ""
rt "hutch cp $ID:" hutch cp "$ID" :
'''


def test_bash_completes_across_its_word_breaks(hutch):
    """bash splits status=r into three words and replaces only the last:
    the script takes the words from the line and trims its replies."""
    sb = hutch.create("--instance-type", "nano")
    try:
        out = shell(hutch, ["bash"], sb.id, BASH_LINES).split("\n")
        assert out[:5] == [
            "running",               # what replaces "r"
            "=creating =running =sleeping =pooled =closing =dead",  # what replaces "="
            "nano",
            sb.id,                   # --cwd=/x holds its value: the id is next
            ":",                     # cp ID: completes to itself (bash keeps ID)
        ], out
    finally:
        sb.rm()


@pytest.mark.skipif(not shutil.which("fish"), reason="fish not installed (scripts/install-deps --test)")
def test_fish_completes_verbs_values_and_ids(hutch):
    sb = hutch.create("--instance-type", "nano")
    try:
        out = shell(hutch, ["fish", "-c", "hutch completion fish | source; "
                            "complete -C 'hutch ex'; echo ==; complete -C 'hutch exec '; "
                            "echo ==; complete -C 'hutch run --network '"], sb.id)
        verbs, ids, nets = out.split("==\n")
        assert [ln.split("\t")[0] for ln in verbs.splitlines()] == ["exec"], verbs
        assert sb.id in [ln.split("\t")[0] for ln in ids.splitlines()], ids
        assert [ln.split("\t")[0] for ln in nets.splitlines()] == ["all", "allow:", "none"], nets
    finally:
        sb.rm()


@pytest.mark.skipif(not shutil.which("zsh"), reason="zsh not installed (scripts/install-deps --test)")
def test_zsh_loads_the_completion_and_completes_ids(hutch):
    sb = hutch.create("--instance-type", "nano")
    try:
        out = shell(hutch, ["zsh", "-c",
                            "autoload -U compinit; compinit -u; source <(hutch completion zsh); "
                            "echo ${_comps[hutch]}; setopt ksharrays; "
                            "COMP_WORDS=(hutch exec ''); COMP_CWORD=2; _hutch; "
                            "echo \"[${COMPREPLY[*]}]\""], sb.id)
        assert out.splitlines() == ["_bash_complete -F _hutch", f"[{sb.id}]"], out
    finally:
        sb.rm()


def test_completion_usage_errors(hutch):
    r = hutch("completion")
    assert r.returncode == 64 and b"missing shell: hutch completion bash|zsh|fish" in r.stderr
    r = hutch("completion", "tcsh")
    assert r.returncode == 64 and b"unknown shell 'tcsh'" in r.stderr


def test_each_verb_is_offered_once(hutch):
    """A group that is a verb too (snapshot ID, snapshot ls|inspect|rm) is
    one word: bash listed `snapshot` twice, fish offered it twice."""
    bash = hutch("completion", "bash").stdout.decode()
    line = next(ln for ln in bash.splitlines() if ln.startswith("_hutch_verbs='"))
    words = line.split("'")[1].split()
    assert len(words) == len(set(words)), words
    assert "snapshot" in words and "rollback" in words
    assert "\tsnapshot) echo \"ls inspect rm\" ;;" in bash  # its subcommands still
    fish = hutch("completion", "fish").stdout.decode()
    offered = [ln.split(" -a ")[1].split()[0] for ln in fish.splitlines()
               if ln.startswith("complete -c hutch -n __fish_use_subcommand -a ")]
    assert len(offered) == len(set(offered)), offered
