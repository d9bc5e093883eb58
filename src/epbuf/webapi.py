"""The JSON API of ``epbuf serve``: a URL query becomes the command's options, and the answer
is the command's document from :mod:`epbuf.api`.

``GET /api/hint?model=deepseek-v3&ranks=64&device=h200`` answers
``epbuf.api.document("hint", ["--model=deepseek-v3", "--ranks=64", "--device=h200"])``,
serialized as ``epbuf hint --model=deepseek-v3 --ranks=64 --device=h200 --json`` prints it:
the parameter names are the CLI's option names without ``--``, and the parsing, validation,
defaults and JSON (``epbuf.report/1`` ...) are the command's own code, called as a library
(no output captured, nothing shared between requests: they run concurrently).

=====================  ====================================================  =====================
path                   command                                               schema
=====================  ====================================================  =====================
``/api/hint``          ``epbuf hint ... --json``                             ``epbuf.report/1``
``/api/layout``        ``epbuf layout ... --json``; ``format=svg``: the      ``epbuf.report/1``
                       byte map ``layout --svg`` writes, in memory           (subset) or SVG
``/api/compare``       ``epbuf compare ... --json``                          ``epbuf.compare/1``
``/api/fit``           ``epbuf fit ... --json``                              ``epbuf.fit/1``
``/api/sweep``         ``epbuf sweep ... --json``                            ``epbuf.sweep/1``
``/api/engine/NAME``   ``epbuf engine NAME ... --json``; ``launch=TEXT``:      ``epbuf.engine/1``
                       the engine's own launch line (after ``--``)
``/api/simulate``      ``epbuf simulate ... --json`` (needs numpy)           ``epbuf.simulate/1``
``/api/replay``        ``epbuf replay ... --json``                           ``epbuf.replay/1``
``/api/models``        ``epbuf models --json``; POST a config.json: that     ``epbuf.models/1``
                       model, read by :func:`epbuf.models.parse_model_config`
``/api/devices``       ``epbuf devices --json``                              ``epbuf.devices/1``
``/api/versions``      ``epbuf versions --json``                             ``epbuf.versions/1``
=====================  ====================================================  =====================

Exit status → HTTP: 0 → 200 and the command's JSON; 1 → 422 and the JSON (``strict``:
the plan breaks an upstream limit; ``simulate``: a region overflows); 2 (invalid input) →
400 and ``{"error": "<the CLI's one line>"}``; a command stopped by the server's time limit
→ 422 and ``{"error": ...}`` naming the limit. Every API response says ``X-Epbuf-Exit-Status``
and ``X-Epbuf-Command`` (the equivalent command line, to paste into a terminal).

Parameters: ``key=value`` becomes ``--key=value`` (the ``=`` form, so a value can never
be read as another option); a switch (``bf16``, ``no-hybrid``, ``strict`` ...) is on for
an empty value or ``1/true/yes/on``, off for ``0/false/no/off``. Only the options listed
per command below pass (plus, for engines, the engine's own flags); a parameter given
twice is refused (except ``env``). Nothing here reads or writes a file on the server:

* no ``--model-config``, ``--csv``, ``--plot``, ``--svg``: a config.json is POSTed as the
  request body instead, read from memory, and its hidden size, top-k and expert count
  become ``--hidden/--topk/--experts`` (explicit parameters override them and fill keys
  the file lacks, as on the command line); the response gains ``model_config`` (the
  model as ``epbuf models --json`` describes one);
* ``model=org/name`` is looked up as ``name`` (presets and their released variants),
  never in a local Hugging Face cache; a link then means the same on every server;
* an engine's JSON settings (``deepep-config=...``) must be the JSON itself, not a path.
"""

from __future__ import annotations

import json

__all__ = ["Response", "handle", "error_response", "ENDPOINTS", "MAX_PARAMS", "MAX_BODY_BYTES"]

#: The largest request body (a pasted config.json) the API reads.
MAX_BODY_BYTES = 1 << 20
#: The most query parameters one request may carry.
MAX_PARAMS = 100

_PLAN_VALUES = ("model", "hidden", "topk", "experts", "ranks", "nodes", "gpus-per-node", "tokens",
                "redundant-experts", "sf-packs", "backend-version", "deepep-version", "num-sms", "device", "hbm")
_PLAN_FLAGS = ("fp8", "bf16", "no-hybrid", "single-reduction", "no-nvlink")
_SHAPE_VALUES = ("model", "hidden", "topk", "experts", "ranks", "tokens", "gpus-per-node", "nodes", "redundant-experts",
                 "sf-packs", "topk-idx-bits")
