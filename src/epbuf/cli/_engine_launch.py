"""Launch lines for ``epbuf engine NAME ... -- LAUNCH LINE``: the model, the settings and the
variables epbuf reads from an engine's own command line, and what it ignores (:func:`parse_launch_line`),
and the options before ``--`` epbuf does not know (:func:`unknown_options`). No formulas.
"""

from __future__ import annotations

import argparse

from .._record import Record

__all__ = ["EXAMPLES", "LaunchLine", "parse_launch_line", "unknown_options"]

PROG = "epbuf engine"
#: Options that name the model in the engines' own launch lines (vLLM ``--model``, SGLang ``--model-path``).
MODEL_FLAGS = ("--model", "--model-path")
#: Programs a launch line may start with, and the engines each one runs.
#: epbuf's own options, which no engine's launch line has: after ``--`` they are a mistake, not ignored.
EPBUF_ONLY_OPTIONS = ("--json", "--strict", "--env-from-shell", "--budget", "--max-tokens-under-load")
#: epbuf's options of the DeepEP (GPU) engines only: given to another engine they are an error, not ignored.
EPBUF_GPU_OPTIONS = ("--backend-version", "--deepep-version")
PROGRAMS = {"vllm": ("vllm", "vllm-ascend"), "sglang": ("sglang", "sgl-kernel-npu"),
            "torchrun": ("megatron", "mindspeed")}



EXAMPLES = {
    "vllm": "vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel --all2all-backend deepep_low_latency",
    "vllm-ascend": "vllm serve deepseek-ai/DeepSeek-V3 -dp 16 --enable-expert-parallel",
    "sglang": "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --moe-a2a-backend deepep",
    "sgl-kernel-npu": "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 16 --moe-a2a-backend "
                      "deepep",
    "megatron": "torchrun --nproc-per-node 8 pretrain_gpt.py --expert-model-parallel-size 16 "
                "--moe-token-dispatcher-type flex",
    "mindspeed": "torchrun --nproc-per-node 8 pretrain_gpt.py --expert-model-parallel-size 16 "
                 "--hccl-group-buffer-adaptive",
}


class LaunchLine(Record):
    """What epbuf reads from an engine's launch line.

    Attributes:
        argv: the options epbuf's engine parser understands (the engine's settings and shape
            flags, ``--model``), in their order.
        env: ``NAME=VALUE`` variables before the program, for variables the engine reads.
        ignored: everything else, as written (``--trust-remote-code``, ``--max-model-len 32768``).
        program: the launcher recognised (``vllm``, ``sglang``, ``torchrun``) or ``""``.
    """

    argv: tuple
    env: dict
    ignored: tuple
    program: str = ""


def _is_option(token: str) -> bool:
    """``--x`` / ``-x``, not a negative number."""
    if not token.startswith("-") or token in ("-", "--"):
        return False
    try:
        float(token)
        return False
    except ValueError:
        return True


def _strip_program(tokens: list[str], ignored: list[str]) -> tuple[list[str], str, str | None]:
    """``(engine arguments, program, positional model)`` after the launcher: ``vllm serve [MODEL]``,
    ``sglang serve``, ``python [-m module | script.py]`` (``-m torch.distributed.run`` counts as torchrun),
    ``torchrun|deepspeed [its options] script.py``. The launcher's own options go to ``ignored``."""
    if not tokens:
        return tokens, "", None
    head = tokens[0].rsplit("/", 1)[-1]
    rest = tokens[1:]
    if head in ("vllm", "sglang") and rest[:1] == ["serve"]:
        rest = rest[1:]
        model = rest[0] if rest and not _is_option(rest[0]) else None
        return (rest[1:] if model else rest), head, model
    if head.startswith("python"):
        while rest and _is_option(rest[0]) and rest[0] != "-m":
            ignored.append(rest.pop(0))
        if rest[:1] == ["-m"] and len(rest) > 1:
            module = rest[1]
            rest = rest[2:]
            if module.startswith("sglang."):
                return rest, "sglang", None
            if module.startswith("vllm."):
                return rest, "vllm", None
            if module in ("torch.distributed.run", "torch.distributed.launch"):
                return _after_script(rest, ignored), "torchrun", None
            ignored.append(f"-m {module}")
            return rest, "", None
        if rest and rest[0].endswith(".py"):
            return rest[1:], "python", None
        return rest, "", None
    if head in ("torchrun", "deepspeed"):
        return _after_script(rest, ignored), "torchrun", None
    return tokens, "", None


