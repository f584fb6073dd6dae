"""Compiles the admission engine with mypyc into the directory `gitopsq.native` looks for (see there).

    python -m gitopsq.native_build build [--force]   # needs mypy, setuptools and a C compiler; no-op when current
    python -m gitopsq.native_build status            # which engine this interpreter imports, and why
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gitopsq.native import ADMISSION_DIR, MARKER, build_dir, sources

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify
config, target, group, *paths = sys.argv[1:]
sys.argv = [sys.argv[0], "build_ext", "--build-lib", target + "/lib", "--build-temp", target + "/tmp"]
setup(name="gitopsq-native", ext_modules=mypycify(["--config-file", config, *paths], opt_level="3",
                                                  target_dir=target + "/c", group_name=group))
"""

# The engine is mypy-strict already (pyproject.toml); a config of its own keeps the project's unrelated sections
# (unused here, an error to mypyc) out of the compile.
_MYPY_CONFIG = "[mypy]\npython_version = {version}\nstrict = True\nignore_missing_imports = True\n"


def build(package_dir: Path = ADMISSION_DIR, *, force: bool = False, log: bool = True) -> Path:
    """Compile ``package_dir``'s modules into `build_dir` (nothing to do when it is current); older builds go."""
    final = build_dir(package_dir)
    if (final / MARKER).is_file() and not force:
        return final
    root = package_dir.parent.parent  # mypyc names modules by their path below the import root
    package = ".".join(package_dir.relative_to(root).parts)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gitopsq-native-") as tmp:
        config = Path(tmp) / "mypy.ini"
        config.write_text(_MYPY_CONFIG.format(version=f"{sys.version_info.major}.{sys.version_info.minor}"))
        paths = [str(p.relative_to(root)) for p in sources(package_dir)]
        done = subprocess.run([sys.executable, "-c", _SETUP, str(config), tmp, f"{package}.native", *paths],
                              cwd=root, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
            raise BuildError(f"mypyc failed for {package} (exit {done.returncode}):\n{tail}")
        built = Path(tmp, "lib", *package.split("."))
        staging = package_dir / "_native" / f".{final.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for lib in built.iterdir():
            shutil.copy2(lib, staging / lib.name)
    (staging / MARKER).write_text(f"{package} {final.name} built {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} "
                                  f"in {time.monotonic() - started:.0f} s\n")
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    for old in (package_dir / "_native").iterdir():
        if old != final:
            shutil.rmtree(old, ignore_errors=True)
    if log:
        sys.stderr.write(f"gitopsq.native: {package} compiled into {final} in {time.monotonic() - started:.0f} s\n")
    return final


class BuildError(RuntimeError):
    """mypyc, setuptools or the C compiler is missing or failed (the message has the tail of their output)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gitopsq.native_build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["build", "status"])
    parser.add_argument("--force", action="store_true", help="build even when the current build is there")
    parser.add_argument("--package-dir", type=Path, default=ADMISSION_DIR, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.action == "status":
        import gitopsq.admission

        print(f"admission engine: {gitopsq.admission.ENGINE}")
        return 0
    try:
        build(args.package_dir, force=args.force)
    except (BuildError, OSError) as exc:
        sys.stderr.write(f"gitopsq.native: {exc}\n")
        return 3
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
