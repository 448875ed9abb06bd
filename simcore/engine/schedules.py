"""Pipeline schedules as task orders, and their closed forms.

A schedule gives, for every pipeline rank, the ordered list of tasks it runs in one optimizer step.
A task is ``(kind, chunk, microbatch)`` with kind ``F`` (forward), ``B`` (backward; input and weight
gradients together, or input gradients only when the schedule splits them) or ``W`` (weight
gradients, zero-bubble schedules). Rank ``r`` holding chunk ``c`` is virtual stage ``c * p + r``
(interleaved placement, Megatron-LM); DualPipe places its two directions as chunks 0 and 1 with the
second direction's stages reversed.

The discrete-event engine executes these orders; :func:`pipeline_time` is the matching closed form,
the one the analytic engine evaluates over numpy grids, and :func:`bubble_fraction` its idle share for
uniform stages (see docs/parallelism.md, pipeline schedules).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import numpy as np

Task = tuple[str, int, int]
"""(kind F|B|W, chunk, microbatch)"""

Schedule = Literal["gpipe", "1f1b", "interleaved", "zero_bubble", "dualpipe"]
SCHEDULES: tuple[str, ...] = ("gpipe", "1f1b", "interleaved", "zero_bubble", "dualpipe")


def gpipe(p: int, m: int, rank: int) -> list[Task]:
    return [("F", 0, i) for i in range(m)] + [("B", 0, i) for i in reversed(range(m))]


def one_f_one_b(p: int, m: int, rank: int) -> list[Task]:
    warm = min(p - rank - 1, m)
    order: list[Task] = [("F", 0, i) for i in range(warm)]
    f, b = warm, 0
    while f < m:
        order.append(("F", 0, f))
        f += 1
        order.append(("B", 0, b))
        b += 1
    order.extend(("B", 0, i) for i in range(b, m))
    return order


def interleaved(p: int, m: int, rank: int, v: int) -> list[Task]:
    """Megatron-LM interleaved 1F1B: micro-batches in groups of ``p`` cycle through the ``v`` chunks."""
    if v == 1:
        return one_f_one_b(p, m, rank)
    fwd, bwd = _interleaved_tasks(p, m, v)
    total = m * v
    warm = min((p - rank - 1) * 2 + (v - 1) * p, total)
    steady = total - warm
    # warm-up forwards, then one forward and one backward alternating, then the remaining backwards
    mid: list[Task] = [("F", 0, 0)] * (2 * steady)
    mid[0::2] = fwd[warm:]
    mid[1::2] = bwd[:steady]
    return [*fwd[:warm], *mid, *bwd[steady:]]


@lru_cache(maxsize=16)
def _interleaved_tasks(p: int, m: int, v: int) -> tuple[tuple[Task, ...], tuple[Task, ...]]:
    """The forward and the backward tasks of interleaved 1F1B in the order every rank runs them
    (the same on every rank): the ``k``-th is chunk ``(k mod pv) // p`` (backward: counted from the
    last chunk) of micro-batch ``(k // pv) p + k mod p``."""
    fwd: list[Task] = []
    bwd: list[Task] = []
    for k in range(m * v):
        group, within = divmod(k, p * v)
        mb = group * p + within % p
        fwd.append(("F", within // p, mb))
        bwd.append(("B", v - 1 - within // p, mb))
    return tuple(fwd), tuple(bwd)


def zero_bubble_h1(p: int, m: int, rank: int) -> list[Task]:
    """ZB-H1 (Qi et al. 2024): 1F1B with backward split into B (input grads) and W (weight grads);
    W of the warm-up micro-batches is deferred to fill the cool-down bubble."""
    warm = min(p - rank - 1, m)
    order: list[Task] = [("F", 0, i) for i in range(warm)]
    f, b = warm, 0
    deferred: list[int] = []
    while f < m:
        order.append(("F", 0, f))
        f += 1
        order.append(("B", 0, b))
        if b < m - warm:
            order.append(("W", 0, b))
        else:
            deferred.append(b)
        b += 1
    for i in range(b, m):
        order.append(("B", 0, i))
        deferred.append(i)
        if deferred:
            order.append(("W", 0, deferred.pop(0)))
    order.extend(("W", 0, i) for i in deferred)
    return order


def dualpipe(p: int, m: int, rank: int) -> list[Task]:
    """A DualPipe-style bidirectional schedule (DeepSeek-V3): half the micro-batches flow from rank 0
    (chunk 0), half from rank p-1 (chunk 1); each rank alternates the two directions in a 1F1B
    pattern with split backward, so the two streams fill each other's bubbles."""
    half = max(m // 2, 1)
    down = one_f_one_b(p, half, rank)
    up = one_f_one_b(p, m - half, p - 1 - rank) if m - half > 0 else []
    out: list[Task] = []
    i = j = 0
    while i < len(down) or j < len(up):
        if i < len(down):
            k, c, mb = down[i]
            out.append((k, 0, mb))
            i += 1
        if j < len(up):
            k, c, mb = up[j]
            out.append((k, 1, half + mb))
            j += 1
    return out


def rank_order(schedule: str, p: int, m: int, rank: int, v: int = 1) -> list[Task]:
    """The ordered tasks of pipeline rank ``rank`` in one step."""
    if schedule == "gpipe":
        return gpipe(p, m, rank)
    if schedule == "1f1b":
        return one_f_one_b(p, m, rank)
    if schedule == "interleaved":
        return interleaved(p, m, rank, v)
    if schedule == "zero_bubble":
        return zero_bubble_h1(p, m, rank)
    if schedule == "dualpipe":
        return dualpipe(p, m, rank)
    raise ValueError(f"unknown schedule {schedule!r}")


def chunks(schedule: str, v: int) -> int:
    if schedule == "interleaved":
        return v
    if schedule == "dualpipe":
        return 2
    return 1


def virtual_stage(schedule: str, p: int, rank: int, chunk: int) -> int:
    """Position of (rank, chunk) along the micro-batch's path through the model."""
    if schedule == "dualpipe":
        return rank if chunk == 0 else p + (p - 1 - rank)
    return chunk * p + rank


def chain_length(schedule: str, p: int, v: int) -> int:
    """Virtual stages a micro-batch visits (DualPipe: one direction of ``p`` stages)."""
    return p if schedule == "dualpipe" else p * chunks(schedule, v)


def pipeline_time(
    schedule: Any,
    p: Any,
    m: Any,
    v: Any,
    stage_max: Any,
    stage_sum: Any,
    fwd: Any,
    bwd: Any,
    wgrad: Any,
    c: Any = 0.0,
) -> Any:
    """Seconds of the pipeline phase of one step (closed forms; numpy arrays broadcast).

    ``stage_max``: the slowest stage's forward + backward seconds per micro-batch; ``stage_sum``: the
    sum over the ``p`` stages; ``fwd``, ``bwd``: a middle stage's (its layers') forward and backward
    seconds, ``wgrad`` the weight-gradient share of ``bwd``; ``c``: one point-to-point transfer of a
    micro-batch's activations between stages; ``m`` micro-batches, ``v`` chunks per rank.

    * GPipe, 1F1B: ``(m-1) stage_max + stage_sum + 2(p-1)c``
    * interleaved 1F1B (``v > 1``): ``m stage_max + (p-1)/v (F+B) + 2 v (p-1) c``
    * ZB-H1: the 1F1B form less ``(p-1) W`` (weight gradients fill the cool-down)
    * DualPipe: ``m stage_max + (p/2-1)(F+B+B_in-3W) + 2(p-1)c`` with ``B_in = B - W`` (DeepSeek-V3
      report, with F&B = F+B)

    The discrete-event engine reproduces GPipe, 1F1B, interleaved and ZB-H1 on uncontended cases
    (tests/engine/test_bubble.py); DualPipe's simulated bubble is larger (docs/parallelism.md).
    """
    s = np.asarray(schedule)
    one_f_one_b_t = (m - 1) * stage_max + stage_sum + 2 * (p - 1) * c
    inter = m * stage_max + (p - 1) / v * (fwd + bwd) + 2 * v * (p - 1) * c
    zb = one_f_one_b_t - (p - 1) * wgrad
    b_in = bwd - wgrad
    dual = m * stage_max + np.maximum(p / 2 - 1, 0.0) * (fwd + bwd + b_in - 3 * wgrad) + 2 * (p - 1) * c
    return np.select(
        [s == "interleaved", s == "zero_bubble", s == "dualpipe"],
        [np.where(v > 1, inter, one_f_one_b_t), zb, dual],
        default=one_f_one_b_t,
    )


def bubble_fraction(schedule: Any, p: Any, m: Any, v: Any = 1, w_frac: Any = 1.0 / 3.0) -> Any:
    """Idle fraction of the pipeline, bubble / (bubble + useful), for uniform stages and free
    point-to-point transfers (numpy arrays broadcast).

    * GPipe, 1F1B and interleaved 1F1B: :func:`pipeline_time` with ``F + B = 1`` per stage, which gives
      ``(p-1) / (m + p - 1)`` and ``(p-1)/v / (m + (p-1)/v)``.
    * ZB-H1 and DualPipe: the papers' forms, a reference the engines do not reach (docs/parallelism.md,
      known gaps): ZB-H1's bubble shrinks from ``(p-1)(F+B)`` to ``(p-1)(F+B-2W)`` where ``W`` is the
      weight gradient share of the backward (``w_frac`` of F+B; 1/3 when backward is twice forward and
      split evenly); DualPipe's is ``(p/2 - 1)(F&B + B - 3W)`` (DeepSeek-V3 report), approximated with
      F&B = F+B.
    """
    p = np.asarray(p, dtype=float)
    m = np.asarray(m, dtype=float)
    v = np.asarray(v, dtype=float)
    s = np.asarray(schedule)
    t = pipeline_time(np.where(s == "interleaved", s, "1f1b"), p, m, v, 1.0, p, 1.0, 0.0, 0.0)
    paper = np.where(
        s == "zero_bubble",
        (p - 1) * (1 - 2 * w_frac),
        np.maximum(p / 2 - 1, 0) * (1 + (0.5 - 3 * w_frac) * 1.0),
    )
    unit = np.where((s == "zero_bubble") | (s == "dualpipe"), paper, t - m)
    unit = np.maximum(unit, 0.0)
    return unit / (m + unit)


def rank_queues(schedule: str, p: int, m: int, rank: int, v: int = 1) -> list[list[Task]]:
    """Task queues of a rank for the discrete-event engine, in priority order.

    A rank runs the head of the first queue whose dependencies are met. One queue reproduces the
    strict order of :func:`rank_order`. Zero-bubble keeps forward/backward in 1F1B order in the
    first queue and weight gradients in the second, run whenever the first is blocked (or first,
    once as many are deferred as 1F1B keeps micro-batches in flight). DualPipe keeps one queue per
    direction, each in split-backward 1F1B order, so either direction fills the other's bubbles.
    """
    if schedule == "zero_bubble":
        base = one_f_one_b(p, m, rank)
        return [base, [("W", 0, i) for i in range(m)]]
    if schedule == "dualpipe":
        half = max(m // 2, 1)

        def with_w(order: list[Task], chunk: int, offset: int) -> list[Task]:
            out: list[Task] = []
            for k, _c, mb in order:
                out.append((k, chunk, offset + mb))
                if k == "B":
                    out.append(("W", chunk, offset + mb))
            return out

        q0 = with_w(one_f_one_b(p, half, rank), 0, 0)
        q1 = with_w(one_f_one_b(p, m - half, p - 1 - rank), 1, half) if m > half else []
        return [q0, q1]
    return [rank_order(schedule, p, m, rank, v)]