def _grouped(tokens: list[str]) -> list[str]:
    """Options with the word that follows each (``--nnodes 2``), as one string each."""
    out: list[str] = []
    for token in tokens:
        if out and _is_option(out[-1]) and "=" not in out[-1] and " " not in out[-1] and not _is_option(token):
            out[-1] = f"{out[-1]} {token}"
        else:
            out.append(token)
    return out


def _after_script(tokens: list[str], ignored: list[str]) -> list[str]:
    """The arguments after the first ``*.py`` script of a launcher's command line; the launcher's own
    options before it go to ``ignored``."""
    for i, token in enumerate(tokens):
        if token.endswith(".py") and not _is_option(token):
            ignored.extend(_grouped(tokens[:i]))
            return tokens[i + 1:]
    return tokens


def _model_option(model: str) -> list[str]:
    """``--model-config PATH`` for a local checkpoint folder or config file (``vllm serve /models/X``),
    else ``--model NAME`` (a preset, a cached Hugging Face id or a released variant)."""
    import os

    return ["--model-config", model] if os.path.exists(model) else ["--model", model]


def parse_launch_line(tokens: list[str], engine: str) -> LaunchLine:
    """Read an engine's launch line: leading ``NAME=VALUE`` variables (and ``env``), the launcher
    (:func:`_strip_program`), the model (positional or :data:`MODEL_FLAGS`), the engine's settings
    (its knobs and their aliases) and shape flags (``--hidden-size``, ``--num-experts``, ...);
    everything else is kept, as written, in ``ignored``.

    >>> line = parse_launch_line(["VLLM_DEEPEP_BUFFER_SIZE_MB=512", "vllm", "serve", "deepseek-ai/DeepSeek-V3",
    ...                           "-dp", "16", "--trust-remote-code", "--max-model-len", "32768"], "vllm")
    >>> line.argv, line.env, line.ignored
    (('--model', 'deepseek-ai/DeepSeek-V3', '-dp', '16'), {'VLLM_DEEPEP_BUFFER_SIZE_MB': '512'}, ('--trust-remote-code', '--max-model-len 32768'))

    Raises:
        InvalidArgumentError: a launch line for another engine family (``python -m sglang...`` given
            to ``epbuf engine vllm``), or nothing after ``--``.
    """
    from ..engines import get_engine
    from ..engines._knobs import EngineProblem
    from ..errors import InvalidArgumentError

    spec = get_engine(engine)
    if not tokens:
        raise InvalidArgumentError([EngineProblem("--", "", "allowed the engine's launch line after --, e.g. "
                                                             + EXAMPLES.get(engine, "..."))])
    known_env = {k.name for k in spec.knobs if k.is_env} | {k.env for k in spec.knobs if k.env}
    env: dict[str, str] = {}
    ignored: list[str] = []
    rest = list(tokens)
    while rest and (rest[0] == "env" or ("=" in rest[0] and rest[0].split("=", 1)[0].isidentifier())):
        token = rest.pop(0)
        if token == "env":
            continue
        name, value = token.split("=", 1)
        if name in known_env:
            env[name] = value
        else:
            ignored.append(token)
    rest, program, model = _strip_program(rest, ignored)
    if engine == "vllm":
        rest = _vllm_spelling(rest)
    if engine == "sglang":  # SGLang's argparse takes unique abbreviations (engines/_sglang_launch.py)
        from ..engines._sglang_launch import expand

        rest = expand(rest)
    if program in PROGRAMS and engine not in PROGRAMS[program]:
        raise InvalidArgumentError([EngineProblem(
            "--", " ".join(tokens[:4]) + " ...", f"a {program} launch line; size it with {PROG} "
                                                 f"{' or '.join(PROGRAMS[program])}")])
    takes_value: dict[str, bool] = {}
    for k in spec.knobs:
        if not k.is_env:
            for spelling in (k.name, *k.aliases):
                takes_value[spelling] = k.kind != "flag"
    for spellings in spec.aliases.values():
        for spelling in spellings:
            if spelling not in ("--npus-per-node", "--ep-size"):  # epbuf's topology options, not the engines'
                takes_value[spelling] = True
    misplaced = [t for t in rest if t.partition("=")[0] in EPBUF_ONLY_OPTIONS]
    if misplaced:
        raise InvalidArgumentError([EngineProblem(misplaced[0], " ".join(tokens[:3]) + " ...",
                                                  "epbuf's option in the launch line; put it before --")])
    argv: list[str] = []
    if model is not None:
        argv += _model_option(model)
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not _is_option(token):
            ignored.append(token)
            continue
        flag, eq, inline = token.partition("=")
        value = inline if eq else None
        needs = takes_value.get(flag)  # None: an option epbuf does not know; it takes the next word if any
        if value is None and needs is not False and i < len(rest) and not _is_option(rest[i]):
            value = rest[i]
            i += 1
        if flag in MODEL_FLAGS and value is not None:
            argv += _model_option(value)
        elif flag in takes_value and (value is not None or not takes_value[flag]):
            argv += [flag] + ([value] if value is not None else [])
        else:
            ignored.append(token if value is None or eq else f"{token} {value}")
    if engine == "mindspeed" and program == "torchrun":
        argv += _mindspeed_data_parallel(argv, ignored)
    if engine in ("sglang", "megatron"):  # the engine's own defaults where epbuf's differ (no EP buffer)
        from ..engines._sglang_launch import with_defaults
        from ..engines.megatron import LAUNCH_DEFAULTS

        argv = with_defaults(argv, LAUNCH_DEFAULTS if engine == "megatron" else None)
    return LaunchLine(argv=tuple(argv), env=env, ignored=tuple(ignored), program=program)


