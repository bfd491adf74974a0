"""How the suite runs in parallel (pytest-xdist: ``-n`` and ``--dist loadgroup`` in
pyproject.toml's ``addopts``; ``-n 0`` runs it serially, unchanged).

- Tests that share a module-scoped (or wider) fixture of this project, such as a cluster of
  ``rillet server start`` processes or a Spark session, go to one worker together, so the
  fixture is set up once and not once on each worker: they get the ``xdist_group`` of their
  file, unless they are in a group already.
- Tests that must not run beside each other (network namespaces and Docker networks) carry
  an explicit ``xdist_group``; ports are per process (see
  :func:`tests.support.server_process.free_port`).
- Each worker starts the slowest kinds of tests first (Docker, network namespaces, clusters,
  Spark, crashes, then servers), so that no long test starts last while the other workers
  have nothing left to do. The order within a file is kept.

The groups reach the scheduler here, not as pytest-xdist sends them: it appends ``@group`` to
a test's node id, which pytest 9.2's structured node ids ignore, so that the groups are
silently dropped (pytest-dev/pytest-xdist#1386). The workers write each grouped test's group
to a file that the controller names, and the controller's scheduler reads it.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

# Slowest first: where a test's file lies, or its explicit group, decides when it starts.
_FIRST = ("network", "tests/cluster/", "tests/spark/", "tests/crash/", "tests/integration/")
# Set by the controller for its workers: the file the workers write the groups to.
_GROUPS_ENV = "RILLET_TEST_GROUPS"


def _shares_a_wide_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in info.names_closure:
        for fixturedef in info.name2fixturedefs.get(name, ()):
            # baseid: where the fixture is defined ("" for pytest's and plugins' own).
            if fixturedef.scope in ("module", "package", "session") and fixturedef.baseid:
                return True
    return False


def _group(item: pytest.Item) -> str | None:
    for mark in item.iter_markers("xdist_group"):
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    return None


def _rank(item: pytest.Item) -> int:
    where = _group(item) or item.nodeid
    for i, prefix in enumerate(_FIRST):
        if where.startswith(prefix):
            return i
    return len(_FIRST)


def _is_controller(config: pytest.Config) -> bool:
    return not hasattr(config, "workerinput") and bool(config.getoption("numprocesses", None))


def pytest_configure(config: pytest.Config) -> None:
    if _is_controller(config) and config.getoption("dist", None) == "loadgroup":
        fd, path = tempfile.mkstemp(prefix="rillet-test-groups-", suffix=".json")
        os.close(fd)
        os.unlink(path)
        os.environ[_GROUPS_ENV] = path  # the workers start later, with this environment


def pytest_unconfigure(config: pytest.Config) -> None:
    if _is_controller(config) and (path := os.environ.pop(_GROUPS_ENV, None)):
        for stale in Path(path).parent.glob(Path(path).name + "*"):
            stale.unlink(missing_ok=True)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    for item in items:
        if _group(item) is None and _shares_a_wide_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=_rank)


@pytest.hookimpl(tryfirst=True)  # before the worker tells the controller it has collected
def pytest_collection_finish(session: pytest.Session) -> None:
    path = os.environ.get(_GROUPS_ENV)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if path is None or worker is None:
        return
    groups = {item.nodeid: group for item in session.items if (group := _group(item))}
    mine = Path(f"{path}.{worker}")
    mine.write_text(json.dumps(groups))
    mine.replace(path)  # whole: every worker collects the same tests, and writes the same


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    path = os.environ.get(_GROUPS_ENV)
    if path is None:
        return None
    from xdist.scheduler import LoadGroupScheduling

    class GroupsFromWorkers(LoadGroupScheduling):  # type: ignore[misc]
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                # Read once all workers have collected (scheduling starts then).
                self.groups = json.loads(Path(path).read_text())
            group = self.groups.get(nodeid)
            return group if group is not None else str(super()._split_scope(nodeid))

    return GroupsFromWorkers(config, log)
