"""Labelled histograms and counters whose exposition text is kept per series between scrapes.

Kueue's wait-time histograms and workload counters are labelled by ClusterQueue (or LocalQueue) and priority
class: with a thousand queues they are most of the ``/metrics`` answer (about 17 lines per histogram series, one
per counter series), while a scrape a second finds only the few series changed since the last one.
prometheus_client's `Histogram` and `Counter` rebuild every sample of every series per scrape (a namedtuple and a
formatted float per line); here a series' lines are formatted when it changed and reused otherwise. The interface
used by `metrics.KueueMetrics` (``labels(...).observe(v)`` / ``.inc()``) and the samples a registry reads
(`generate_latest`, ``get_sample_value``) are prometheus_client's; `exposition.render` takes the kept text
(``text``) instead of the samples. Neither writes ``*_created`` series (Kueue's exposition has none).
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar, cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from gitopsq.exposition import label_text

_number = cast(Callable[[float], str], floatToGoString)


S = TypeVar("S")


class _Labelled(Generic[S]):
    """A family's children by label values, made on first use (prometheus_client's ``labels``)."""

    name: str
    labelnames: tuple[str, ...]
    lock: threading.Lock
    _series: dict[tuple[str, ...], S]

    def _new(self) -> S:
        raise NotImplementedError

    def labels(self, *values: str) -> S:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: {len(self.labelnames)} label values expected, got {len(values)}")
        key = tuple(str(v) for v in values)
        series = self._series.get(key)
        if series is None:
            with self.lock:
                series = self._series.setdefault(key, self._new())
        return series


class _Series:
    """One label set's counts (per bucket, not cumulative; the last is +Inf), sum and change count."""

    __slots__ = ("_family", "counts", "sum", "version")

    def __init__(self, family: KeptHistogram) -> None:
        self._family = family
        self.counts = [0] * (len(family.bounds) + 1)
        self.sum = 0.0
        self.version = 0

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self._family.bounds, value)  # the first bound >= value, as ``le`` means
        with self._family.lock:
            self.counts[index] += 1
            self.sum += value
            self.version += 1


class KeptHistogram(_Labelled[_Series]):
    """A histogram with label names, registered in ``registry`` (its name checked against the others')."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *, buckets: Sequence[float],
                 registry: CollectorRegistry) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self.bounds = tuple(float(b) for b in buckets if b != float("inf"))
        self._le = (*(_number(b) for b in self.bounds), "+Inf")
        self.lock = threading.Lock()
        self._series: dict[tuple[str, ...], _Series] = {}
        self._kept: dict[tuple[str, ...], tuple[int, list[str], str]] = {}  # labels -> (version, prefixes, text)
        registry.register(self)

    def _new(self) -> _Series:
        return _Series(self)

    def describe(self) -> list[Metric]:
        """The family's name, so that the registry refuses another collector using it."""
        return [Metric(self.name, self.documentation, "histogram")]

    def collect(self) -> Iterator[Metric]:
        with self.lock:  # a consistent copy: an observation lands wholly before or after it
            copy = [(key, s.version, list(s.counts), s.sum) for key, s in self._series.items()]
        yield _Family(self, copy)

    def _lines(self, key: tuple[str, ...], version: int, counts: list[int], total: float) -> str:
        kept = self._kept.get(key)
        if kept is not None and kept[0] == version:
            return kept[2]
        prefixes = kept[1] if kept is not None else self._prefixes(key)
        parts: list[str] = []
        running = 0
        for prefix, count in zip(prefixes, counts, strict=False):
            running += count
            parts.append(f"{prefix}{_number(float(running))}\n")
        parts.append(f"{prefixes[-2]}{_number(float(running))}\n{prefixes[-1]}{_number(total)}\n")
        text = "".join(parts)
        self._kept[key] = (version, prefixes, text)
        return text

    def _prefixes(self, key: tuple[str, ...]) -> list[str]:
        """``name_bucket{...,le="..."} `` per bucket, then the ``_count`` and ``_sum`` prefixes: labels sorted
        by name and escaped as prometheus_client writes them."""
        labels = dict(zip(self.labelnames, key, strict=True))
        buckets = [f"{self.name}_bucket{label_text({**labels, 'le': le})} " for le in self._le]
        return [*buckets, f"{self.name}_count{label_text(labels)} ", f"{self.name}_sum{label_text(labels)} "]


