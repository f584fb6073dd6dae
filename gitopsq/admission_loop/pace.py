"""How hard the admission loop drives its Workload budget while work waits for tokens: how many admissions a pass
writes (`admission_cap`, `ahead`) and how long the loop rests after it (`rest_after`). Pure functions of the
bucket's level and the last passes' timings, so the pace is tested without a clock.

The budget is a client-go token bucket (``qps`` a second, at most ``burst`` banked): every second the bucket sits
full while admissible work waits is budget lost for good. A pass writes its batch at one moment (the issue); the
bucket then refills until the next pass issues. Writing only what is banked loses whatever the refill brings past
the burst in between — nothing while passes are fast (≈ 0.4 s, a thousand ClusterQueues on an idle machine), a
tenth or more of the budget once passes take a second (the same controller on a machine its neighbours keep busy:
Kueue's large-scale benchmark on a slowed machine admitted 44/s of 50 in its steady state). So a pass also writes
`ahead` of its tokens: those writes reserve their tokens in order and wait for them, taking the refill as it
comes, as a controller-runtime client's queued requests do.
"""

from __future__ import annotations

from gitopsq.admission_loop.options import LoopOptions


def ahead(qps: float, burst: int, span: float | None) -> int:
    """Admissions a pass writes beyond the tokens it banked: what the refill brings past the burst over ``span``
    seconds — from this pass's start to the next pass's issue, as `Pace` expects it — at most another burst.
    None: the last pass issued nothing or the loop idled (work did not wait for tokens), so nothing ahead and a
    pass never writes a larger batch than the budget's refill would have sent anyway."""
    if span is None or qps <= 0:
        return 0
    return max(0, min(burst, int(qps * span) - burst))


def admission_cap(banked: float | None, burst: int, options: LoopOptions, busy: float, extra: int) -> int:
    """How many admissions a pass writes: the Workload tokens ``banked`` (None: no bucket, so nothing to write
    ahead of) plus ``extra`` (`ahead`), at least one; without ``extra`` at most ``admissions_per_pass`` or what
    the budget refills over a pass as busy as the last one and its rest (`rest_after`: ``pass_rest`` times as
    long; a second's worth at least, the burst at most). More than it banked, unasked, would sit out the refill
    while freed quota waits; less would leave budget unused when passes are slow (a thousand ClusterQueues: up to
    2 s). Fast passes take a second's worth: a larger batch fills the cohorts with whatever was decided first,
    which high-priority work arriving a moment later reclaims (Kueue's baseline, earlier pending rule: 82
    evictions; 304 with the burst)."""
    qps = options.qps
    most = options.admissions_per_pass
    if most:
        return most if banked is None else max(1, min(most, int(banked)))
    most = max(1, int(min(burst, max(qps, (1 + options.pass_rest) * qps * busy))))
    return most if banked is None else max(1, min(most, int(banked)) + extra)


def token_wait(batch: int, level: float, qps: float) -> float:
    """Seconds the last of ``batch`` writes issued at once waits for its token when the bucket holds ``level``:
    the bucket serves reservations in order, so this part of a pass is the budget's, not the machine's."""
    return max(0.0, batch - max(0.0, level)) / qps if qps > 0 else 0.0


def rest_after(elapsed: float, options: LoopOptions, fill: float = float("inf"), waited: float = 0.0) -> float:
    """Seconds to wait before the next pass while work waits for tokens: until ``pass_interval`` after this pass
    started, and after a slow pass ``pass_rest`` times as long as it was busy, shortened so that the Workload
    token bucket, which fills in ``fill`` seconds, is not full before the next pass (as busy as this one) ends —
    tokens beyond the burst are lost, and with them admissions — but never below as long as the pass was busy.
    Busy is the pass's time less the ``waited`` seconds its writes spent waiting for their tokens
    (`token_wait`); that wait loads nothing and counts as rest already taken. A thousand ClusterQueues make passes
    of about 0.3 s whose CPU hardly depends on how many they admit: resting twice as long writes the same tokens
    in two thirds of the passes. A pass slowed down by a saturated API server (5–17 s while Kueue's large-scale
    runner creates 50,000 Workloads) still backs off as long as it took: in the two runs that rested less (no
    back-off; twice the pass's CPU time), the runner's recorder fell behind on the saturated machine and dropped
    26,611 and 47,590 events."""
    busy = max(0.0, elapsed - waited)
    rest = min(busy * options.pass_rest, max(fill - busy, busy))
    return max(options.pass_interval - elapsed, rest - waited, 0.0)


