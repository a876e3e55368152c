# SPDX-License-Identifier: Apache-2.0
"""Docker's flags and verbs (docs/docker.md): the ones that mean the same
work; every other one exits 64 naming hutch's way, and creates nothing."""
import pytest

from conftest import HUTCH  # noqa: F401


def test_workdir_rm_and_env_file_work(hutch, tmp_path, monkeypatch):
    assert hutch("run", "-w", "/tmp", "--", "pwd").stdout == b"/tmp\n"
    assert hutch("run", "--workdir", "/etc", "--rm", "--", "pwd").stdout == b"/etc\n"
    env = tmp_path / "env"
    env.write_text("A=1\n# a comment\n\n  B=two words\r\nFROM_HOST\nUNSET_HERE\n")
    r = hutch("run", "--env-file", str(env), "-e", "A=2", "--", "sh", "-c",
              "echo $A/$B/$FROM_HOST/${UNSET_HERE-unset}",
              env={"FROM_HOST": "host value"})
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"2/two words/host value/unset\n"
    sb = hutch.create()
    r = hutch("exec", "-w", "/tmp", "--env-file", str(env), sb.id, "--", "sh", "-c", 'echo $PWD $A')
    assert r.stdout == b"/tmp 1\n"
    sb.rm()
    assert hutch.ids() == []


@pytest.mark.parametrize("args, words", [
    (["run", "-d", "--", "true"], ["hutch create", "hutch exec -d ID"]),
    (["run", "--detach", "--", "true"], ["hutch exec -d ID"]),
    (["run", "-u", "0", "--", "true"], ["appuser"]),
    (["exec", "--user=root", "0123456789ab", "--", "true"], ["appuser"]),
    (["run", "-v", "./x:/y", "--", "true"], ["$PWD/x"]),
    (["create", "--mount", "type=bind"], ["source=SRC,target=PATH", "-v SRC:PATH"]),
    (["run", "--name", "x", "--", "true"], ["--description"]),
    (["create", "--name=x"], ["ids, not names"]),
    (["create", "-l", "a=b"], ["--description"]),
    (["create", "--label", "a=b"], ["ls -f description="]),
    (["create", "--rm"], ["hutch rm ID", "hutch run"]),
    (["run", "--env-file", "/nonexistent/env", "--", "true"], ["cannot read --env-file"]),
    (["ps"], ["hutch ls"]),
    (["stop", "0123456789ab"], ["hutch rm ID"]),
    (["start", "0123456789ab"], ["hutch create"]),
    (["wait", "0123456789ab"], ["hutch logs ID PROC -f"]),
    (["attach", "0123456789ab"], ["hutch exec -it ID"]),
    (["images"], ["hutch image ls"]),
])
def test_refused_naming_hutchs_way(hutch, args, words):
    r = hutch(*args)
    assert r.returncode == 64, r.stderr
    err = r.stderr.decode()
    assert "unknown option" not in err
    for w in words:
        assert w in err, err
    assert hutch.ids() == []


def test_refused_flags_stay_out_of_help_and_completion(hutch):
    for verb in ("run", "create", "exec"):
        h = hutch(verb, "--help").stdout.decode()
        assert "--user" not in h and "--name" not in h
        # -v and --mount work (issue 28)
        assert ("--volume" in h) == ("--mount" in h) == (verb != "exec")
    assert "--workdir" in hutch("run", "--help").stdout.decode()
    bash = hutch("completion", "bash").stdout.decode()
    assert "--user" not in bash and "--volume" in bash and "--env-file" in bash
