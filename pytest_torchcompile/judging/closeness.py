"""Element-wise closeness of two tensors, computed in float64 chunks, and its messages.

The numeric kernels every tolerance rule is built from: assert_close's element-wise test (with
NaN equal to NaN, infinities equal only to themselves, integers and bools exact), the same test
against a reference with a slack, distances and RMS over finite elements, the reduction-order
noise floor, and the batched plain verdicts that read a device once per call. Differences are
computed in float64 in chunks, so a large leaf never needs more than a few chunk-sized float64
temporaries.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from pytest_torchcompile import _compat

NOISE_ULPS = 128.0
"""Reduction-order noise the reference rule allows: this many ulps (of the accumulation precision)
of the leaf's RMS magnitude."""


CHUNK_ELEMENTS = 1 << 22  # elements per float64 working chunk (32 MiB per temporary)


def dense(t: Tensor) -> Tensor:
    """The strided, plain-valued form that values are compared in."""
    t = t.detach()
    if t.is_quantized:
        return t.dequantize()
    return t.to_dense() if t.layout != torch.strided else t


def num(x: float) -> str:
    return f"{x:.4g}"


@dataclass
class _Peak:
    """The greatest value seen and its flat index."""

    value: float = 0.0
    at: int = 0

    @staticmethod
    def unread(values: Tensor, start: int) -> list[Tensor]:
        """This chunk's greatest value and its flat index, not yet read from the device."""
        best, where = torch.max(values, 0)
        return [best.to(torch.float64), (where + start).to(torch.float64)]

    def take(self, best: float, at: float) -> None:
        """Fold in a chunk's read `unread` values: an earlier chunk keeps a tie."""
        if best > self.value:
            self.value, self.at = best, int(at)


@dataclass
class Scan:
    """Element-wise verdict of compiled against eager over one leaf."""

    numel: int
    mismatched: int = 0  # all failing elements
    value_mismatches: int = 0  # failing elements where both sides are finite
    first_placement: int = -1  # flat index of the first NaN/inf placement difference
    abs_all: _Peak = field(default_factory=_Peak)  # |c - e| over finite pairs
    rel_all: _Peak = field(default_factory=_Peak)  # |c - e| / |e| over finite pairs, e != 0
    abs_bad: _Peak = field(default_factory=_Peak)  # as abs_all, over value mismatches only
    rel_bad: _Peak = field(default_factory=_Peak)
    rescued: int = 0  # elements eager has non-finite where compiled agrees with a finite reference
    unjudged: int = 0  # compiled finite where eager and a reference no wider than it are not

    def add(self, row: list[float]) -> None:
        """Take in one chunk's row (`_row`), read on the host."""
        mismatched, value_mismatches, rescued, placed, first_placed, unjudged = row[:6]
        self.mismatched += int(mismatched)
        self.value_mismatches += int(value_mismatches)
        self.rescued += int(rescued)
        self.unjudged += int(unjudged)
        if self.first_placement < 0 and placed:
            self.first_placement = int(first_placed)
        for k, peak in enumerate((self.abs_all, self.rel_all, self.abs_bad, self.rel_bad)):
            peak.take(row[6 + 2 * k], row[7 + 2 * k])


