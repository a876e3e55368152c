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

Enable with ``pytest -p hutch.pytest_plugin`` (or install the package: it
registers itself through the ``pytest11`` entry point).
"""
import pytest

from .sandbox import LocalSandbox


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hutch(**options): LocalSandbox options for the 'sandbox' fixture "
        "(instance_type=, ttl_seconds=, network=, setup_script=, hooks=, ...)")


def _opened(options):
    session = LocalSandbox(**options).open()
    try:
        yield session
    finally:
        session.close()


def _marker_options(node):
    marker = node.get_closest_marker("hutch")
    return dict(marker.kwargs) if marker else {}


@pytest.fixture
def sandbox(request):
    """An open local sandbox, deleted after the test."""
    yield from _opened(_marker_options(request.node))


@pytest.fixture(scope="module")
def sandbox_module(request):
    """One open local sandbox for every test of a module, deleted after its
    last test; options from the module's ``pytestmark``."""
    yield from _opened(_marker_options(request.node))


@pytest.fixture(scope="session")
def hutch_session_options():
    """LocalSandbox options of ``sandbox_session``: override in conftest.py."""
    return {}


@pytest.fixture(scope="session")
def sandbox_session(hutch_session_options):
    """One open local sandbox for the whole test run, deleted at its end."""
    yield from _opened(dict(hutch_session_options))