# The UCCL-EP, MORI-EP and pplx options and --topk-idx-bits (cli/_library_options.py,
# cli/_options.py): values the library reads, never a file (``env`` is MORI's/pplx's variables
# as NAME=VALUE text, repeatable, not the server's environment).
_LIBRARY_VALUES = ("platform", "nic", "kernel-type", "max-total-recv-tokens", "quant-type", "dp-group-size",
                   "num-scale-bytes", "max-token-type-size", "env", "topk-idx-bits")
_LIBRARY_FLAGS = ("per-expert-batching",)
# simulate's routing and link options (not --routing-file, --save-routing, --plot: files).
_ROUTING_VALUES = ("routing", "seed", "num-tokens", "masked-ratio", "expert-alignment", "network", "nvlink-gbps",
                   "rdma-gbps", "latency-us")

#: API name -> (command, value options, switch options, accepts a config.json body).
ENDPOINTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], bool]] = {
    "hint": ("hint", _PLAN_VALUES + _LIBRARY_VALUES + ("backend", "budget"),
             _PLAN_FLAGS + _LIBRARY_FLAGS + ("strict", "verbose"), True),
    "layout": ("layout", _PLAN_VALUES + _LIBRARY_VALUES + ("backend", "format"), _PLAN_FLAGS + _LIBRARY_FLAGS, True),
    "compare": ("compare", _PLAN_VALUES + _LIBRARY_VALUES + ("backends",), _PLAN_FLAGS + _LIBRARY_FLAGS + ("verbose",),
                True),
    "fit": ("fit", _PLAN_VALUES + _LIBRARY_VALUES + ("budget", "backends"), _PLAN_FLAGS + _LIBRARY_FLAGS, True),
    "sweep": ("sweep", ("model", "backends", "hidden", "topk", "experts", "ranks", "tokens", "dtype",
                        "gpus-per-node", "redundant-experts", "device", "hbm"), (), True),
    # simulate and replay offer only the options they read (their parsers: no --hbm, no other
    # library's options; replay: DeepEP-Ascend's shape alone).
    "simulate": ("simulate", _SHAPE_VALUES + ("device", "backend", "backend-version", "deepep-version", "num-sms")
                 + _ROUTING_VALUES, _PLAN_FLAGS, True),
    "replay": ("replay", _SHAPE_VALUES, ("fp8", "bf16"), True),
    "models": ("models", (), (), True),
    "devices": ("devices", (), (), False),
    "versions": ("versions", (), (), False),
}

_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")
_BODY_SOURCE = "config.json (request body)"
_SHAPE = (("hidden", "hidden"), ("topk", "num_topk"), ("experts", "num_experts"))


class Response:
    """What the server sends: HTTP ``status``, ``content_type``, ``body`` bytes, extra ``headers``."""

    __slots__ = ("status", "content_type", "body", "headers")

    def __init__(self, status: int, content_type: str, body: bytes, headers: dict | None = None) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body
        self.headers = dict(headers or {})

    def json(self) -> object:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"Response({self.status}, {self.content_type!r}, {len(self.body)} B)"


class _Refused(Exception):
    """A request the API answers with one line: ``status`` and ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_response(status: int, message: str, headers: dict | None = None) -> Response:
    """``{"error": message}`` with ``status`` (one line, never a traceback; at most 2,000
    characters, so no error echoes a whole oversized input)."""
    from ._serve_http import error_body

    return Response(status, "application/json", error_body(message), headers)


def shown_command(words: list[str]) -> str:
    """The command line as a shell takes it, printable ASCII only (it travels in a header)."""
    import shlex

    text = shlex.join(words)
    return "".join(c if " " <= c <= "~" else c.encode("unicode_escape").decode("ascii") for c in text)


def _params(query: str) -> list[tuple[str, str]]:
    from urllib.parse import parse_qsl

    try:
        return parse_qsl(query, keep_blank_values=True, max_num_fields=MAX_PARAMS)
    except ValueError:
        raise _Refused(400, f"more than {MAX_PARAMS} query parameters") from None


def _short(value: str, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + "...'"


def _switch(key: str, value: str) -> bool:
    folded = value.strip().lower()
    if folded in _ON:
        return True
    if folded in _OFF:
        return False
    raise _Refused(400, f"{key} = {_short(value)}: a switch; give it without a value or as 1/true/yes/on, "
                        "0/false/no/off")


def _engine_options(name: str) -> tuple[set, set, set, set]:
    """(value options, switches, options holding JSON, environment variables holding JSON)
    of ``epbuf engine NAME``, from the engine's own knob table."""
    from .engines import get_engine

    spec = get_engine(name)
    values = {"model", "hidden", "topk", "experts", "ranks", "nodes", "gpus-per-node", "device", "hbm", "budget",
              "max-tokens-under-load", "engine-version", "env", "launch"}
    if spec.gpu:
        values |= {"backend-version", "deepep-version"}
    for spellings in spec.aliases.values():
        values |= {s[2:] for s in spellings if s.startswith("--")}
    switches = {"verbose", "strict"}
    json_options: set = set()
    json_env: set = set()
    for knob in spec.knobs:
        if knob.is_env:
            if knob.kind == "json":
                json_env.add(knob.name)
            continue
        names = {s[2:] for s in (knob.name, *knob.aliases) if s.startswith("--")}
        (switches if knob.kind == "flag" else values).update(names)
        if knob.kind == "json":
            json_options |= names
            if knob.env:
                json_env.add(knob.env)
    return values, switches, json_options, json_env


