"""epbuf as library functions: one per command, returning the command's JSON document.

``epbuf.api.hint(model="deepseek-v3", ranks=64, device="h200")`` returns the dict that
``epbuf hint --model deepseek-v3 --ranks 64 --device h200 --json`` prints (``json.dumps(doc,
indent=2)`` plus a newline is that output, byte for byte), and ``epbuf serve`` sends it as
``/api/hint``. Each document is built in exactly one function (:mod:`epbuf.api._plan`,
:mod:`epbuf.api._tools`), which the command line's ``--json`` calls too.

Keyword arguments are the command's options with ``_`` for ``-`` (``backend_version``,
``gpus_per_node``, ``no_hybrid``); values are typed (``ranks=64``, ``bf16=True``,
``env=["MORI_SHMEM_HEAP_SIZE=6G"]``) or the command line's text (``budget="10%"``,
``tokens="128:4096:*2"`` for ``sweep``), and are checked by the command's own parser, so a
refusal is the command line's one line, raised as :class:`ApiArgumentError` (an
:class:`~epbuf.errors.EpbufError`). Output-only options (``json``, ``wide``, ``csv``,
``plot``, ``svg``, ``quiet``, ``save_routing``, ``verbose``) are refused: no document reads
them.

=============  ==================================  ======================  ====================
function       command                             schema                  exit status 1 when
=============  ==================================  ======================  ====================
``hint``       ``epbuf hint``                      ``epbuf.report/1``      ``strict`` and an
                                                                           error finding
``layout``     ``epbuf layout``                    ``epbuf.report/1``
                                                   (records)
``compare``    ``epbuf compare``                   ``epbuf.compare/1``
``fit``        ``epbuf fit``                       ``epbuf.fit/1``
``sweep``      ``epbuf sweep``                     ``epbuf.sweep/1``
``engine``     ``epbuf engine NAME [-- LAUNCH]``   ``epbuf.engine/1``      ``strict`` and an
                                                                           error finding
``simulate``   ``epbuf simulate`` (numpy)          ``epbuf.simulate/1``    a region overflows
``replay``     ``epbuf replay``                    ``epbuf.replay/1``
``models``,    ``epbuf models`` ...                ``epbuf.models/1`` ...
``devices``,
``versions``
=============  ==================================  ======================  ====================

:func:`exit_status` gives the command line's exit status for a document. ``sweep`` and
``simulate`` take ``check``: a function called as the work progresses, which may raise to
stop it (``epbuf serve`` stops a request whose client left or whose time ran out this way).
"""

from __future__ import annotations

__all__ = ["ApiArgumentError", "COMMANDS", "hint", "layout", "compare", "fit", "sweep", "engine", "simulate",
           "replay", "models", "devices", "versions", "document", "exit_status"]

#: The commands with a document (``engine`` takes the engine's name too).
COMMANDS = ("hint", "layout", "compare", "fit", "sweep", "engine", "simulate", "replay", "models", "devices",
            "versions")


