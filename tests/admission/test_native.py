"""The compiled admission engine (`gitopsq.native`): used exactly when built from the sources beside it, and
deciding every case exactly as the pure Python engine does."""

from __future__ import annotations

import filecmp
import gc
import importlib
import os
import random
import shutil
import subprocess
import sys
import types
from pathlib import Path

import gitopsq.admission
from gitopsq import native
from gitopsq.admission import cycle
from gitopsq.admission.engine import Engine
from gitopsq.errors import GitopsqError
from gitopsq.simulate.replay import Simulation
from gitopsq.simulate.scenario import parse_scenario

ROOT = Path(__file__).resolve().parents[2]


def test_the_suite_runs_the_compiled_engine() -> None:
    """scripts/test builds it (as the image does): the engine under test is the one that ships."""
    assert os.environ.get(native.ENGINE_ENV) != "python", "the suite must run the engine as it ships"
    assert gitopsq.admission.ENGINE.compiled, (
        f"admission engine: {gitopsq.admission.ENGINE} (scripts/test builds it: python -m gitopsq.native_build build)")
    assert not isinstance(cycle.settle, types.FunctionType)  # compiled to C, not Python bytecode
    # (a compiled module's own __file__ depends on which module imported it first; the shared library's does not)
    group = importlib.import_module("gitopsq.admission.native__mypyc")
    assert Path(str(group.__file__)).parent == native.build_dir(native.ADMISSION_DIR)


def _package(tmp_path: Path) -> Path:
    copy = tmp_path / "pkg" / "admission"
    copy.mkdir(parents=True)
    for source in native.sources(native.ADMISSION_DIR):
        shutil.copy(source, copy / source.name)
    return copy


def test_a_build_of_other_sources_is_never_imported(tmp_path: Path) -> None:
    """Editing one module after a build leaves the build aside: the package path gets nothing, and the reason
    says to rebuild."""
    package = _package(tmp_path)
    built = native.build_dir(package)
    built.mkdir(parents=True)
    (built / native.MARKER).write_text("test\n")
    path: list[str] = []
    assert native.activate(path, package).compiled and path == [str(built)]

    with (package / "quota.py").open("a") as f:
        f.write("\n# an edit after the build\n")
    path = []
    kind = native.activate(path, package)
    assert not kind.compiled and path == []
    assert "built from other sources: rebuild" in str(kind)


def test_an_interrupted_build_or_the_python_switch_gives_the_pure_engine(tmp_path: Path) -> None:
    package = _package(tmp_path)
    native.build_dir(package).mkdir(parents=True)  # no marker: the build never finished
    path: list[str] = []
    kind = native.activate(path, package)
    assert not kind.compiled and path == [] and "not built" in str(kind)

    (native.build_dir(package) / native.MARKER).write_text("test\n")
    env = {**os.environ, native.ENGINE_ENV: "python"}
    done = subprocess.run([sys.executable, "-m", "gitopsq.native_build", "status"], env=env, cwd=ROOT,
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"admission engine: pure Python ({native.ENGINE_ENV}=python)"


def test_compiled_and_pure_engines_decide_every_case_alike(tmp_path: Path) -> None:
    """benchmarks/outcomes_dump.py on every scenario, 300 generated ones and admission_bench's two instants (10,000
    pending), once per engine: the outputs are equal byte for byte."""
    outputs = {}
    for engine in ("compiled", "python"):
        env = {k: v for k, v in os.environ.items() if k != native.ENGINE_ENV}
        if engine == "python":
            env[native.ENGINE_ENV] = "python"
        out = tmp_path / f"{engine}.txt"
        done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "outcomes_dump.py"), str(ROOT), str(out),
                               "--seeds", "300"], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
        assert "'benchmark instants': 2" in done.stdout
        assert ("admission engine: compiled (mypyc" in done.stdout) is (engine == "compiled"), done.stdout
        outputs[engine] = Path(f"{out}.full")
    assert outputs["compiled"].stat().st_size > 1_000_000
    assert filecmp.cmp(outputs["compiled"], outputs["python"], shallow=False)


class _CycleCounting:
    """A simulation's engine whose every `schedule` is followed by a collection that counts what it found."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.garbage = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._engine, name)

    def schedule(self, now: float) -> None:
        gc.collect()
        gc.disable()
        try:
            self._engine.schedule(now)
        finally:
            gc.enable()
        self.garbage += gc.collect()


def test_settling_creates_no_reference_cycles() -> None:
    """What lets `Engine.schedule` pause the cycle collector: every scenario, and admission_bench's 10,000-workload
    instant, settle without leaving anything for it (a nested function in a nomination once left 378,401 objects
    per bench instant in the compiled engine)."""
    scenarios = 0
    for path in sorted((ROOT / "tests" / "scenarios").rglob("*.yaml")):
        try:
            scenario = parse_scenario(path.read_text(encoding="utf-8"), str(path))
        except GitopsqError:
            continue  # the invalid ones
        sim = Simulation(scenario)
        counting = _CycleCounting(sim.engine)
        sim.engine = counting  # type: ignore[assignment]
        sim.run()
        assert counting.garbage == 0, path
        scenarios += 1
    assert scenarios > 100
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import admission_bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bench = _CycleCounting(admission_bench.build(random.Random(4)))
    bench.schedule(0.0)
    assert bench.garbage == 0
    assert sum(1 for w in bench.state.workloads.values() if w.assignment is not None) > 500  # it did settle
