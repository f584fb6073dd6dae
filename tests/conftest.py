"""Root conftest: isolates the run from the machine's HOME and git configuration (tests/machine_isolation.py),
then registers the test rig plugins: real Kubernetes (tests/envtest_rig.py) and a real Gitea
(tests/forge_rig.py), and keeps each expensive rig on one worker when the suite runs in parallel
(tests/worker_groups.py); tests/cli_runs.py holds what the command-line tests share. Keep it minimal."""

import machine_isolation

_ISOLATED_HOME = machine_isolation.isolate()  # before any plugin or test module imports pygit2 or reads HOME

pytest_plugins = ["envtest_rig", "forge_rig", "worker_groups", "cli_runs"]


def pytest_unconfigure() -> None:
    machine_isolation.remove(_ISOLATED_HOME)