class _Family(Metric):
    """One scrape's copy of a `KeptHistogram`: ``text`` for `exposition.render`, ``samples`` (built on first
    use) for everything else that reads a registry."""

    def __init__(self, owner: KeptHistogram, copy: list[tuple[tuple[str, ...], int, list[int], float]]) -> None:
        self.name, self.documentation, self.type, self.unit = owner.name, owner.documentation, "histogram", ""
        self._owner, self._copy = owner, copy
        self._samples: list[Sample] | None = None

    def text(self) -> str:
        """Every series' lines, kept ones reused (two scrapes at once may both format a changed series; each
        keeps a whole entry, so either is right)."""
        return "".join(self._owner._lines(*entry) for entry in self._copy)

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            out: list[Sample] = []
            names = self._owner.labelnames
            for key, _, counts, total in self._copy:
                labels = dict(zip(names, key, strict=True))
                running = 0
                for le, count in zip(self._owner._le, counts, strict=True):
                    running += count
                    out.append(Sample(f"{self.name}_bucket", {**labels, "le": le}, float(running)))
                out.append(Sample(f"{self.name}_count", dict(labels), float(running)))
                out.append(Sample(f"{self.name}_sum", dict(labels), total))
            self._samples = out
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value


class _Count:
    """One label set's count and change count."""

    __slots__ = ("_lock", "value", "version")

    def __init__(self, lock: threading.Lock) -> None:
        self._lock = lock
        self.value = 0.0
        self.version = 0

    def inc(self, amount: float = 1.0) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        with self._lock:
            self.value += amount
            self.version += 1


class KeptCounter(_Labelled[_Count]):
    """A counter with label names, registered in ``registry``; ``name`` with or without ``_total`` (the
    samples are ``<name>_total``, as prometheus_client's)."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], *,
                 registry: CollectorRegistry) -> None:
        self.name = name.removesuffix("_total")
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.lock = threading.Lock()
        self._series: dict[tuple[str, ...], _Count] = {}
        self._kept: dict[tuple[str, ...], tuple[int, str, str]] = {}  # labels -> (version, prefix, line)
        registry.register(self)

    def _new(self) -> _Count:
        return _Count(self.lock)

    def describe(self) -> list[Metric]:
        return [Metric(self.name, self.documentation, "counter")]

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            copy = [(key, s.version, s.value) for key, s in self._series.items()]
        yield _CounterFamily(self, copy)

    def _line(self, key: tuple[str, ...], version: int, value: float) -> str:
        kept = self._kept.get(key)
        if kept is not None and kept[0] == version:
            return kept[2]
        prefix = kept[1] if kept is not None else \
            f"{self.name}_total{label_text(dict(zip(self.labelnames, key, strict=True)))} "
        line = f"{prefix}{_number(value)}\n"
        self._kept[key] = (version, prefix, line)
        return line


class _CounterFamily(Metric):
    """One scrape's copy of a `KeptCounter` (as `_Family` is of a histogram)."""

    def __init__(self, owner: KeptCounter, copy: list[tuple[tuple[str, ...], int, float]]) -> None:
        self.name, self.documentation, self.type, self.unit = owner.name, owner.documentation, "counter", ""
        self._owner, self._copy = owner, copy
        self._samples: list[Sample] | None = None

    def text(self) -> str:
        return "".join(self._owner._line(*entry) for entry in self._copy)

    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            names = self._owner.labelnames
            self._samples = [Sample(f"{self.name}_total", dict(zip(names, key, strict=True)), value)
                             for key, _, value in self._copy]
        return self._samples

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        self._samples = value
