"""Run an optimizer written in R (through rpy2) on the optimizer rank's main thread.

:class:`ROptimizer` sources an R script into a fresh environment and calls its
entry function as ``entry(evaluator, space, options)``, the way EQ/R handed R
algorithms the queues::

    emews_optimize <- function(evaluator, space, options) {
      while (evaluator$remaining() > 0) {
        n <- min(evaluator$workers(), evaluator$remaining())
        pts <- data.frame(x = runif(n, space$x$lower, space$x$upper))
        res <- evaluator$map(pts)          # params columns + id, loss, objective, status, error
      }
      list(best = min(res$loss))           # any value; kept as ROptimizer.value
    }

Options: an entry function may declare its options as the default of its ``options`` argument,
``function(evaluator, space, options = list(batch = 4L, spread = 0.5))``: the run then gets those
defaults under the options given, and ``emews check`` / ``emews launch`` refuse an option it does
not declare (``seed`` is always taken) in one line naming ``optimizer.options.NAME`` and the
declared names (R reads the script in a child process then). The declaration may say the values
allowed (:class:`DeclaredOption`): ``mode = c("fast", "slow")`` takes one of them, the first the
default; ``width = emews_option(2L, min = 1L, integer = TRUE)`` a number of at least ``min``, an
integer. Without a default any option passes.

The R-side ``evaluator`` is a list of functions:

``put(points) -> ids``, ``get(n = 1, timeout = NULL, more_room = NULL) -> results``,
``map(points) -> results`` (in order), ``remaining()``, ``pending()``,
``workers()``, ``capacity()`` (the tasks the workers can hold now), ``room(own)`` (for an
algorithm whose own count of evaluations outstanding is ``own``: ``list(in_flight, propose,
capacity)``, how many to keep outstanding, with pools at least what they can hold, how many to
propose now, and the capacity read first; ``get(1, more_room = room$capacity)`` returns, maybe
with no result, once a pool joins: Python's ``Evaluator.room``), ``seed()``, ``direction()``,
``history()`` (the earlier runs' results
when the run resumes an experiment, in the results format below: pass them to your
algorithm as its initial design, with their losses, before proposing), ``log(..., level = "info")``
(to Python's logging) and ``set_info(key, value)`` (to ``ROptimizer.info``).

``points`` is a data.frame with one column per parameter (or a list of named
lists, one per point); constant parameters may be left out. Results come back
as a data.frame: ``id`` (integer), one column per parameter, ``loss`` (double,
always minimized, ``Inf`` when the evaluation failed), ``objective`` (double,
``NA`` when none), ``status`` ("ok", "failed", "crashed", "timeout") and
``error`` (character, ``NA`` when none).

Types at the boundary: int parameters are R integers, floats are doubles,
categorical / ordered / constant values keep their element type (character,
integer, double or logical; character when the values mix types; a null is
``NA``, and ``NA`` back is null where the parameter's values hold one). Values
coming back from R are matched to the space's own values (``2`` to ``2L``,
``"TRUE"`` to ``True``, factors by their labels) and then checked by
:meth:`emews.core.space.Space.validate` inside ``Evaluator.put``.

``space`` arrives as a named list of parameter descriptions
(``list(name, type = "int"|"float"|"categorical"|"ordered"|"constant",
lower, upper, log, values, value)``). Helpers available to every script:
``emews_param_set(space)`` builds a ParamHelpers ParamSet over the free
parameters in an encoded form (log scales as numeric log ranges, ordered as
integer ranks, categorical as discrete) and ``emews_decode(space, df)`` maps
rows of that form back to points of the space.

Errors: a Python exception raised by an evaluator function (``BudgetExhausted``
from ``put``, an invalid point ...) is signalled in R as a condition of class
``emews_budget_exhausted`` / ``emews_invalid_point`` / ``emews_python_error``
(all also ``emews_error``), so R code may ``tryCatch`` it; if it is not caught
the original Python exception is re-raised from ``run``. Any other R error
becomes :class:`RError` carrying R's message, the failing call and the R call
stack (with file:line where R kept source references). R warnings go to the
``emews.contrib.rbridge`` logger.

R is single threaded: ``run`` refuses to start off the main thread. Deep R
recursion overflows the C stack and can kill the process; R code run here
should iterate, not recurse deeply.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import struct
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emews.core.check_cache import keep, kept
from emews.core.code_files import code_fingerprint
from emews.core.errors import EmewsError, OptionError, did_you_mean
from emews.core.evaluator import BudgetExhausted, Room
from emews.core.optimizer import Optimizer
from emews.core.space import Categorical, Constant, Float, Int, Space, registered, to_builtin

if TYPE_CHECKING:
    from emews.core.evaluator import Evaluator
    from emews.core.results import Result

log = logging.getLogger("emews.contrib.rbridge")

#: result columns added next to the parameter columns
RESULT_COLUMNS = ("id", "loss", "objective", "status", "error")

INSTALL_HINT = (
    "install R and rpy2 with tools/install-r.sh and pip install -e '.[r]' (rpy2>=3.5,<3.6 for Debian's R 4.2)"
)


class RUnavailable(EmewsError, RuntimeError):
    """R or rpy2 cannot be loaded."""


class RError(EmewsError, RuntimeError):
    """An error raised by R code, with R's message, the failing call and the R call stack."""

    def __init__(
        self,
        message: str,
        *,
        call: str | None = None,
        trace: Sequence[str] = (),
        classes: Sequence[str] = (),
        script: str | None = None,
    ) -> None:
        self.r_message = message
        self.call = call
        self.trace = list(trace)
        self.classes = list(classes)
        self.script = script
        text = f"R error: {message}"
        if call:
            text += f"\n  in call: {call}"
        if script:
            text += f"\n  script: {script}"
        if self.trace:
            text += "\n  R traceback (innermost last):\n" + "\n".join(f"    {line}" for line in self.trace)
        super().__init__(text)