def _vllm_spelling(tokens: list[str]) -> list[str]:
    """The words as vLLM's ``FlexibleArgumentParser.parse_args`` reads them (``vllm/utils/argparse_utils.py``
    @v0.33.0): ``_`` for ``-`` in a ``--`` option's name (up to its first ``.``); ``--json-flag.key value``
    merged into ``--json-flag`` (its JSON, when also given, updated key by key); and argparse's
    ``allow_abbrev``: a unique prefix of one of vLLM 0.33.0's options is that option, an ambiguous one
    is refused (:mod:`epbuf.engines._vllm_flags`).

    Raises:
        InvalidArgumentError: an abbreviation vLLM's parser finds ambiguous.
    """
    import json
    import re

    from ..engines import _vllm_flags
    from ..engines._knobs import EngineProblem
    from ..errors import InvalidArgumentError

    out: list[str] = []
    dotted: dict[str, dict] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("--") or token == "--":
            out.append(token)
            continue
        key, eq, value = token.partition("=")
        key = re.sub(r"(?<=--)[^.]*", lambda m: m.group(0).replace("_", "-"), key, count=1)
        name, dot, path = key.partition(".")
        full, candidates = _vllm_flags.expand(name)
        if full is None and len(candidates) > 1:
            raise InvalidArgumentError([EngineProblem(  # the reason first: the line keeps 100 columns
                "launch line", token, f"ambiguous in vLLM {_vllm_flags.RELEASE}: {len(candidates)} flags "
                f"start so ({', '.join(candidates[:3])}{' ...' if len(candidates) > 3 else ''})")])
        name = full or name
        if dot:
            if not eq and i < len(tokens):
                value, i = tokens[i], i + 1
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
            target = dotted.setdefault(name, {})
            *parents, leaf = path.split(".")
            for part in parents:
                target = target.setdefault(part, {})
            target[leaf.replace("-", "_")] = parsed
            continue
        out.append(f"{name}={value}" if eq else name)
    for name, update in dotted.items():
        spelled = [j for j, t in enumerate(out) if t == name or t.startswith(name + "=")]
        if not spelled:
            out += [name, json.dumps(update)]
            continue
        j = spelled[-1]
        inline = out[j].partition("=")[2] if "=" in out[j] else (out[j + 1] if j + 1 < len(out) else "{}")
        try:
            merged = {**json.loads(inline), **update}
        except (ValueError, TypeError):
            continue  # not JSON text (a file path): the recipe reads the file and reports on it
        if "=" in out[j]:
            out[j] = f"{name}={json.dumps(merged)}"
        else:
            out[j + 1] = json.dumps(merged)
    return out


