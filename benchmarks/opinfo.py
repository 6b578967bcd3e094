"""The false-alarm benchmark over PyTorch's OpInfo database (op_db).

    python benchmarks/opinfo.py --backend aot_eager --out opinfo-aot      # every op, float32, CPU
    python benchmarks/opinfo.py --backend inductor --ops 'nn.functional.*' --limit 20
    python benchmarks/opinfo.py --device cuda --dtypes float32 float16 bfloat16 \\
        --backend inductor --workers 14 --deadline 540 --resume --out $OUT/cuda

Every op and variant in op_db, its first `--samples` samples, each through
`assert_compile_parity` at its default settings; opinfo_check.py classifies each outcome (pass,
eager-invalid, skip, unsupported, fallback, divergence, false-alarm, crash, timeout, died,
harness). Each (op, dtype) runs in a worker process with a time limit, so a hang or a segfault
costs one op, not the run. Records are appended to OUT/records.jsonl as they arrive (so a run cut
short keeps them, and --resume goes on from there); OUT/summary.json and OUT/summary.md give the
counts per class and every failure with its one-line reason.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

Task = tuple[int, str]  # (index in op_db, dtype name)


def _op_names() -> list[str]:
    from opinfo_check import full_name
    from torch.testing._internal.common_methods_invocations import op_db

    return [full_name(op) for op in op_db]


def select(
    names: Sequence[str], patterns: Sequence[str], limit: int | None, every: int
) -> list[int]:
    """Indices of the ops whose full name matches a pattern (all when none), every `every`-th."""
    chosen = [
        index
        for index, name in enumerate(names)
        if not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)
    ][::every]
    return chosen[:limit]


def _worker(conn: Connection, args: argparse.Namespace, threads: int) -> None:
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    import torch
    from opinfo_check import DTYPES, check_op
    from torch.testing._internal.common_methods_invocations import op_db

    torch.set_num_threads(threads)
    conn.send("ready")
    while (task := conn.recv()) is not None:
        index, label = task  # "float16", "float16-extremal" or "error_inputs"
        dtype, _, kind = label.partition("-")
        if label == "error_inputs":
            dtype, kind = "float32", label
        records = check_op(
            op_db[index], DTYPES[dtype], args.device, args.backend, args.samples, kind or "sample"
        )
        # A CUDA error (a device-side assert) poisons the process's context: retire the worker.
        retire = any("CUDA error" in record.reason for record in records)
        conn.send(([record.to_json() for record in records], retire))
        if retire:
            return


@dataclass
class _Slot:
    process: Any
    task: Task | None = None
    started: float = 0.0
    ready: bool = False


class Pool:
    """Worker processes fed one task at a time over pipes, so a stuck one can be killed alone."""

    def __init__(self, args: argparse.Namespace, names: list[str], write: Any) -> None:
        self.args, self.names, self.write = args, names, write
        self.context = multiprocessing.get_context("spawn")
        self.slots: dict[Connection, _Slot] = {}

    def _spawn(self) -> None:
        ours, theirs = self.context.Pipe()
        threads = max(1, (os.cpu_count() or 1) // self.args.workers)
        process = self.context.Process(
            target=_worker,
            args=(theirs, self.args, threads),
            daemon=True,
        )
        process.start()
        theirs.close()
        self.slots[ours] = _Slot(process)

    def _lost(self, conn: Connection, outcome: str, reason: str) -> None:
        slot = self.slots.pop(conn)
        if slot.process.is_alive():
            slot.process.kill()
        slot.process.join()
        if slot.task is not None:
            index, dtype = slot.task
            self.write(
                [
                    {
                        "op": self.names[index],
                        "dtype": dtype,
                        "device": self.args.device,
                        "backend": self.args.backend,
                        "sample": -1,
                        "outcome": outcome,
                        "reason": reason.format(code=slot.process.exitcode),
                        "evidence": "",
                        "seconds": round(time.monotonic() - slot.started, 3),
                    }
                ]
            )

    def run(self, tasks: list[Task], deadline: float) -> list[Task]:
        """Run tasks until done or the deadline (plus grace); return those not run."""
        pending = list(reversed(tasks))
        for _ in range(min(self.args.workers, len(tasks))):
            self._spawn()
        while self.slots and (
            (pending and time.monotonic() < deadline)
            or any(s.task is not None for s in self.slots.values())
        ):
            for conn, slot in self.slots.items():
                if slot.ready and slot.task is None and pending and time.monotonic() < deadline:
                    slot.task, slot.started = pending.pop(), time.monotonic()
                    conn.send(slot.task)
            for conn in wait(list(self.slots), timeout=1.0):
                slot = self.slots[conn]
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    if not slot.ready:
                        raise RuntimeError("a worker died while starting: see its stderr") from None
                    self._lost(conn, "died", "the worker process died (exit code {code})")
                    self._spawn()
                    continue
                if message == "ready":
                    slot.ready = True
                    continue
                records, retire = message
                self.write(records)
                slot.task = None
                if retire:
                    self.slots.pop(conn).process.join(timeout=10)
                    self._spawn()
            now = time.monotonic()
            for conn, slot in list(self.slots.items()):
                if slot.task is not None and now > deadline + self.args.grace:
                    pending.append(slot.task)  # cut off by the deadline: not run, not recorded
                    slot.task = None
                    slot.process.kill()
                elif slot.task is not None and now - slot.started > self.args.timeout:
                    self._lost(
                        conn, "timeout", f"ran past the per-op limit of {self.args.timeout}s"
                    )
                    self._spawn()
        for conn in list(self.slots):
            slot = self.slots.pop(conn)
            if slot.ready and slot.process.is_alive():
                conn.send(None)
            slot.process.join(timeout=10)
            if slot.process.is_alive():
                slot.process.kill()
        return list(reversed(pending))


def summarize(records: list[dict[str, Any]], not_run: int, command: str) -> dict[str, Any]:
    from opinfo_check import FAILURES, OUTCOMES

    counts = Counter(r["outcome"] for r in records)
    by_dtype: dict[str, Counter[str]] = {}
    for r in records:
        by_dtype.setdefault(r["dtype"], Counter())[r["outcome"]] += 1
    return {
        "command": command,
        "ops": len({r["op"] for r in records}),
        "records": len(records),
        "not_run": not_run,
        "counts": {o: counts[o] for o in OUTCOMES},
        "counts_by_dtype": {d: {o: c[o] for o in OUTCOMES} for d, c in sorted(by_dtype.items())},
        "failures": sorted(
            (r for r in records if r["outcome"] in FAILURES),
            key=lambda r: (FAILURES.index(r["outcome"]), r["op"], r["dtype"], r["sample"]),
        ),
    }


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        f"`{summary['command']}`",
        "",
        f"{summary['ops']} ops, {summary['records']} records, {summary['not_run']} (op, dtype) "
        "pairs not run (deadline)",
        "",
        "| dtype | " + " | ".join(summary["counts"]) + " |",
        "|---" * (len(summary["counts"]) + 1) + "|",
    ]
    rows = {**summary["counts_by_dtype"], "all": summary["counts"]}
    lines += [f"| {d} | " + " | ".join(str(v) for v in c.values()) + " |" for d, c in rows.items()]
    lines += [
        "",
        "| class | op | dtype | sample | reason | evidence |",
        "|---|---|---|---|---|---|",
    ]
    for r in summary["failures"]:
        cells = [r["outcome"], r["op"], r["dtype"], str(r["sample"]), r["reason"], r["evidence"]]
        lines.append(
            "| " + " | ".join(c.replace("|", "/").replace("\n", " ") for c in cells) + " |"
        )
    return "\n".join(lines) + "\n"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", default="aot_eager", help="eager, aot_eager or inductor")
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--dtypes",
        nargs="*",
        default=["float32"],
        choices=["float32", "float16", "bfloat16"],
        help="sample dtypes (none with --error-inputs: error inputs only)",
    )
    parser.add_argument("--samples", type=int, default=2, help="first N samples per op and dtype")
    parser.add_argument(
        "--extremal",
        action="store_true",
        help="also the first N of each op's reference_inputs holding inf, nan or |x| > 1e4",
    )
    parser.add_argument(
        "--error-inputs",
        action="store_true",
        help="also the first N of each op's error_inputs (eager must raise): exception parity",
    )
    parser.add_argument("--ops", nargs="*", default=[], help="fnmatch patterns on op.variant names")
    parser.add_argument("--limit", type=int, default=None, help="at most this many ops")
    parser.add_argument("--every", type=int, default=1, help="every K-th selected op (a spread)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="per (op, dtype), seconds")
    parser.add_argument(
        "--deadline",
        type=float,
        default=None,
        help="stop starting ops after this many seconds, then summarize",
    )
    parser.add_argument(
        "--grace",
        type=float,
        default=30.0,
        help="after the deadline, ops still running get this long, then count as not run",
    )
    parser.add_argument("--resume", action="store_true", help="skip (op, dtype) pairs in OUT")
    parser.add_argument("--out", type=Path, default=Path("opinfo-results"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    started = time.monotonic()
    deadline = started + args.deadline if args.deadline else float("inf")
    names = _op_names()
    chosen = select(names, args.ops, args.limit, args.every)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "records.jsonl"
    done: set[tuple[str, str]] = set()
    if args.resume and path.exists():
        done = {(r["op"], r["dtype"]) for r in map(json.loads, path.read_text().splitlines())}
    elif path.exists():
        path.unlink()
    kinds = [
        *args.dtypes,
        *([f"{d}-extremal" for d in args.dtypes] if args.extremal else []),
        *(["error_inputs"] if args.error_inputs else []),
    ]
    tasks = [(i, d) for i in chosen for d in kinds if (names[i], d) not in done]
    print(f"{len(tasks)} (op, dtype) pairs to run on {args.device} with {args.backend}", flush=True)
    with path.open("a") as sink:

        def write(records: list[dict[str, Any]]) -> None:
            for record in records:
                sink.write(json.dumps(record) + "\n")
                if record["outcome"] not in ("pass", "skip", "eager-invalid"):
                    print(
                        f"{record['outcome']:12} {record['op']} {record['dtype']} "
                        f"#{record['sample']}: {record['reason']}",
                        flush=True,
                    )
            sink.flush()

        not_run = Pool(args, names, write).run(tasks, deadline)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    command = "python benchmarks/opinfo.py " + " ".join(sys.argv[1:] if argv is None else argv)
    summary = summarize(records, len(not_run), command)
    summary["seconds"] = round(time.monotonic() - started, 1)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (args.out / "summary.md").write_text(markdown(summary))
    print(
        json.dumps(
            {"counts": summary["counts"], "not_run": len(not_run), "seconds": summary["seconds"]}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
