"""The preset tables: ``epbuf models``, ``epbuf devices`` and ``epbuf versions`` (the upstream
formula generations each backend follows, ``--backend-version``)."""

from __future__ import annotations

import argparse
import sys

from ._options import add_wide_option, output_width, print_json

_DESCRIPTIONS = {
    "models": "MoE model presets usable with --model.",
    "devices": "Accelerator presets usable with --device.",
    "versions": "Upstream commits whose arithmetic epbuf reproduces, per backend.",
}


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = _DESCRIPTIONS[command]
    p.add_argument("--json", action="store_true", help="machine-readable output (every field, sources included)")
    add_wide_option(p)
    p.set_defaults(run={"models": run_models, "devices": run_devices, "versions": run_versions}[command])


def _summarised(command: str, data: dict) -> dict:
    """``data`` with its ``summary`` (:func:`epbuf.verdict.summary`)."""
    from ..verdict import summary

    data["summary"] = summary(command, data)
    return data


def run_models(args: argparse.Namespace) -> int:
    if args.json:
        from ..api._tools import models_document

        print_json(models_document())
        return 0
    from ..models.presets import MODELS

    from ..render import table
    from ..units import format_int

    rows = [[m.name, format_int(m.hidden), format_int(m.num_experts), format_int(m.num_topk),
             format_int(m.num_shared_experts), m.hf_id] + ([m.source] if args.wide else []) for m in MODELS.values()]
    headers = ["model", "hidden", "experts", "top-k", "shared", "Hugging Face id"]
    sys.stdout.write(table(headers + (["source (config.json)"] if args.wide else []), rows, right={1, 2, 3, 4},
                           indent="", width=output_width(args)) + "\n")
    if not args.wide:
        sys.stdout.write("(--wide adds the config.json each row was read from; --json has every field)\n")
        sys.stdout.write("(a Hugging Face id whose config.json is in the local cache works too)\n")
    return 0


def run_devices(args: argparse.Namespace) -> int:
    if args.json:
        from ..api._tools import devices_document

        print_json(devices_document())
        return 0
    from ..devices import DEVICES

    from ..render import table
    from ..units import format_bytes, format_int

    from ..placement import DEVICE_BACKENDS

    width = output_width(args)
    exact = width is None or width >= 100  # the exact bytes (as the driver reports them) when there is room
    rows = [[d.name, d.title] + ([format_int(d.num_bytes)] if exact else []) + [format_bytes(d.num_bytes), d.label,
             str(d.ranks_per_node), DEVICE_BACKENDS[d.vendor]] + ([d.source] if args.wide else [])
            for d in DEVICES.values()]
    headers = (["device", "title"] + (["bytes"] if exact else []) + ["memory", "label", "per node", "backend"]
               + (["source"] if args.wide else []))
    shift = 0 if exact else -1
    sys.stdout.write(table(headers, rows, right={2, 3 + shift, 5 + shift} - {1}, indent="", width=width,
                           wrap_columns=(1, 4 + shift)) + "\n")
    if not args.wide:
        from ..render import wrap

        sys.stdout.write("\n".join(wrap("backend: what --device chooses without --backend. (--wide adds where "
                                         "each number comes from; --json has every field)", output_width(args)))
                         + "\n")
    return 0


def run_versions(args: argparse.Namespace) -> int:
    from ..api._tools import versions_data, versions_document

    if args.json:
        print_json(versions_document())
        return 0
    data = versions_data()
    from ..render import wrap

    width = output_width(args)
    for name, entry in data.items():
        sys.stdout.write(f"{name}\n")
        for vid, text in entry["versions"].items():
            mark = " (default)" if vid == entry["default"] else ""
            line = f"{vid or '-'}{mark}: {text.removeprefix(vid + ': ')}"
            sys.stdout.write("\n".join(wrap(line, width, indent="      ", first="  ")) + "\n")
    return 0
