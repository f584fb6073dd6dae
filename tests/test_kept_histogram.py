"""kept_histogram.py: prometheus_client's histogram samples and text, with each series' lines kept until it changes."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from gitopsq.exposition import render
from gitopsq.kept_histogram import KeptHistogram

BUCKETS = (1.0, 2.5, 5.0, 10.0)
VALUES = [0.0, 1.0, 1.5, 2.5, 7.0, 10.0, 11.0, 1e7, -3.0]  # bounds themselves, below the first, beyond the last


def pair() -> tuple[CollectorRegistry, KeptHistogram, CollectorRegistry, Histogram]:
    kept_registry, library_registry = CollectorRegistry(), CollectorRegistry()
    kept = KeptHistogram("wait_seconds", "Wait \\ with\nescapes", ["queue", "role"], buckets=BUCKETS,
                         registry=kept_registry)
    library = Histogram("wait_seconds", "Wait \\ with\nescapes", ["queue", "role"], buckets=BUCKETS,
                        registry=library_registry)
    return kept_registry, kept, library_registry, library


def without_created(text: bytes) -> bytes:
    """prometheus_client writes ``_created`` series unless disabled process-wide; the kept histogram never does."""
    lines = text.decode().splitlines(keepends=True)
    out, skip = [], False
    for line in lines:
        if line.startswith("# HELP wait_seconds_created"):
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
