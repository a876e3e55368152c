# SPDX-License-Identifier: Apache-2.0
"""pytest plugin: a ``sandbox`` fixture (an open :class:`hutch.SandboxSession`,
closed after each test) whose options come from a marker:

    @pytest.mark.hutch(instance_type="small", ttl_seconds=600)
    def test_it(sandbox):
        assert sandbox.execute("echo hi").stdout == "hi\\n"

Shared sandboxes, for suites whose tests may see each other's files:
``sandbox_module`` (one per test module; options from the module's
``pytestmark = pytest.mark.hutch(...)``) and ``sandbox_session`` (one for
the whole run; options from a ``hutch_session_options`` fixture you may
override in conftest.py).

Debugging a failure: ``pytest --hutch-keep-failed`` (or
``HUTCH_KEEP_FAILED=1``) leaves the sandbox of a test that failed (of a
module or session whose tests failed, for the shared ones) in place, not
deleted, and says its id and how to get in (``hutch exec -it ID``) and
remove it (``hutch rm ID``); its TTL still ends it.

Enable with ``pytest -p hutch.pytest_plugin`` (or install the package: it
registers itself through the ``pytest11`` entry point).
"""
import os
import sys

import pytest

from .sandbox import LocalSandbox


def pytest_addoption(parser):
    parser.getgroup("hutch").addoption(
        "--hutch-keep-failed", action="store_true", default=False,
        help="keep the sandbox of a failed test for debugging (hutch exec -it ID; hutch rm ID); "
        "also HUTCH_KEEP_FAILED=1")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hutch(**options): LocalSandbox options for the 'sandbox' fixture "
        "(instance_type=, ttl_seconds=, network=, setup_script=, hooks=, ...)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report on the item (rep_setup, rep_call, ...), for the
    fixture's teardown to see whether its test failed."""
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "_hutch_rep_" + rep.when, rep)


def _keep_failed(request):
    return bool(request.config.getoption("hutch_keep_failed", False)
                or os.environ.get("HUTCH_KEEP_FAILED", "") not in ("", "0"))


def _opened(options, request, failed):
    session = LocalSandbox(**options).open()
    failures = request.session.testsfailed
    try:
        yield session
    finally:
        if _keep_failed(request) and failed(failures):
            # Not closed: a message where pytest prints it even with -q
            # (stderr of the terminal), once per kept sandbox.
            sys.stderr.write(f"\nhutch: kept sandbox {session.id} of a failed test for "
                             f"debugging: hutch exec -it {session.id} (a shell), "
                             f"hutch rm {session.id} (when done)\n")
        else:
            session.close()


def _marker_options(node):
    marker = node.get_closest_marker("hutch")
    return dict(marker.kwargs) if marker else {}


def _test_failed(request):
    """Whether request's test failed (its setup or call), for its teardown."""
    return lambda _: any(getattr(getattr(request.node, "_hutch_rep_" + w, None), "failed", False)
                         for w in ("setup", "call"))


def _any_failed(request):
    """Whether any test failed since the fixture was made."""
    return lambda before: request.session.testsfailed > before


@pytest.fixture
def sandbox(request):
    """An open local sandbox, deleted after the test."""
    yield from _opened(_marker_options(request.node), request, _test_failed(request))


@pytest.fixture(scope="module")
def sandbox_module(request):
    """One open local sandbox for every test of a module, deleted after its
    last test; options from the module's ``pytestmark``."""
    yield from _opened(_marker_options(request.node), request, _any_failed(request))


@pytest.fixture(scope="session")
def hutch_session_options():
    """LocalSandbox options of ``sandbox_session``: override in conftest.py."""
    return {}


@pytest.fixture(scope="session")
def sandbox_session(hutch_session_options, request):
    """One open local sandbox for the whole test run, deleted at its end."""
    yield from _opened(dict(hutch_session_options), request, _any_failed(request))
