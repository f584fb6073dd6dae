"""kept_series.py: prometheus_client's histogram and counter samples and text, each series' lines kept until it
changes."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from gitopsq.exposition import render
from gitopsq.kept_series import KeptCounter, KeptHistogram

BUCKETS = (1.0, 2.5, 5.0, 10.0)
VALUES = [0.0, 1.0, 1.5, 2.5, 7.0, 10.0, 11.0, 1e7, -3.0]  # bounds themselves, below the first, beyond the last


def pair() -> tuple[CollectorRegistry, KeptHistogram, CollectorRegistry, Histogram]:
    kept_registry, library_registry = CollectorRegistry(), CollectorRegistry()
    kept = KeptHistogram("wait_seconds", "Wait \\ with\nescapes", ["queue", "role"], buckets=BUCKETS,
                         registry=kept_registry)
    library = Histogram("wait_seconds", "Wait \\ with\nescapes", ["queue", "role"], buckets=BUCKETS,
                        registry=library_registry)
    return kept_registry, kept, library_registry, library


def without_created(text: bytes, name: str = "wait_seconds") -> bytes:
    """prometheus_client writes ``_created`` series unless disabled process-wide; the kept series never do."""
    lines = text.decode().splitlines(keepends=True)
    out, skip = [], False
    for line in lines:
        if line.startswith(f"# HELP {name}_created"):
            skip = True
        elif line.startswith("# HELP"):
            skip = False
        if not skip and "_created{" not in line:
            out.append(line)
    return "".join(out).encode()


def test_samples_and_text_are_prometheus_clients_through_changes() -> None:
    kept_registry, kept, library_registry, library = pair()
    queues = ["a", 'quo"ted', "new\nline"]
    for round_ in range(3):  # render, change some series, render again: kept lines must follow the changes
        for i, value in enumerate(VALUES):
            if (i + round_) % 2:
                queue = queues[(i + round_) % len(queues)]
                kept.labels(queue, "leader").observe(value)
                library.labels(queue, "leader").observe(value)
        expected = without_created(generate_latest(library_registry))
        assert render(kept_registry) == expected
        assert generate_latest(kept_registry) == expected  # the samples, as any registry reader sees them
    assert kept_registry.get_sample_value("wait_seconds_count", {"queue": "a", "role": "leader"}) == \
        library_registry.get_sample_value("wait_seconds_count", {"queue": "a", "role": "leader"})
    assert kept_registry.get_sample_value("wait_seconds_bucket", {"queue": "a", "role": "leader", "le": "+Inf"}) > 0


def test_an_unchanged_series_is_not_formatted_again() -> None:
    registry = CollectorRegistry()
    kept = KeptHistogram("w", "w", ["q"], buckets=BUCKETS, registry=registry)
    kept.labels("a").observe(1.0)
    kept.labels("b").observe(1.0)
    render(registry)
    texts = {key: entry[2] for key, entry in kept._kept.items()}
    kept.labels("b").observe(3.0)
    body = render(registry).decode()
    assert kept._kept[("a",)][2] is texts[("a",)]  # the same string object: reused, not rebuilt
    assert kept._kept[("b",)][2] is not texts[("b",)]
    assert 'w_bucket{le="5.0",q="b"} 2.0' in body and 'w_bucket{le="2.5",q="b"} 1.0' in body


def test_label_count_and_duplicate_names_are_refused() -> None:
    registry = CollectorRegistry()
    kept = KeptHistogram("w", "w", ["q", "r"], buckets=BUCKETS, registry=registry)
    with pytest.raises(ValueError, match="2 label values expected, got 1"):
        kept.labels("a")
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Histogram("w", "again", ["q"], registry=registry)


def test_observations_during_scrapes_are_all_counted() -> None:
    registry = CollectorRegistry()
    kept = KeptHistogram("w", "w", ["q"], buckets=BUCKETS, registry=registry)
    per_thread, threads = 5_000, 4
    series = kept.labels("a")

    def observe() -> None:
        for i in range(per_thread):
            series.observe(float(i % 12))

    workers = [threading.Thread(target=observe) for _ in range(threads)]
    for w in workers:
        w.start()
    while any(w.is_alive() for w in workers):
        body = render(registry).decode()
        counts = [float(line.rsplit(" ", 1)[1]) for line in body.splitlines() if line.startswith("w_bucket")]
        assert counts == sorted(counts)  # every scrape sees a consistent, cumulative set of buckets
    for w in workers:
        w.join()
    assert registry.get_sample_value("w_count", {"q": "a"}) == per_thread * threads
    assert registry.get_sample_value("w_sum", {"q": "a"}) == threads * sum(float(i % 12) for i in range(per_thread))


def test_counter_samples_and_text_are_prometheus_clients_through_changes() -> None:
    kept_registry, library_registry = CollectorRegistry(), CollectorRegistry()
    kept = KeptCounter("admitted_total", "Admitted \\ with\nescapes", ["queue", "role"], registry=kept_registry)
    library = Counter("admitted_total", "Admitted \\ with\nescapes", ["queue", "role"], registry=library_registry)
    queues = ["a", 'quo"ted', "new\nline"]
    for round_ in range(3):
        for i, amount in enumerate([1.0, 2.5, 0.0, 7.0]):
            queue = queues[(i + round_) % len(queues)]
            kept.labels(queue, "leader").inc(amount)
            library.labels(queue, "leader").inc(amount)
        expected = without_created(generate_latest(library_registry), "admitted")
        assert render(kept_registry) == expected
        assert generate_latest(kept_registry) == expected
    assert kept_registry.get_sample_value("admitted_total", {"queue": "a", "role": "leader"}) == \
        library_registry.get_sample_value("admitted_total", {"queue": "a", "role": "leader"})


def test_an_unchanged_counter_series_is_not_formatted_again() -> None:
    registry = CollectorRegistry()
    kept = KeptCounter("c", "c", ["q"], registry=registry)
    kept.labels("a").inc()
    kept.labels("b").inc()
    render(registry)
    lines = {key: entry[2] for key, entry in kept._kept.items()}
    kept.labels("b").inc(2)
    body = render(registry).decode()
    assert kept._kept[("a",)][2] is lines[("a",)]
    assert 'c_total{q="b"} 3.0' in body and 'c_total{q="a"} 1.0' in body


def test_a_counter_refuses_decrements_wrong_labels_and_a_taken_name() -> None:
    registry = CollectorRegistry()
    kept = KeptCounter("c_total", "c", ["q"], registry=registry)
    with pytest.raises(ValueError, match="non-negative"):
        kept.labels("a").inc(-1)
    with pytest.raises(ValueError, match="1 label values expected, got 2"):
        kept.labels("a", "b")
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("c", "again", ["q"], registry=registry)
    assert registry.get_sample_value("c_total", {"q": "a"}) == 0.0


def test_increments_during_scrapes_are_all_counted() -> None:
    registry = CollectorRegistry()
    series = KeptCounter("c", "c", ["q"], registry=registry).labels("a")
    per_thread, threads = 20_000, 4

    def inc() -> None:
        for _ in range(per_thread):
            series.inc()

    workers = [threading.Thread(target=inc) for _ in range(threads)]
    for w in workers:
        w.start()
    seen = [0.0]
    while any(w.is_alive() for w in workers):
        line = next(x for x in render(registry).decode().splitlines() if x.startswith("c_total"))
        seen.append(float(line.rsplit(" ", 1)[1]))
    for w in workers:
        w.join()
    assert seen == sorted(seen)  # never backwards
    assert registry.get_sample_value("c_total", {"q": "a"}) == per_thread * threads