def _looks_like_json(text: str) -> bool:
    # The test epbuf.engines uses to tell JSON text from a file path (``_load_json``).
    return text.lstrip()[:1] in ("{", "[")


def _fill(params: list[tuple[str, str]]) -> dict:
    """``--hidden/--topk/--experts`` values that are integers, to fill keys a config lacks."""
    given = dict(params)
    fill = {}
    for key, field in _SHAPE:
        try:
            fill[field] = int(given[key].replace("_", ""), 10)
        except (KeyError, ValueError):
            continue
    return fill


def _argv(name: str, params: list[tuple[str, str]], values, switches, repeatable=("env",)) -> tuple[list[str], bool]:
    """``--key=value`` / ``--key`` for the allowed parameters; ``True`` when a model's
    ``org/`` prefix was dropped."""
    argv: list[str] = []
    seen: set = set()
    dropped_org = False
    for key, value in params:
        if key in seen and key not in repeatable:
            raise _Refused(400, f"{key} is given twice; give it once")
        seen.add(key)
        if key in switches:
            if _switch(key, value):
                argv.append(f"--{key}")
        elif key in values:
            if key == "model" and "/" in value:
                value = value.rsplit("/", 1)[1]
                dropped_org = True
            argv.append(f"--{key}={value}")
        else:
            from ._names import closest

            known = sorted({*values, *switches} - {"format"})
            close = closest(key, known)
            raise _Refused(400, f"unknown parameter {_short(key, 40)} for /api/{name}"
                                + (f"; did you mean {close}?" if close else "")
                                + f"; allowed: {', '.join(known) or 'none'}")
    return argv, dropped_org


def _json_response(status: int, data: dict, headers: dict, extra: dict | None) -> Response:
    if extra is not None:
        data = {**data, **extra}
    return Response(status, "application/json", (json.dumps(data, indent=2) + "\n").encode(), headers)


def handle(method: str, path: str, query: str = "", body: bytes | None = None, *, check=None) -> Response:
    """Answer one API request (``path`` starts with ``/api/``); ``body`` is a POSTed config.json.
    ``check()`` is called as a sweep or simulation progresses; what it raises propagates (the
    server stops a request that way).

    Never raises for bad input: every refusal is a 4xx :class:`Response` with one line.
    A bug (an exception other than :class:`~epbuf.errors.EpbufError`) propagates, for the
    server to log and answer 500.
    """
    try:
        return _handle(method, path, query, body, check)
    except _Refused as refused:
        return error_response(refused.status, str(refused))


