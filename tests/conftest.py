"""Root conftest: registers the real-Kubernetes test rig plugin (tests/envtest_rig.py). Keep it minimal."""

pytest_plugins = ["envtest_rig"]