def is_inexact(t: Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _chunks(*tensors: Tensor) -> Iterator[tuple[int, list[Tensor]]]:
    """Aligned slices of the flattened tensors (row-major, as indices are reported)."""
    flat = [t.reshape(-1) for t in tensors]
    for start in range(0, flat[0].numel(), CHUNK_ELEMENTS):
        yield start, [f[start : start + CHUNK_ELEMENTS] for f in flat]


def _widen(t: Tensor, device: torch.device) -> Tensor:
    return t.to(device=device, dtype=torch.complex128 if t.is_complex() else torch.float64)


def _finite_diff(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """x and y widened to float64/complex128, where both are finite, and |x - y| there (else 0)."""
    xw, yw = _widen(x, x.device), _widen(y, x.device)
    diff = (xw - yw).abs()
    if _narrower_than_wide(x) or _narrower_than_wide(y):
        # One pass: only a non-finite side makes the difference non-finite, as a value of a
        # narrower dtype is below half a unit of float64's largest finite value.
        finite = diff.isfinite()
    else:  # a difference of two finite float64 values may overflow
        finite = xw.isfinite() & yw.isfinite()
    if x.device.type == "cpu" and bool(finite.all()):  # the common case, without another pass
        return xw, yw, finite, diff
    return xw, yw, finite, torch.where(finite, diff, 0.0)


def _narrower_than_wide(t: Tensor) -> bool:
    return t.dtype not in (torch.float64, torch.complex128)


def rms(a: Tensor, b: Tensor) -> float:
    """Root mean square of a - b over elements where both are finite."""
    total, count = 0.0, 0
    for _, (x, y) in _chunks(a, b):
        _, _, finite, diff = _finite_diff(x, y)
        total += float((diff * diff).sum())
        count += int(finite.sum())
    return (total / count) ** 0.5 if count else 0.0


def distance(a: Tensor, b: Tensor) -> _Peak:
    """Greatest |a - b| over elements where both are finite."""
    peak = _Peak()
    for row in _read_rows(
        torch.stack(_Peak.unread(_finite_diff(x, y)[3], start)) for start, (x, y) in _chunks(a, b)
    ):
        peak.take(*row)
    return peak


def _read_rows(rows: Iterator[Tensor]) -> list[list[float]]:
    """Each chunk's row of statistics, read from the device in one host sync."""
    found = list(rows)
    return torch.stack(found).tolist() if found else []


def plainly_close(c: Tensor, e: Tensor, rtol: float, atol: float) -> tuple[float, float] | None:
    """(max_abs, max_rel) of a leaf that passes the plain tolerance with every element finite, as
    `scan_leaf` would find them; None when it may not, and `scan_leaf` must judge it.

    Most leaves of a passing call are equal (state the call did not change) or close and finite;
    this settles them with one equality test, or a few fused float64 ops per chunk and a single
    device sync, instead of the scan's per-element bookkeeping and dozens of syncs.
    """
    if e.dtype != torch.complex32 and torch.equal(c, e):  # complex32 has no equal kernel
        return 0.0, 0.0  # NaN never equals NaN here unless c is e, where the scan passes too
    if not is_inexact(e):
        return None
    return _verdict(*_closeness(c, e, rtol, atol).tolist()[:3])


Verdicts = tuple[tuple[float, float] | None, tuple[float, float] | None]
"""A leaf's (max_abs, max_rel) where it passes the plain tolerance, and where it passes that
tolerance widened by its noise floor; None where it may not (the scan then judges it)."""

MARGIN_ULPS = 8.0
"""A batch judged in the leaves' own dtype passes a leaf only this many ulps inside its bound
(and a smallest-normal below it): rounding there cannot turn a fail into a pass."""

_WORKING_DTYPES = {
    torch.float32: torch.float32,
    torch.float64: torch.float64,
    torch.float16: torch.float32,  # no reduction kernels are lost; float32 holds them exactly
    torch.bfloat16: torch.float32,
}


def plainly_close_all(pairs: list[tuple[Tensor, Tensor, float, float]]) -> list[Verdicts]:
    """For each (c, e, rtol, atol): `plainly_close`, and the same within the noise floor, with at
    most two host syncs per device in all and a number of kernel launches that does not grow
    with the number of leaves.

    Leaves alike in device, dtype and tolerance are judged together (`_Batch`): concatenated
    into one buffer per side, compared in their own dtype with per-leaf maxima by multi-tensor
    norms, about 20 launches per batch of up to CHUNK_ELEMENTS elements. What a batch cannot
    settle for sure (a leaf outside its bound or within MARGIN_ULPS of it, a NaN or an
    infinity, a complex, empty or larger leaf) is judged as before, leaf by leaf in float64. A leaf
    that passes within its floor but perhaps not without gets (None, verdict): the floor rule
    passes it just the same.
    """
    verdicts: list[Verdicts | None] = [None] * len(pairs)
    batches = _Batch.of(pairs)
    for batch, values in zip(batches, _read_flat([b.judge() for b in batches]), strict=True):
        for i, verdict in zip(batch.indices, batch.verdicts(values), strict=True):
            verdicts[i] = verdict
    rest = [i for i, verdict in enumerate(verdicts) if verdict is None]
    for i, verdict in zip(rest, leaf_by_leaf([pairs[i] for i in rest]), strict=True):
        verdicts[i] = verdict
    return [verdict or (None, None) for verdict in verdicts]


def leaf_by_leaf(pairs: list[tuple[Tensor, Tensor, float, float]]) -> list[Verdicts]:
    """`plainly_close_all` in float64, leaf by leaf (in chunks): whether each differs at all and,
    for inexact ones, the fused verdicts, read in one host sync per device."""
    unread = []
    for c, e, rtol, atol in pairs:
        differs = (c != e).any()[None].to(torch.float64)
        if is_inexact(e):
            fused = _closeness(c, e, rtol, atol, floor=_floor_of(e, e.dtype))
            differs = torch.cat([differs, fused])
        unread.append(differs)
    verdicts: list[Verdicts] = []
    for pair, row in zip(pairs, _read_flat(unread), strict=True):
        if not row[0]:
            verdicts.append(((0.0, 0.0), (0.0, 0.0)))
        elif is_inexact(pair[1]):
            far, max_abs, max_rel, far_beyond_floor = row[1:]
            verdicts.append(
                (_verdict(far, max_abs, max_rel), _verdict(far_beyond_floor, max_abs, max_rel))
            )
        else:
            verdicts.append((None, None))
    return verdicts


def _read_flat(values: list[Tensor]) -> list[list[float]]:
    """Each 1-d tensor's values as Python floats, with one host sync per device."""
    by_device: dict[torch.device, list[int]] = {}
    for i, value in enumerate(values):
        by_device.setdefault(value.device, []).append(i)
    read: list[list[float]] = [[] for _ in values]
    for indices in by_device.values():
        flat = torch.cat([values[i].to(torch.float64) for i in indices]).tolist()
        for i in indices:
            read[i], flat = flat[: values[i].numel()], flat[values[i].numel() :]
    return read


@dataclass
class _Batch:
    """Leaves of one device, dtype and tolerance, judged in one fused pass."""

    indices: list[int]
    c: list[Tensor]
    e: list[Tensor]
    rtol: float
    atol: float

    @classmethod
    def of(cls, pairs: list[tuple[Tensor, Tensor, float, float]]) -> list[_Batch]:
        """The batches of `pairs`, each of up to CHUNK_ELEMENTS elements; complex leaves, empty
        ones and larger ones are in none (they are judged leaf by leaf, in chunks)."""
        open_batches: dict[tuple[Any, ...], _Batch] = {}
        batches: list[_Batch] = []
        for i, (c, e, rtol, atol) in enumerate(pairs):
            if e.is_complex() or not 0 < e.numel() <= CHUNK_ELEMENTS:
                continue
            key = (e.device, e.dtype, rtol, atol)
            batch = open_batches.get(key)
            if batch is None or batch.numel() + e.numel() > CHUNK_ELEMENTS:
                batch = open_batches[key] = cls([], [], [], rtol, atol)
                batches.append(batch)
            batch.indices.append(i)
            batch.c.append(c.reshape(-1))
            batch.e.append(e.reshape(-1))
        return batches

    def numel(self) -> int:
        return sum(t.numel() for t in self.e)

    def judge(self) -> Tensor:
        """Unread: for an exact dtype, whether any element differs; for a floating one, per leaf
        max |c - e|, max |c - e| / |e| (over e != 0), max of |c - e| minus the leaf's bound
        (atol + rtol * |e|, less the margin) or 0 where that is less, and the sum of e squared,
        in that order."""
        dtype = self.e[0].dtype
        work = _WORKING_DTYPES.get(dtype)
        if work is None:  # integers and bools: equal or not, the scan says how
            return (torch.cat(self.c) != torch.cat(self.e)).any()[None].to(torch.float64)
        e = torch.cat(self.e).to(work)
        d = torch.cat(self.c).to(work).sub_(e).abs_()
        # A NaN on either side (or inf - inf) is an infinite difference: the leaf is judged
        # leaf by leaf then, whatever a reduction kernel makes of a NaN.
        d.nan_to_num_(nan=math.inf, posinf=math.inf)
        sizes = [t.numel() for t in self.e]

        def peaks(values: Tensor, order: float = math.inf) -> Tensor:
            # Per-leaf norms of non-negative values (inf: the maximum) in multi-tensor kernels.
            # torch.segment_reduce gave one GPU block to each leaf and read the lengths back
            # to the host: a 1024-wide transformer's leaves took 16 ms of GPU time there.
            return torch.stack(_compat.foreach_norm(torch.split(values, sizes), order))

        squares = peaks(e, 2.0).square_()
        e.abs_()
        zero = e == 0
        scratch = torch.div(d, e)
        relative = peaks(scratch.masked_fill_(zero, 0.0))
        info = torch.finfo(work)
        keep = 1.0 - MARGIN_ULPS * info.eps
        bound = torch.mul(e, self.rtol * keep, out=scratch).add_(self.atol * keep - info.tiny)
        excess = peaks(torch.sub(d, bound, out=scratch).clamp_min_(0.0))
        return torch.cat([peaks(d), relative, excess, squares]).to(torch.float64)

    def verdicts(self, values: list[float]) -> list[Verdicts | None]:
        """Each leaf's verdicts from `judge`'s values; None where the batch cannot be sure."""
        if len(values) == 1:  # an exact dtype: all equal, or judged leaf by leaf
            return [((0.0, 0.0), (0.0, 0.0)) if not values[0] else None for _ in self.indices]
        n = len(self.indices)
        wide = self.e[0].dtype == torch.float64
        eps = torch.finfo(torch.float64 if wide else torch.float32).eps  # the floor's unit
        u = torch.finfo(_WORKING_DTYPES[self.e[0].dtype]).eps  # the batch's rounding unit
        found: list[Verdicts | None] = []
        for j, e in enumerate(self.e):
            max_abs, max_rel, excess, squares = values[j::n]
            floor = NOISE_ULPS * eps * math.sqrt(squares / max(e.numel(), 1))
            passed = (max_abs, max_rel)
            # Rounding moved |c - e| minus the bound by at most u * (excess + max_abs), and the
            # floor's sum of squares, summed in order at worst, by numel * u of itself.
            slack = excess * (1 + 2 * u) + 2 * u * max_abs
            if not (math.isfinite(max_abs) and math.isfinite(max_rel)):
                # A NaN or an infinity, or a relative difference past the working dtype's range
                # (a difference over a subnormal): the leaf-by-leaf pass, in float64, says how.
                found.append(None)
            elif excess <= 0:
                found.append((passed, passed))
            elif math.isfinite(floor) and slack <= floor * (1 - (e.numel() + 4) * u):
                found.append((None, passed))
            else:
                found.append(None)
        return found


@dataclass(frozen=True)
class Settled:
    """A leaf's plain verdict, computed ahead, and the exact pair and tolerances it was for."""

    c: Tensor
    e: Tensor
    rtol: float
    atol: float
    verdict: tuple[float, float] | None
    within_floor: tuple[float, float] | None

    def judges(self, c: Tensor, e: Tensor, rtol: float, atol: float) -> bool:
        views = [(t.data_ptr(), t.shape, t.stride(), t.dtype) for t in (c, e, self.c, self.e)]
        return (rtol, atol) == (self.rtol, self.atol) and views[:2] == views[2:]


def reads_wait(t: Any) -> bool:
    """Whether reading a value of `t` into Python waits for a device (not on the CPU)."""
    return isinstance(t, Tensor) and t.device.type != "cpu"


def plain_pair(e: Any, c: Any) -> bool:
    """Both plain dense tensors alike in shape, dtype and device: comparable value by value."""
    return (
        type(e) in _PLAIN_TENSORS
        and type(c) in _PLAIN_TENSORS
        and e.layout == c.layout == torch.strided
        and not (e.is_quantized or c.is_quantized)
        and (e.shape, e.dtype, e.device) == (c.shape, c.dtype, c.device)
        and e.dtype != torch.complex32  # no kernel compares it: left to plainly_close
    )


_PLAIN_TENSORS = (Tensor, torch.nn.Parameter)  # not subclasses, whose storage may be elsewhere


def _verdict(far: float, max_abs: float, max_rel: float) -> tuple[float, float] | None:
    # A NaN or infinity on either side makes some diff NaN or inf, and so max_abs.
    if far or not math.isfinite(max_abs):
        return None
    return max_abs, max_rel


def _closeness(
    c: Tensor, e: Tensor, rtol: float, atol: float, floor: Tensor | None = None
) -> Tensor:
    """[far, max_abs, max_rel, far_beyond_floor] of compiled against eager in float64 on their
    device, unread: far is 1 where some element is outside atol + rtol * |e| or not finite;
    far_beyond_floor the same with `floor` (a noise floor, unread) added to atol, else far."""
    verdicts = [torch.zeros(4, dtype=torch.float64, device=e.device)]  # an empty leaf is equal
    for _, (x, y) in _chunks(c, e):
        # In place where a temporary is the checker's own, so at most three chunk-sized
        # float64 temporaries are alive at once.
        xw, yw = _widen(x, x.device), _widen(y, x.device)
        diff = xw - yw
        diff = diff.abs() if diff.is_complex() else diff.abs_()
        del xw
        magnitude = yw.abs_() if yw is not y and not yw.is_complex() else yw.abs()
        del yw
        allowed = magnitude.mul(rtol).add_(atol)
        far = ~(diff <= allowed).all()
        far_beyond_floor = far if floor is None else ~(diff <= allowed.add_(floor)).all()
        max_abs = diff.amax()
        rel = diff.div_(magnitude).masked_fill_(magnitude == 0, 0.0)
        verdicts.append(
            torch.stack([far.to(rel.dtype), max_abs, rel.amax(), far_beyond_floor.to(rel.dtype)])
        )
    return torch.stack(verdicts).amax(0)


def scan_leaf(
    c: Tensor,
    e: Tensor,
    rtol: float,
    atol: float,
    *,
    reference: Tensor | None = None,
    slack: float = 0.0,
) -> Scan:
    """Compare compiled against eager element by element.

    Integers and bools must be equal. A floating element passes when both sides are the same
    NaN/inf, or both are finite and |c - e| <= atol + rtol*|e| (torch.isclose). With a
    reference `r` it also passes when compiled agrees with `r` rounded to the leaf's dtype:
    both finite and |c - r| <= atol + rtol*|r| + slack, or both non-finite and the kinds are
    the same; and where compiled and eager are both non-finite, of any kinds: eager overflowed
    or lost the value too, so it holds compiled to nothing there (with a finite `r`, both are
    wrong alike, as the program is in this dtype; with a non-finite one, the result is
    undefined). Where compiled is finite and eager and `r` are not, and `r` is no wider than
    the leaf (a float64 leaf), nothing can tell which side is right: such elements pass, and
    are counted as `unjudged` for the report to say so.
    """
    scan = Scan(e.numel())
    exact = not is_inexact(e)
    rows = []
    for start, chunk in _chunks(c, e) if reference is None else _chunks(c, e, reference):
        cw, ew, finite, diff = _finite_diff(chunk[0], chunk[1])
        rescued = torch.zeros((), dtype=torch.int64, device=cw.device)
        unjudged = torch.zeros((), dtype=torch.int64, device=cw.device)
        if exact:
            ok = chunk[0] == chunk[1]
        elif _all_finite(finite, e.dtype, None if reference is None else chunk[2]):
            # Every value finite (the common case, read on the CPU only, where it costs no
            # device sync): the same verdicts as below without the non-finite placements.
            ok = diff <= atol + rtol * ew.abs()
            if reference is not None:
                rw = _widen(chunk[2], cw.device)
                ok |= (cw - rw).abs() <= atol + rtol * rw.abs() + slack
        else:
            ok = torch.where(finite, diff <= atol + rtol * ew.abs(), same_nonfinite(cw, ew))
            if reference is not None:
                ok, rescued, unjudged = _by_reference(
                    cw, ew, chunk[2], ok, rtol, atol, slack, dtype=e.dtype
                )
        rows.append(_row(start, ok, finite, diff, ew, rescued, unjudged))
    for row in _read_rows(iter(rows)):
        scan.add(row)
    return scan


def _by_reference(
    cw: Tensor,
    ew: Tensor,
    r: Tensor,
    ok: Tensor,
    rtol: float,
    atol: float,
    slack: float,
    *,
    dtype: torch.dtype,
) -> tuple[Tensor, Tensor, Tensor]:
    """`scan_leaf`'s verdicts `ok` on a chunk with non-finite values (both sides widened, of a
    leaf of `dtype`), widened by the reference `r`; with them, how many elements compiled is
    rescued at (it agrees with a finite reference where eager is not finite) and how many
    cannot be judged (a reference no wider than the leaf, non-finite with eager)."""
    rw = _widen(r, cw.device)
    rounded = _widen(r.to(dtype), cw.device)  # the exact answer in the leaf's dtype
    c_finite, e_finite, r_finite = cw.isfinite(), ew.isfinite(), rounded.isfinite()
    close = (cw - rw).abs() <= atol + rtol * rw.abs() + slack
    agrees = torch.where(
        c_finite,
        r_finite & close,
        ~e_finite | (~r_finite & same_nonfinite(cw, rounded)),
    )
    rescued = (agrees & ~ok & ~e_finite & c_finite).sum()
    unjudged = torch.zeros((), dtype=torch.int64, device=cw.device)
    if r.dtype == dtype:  # no wider: an overflow only one side makes
        undecidable = ~ok & ~agrees & c_finite & ~e_finite & ~r_finite
        unjudged = undecidable.sum()
        agrees |= undecidable
    return ok | agrees, rescued, unjudged


def _row(
    start: int,
    ok: Tensor,
    finite: Tensor,
    diff: Tensor,
    ew: Tensor,
    rescued: Tensor,
    unjudged: Tensor,
) -> Tensor:
    """One chunk's counts and peaks, left on its device for `_read_rows` to read in one sync:
    a chunk whose flat indices start at `start`, and its verdicts `ok`."""
    bad = ~ok
    value_bad = bad & finite
    placement = (bad & ~finite).to(torch.uint8)
    magnitude = ew.abs()
    rel = diff / magnitude
    counts = [
        bad.sum(),
        value_bad.sum(),
        rescued,
        placement.amax(),
        placement.argmax() + start,
        unjudged,
    ]
    return torch.stack(
        [count.to(torch.float64) for count in counts]
        + _Peak.unread(diff, start)
        + _Peak.unread(torch.where(finite & (magnitude > 0), rel, 0.0), start)
        + _Peak.unread(torch.where(value_bad, diff, 0.0), start)
        + _Peak.unread(torch.where(value_bad, rel, 0.0), start)
    )


def _all_finite(finite: Tensor, dtype: torch.dtype, reference: Tensor | None) -> bool:
    """Whether both sides (`finite`: where both are), and the reference and it rounded to the
    leaf's `dtype`, are finite throughout; asked on the CPU only, where it costs no sync."""
    if finite.device.type != "cpu" or not bool(finite.all()):
        return False
    return reference is None or bool(reference.to(dtype).isfinite().all())


def same_nonfinite(x: Tensor, y: Tensor) -> Tensor:
    """Where x and y are the same NaN or the same infinity (or equal)."""
    return (x.isnan() & y.isnan()) | (x == y)


def noise_floor(r: Tensor, dtype: torch.dtype) -> float:
    """NOISE_ULPS ulps of the accumulation precision of `dtype`, times the rms of `r`'s finite
    elements: what reordering a reduction may cost a correct compiler on this leaf."""
    return float(_floor_of(r, dtype))


def _floor_of(r: Tensor, dtype: torch.dtype) -> Tensor:
    """`noise_floor` as a float64 tensor on `r`'s device, unread."""
    wide = dtype in (torch.float64, torch.complex128)
    eps = torch.finfo(torch.float64 if wide else torch.float32).eps
    total = torch.zeros((), dtype=torch.float64, device=r.device)
    count = torch.zeros((), dtype=torch.float64, device=r.device)
    for _, (x,) in _chunks(r):
        xw = _widen(x, x.device)
        finite = xw.isfinite()
        total += torch.where(finite, xw.abs() ** 2, 0.0).sum()
        count += finite.sum()
    return NOISE_ULPS * eps * (total / count.clamp_min(1)).sqrt()


def _unravel(flat: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        flat, rest = divmod(flat, size)
        index.append(rest)
    return tuple(reversed(index))


def at_index(flat: int, t: Tensor) -> str:
    """Where flat index `flat` lies in `t` (" at index (i, j)"); nothing for a scalar."""
    return f" at index {_unravel(flat, t.shape)}" if t.dim() else ""


def peak_text(peak: _Peak, t: Tensor) -> str:
    where = at_index(peak.at, t) if peak.value else ""  # a 0 is everywhere, not at the first index
    return f"greatest |difference| {num(peak.value)}{where}"


def nonfinite_text(a: Tensor, b: Tensor, names: tuple[str, str]) -> str:
    """Where a and b differ in NaN/inf, which a distance over finite pairs cannot show ("" if
    nowhere): without it, a leaf that fails only on NaN/inf placement reads "difference 0"."""
    count, first = 0, -1
    for start, (x, y) in _chunks(a, b):
        xw, yw, finite, _ = _finite_diff(x, y)
        differ = ~finite & ~same_nonfinite(xw, yw)
        count += int(differ.sum())
        if first < 0 and bool(differ.any()):
            first = start + int(differ.nonzero()[0, 0])
    if not count:
        return ""
    return (
        f" where both are finite; NaN/inf differ at {count} element(s), first{at_index(first, a)}: "
        f"{names[0]} {_element(a, first)}, {names[1]} {_element(b, first)}"
    )


def _element(t: Tensor, flat: int) -> Any:
    return t.reshape(-1)[flat].item()


def value_lines(scan: Scan, e: Tensor, c: Tensor, rtol: float, atol: float) -> list[str]:
    """assert_close-style statistics of a failing leaf: how many, how far, where, what allowed."""
    exact = rtol == 0 and atol == 0
    share = scan.mismatched / scan.numel
    lines = [f"  Mismatched elements: {scan.mismatched} / {scan.numel} ({share:.1%})"]
    if scan.first_placement >= 0:
        i = scan.first_placement
        lines.append(
            f"  NaN/inf in different places, first{at_index(i, e)}: "
            f"eager {_element(e, i)}, compiled {_element(c, i)}"
        )
    if scan.value_mismatches:
        for kind, peak, tol in (("absolute", scan.abs_bad, atol), ("relative", scan.rel_bad, rtol)):
            allowed = "" if exact else f" (up to {num(tol)} allowed)"
            lines.append(
                f"  Greatest {kind} difference: {num(peak.value)}{at_index(peak.at, e)}{allowed}"
            )
    if e.dim() == 0:
        lines.append(f"  eager {e.item()}, compiled {c.item()}")
    return lines