def _handle(method: str, path: str, query: str, body: bytes | None, check) -> Response:
    from .api import document, exit_status
    from .errors import EpbufError

    name = path[len("/api/"):] if path.startswith("/api/") else ""
    engine = None
    if name.startswith("engine/"):
        engine = name[len("engine/"):]
        endpoint = ("engine", (), (), True)
    else:
        endpoint = ENDPOINTS.get(name)
    if endpoint is None:
        raise _Refused(404, f"no API at {_short(path, 80)}; try /api/" + ", /api/".join([*ENDPOINTS, "engine/NAME"]))
    command, values, switches, takes_body = endpoint
    if method not in ("GET", "POST") or (method == "POST" and not takes_body):
        allowed = "GET, POST" if takes_body else "GET"
        raise _Refused(405, f"{method} is not allowed on /api/{name}; use {allowed}")
    params = _params(query)
    words = [command]
    json_options: set = set()
    json_env: set = set()
    launch = None
    if engine is not None:
        try:
            values, switches, json_options, json_env = _engine_options(engine)
        except EpbufError as error:
            raise _Refused(404, f"/api/engine/{_short(engine, 60)}: {error}") from None
        words.append(engine)
        launches = [v for k, v in params if k == "launch"]
        if len(launches) > 1:
            raise _Refused(400, "launch is given twice; give it once")
        launch = launches[0] if launches and launches[0].strip() else None
        params = [(k, v) for k, v in params if k != "launch"]
    for key, value in params:
        if key in json_options and not _looks_like_json(value):
            raise _Refused(400, f"{key} = {_short(value)}: give the JSON object itself; the server reads no files")
        env_name = value.partition("=")[0].strip() if key == "env" else ""
        if env_name in json_env and not _looks_like_json(value.partition("=")[2]):
            raise _Refused(400, f"env {env_name[:60]} = {_short(value.partition('=')[2])}: give the JSON object "
                                "itself; the server reads no files")
    fmt = "json"
    if name == "layout":
        formats = [v for k, v in params if k == "format"]
        fmt = formats[-1] if formats else "json"
        if fmt not in ("json", "svg"):
            raise _Refused(400, f"format = {_short(fmt)}: allowed json (the records) or svg (the byte map)")
        params = [(k, v) for k, v in params if k != "format"]
        if len(formats) > 1:
            raise _Refused(400, "format is given twice; give it once")
    if name == "models" and method == "POST":
        # The pasted model alone, in the schema of `epbuf models --json`; hidden/topk/experts
        # fill keys the file lacks.
        _argv(name, params, {key for key, _ in _SHAPE}, ())
        _, extra = _with_config(name, params, [], body)
        data = {"schema": "epbuf.models/1", "models": [extra["model_config"]]}
        body = (json.dumps(data, indent=2) + "\n").encode()
        return Response(200, "application/json", body, {"X-Epbuf-Exit-Status": "0"})
    options, dropped_org = _argv(name, params, values, switches)
    extra = None
    if method == "POST":
        options, extra = _with_config(name, params, options, body)
    if fmt == "svg":
        return _layout_svg(options)
    argv = [*words, *options, "--json"]
    shown = ["epbuf", *argv]
    if launch is not None:
        shown += ["--", *_launch_words(launch)]
    headers = {"X-Epbuf-Command": shown_command(shown)}
    try:
        data = document(command, options, engine=engine, launch=launch, check=check)
    except EpbufError as error:
        line = f"{getattr(error, 'prog', '') or 'epbuf ' + command}: error: {error}"
        if dropped_org and "model" in line:
            line += ("; the server looks up models by name only (presets and their released variants) and never "
                     "reads a local Hugging Face cache: POST the model's config.json instead")
        return error_response(400, line, {**headers, "X-Epbuf-Exit-Status": "2"})
    status = exit_status(command, data, strict="--strict" in options)
    headers["X-Epbuf-Exit-Status"] = str(status)
    return _json_response(200 if status == 0 else 422, data, headers, extra)


def _launch_words(launch: str) -> list[str]:
    import shlex

    try:
        return shlex.split(launch)
    except ValueError:
        return [launch]


def _with_config(name: str, params: list[tuple[str, str]], options: list[str], body: bytes | None):
    """The options with a POSTed config.json's shape as ``--hidden/--topk/--experts``, and
    the extra response field ``model_config``."""
    from .errors import EpbufError
    from .models.config_json import parse_model_config

    if any(k == "model" for k, _ in params):
        raise _Refused(400, "model and a config.json body: give one of them")
    if not body:
        raise _Refused(400, f"{_BODY_SOURCE}: empty; POST the text of a Hugging Face config.json, or use GET")
    try:
        spec = parse_model_config(body, _BODY_SOURCE, fill=_fill(params))
    except EpbufError as error:
        raise _Refused(400, str(error)) from None
    given = {k for k, _ in params}
    shape = [f"--{key}={getattr(spec, field)}" for key, field in _SHAPE if key not in given]
    return [*shape, *options], {"model_config": spec.as_dict()}


def _layout_svg(options: list[str]) -> Response:
    """The byte map ``epbuf layout --svg FILE`` would write, rendered in memory from the
    report ``epbuf hint --json`` gives for the same options (layout and hint share them)."""
    from .api import document
    from .errors import EpbufError
    from .report.json_form import report_from_dict
    from .svg import render_svg

    headers = {"X-Epbuf-Command": shown_command(["epbuf", "layout", *options, "--svg", "byte-map.svg"])}
    try:
        data = document("hint", options)
    except EpbufError as error:
        return error_response(400, f"epbuf layout: error: {error}", {**headers, "X-Epbuf-Exit-Status": "2"})
    svg = render_svg(report_from_dict(data))
    return Response(200, "image/svg+xml; charset=utf-8", svg.encode(), {**headers, "X-Epbuf-Exit-Status": "0"})
