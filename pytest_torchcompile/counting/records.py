"""Plain, JSON-able records that travel from a test to its report, the summary and the budget file.

They are TypedDicts (not classes) so pytest-xdist can ship them from workers to the controller
as ordinary report attributes, and `report.py` and `budgets.py` can stay free of torch. Each event
record's one-line text lives here too, so that both of them read it from one place and the
imports run one way: records <- budgets <- report.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class GraphRecord(TypedDict):
    """One graph handed to the backend, with the reason the graph before it ended."""

    frame: str  # user frame (code name, file:line) the graph was captured from
    ops: int  # call_function/call_method/call_module nodes in the graph
    reason: str  # Dynamo's compile_subgraph_reason for this graph


class BreakRecord(TypedDict):
    """One graph break (or a frame Dynamo gave up on), as the user should read it."""

    reason: str
    location: str  # "path/to/file.py:123" of user code, or "" when unknown


class RecompileRecord(TypedDict):
    """One user-level recompile of a frame, with the guard that failed."""

    frame: str
    reason: str
    category: str  # size, stride, dtype, device, requires_grad, grad_mode, python_value, other


class FallbackRecord(TypedDict):
    """A frame that ran eagerly although it was meant to be compiled."""

    frame: str
    kind: str  # recompile_limit, skipped, suppressed_error
    reason: str


class LeafError(TypedDict):
    """The largest difference seen in one compared leaf, over every call of the checker."""

    leaf: str  # e.g. "output[1]['logits']", "grad of parameter 'W_q.weight'"
    max_abs: float
    max_rel: float


class CompileCounts(TypedDict):
    """What accounting counted for one test, across every checker call and Hypothesis example."""

    graphs: list[GraphRecord]
    graph_breaks: list[BreakRecord]
    recompiles: list[RecompileRecord]
    fallbacks: list[FallbackRecord]
    cudagraph_rerecords: list[str]  # "<function> of <frame> [compile id]: why", one per re-record
    cudagraph_skips: list[str]  # Inductor's reasons for running a graph without CUDA graphs
    compile_time_s: float


class ModuleCallRecord(TypedDict):
    """Intercepted module calls of one test (--compile-parity=all) with one outcome and reason;
    or function calls (--compile-parity-functions), which say `kind: function`."""

    module: str  # qualified class name, e.g. "timm.models.resnet.ResNet", or function name
    outcome: str  # checked, checked partly, skipped, diverged
    reason: str  # why skipped or partly, or the differing leaves; "" when checked
    calls: int
    kind: NotRequired[str]  # "function" for a function's calls; absent for a module class's


class CoverageRecord(TypedDict):
    """Module classes one intercepted test constructed and called, and what its checks reached."""

    nodeid: str
    constructed: list[str]  # qualified names of the classes constructed in setup and body
    calls: list[ModuleCallRecord]  # its outermost module calls, by class, outcome and reason
    inside_checked: list[str]  # classes of submodules of the calls it checked
    # --compile-parity-functions: the functions its checked calls made, and the functions
    # wrapped and not wrapped (each listed by the first test of a process that found it).
    inside_checked_functions: NotRequired[list[str]]
    functions: NotRequired[list[str]]
    unwrapped: NotRequired[dict[str, str]]  # qualified name -> why it is not wrapped


class CostRecord(TypedDict):
    """Where one test's checking time went (costs.PARTS -> seconds), and the compiles the
    checker added beyond the user's own (reason -> count)."""

    seconds: dict[str, float]
    added_compiles: dict[str, int]
    # Zero-change mode: checks by how their compiled side got its code (costs.CHECK_KINDS).
    checks: NotRequired[dict[str, int]]


class ParityRecord(TypedDict):
    """Everything the plugin knows about one parity test; rides on the pytest report."""

    nodeid: str
    device: str
    backend: str
    mode: str
    dynamic: str  # auto, true, false
    verdict: str  # passed, failed, skipped
    calls: int  # checker calls (over all Hypothesis examples)
    counts: CompileCounts
    largest_errors: list[LeafError]
    wall_time_s: float
    notes: NotRequired[list[str]]  # what the checker did that the reader should know
    # Leaves outside the plain tolerance that a named rule excused, by rule (each has its note).
    excused: NotRequired[dict[str, int]]
    # Leaves the checker could not judge ("checked partly"), by why: control, uncomparable.
    not_judged: NotRequired[dict[str, int]]
    costs: NotRequired[CostRecord]  # where the test's checking time went
    # Hypothesis examples rejected because eager raised on them (and compiled raised alike).
    rejected: NotRequired[int]
    first_rejection: NotRequired[str]  # the first such error, "Type: message"
    # After a parity failure (triage.py): the stage line, repro.py's path, the artifacts directory.
    stage: NotRequired[str]
    repro: NotRequired[str]
    artifacts: NotRequired[str]
    triage_time_s: NotRequired[float]
    module_calls: NotRequired[list[ModuleCallRecord]]  # intercepted tests only


# The start of the skip reason of an intercepted call whose signature a check already covered.
ALREADY_CHECKED = "already checked in this session"


# --- one line per event, shared by the report section and the budget failure text ---


def graph_line(item: GraphRecord) -> str:
    return f"{item['frame']}, {item['ops']} ops, ended by: {item['reason']}"


def break_line(item: BreakRecord) -> str:
    return f"{item['location'] or '<unknown location>'}: {item['reason']}"


def recompile_line(item: RecompileRecord) -> str:
    return f"[{item['category']}] {item['frame']}: {item['reason']}"


def fallback_line(item: FallbackRecord) -> str:
    return f"[{item['kind']}] {item['frame']}: {item['reason']}"