SPREAD = 2.0  # how many mean deviations past the mean span `ahead` covers: a refill lost is lost for good
SLOW_ANSWERS = 1.0  # seconds the API server took to answer a pass's admissions (past their tokens): saturated


class Pace:
    """The last passes' timings that the next pass's cap and rest depend on; told when a pass issues its
    admissions, when they are answered, when the pass ends, and when the loop idles (monotonic seconds), so the
    pacing runs the same on a test's clock.

    The span `ahead` covers — a pass's time to its issue plus the time from there to the next issue — is not known
    when the pass starts, and passes vary (±50 % on a busy machine): sized to the mean it still loses the refill of
    every longer one (44 of 50 admissions a second in a large-scale run on a slowed machine). So the pass expects
    the mean plus `SPREAD` mean deviations, both smoothed as TCP smooths its round-trip time (Jacobson: gains 1/8
    and 1/4): regular fast passes still write nothing ahead, irregular slow ones cover most of their spread.

    Nothing goes ahead after a pass whose admissions the API server took `SLOW_ANSWERS` or more to answer, and the
    samples start over: the server, not the loop, is then what is slow, and more writes in flight only queue
    there (Kueue's large-scale runner saturating it with 50,000 creations: a pass of 200 writes took 37 s where
    passes of 100 took 4–9 s, and the back-off after it another 33 s without an admission)."""

    def __init__(self, options: LoopOptions) -> None:
        self.options = options
        self.busy = 0.0  # the last pass's time less its `token_wait` (`admission_cap`)
        self.token_wait = 0.0  # how long the last pass's admissions waited for their tokens
        self._issued: float | None = None  # the last issue, while every pass since work waited has issued
        self._decide = 0.0  # seconds from the last issuing pass's start to its issue
        self._span: float | None = None  # smoothed span (None: no sample since passes last issued in a row)
        self._spread = 0.0  # smoothed deviation of the span
        self.answer = 0.0  # how long the last pass's admissions took to be answered, past their tokens

    def expected_span(self) -> float | None:
        return None if self._span is None else self._span + SPREAD * self._spread

    def cap(self, banked: float | None, burst: int) -> int:
        """How many admissions the pass that starts now writes (``banked``: the Workload bucket's level, None
        without a bucket; no bucket, nothing ahead)."""
        slow = self.answer >= SLOW_ANSWERS
        extra = ahead(self.options.qps, burst, self.expected_span()) if banked is not None and not slow else 0
        self.token_wait = 0.0
        return admission_cap(banked, burst, self.options, self.busy, extra)

    def issue(self, at: float, started: float, batch: int, level: float | None) -> None:
        """The pass that started at ``started`` sends ``batch`` admissions at ``at`` with ``level`` tokens banked
        (None: no bucket). A pass that sends none ends the run of samples."""
        if not batch:
            self.idle()
            return
        if self._issued is not None:
            self._sample(self._decide + at - self._issued)
        self._issued, self._decide = at, at - started
        self.token_wait = token_wait(batch, level, self.options.qps) if level is not None else 0.0

    def answered(self, at: float) -> None:
        """The last of the admissions this pass issued was answered at ``at``. A slow answer ends the run of
        samples: spans measured while the server was saturated (passes and back-offs of 5–30 s) say nothing of
        the loop's own pace once it answers quickly again."""
        if self._issued is not None:
            self.answer = max(0.0, at - self._issued - self.token_wait)
            if self.answer >= SLOW_ANSWERS:
                self.idle()

    def idle(self) -> None:
        """The loop waits for a change (no work waiting for tokens): the next pass starts a new run of samples."""
        self._issued = self._span = None
        self._spread = 0.0

    def done(self, started: float, ended: float) -> None:
        self.busy = max(0.0, ended - started - self.token_wait)

    def rest(self, elapsed: float, fill: float) -> float:
        """`rest_after` the pass that just ended, ``elapsed`` seconds long."""
        return rest_after(elapsed, self.options, fill, self.token_wait)

    def _sample(self, span: float) -> None:
        if self._span is None:
            self._span, self._spread = span, 0.0
            return
        self._spread += (abs(self._span - span) - self._spread) / 4
        self._span += (span - self._span) / 8


__all__ = ["SLOW_ANSWERS", "SPREAD", "Pace", "admission_cap", "ahead", "rest_after", "token_wait"]
