# SPDX-License-Identifier: Apache-2.0
"""pytest plugin: a ``sandbox`` fixture (an open :class:`hutch.SandboxSession`,
closed after each test) whose options come from a marker:

    @pytest.mark.hutch(instance_type="small", ttl_seconds=600)
    def test_it(sandbox):
        assert sandbox.execute("echo hi").stdout == "hi\\n"

Enable with ``pytest -p hutch.pytest_plugin`` (or install the package: it
registers itself through the ``pytest11`` entry point).
"""
import pytest

from .sandbox import LocalSandbox


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "hutch(**options): LocalSandbox options for the 'sandbox' fixture "
        "(instance_type=, ttl_seconds=, network=, setup_script=, hooks=, ...)")


@pytest.fixture
def sandbox(request):
    """An open local sandbox, deleted after the test."""
    marker = request.node.get_closest_marker("hutch")
    options = dict(marker.kwargs) if marker else {}
    session = LocalSandbox(**options).open()
    try:
        yield session
    finally:
        session.close()