# --------------------------------------------------------------------------------------------
# R side helpers, defined once per process in an environment whose parent is globalenv()

#: the R side: helper functions, evaluated once per process (the file's value is their environment)
PRELUDE_FILE = Path(__file__).with_name("rbridge.R")

_helpers: Any = None  # the helpers environment, created on first use


def _r() -> tuple[Any, Any]:
    """Import rpy2 (initialising R in this process) and return ``(rinterface, robjects)``.

    rpy2 prepends R's and the system's library folders to ``LD_LIBRARY_PATH`` in
    ``os.environ``. This process's loader never reads it again, but every program
    started later would: a Python of its own (pyenv, a venv) then loads the
    system's libpython and cannot find its packages. So the variable is put back.
    Starting R on the main thread, rpy2 also sets SIGINT's handler to Python's default
    (``KeyboardInterrupt``), over the process's own (a rank's clean stop, runtime/interrupt.py):
    it is put back too, so Ctrl-C stops an R optimizer's run as any other's.
    """
    saved = os.environ.get("LD_LIBRARY_PATH")
    on_main = threading.current_thread() is threading.main_thread()
    sigint = signal.getsignal(signal.SIGINT) if on_main else None
    try:
        import rpy2.rinterface as ri
        import rpy2.robjects as ro

        ri.initr_simple()
    except ImportError as exc:
        raise RUnavailable(f"rpy2 is not importable ({exc}); {INSTALL_HINT}") from exc
    except Exception as exc:  # rpy2 found no usable R
        raise RUnavailable(f"R cannot be started through rpy2 ({type(exc).__name__}: {exc}); {INSTALL_HINT}") from exc
    finally:
        if saved is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = saved
        if sigint is not None:  # None: a handler not set from Python, which rpy2 leaves alone too
            signal.signal(signal.SIGINT, sigint)
    return ri, ro


def helpers() -> Any:
    """The R environment holding the bridge's helper functions (created once)."""
    global _helpers
    if _helpers is None:
        ri, _ = _r()
        _helpers = ri.evalr(PRELUDE_FILE.read_text(encoding="utf-8"))
    return _helpers


def require_main_thread(what: str = "R") -> None:
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError(
            f"{what} must run on the main thread (R is single threaded and rpy2 "
            f"calls from another thread can crash the process); called from "
            f"thread {threading.current_thread().name!r}"
        )


# --------------------------------------------------------------------------------------------
# conversions


def _is_na_real(x: float) -> bool:
    # R's NA_real_ is a NaN whose low word is 1954
    return isinstance(x, float) and math.isnan(x) and struct.unpack("<Q", struct.pack("<d", x))[0] & 0xFFFFFFFF == 1954