def _mindspeed_data_parallel(argv: list[str], ignored: list[str]) -> list[str]:
    """``--data-parallel-size`` for MindSpeed from torchrun's world: Megatron derives DP =
    world / (TP x PP x CP) (``megatron/core/parallel_state.py`` ``initialize_model_parallel``) where epbuf
    takes it as a flag. Uses ``--nnodes`` (default 1) x ``--nproc-per-node``; the torchrun options
    used leave ``ignored``. Nothing when the line gives no world size or it does not divide."""
    def value(options: tuple[str, ...], words: list[str], default: int | None) -> int | None:
        for i, word in enumerate(words):
            flag, eq, inline = word.partition("=")
            flag, _, after = flag.partition(" ")
            if flag in options:
                text = inline if eq else (after or (words[i + 1] if i + 1 < len(words) else ""))
                return int(text) if text.isascii() and text.isdigit() and len(text) < 10 else None
        return default

    if "--data-parallel-size" in argv:
        return []
    nproc = value(("--nproc-per-node", "--nproc_per_node"), ignored, None)
    nnodes = value(("--nnodes",), ignored, 1)
    inner = 1
    for option in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size", "--context-parallel-size"):
        inner *= value((option,), argv, 1) or 1
    if not nproc or not nnodes or (nproc * nnodes) % inner:
        return []
    ignored[:] = [w for w in ignored if w.partition(" ")[0].partition("=")[0]
                  not in ("--nproc-per-node", "--nproc_per_node", "--nnodes")]
    return ["--data-parallel-size", str(nproc * nnodes // inner)]


def unknown_options(extras: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Options before ``--`` that epbuf does not know, grouped with their values, to be ignored —
    unless one looks like a misspelling of a known option or a stray positional is left.

    Raises:
        InvalidArgumentError: one line naming the option and the option it resembles.
    """
    from ..engines._knobs import EngineProblem
    from ..errors import InvalidArgumentError

    options = [s for s in parser._option_string_actions if s.startswith("--")]
    knobs = {s for a in parser._actions if a.dest.startswith("knob_") for s in a.option_strings}
    # epbuf's own options are few and unlike engine flags: a near miss is a typo. Engine flags have
    # long, similar relatives (--data-parallel-size-local), so only a very near miss is.
    own = [s for s in options if s not in knobs]
    groups: list[str] = []
    i = 0
    while i < len(extras):
        token = extras[i]
        i += 1
        if not _is_option(token):
            raise InvalidArgumentError([EngineProblem(
                token, token, "unrecognized argument; paste the engine's whole launch line after --")])
        flag, eq, inline = token.partition("=")
        value = inline if eq else (extras[i] if i < len(extras) and not _is_option(extras[i]) else "")
        if flag in EPBUF_GPU_OPTIONS:
            raise InvalidArgumentError([EngineProblem(flag, value, "not an option of this engine: it does not use "
                                                                   "DeepEP (Ascend HCCL windows)")])
        close = (_single_dash(parser, flag)  # --tp for the engine's -tp
                 or next((o for o in options if o.startswith(flag) and len(flag) > 3), None)  # an abbreviation
                 or _closest_bare(flag, own, 0.8) or _closest_bare(flag, sorted(knobs), 0.9))
        if close:
            raise InvalidArgumentError([EngineProblem(flag, value, f"unknown option; did you mean {close}?")])
        if not eq and i < len(extras) and not _is_option(extras[i]):
            token = f"{token} {extras[i]}"
            i += 1
        groups.append(token)
    return groups


def _single_dash(parser, flag: str) -> str | None:
    """``-tp (--tensor-parallel-size)`` when ``flag`` is ``--tp`` and the engine spells it ``-tp``."""
    action = parser._option_string_actions.get(flag[1:]) if flag.startswith("--") else None
    if action is None:
        return None
    longest = max(action.option_strings, key=len)
    return flag[1:] + (f" ({longest})" if longest != flag[1:] else "")


def _closest_bare(flag: str, options: list[str], cutoff: float) -> str | None:
    """The option nearest to ``flag``, compared without the leading dashes (``--tp`` is not a
    near miss of ``--topk``: ``tp`` and ``topk`` are too far apart)."""
    from .._names import closest

    bare = {o.lstrip("-"): o for o in options}
    close = closest(flag.lstrip("-"), bare, cutoff=cutoff)
    return bare[close] if close else None