def __getattr__(name: str):
    # ApiArgumentError on first use: the command line's --json imports this package for its
    # document functions and pays for nothing else.
    if name == "ApiArgumentError":
        from ._args import ApiArgumentError

        return ApiArgumentError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def document(command: str, argv: list[str] | tuple = (), *, engine: str | None = None,
             launch: str | list | None = None, check=None) -> dict:
    """The JSON document of ``epbuf COMMAND [ENGINE] ARGV --json`` (``argv``: the command
    line's words, ``--key=value``); ``launch``: an engine's own launch line (what follows
    ``--``); ``check()``: called as a sweep or simulation progresses (it may raise to stop it).

    Raises:
        EpbufError: invalid input (the command line's one line; exit status 2 there).
    """
    from ._args import ApiArgumentError, engine_parse, parse

    if command == "engine":
        from ..cli.engine import report_from_args
        from ._tools import engine_document

        if not engine:
            from ..engines import ENGINES

            raise ApiArgumentError(f"engine: give the engine's name, one of {', '.join(ENGINES)}")
        opts, spelled, line, ignored = engine_parse(engine, list(argv), launch)
        return engine_document(report_from_args(engine, opts, ranks_flag=spelled, launch=line, ignored=ignored))
    if command not in COMMANDS:
        raise ApiArgumentError(f"command {command!r}: one of {', '.join(COMMANDS)}")
    if launch is not None or engine is not None:
        raise ApiArgumentError(f"{command}: engine and launch are options of engine only")
    args = parse(command, list(argv))
    if command in ("hint", "layout", "compare", "fit"):
        from . import _plan

        return getattr(_plan, f"{command}_document")(args)
    if command == "sweep":
        from ._plan import sweep_document, sweep_run

        progress = (lambda done, total: check()) if check is not None else None
        return sweep_document(sweep_run(args, progress)[0], args)
    from . import _tools

    if command == "simulate":
        progress = (lambda stage, done=None, total=None: check()) if check is not None else None
        return _tools.simulate_document(_tools.simulate_run(args, progress)[0])
    if command == "replay":
        return _tools.replay_document(_tools.replay_run(args))
    return getattr(_tools, f"{command}_document")()


def exit_status(command: str, doc: dict, *, strict: bool = False) -> int:
    """The command line's exit status for a document it printed: 1 for ``hint``/``engine``
    with ``strict`` and an error finding, and for ``simulate`` with a region the routing
    overflows; else 0."""
    if command == "simulate":
        return 1 if any(not r["within"] for r in doc.get("regions", ())) else 0
    if not strict or command not in ("hint", "engine"):
        return 0
    findings = doc["report"]["findings"] if command == "engine" else doc.get("findings", ())
    return 1 if any(f["severity"] == "error" for f in findings) else 0


def _words(command: str, options: dict) -> list[str]:
    from ._args import parser_of, words

    return words(options, parser_of(command), f"epbuf.api.{command}")


def hint(**options) -> dict:
    """``epbuf hint --json``: one backend's buffers, regions, findings, limits; ``device`` and
    ``budget`` (share, fits) when given."""
    return document("hint", _words("hint", options))


def layout(**options) -> dict:
    """``epbuf layout --json``: every token record's fields, offsets and sizes."""
    return document("layout", _words("layout", options))


def compare(**options) -> dict:
    """``epbuf compare --json``: the same plan on every backend (``backends="a,b"``)."""
    return document("compare", _words("compare", options))


def fit(**options) -> dict:
    """``epbuf fit --json``: the largest tokens per rank (or EP size) within ``budget``."""
    return document("fit", _words("fit", options))


def sweep(*, check=None, **options) -> dict:
    """``epbuf sweep --json``: every combination of the lists (``ranks="8,16"``,
    ``tokens="128:4096:*2"``) for every backend."""
    return document("sweep", _words("sweep", options), check=check)


def engine(name: str, *, launch: str | list | None = None, **options) -> dict:
    """``epbuf engine NAME --json [-- LAUNCH]``: what the engine allocates with these settings
    (spelled as the engine spells them: ``all2all_backend="deepep_low_latency"``) and the
    launch line ``launch`` (``"vllm serve deepseek-ai/DeepSeek-V3 -dp 16 ..."``)."""
    from ..cli.engine import build_engine_parser
    from ._args import words

    return document("engine", words(options, build_engine_parser(name), f"epbuf.api.engine({name!r})"),
                    engine=name, launch=launch)


def simulate(*, check=None, **options) -> dict:
    """``epbuf simulate --json``: a routing through one backend's buffers (needs numpy)."""
    return document("simulate", _words("simulate", options), check=check)


def replay(**options) -> dict:
    """``epbuf replay --json``: a DeepEP-Ascend token written and read back, field by field."""
    return document("replay", _words("replay", options))


def models() -> dict:
    """``epbuf models --json``."""
    return document("models")


def devices() -> dict:
    """``epbuf devices --json``."""
    return document("devices")


def versions() -> dict:
    """``epbuf versions --json``."""
    return document("versions")