def _scalar_py(x: Any) -> Any:
    ri, _ = _r()
    if x is ri.NA_Integer or x is ri.NA_Logical or x is ri.NA_Character:
        return None
    if isinstance(x, float) and _is_na_real(x):
        return None
    return x


def r_to_py(obj: Any, depth: int = 0) -> Any:
    """Best-effort conversion of an R value to plain Python (for return values and info)."""
    ri, _ = _r()
    if obj is ri.NULL or depth > 50:
        return None
    names = None
    try:
        if obj.names is not ri.NULL:
            names = [str(n) for n in obj.names]
    except (AttributeError, TypeError):
        names = None
    if isinstance(obj, ri.ListSexpVector):
        items = [r_to_py(v, depth + 1) for v in obj]
        return dict(zip(names, items, strict=False)) if names else items
    if isinstance(obj, (ri.IntSexpVector, ri.FloatSexpVector, ri.StrSexpVector, ri.BoolSexpVector)):
        rclass = list(obj.rclass) if obj.rclass is not ri.NULL else []
        if "factor" in rclass:
            levels = [str(s) for s in obj.do_slot("levels")]
            values = [None if v is ri.NA_Integer else levels[v - 1] for v in obj]
        else:
            values = [_scalar_py(v) for v in obj]
            if isinstance(obj, ri.BoolSexpVector):
                values = [None if v is None else bool(v) for v in values]
        if names:
            return dict(zip(names, values, strict=False))
        return values[0] if len(values) == 1 else values
    return repr(obj)


def _element_kind(values: Sequence[Any]) -> str:
    if all(isinstance(v, bool) for v in values):
        return "logical"
    if all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**31 - 1 for v in values):
        return "integer"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return "double"
    return "character"


def _r_vector(kind: str, values: Sequence[Any]) -> Any:
    ri, _ = _r()
    if kind == "logical":
        return ri.BoolSexpVector([ri.NA_Logical if v is None else bool(v) for v in values])
    if kind == "integer":
        return ri.IntSexpVector([ri.NA_Integer if v is None else int(v) for v in values])
    if kind == "double":
        return ri.FloatSexpVector([ri.NA_Real if v is None else float(v) for v in values])
    return ri.StrSexpVector([ri.NA_Character if v is None else str(v) for v in values])


def _r_room(room: Room) -> Any:
    """:meth:`Evaluator.room`'s answer as R's ``list(in_flight, propose, capacity)``."""
    return _named_list(
        {name: _r_vector("integer", [getattr(room, name)]) for name in ("in_flight", "propose", "capacity")}
    )


def _named_list(items: Mapping[str, Any]) -> Any:
    ri, _ = _r()
    lst = ri.ListSexpVector(list(items.values()))
    lst.do_slot_assign("names", ri.StrSexpVector([str(k) for k in items]))
    return lst


