"""Root conftest: registers the test rig plugins: real Kubernetes (tests/envtest_rig.py) and a real Gitea
(tests/forge_rig.py). Keep it minimal."""

pytest_plugins = ["envtest_rig", "forge_rig"]