def py_to_r(value: Any, depth: int = 0) -> Any:
    """Convert plain Python data (options, info) to R: dicts become named lists."""
    ri, _ = _r()
    value = to_builtin(value)
    if depth > 50:
        raise ValueError("value nested too deeply to pass to R")
    if value is None:
        return ri.NULL
    if isinstance(value, (bool, int, float, str)):
        return _r_vector(_element_kind([value]), [value])
    if isinstance(value, Mapping):
        return _named_list({str(k): py_to_r(v, depth + 1) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        items = [to_builtin(v) for v in value]
        if items and all(isinstance(v, (bool, int, float, str)) for v in items):
            return _r_vector(_element_kind(items), items)
        return ri.ListSexpVector([py_to_r(v, depth + 1) for v in items])
    if isinstance(value, Path):
        return _r_vector("character", [str(value)])
    raise TypeError(f"cannot pass {type(value).__name__} to R")


def _int_column(dim: Int) -> str:
    return "integer" if max(abs(dim.lower), abs(dim.upper)) < 2**31 - 1 else "double"


def _range_fields(dim: Int | Float, kind: str) -> dict[str, Any]:
    return {
        "lower": _r_vector(kind, [dim.lower]),
        "upper": _r_vector(kind, [dim.upper]),
        "log": _r_vector("logical", [dim.log]),
    }


def _int_from_r(dim: Int, value: Any) -> Any:
    """A whole number from R as an int; a double beyond 2**53 may have rounded past a bound
    (2**63 - 1 is 2**63 as a double): it is brought back to the bound."""
    if isinstance(value, float) and value.is_integer():
        whole = int(value)
        if abs(value) > 2**53:  # rounded as a double: back to the bound it passed; a value within
            return min(max(whole, dim.lower), dim.upper)  # exact range stays as proposed (validated later)
        return whole
    return value


def _float_from_r(dim: Float, value: Any) -> Any:
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class RType:
    """How one dimension type crosses into R and back."""

    column: Callable[[Any], str]  # the R vector type of its values
    fields: Callable[[Any, str], dict[str, Any]]  # its entry's fields besides name and type
    from_r: Callable[[Any, Any], Any]  # a value that came from R, as the space's own


#: the R form of each dimension type (``Ordered`` uses ``Categorical``'s; its ``type`` is ``dim.kind``)
R_TYPES: dict[type, RType] = {
    Int: RType(_int_column, _range_fields, _int_from_r),
    Float: RType(lambda dim: "double", _range_fields, _float_from_r),
    Categorical: RType(
        lambda dim: _element_kind(dim.values),
        lambda dim, kind: {"values": _r_vector(kind, list(dim.values))},
        lambda dim, value: _match_choice(dim.values, value),
    ),
    Constant: RType(
        lambda dim: _element_kind([dim.value]),
        lambda dim, kind: {"value": _r_vector(kind, [dim.value])},
        lambda dim, value: _match_choice((dim.value,), value),
    ),
}


def _dimension_kind(dim: Any) -> str:
    return registered(R_TYPES, dim).column(dim)


def space_to_r(space: Space) -> Any:
    """The space as a named list of parameter descriptions."""
    entries = {}
    for name, dim in space.dimensions.items():
        rtype = registered(R_TYPES, dim)
        entry = {
            "name": _r_vector("character", [name]),
            "type": _r_vector("character", [dim.kind]),
            **rtype.fields(dim, rtype.column(dim)),
        }
        entries[name] = _named_list(entry)
    return _named_list(entries)


def results_to_r(space: Space, results: Sequence[Result]) -> Any:
    """Results as an R data.frame: id, one column per parameter, loss, objective, status, error."""
    cols: dict[str, Any] = {"id": _r_vector("integer", [r.id for r in results])}
    for name, dim in space.dimensions.items():
        cols[name] = _r_vector(_dimension_kind(dim), [to_builtin(r.params.get(name)) for r in results])
    cols["loss"] = _r_vector("double", [float(r.loss) for r in results])
    cols["objective"] = _r_vector(
        "double",
        [
            None if r.objective is None or not isinstance(r.objective, (int, float)) else float(r.objective)
            for r in results
        ],
    )
    cols["status"] = _r_vector("character", [getattr(r.status, "value", str(r.status)) for r in results])
    cols["error"] = _r_vector("character", [r.error for r in results])
    return helpers()[".emews_df"](_named_list(cols))


def _canonical(dim: Any, value: Any) -> Any:
    """Map a value that came from R onto the space's own value where one matches."""
    return registered(R_TYPES, dim).from_r(dim, value)


def _match_choice(choices: Sequence[Any], value: Any) -> Any:
    """The choice ``value`` (from R) stands for: same type first, then ``"TRUE"``, numbers, text."""
    for v in choices:  # exact (type-aware) match first
        if type(v) is type(value) and v == value:
            return v
    for v in choices:
        if isinstance(v, bool) or isinstance(value, bool):
            if isinstance(value, str) and isinstance(v, bool) and value.upper() in ("TRUE", "FALSE"):
                if (value.upper() == "TRUE") == v:
                    return v
            continue
        if isinstance(v, (int, float)) and isinstance(value, (int, float)) and v == value:
            return v
        if isinstance(value, str) and value == str(v):
            return v
    return value


def points_from_r(space: Space, points: Any) -> list[dict[str, Any]]:
    """Convert R points (data.frame or list of named lists) to dicts of plain Python values."""
    ri, _ = _r()
    nullable = [name for name, dim in space.dimensions.items() if None in getattr(dim, "values", ())]
    norm = helpers()[".emews_points_columns"](points, _r_vector("character", nullable))
    n = int(norm[0][0])
    cols_r = norm[1]
    names = [] if cols_r.names is ri.NULL else [str(k) for k in cols_r.names]
    cols: dict[str, list[Any]] = {}
    for name, vec in zip(names, cols_r, strict=False):
        if isinstance(vec, ri.BoolSexpVector):
            values = [None if v is ri.NA_Logical else bool(v) for v in vec]
        elif isinstance(vec, (ri.IntSexpVector, ri.FloatSexpVector, ri.StrSexpVector)):
            values = [_scalar_py(v) for v in vec]  # NA: a null value (allowed where the space holds one)
        else:
            raise ValueError(f"column {name!r} of the points is not an atomic vector")
        if len(values) != n:
            raise ValueError(f"column {name!r} of the points has {len(values)} values for {n} points")
        cols[name] = values
    out = []
    for i in range(n):
        point: dict[str, Any] = {}
        for name, values in cols.items():
            dim = space.dimensions.get(name)
            point[name] = values[i] if dim is None else _canonical(dim, values[i])
        for name, value in space.constants.items():
            point.setdefault(name, value)
        out.append(point)
    return out


# --------------------------------------------------------------------------------------------

_ERROR_CLASSES = ((BudgetExhausted, "emews_budget_exhausted"), (ValueError, "emews_invalid_point"))


class ROptimizer(Optimizer):
    """An optimizer whose algorithm is an R function: ``entry(evaluator, space, options)``.

    ``script`` is the R file to source (relative paths are taken from the current
    directory), ``entry`` the function it defines, and ``options`` (plus any other
    keyword) is passed to R as a named list, over the defaults the function declares
    (its ``options`` argument's default list; then :meth:`check` refuses any other name).
    R's RNG is seeded with ``options$seed`` when given, else the evaluator's seed, before
    the entry function is called.
    After ``run``, ``value`` holds the entry function's return value (as Python)
    and ``info`` what R reported through ``evaluator$set_info``.
    """

    script: Path | None = None
    entry: str = "emews_optimize"

    def __init__(
        self,
        script: Path | None = None,
        entry: str | None = None,
        options: Mapping[str, Any] | None = None,
        **extra: Any,
    ) -> None:
        if script is not None:
            self.script = Path(script)
        if entry is not None:
            self.entry = entry
        if self.script is None:
            raise OptionError("script", f"{type(self).__name__} needs one", "the path of an R file")
        self.options = {**dict(options or {}), **extra}
        self.value: Any = None
        self.info: dict[str, Any] = {}
        self._error: BaseException | None = None
        self._warned: set[str] = set()
        self._keep: list[Any] = []

    def check(self, space: Space) -> None:
        """The script defines the entry function, and every option given is one it declares (the
        names of its ``options`` argument's default list, and ``seed``); an entry function that
        declares none takes any. Asked of R in a child process (R is not started in this one)."""
        assert self.script is not None, "__init__ refuses an ROptimizer without a script"
        try:
            checked = check_script(Path(self.script), self.entry)
        except RUnavailable as exc:
            raise ValueError(f"cannot check the R optimizer's options: {exc}") from None
        self.check_options(checked)

    def check_options(self, checked: ScriptCheck) -> None:
        """What R said of the script (:func:`check_script`) allows the options given: the entry
        function is there, and each option is one it declares, with a value it allows."""
        if checked.error is not None:
            raise OptionError("script", checked.error, f"an R file that defines the function {self.entry!r}")
        declared = checked.declared
        if declared is None:
            return
        allowed = sorted({"seed", *declared})
        unknown = sorted(set(self.options) - set(allowed))
        if unknown:
            name = unknown[0]
            raise OptionError(name, f"unknown option {name!r}{did_you_mean(name, allowed)}", ", ".join(allowed))
        for name, value in self.options.items():  # the values each declaration allows
            problem = declared[name].problem(value) if name in declared else None
            if problem is not None:
                raise OptionError(name, *problem)

    # hooks --------------------------------------------------------------------------------

    def on_info(self, key: str, value: Any) -> None:
        """Called when R reports ``evaluator$set_info(key, value)``."""

    # run ------------------------------------------------------------------------------------

    def run(self, evaluator: Evaluator) -> None:
        require_main_thread(f"{type(self).__name__}.run")
        ri, _ = _r()
        assert self.script is not None, "__init__ refuses an ROptimizer without a script"
        script = Path(self.script)
        space = evaluator.space
        clash = sorted(set(space.names) & set(RESULT_COLUMNS))
        if clash:
            raise ValueError(
                f"parameter name {clash[0]!r} clashes with a result column "
                f"({', '.join(RESULT_COLUMNS)}); rename it to use an R optimizer"
            )
        env = helpers()
        fn = entry_function(script, self.entry)

        self._error = None
        self._warned = set()
        r_evaluator = env[".emews_make_evaluator"](self._callbacks(evaluator))
        seed = self.options.get("seed")
        seed = evaluator.seed if seed is None else seed
        ri.baseenv["set.seed"](ri.IntSexpVector([int(seed) % (2**31 - 1)]))
        on_warning = ri.rternalize(self._on_warning)
        self._keep.append(on_warning)
        try:
            outcome = env[".emews_run"](fn, r_evaluator, space_to_r(space), py_to_r(self.options), on_warning)
            result = r_to_py(outcome)
        finally:
            # the closures stay referenced from self._keep: R code that kept the evaluator
            # (in a global, say) must never call into a freed Python callback
            del r_evaluator, on_warning
        if result.get("ok"):
            self.value = result.get("value")
            return
        classes = result.get("classes") or []
        classes = [classes] if isinstance(classes, str) else list(classes)
        if self._error is not None and "emews_error" in classes:
            raise self._error
        trace = result.get("trace") or []
        trace = [trace] if isinstance(trace, str) else list(trace)
        error = RError(
            str(result.get("message")), call=result.get("call"), trace=trace, classes=classes, script=str(script)
        )
        if self._error is not None:
            raise error from self._error
        raise error

    def _on_warning(self, message: Any) -> Any:
        ri, _ = _r()
        text = str(message[0]) if len(message) else ""
        if text not in self._warned:
            self._warned.add(text)
            log.warning("R warning from %s: %s", Path(str(self.script)).name, text)
        return _r_vector("logical", [True])

    def _callbacks(self, evaluator: Evaluator) -> Any:
        ri, _ = _r()
        space = evaluator.space

        def _int(x: Any, what: str) -> int:
            vals = list(x) if x is not ri.NULL else []
            if (
                len(vals) != 1
                or vals[0] is ri.NA_Integer
                or (isinstance(vals[0], float) and not math.isfinite(vals[0]))
            ):
                raise ValueError(f"{what} must be a single number")
            return int(vals[0])

        def put(points: Any) -> Any:
            ids = evaluator.put(points_from_r(space, points))
            return _r_vector("integer", ids)

        def get(n: Any = ri.NULL, timeout: Any = ri.NULL, more_room: Any = ri.NULL) -> Any:
            count = 1 if n is ri.NULL else _int(n, "n")
            wait = None if timeout is ri.NULL else float(list(timeout)[0])
            room = None if more_room is ri.NULL else _int(more_room, "more_room")
            return results_to_r(space, evaluator.get(count, timeout=wait, more_room=room))

        def map_(points: Any) -> Any:
            return results_to_r(space, evaluator.map(points_from_r(space, points)))

        def log_(level: Any, message: Any) -> Any:
            lvl = getattr(logging, str(level[0]).upper(), logging.INFO)
            logging.getLogger(f"emews.contrib.rbridge.{Path(str(self.script)).stem}").log(lvl, "%s", str(message[0]))
            return _r_vector("logical", [True])

        def set_info(key: Any, value: Any) -> Any:
            k = str(key[0])
            v = r_to_py(value)
            self.info[k] = v
            self.on_info(k, v)
            return _r_vector("logical", [True])

        fns: dict[str, Callable[..., Any]] = {
            "put": put,
            "get": get,
            "map": map_,
            "log": log_,
            "set_info": set_info,
            "remaining": lambda: _r_vector("integer", [evaluator.remaining]),
            "pending": lambda: _r_vector("integer", [evaluator.pending]),
            "workers": lambda: _r_vector("integer", [evaluator.workers]),
            "capacity": lambda: _r_vector("integer", [evaluator.capacity]),
            "room": lambda own: _r_room(evaluator.room(_int(own, "own"))),
            "seed": lambda: _r_vector("integer", [int(evaluator.seed) % (2**31 - 1)]),
            "direction": lambda: _r_vector("character", [evaluator.direction]),
            "history": lambda: results_to_r(space, evaluator.history),
        }
        closures = {name: ri.rternalize(self._guard(fn)) for name, fn in fns.items()}
        self._keep.extend(closures.values())  # rpy2 needs them alive for as long as R may call them
        return _named_list(closures)

    def _guard(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Turn a Python exception into a marker that R's wrapper signals as a condition."""
        ri, _ = _r()

        def call(*args: Any) -> Any:
            try:
                return fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised in Python after R unwinds
                self._error = exc
                cls = next((c for t, c in _ERROR_CLASSES if isinstance(exc, t)), "emews_python_error")
                marker = _named_list(
                    {"class": ri.StrSexpVector([cls]), "message": ri.StrSexpVector([f"{type(exc).__name__}: {exc}"])}
                )
                marker.do_slot_assign("class", ri.StrSexpVector(["emews_py_error"]))
                return marker

        return call


def entry_function(script: Path, entry: str) -> Any:
    """The R function ``entry`` of ``script``, sourced into a fresh environment under the helpers'
    (R starts in this process). Raises :class:`RError` when the script fails or lacks it,
    ``FileNotFoundError`` when there is no such file."""
    ri, _ = _r()
    if not script.is_file():
        raise FileNotFoundError(f"R script {script} does not exist")
    env = helpers()
    sourced = env[".emews_source"](ri.StrSexpVector([str(script.resolve())]), ri.StrSexpVector([entry]), env)
    if not sourced[0][0]:
        raise RError(f"cannot load {script}: {sourced[1][0]}", script=str(script))
    return sourced[1]


@dataclass(frozen=True)
class DeclaredOption:
    """What an R entry function's ``options`` list declares of one option beyond its default: the
    values it takes (a character vector of several: one of them, the first the default), the least
    value and whether it is an integer (``emews_option(default, min = , integer = )``)."""

    choices: tuple[str, ...] = ()
    min: float | None = None
    integer: bool = False

    def problem(self, value: Any) -> tuple[str, str | None] | None:
        """What is wrong with ``value`` and what is allowed; ``None`` when it fits (``None`` does)."""
        if value is None:
            return None
        if self.choices:
            return None if value in self.choices else (f"invalid value {value!r}", ", ".join(self.choices))
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.integer and not (number and float(value).is_integer()):
            return f"must be an integer, not {value!r}", None if self.min is None else f"an integer >= {self.min:g}"
        if self.min is not None and not (number and math.isfinite(value) and value >= self.min):
            kind = "an integer" if self.integer else "a number"
            return f"must be at least {self.min:g}, not {value!r}", f"{kind} >= {self.min:g}"
        return None


def _per_option(said: Any, names: Sequence[str]) -> list[Any]:
    """An R vector or list of one value per option as ``r_to_py`` gives it (by name when named, a
    lone value for one option), in the order of ``names``."""
    if isinstance(said, dict):
        return [said.get(name) for name in names]
    return list(said) if isinstance(said, list) and len(names) != 1 else [said]


def option_names(script: Path, entry: str) -> dict[str, DeclaredOption] | None:
    """The options the R function ``entry`` of ``script`` declares (its ``options`` argument's
    default list: ``function(evaluator, space, options = list(batch = 4L))``), with what each
    takes, or ``None`` when it declares none; in this process (R starts here). Raises
    :class:`RError` as R says it."""
    said = r_to_py(helpers()[".emews_option_names"](entry_function(script, entry)))
    if not said["ok"]:
        raise RError(f"{entry}'s options: {said['message']}", script=str(script))
    if not said["declared"]:
        return None
    names = said["names"] or []
    names = [names] if isinstance(names, str) else list(names)
    per_option = [_per_option(said[key], names) for key in ("choices", "min", "integer")]
    return {
        name: DeclaredOption(tuple(chosen if isinstance(chosen, list) else []), least, bool(integer))
        for name, chosen, least, integer in zip(names, *per_option, strict=True)
    }


_SCRIPT_PROBE = """
import json, sys
from pathlib import Path
from dataclasses import asdict
from emews.contrib.rbridge import RError, option_names, read_files, unloadable_packages, watch_sources
answer = {"missing": unloadable_packages(sys.argv[3:])}
watch_sources()  # after the packages: their loading is left to their library folders
try:
    said = option_names(Path(sys.argv[1]), sys.argv[2])
    answer["names"] = None if said is None else {name: asdict(o) for name, o in said.items()}
except RError as exc:
    answer["error"] = exc.r_message
except FileNotFoundError as exc:
    answer["error"] = str(exc)
answer["files"] = read_files()
print(json.dumps(answer))
"""

#: what tells R where its packages are: an answer kept under other values is not this one
R_VARIABLES = ("R_HOME", "R_LIBS", "R_LIBS_USER", "R_LIBS_SITE")


def watch_sources() -> None:
    """From now on, note the files R's ``source()`` and ``sys.source()`` read (R starts here)."""
    helpers()[".emews_watch_sources"]()


def read_files() -> list[str]:
    """The files R sourced since :func:`watch_sources` and the library folders it loads packages from."""
    files = r_to_py(helpers()[".emews_read_files"]())
    return [files] if isinstance(files, str) else list(files or [])


@dataclass(frozen=True)
class ScriptCheck:
    """What R said of an R optimizer's script: the packages it lacks (of those asked), the options
    its entry function declares (:func:`option_names`; ``None``: none) or why that failed."""

    missing: tuple[str, ...]
    declared: dict[str, DeclaredOption] | None
    error: str | None


def check_script(script: Path, entry: str, packages: Sequence[str] = ()) -> ScriptCheck:
    """The R packages of ``packages`` that R cannot load and :func:`option_names` of ``entry`` in
    ``script``, asked of one child process (R is not started in this one; each R start costs
    seconds, loading packages more). A good answer (no package missing, the options read) is kept
    (:mod:`emews.core.check_cache`) while the files R sourced (the script, those it sources), R's
    library folders and the bridge are unchanged, so that checking again starts no R.
    Raises :class:`RUnavailable` when rpy2 or R does not work."""
    import json

    key = {
        "check": "r-script",
        "script": str(script.resolve()),
        "entry": entry,
        "packages": sorted(set(packages)),
        "rpy2": code_fingerprint("rpy2"),
        "environment": {name: os.environ.get(name) for name in R_VARIABLES},
    }
    found = kept(key)
    if found is not None:
        return ScriptCheck((), _declared(found.value), None)
    answer = json.loads(_probe(_SCRIPT_PROBE, [str(script), entry, *packages]).splitlines()[-1])
    checked = ScriptCheck(tuple(answer["missing"]), _declared(answer.get("names")), answer.get("error"))
    if not checked.missing and checked.error is None:
        keep(key, answer.get("names"), [PRELUDE_FILE, *map(Path, answer["files"])])
    return checked


def _declared(names: Mapping[str, Any] | None) -> dict[str, DeclaredOption] | None:
    """The options an answer of the script probe declares (``None``: none)."""
    if names is None:
        return None
    return {n: DeclaredOption(tuple(o["choices"]), o["min"], o["integer"]) for n, o in names.items()}


def declared_options(script: Path, entry: str) -> dict[str, DeclaredOption] | None:
    """:func:`option_names`, asked in a child process (so that R is not started in this one; see
    :func:`check_script`). Raises :class:`RError` when the script fails or lacks the function,
    :class:`RUnavailable` when rpy2 or R does not work."""
    checked = check_script(script, entry)
    if checked.error is not None:
        raise RError(checked.error, script=str(script))
    return checked.declared


def unloadable_packages(packages: Sequence[str]) -> list[str]:
    """The R packages of ``packages`` that R cannot load, in this process (R starts here)."""
    ri, _ = _r()
    return [name for name in packages if not ri.evalr(f'requireNamespace("{name}", quietly = TRUE)')[0]]


_PACKAGES_PROBE = """
import sys
import rpy2.rinterface as ri
ri.initr_simple()
for name in sys.argv[1:]:
    if not ri.evalr(f'requireNamespace("{name}", quietly = TRUE)')[0]:
        print(name)
"""


def missing_r_packages(packages: Sequence[str]) -> list[str]:
    """The R packages of ``packages`` that R cannot load, asked in a child process (so that
    R is not started in this one). Raises :class:`RUnavailable` when rpy2 or R does not work."""
    return _probe(_PACKAGES_PROBE, packages).split()


def _probe(code: str, args: Sequence[str]) -> str:
    """What the Python ``code`` run with ``args`` in a child process printed; :class:`RUnavailable`
    when it failed (rpy2 or R does not work)."""
    import subprocess
    import sys

    try:
        done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RUnavailable(f"R cannot be started through rpy2 ({exc})") from exc
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RUnavailable(f"R cannot be started through rpy2 ({last})")
    return done.stdout
