"""The answer first: every command's verdict, as one pure function over its finished ``--json``
document (:func:`summary`, the document's top-level ``summary`` object) and the two text lines
each command opens with (:func:`verdict_lines`).

A summary has the same keys for every command (README, "JSON schemas"):

* ``command``: the command whose document it summarises (``"hint"``, ``"engine"``, ...);
* ``num_bytes``: the answer's total per device (``hint``/``engine``: the allocation; ``compare``:
  the smallest allocation of a backend that runs on the device without an error; ``fit``: the
  allocation at the best backend's largest value; ``sweep``: the largest row), or ``None``;
* ``device`` {``name``, ``num_bytes``, ``share``, ``fits``} and ``budget`` {``num_bytes``,
  ``share``, ``fits``}: ``num_bytes`` against the device memory and the budget, or ``None``;
* ``fits``: every one of those fits (``None``: neither given; ``simulate``: every region held the
  routing; ``replay``: every field read back as written);
* ``num_errors``, ``num_warnings``: error and warning findings (``compare``/``fit``: with the
  backends that rejected the plan; ``sweep``: rows with an error or a broken limit);
* ``first_error`` {``code``, ``message``, ``where``} (``where``: the backend or row; ``""`` for
  one report; ``compare``: a backend that runs on the device first), or ``None``;

plus the command's own keys (:data:`EXTRA_KEYS`). Nothing here computes a size: every number is
read from the document.
"""

from __future__ import annotations

from .units import format_bytes, format_int

__all__ = ["summary", "verdict_lines", "verdict_text", "SUMMARY_KEYS", "EXTRA_KEYS"]

#: The keys of every summary, in order.
SUMMARY_KEYS = ("command", "num_bytes", "device", "budget", "fits", "num_errors", "num_warnings", "first_error")

#: The keys a command adds to :data:`SUMMARY_KEYS`.
EXTRA_KEYS = {
    "hint": ("title",), "engine": ("title",), "layout": ("title", "num_records"),
    "compare": ("backends", "smallest", "largest", "num_fit"),
    "fit": ("variable", "backend", "value", "none_fit"),
    "sweep": ("num_rows", "num_fit", "largest"),
    "simulate": ("title", "fullest", "time"),
    "replay": ("num_fields", "num_wrong_fields"),
    "models": ("count",), "devices": ("count",), "versions": ("count",),
}


def _against(num_bytes: int | None, capacity: int | None) -> dict | None:
    if num_bytes is None or not capacity:
        return None
    return {"num_bytes": capacity, "share": num_bytes / capacity, "fits": num_bytes <= capacity}


def _device(num_bytes: int | None, device: dict | None) -> dict | None:
    entry = _against(num_bytes, (device or {}).get("num_bytes"))
    return None if entry is None else {"name": device["name"], **entry}


def _findings(findings: list, where: str = "") -> dict:
    errors = [f for f in findings if f.get("severity") == "error"]
    first = errors[0] if errors else None
    return {"num_errors": len(errors), "num_warnings": sum(f.get("severity") == "warning" for f in findings),
            "first_error": None if first is None else {"code": first["code"], "message": first["message"],
                                                        "where": where}}


def _fits(*entries) -> bool | None:
    given = [e["fits"] for e in entries if e is not None]
    return all(given) if given else None


def _report(doc: dict, findings: list | None = None, budget: int | None = None) -> dict:
    n = doc.get("num_bytes")
    device = _device(n, doc.get("device"))
    budget_entry = _against(n, budget if budget is not None else (doc.get("budget") or {}).get("num_bytes"))
    return {"num_bytes": n, "device": device, "budget": budget_entry, "fits": _fits(device, budget_entry),
            **_findings(doc.get("findings", []) if findings is None else findings), "title": doc.get("title", "")}


def _engine(doc: dict) -> dict:
    return _report(doc, doc["report"]["findings"], doc.get("budget"))


def _layout(doc: dict) -> dict:
    return {**_findings(doc["findings"]), "title": doc.get("backend", ""), "num_records": len(doc["records"])}


def _compare(doc: dict) -> dict:
    device = doc.get("device")
    runs_on = (device or {}).get("runs_on") or {}
    rows, first, errors, warnings = [], None, 0, 0
    # the backends that run on the device first, so that the first error is one of theirs
    for name, rep in sorted(doc["backends"].items(), key=lambda item: runs_on.get(item[0]) is False):
        if "error" in rep:
            errors += 1
            first = first or {"code": "rejected", "message": rep["error"], "where": name}
            rows.append({"backend": name, "num_bytes": None, "device": None, "runs_on": runs_on.get(name),
                         "num_errors": 1})
            continue
        found = _findings([f for f in rep["findings"] if not f["code"].startswith("device.")], name)
        errors += found["num_errors"]
        warnings += found["num_warnings"]
        first = first or found["first_error"]
        rows.append({"backend": name, "num_bytes": rep["num_bytes"], "device": _device(rep["num_bytes"], device),
                     "runs_on": runs_on.get(name), "num_errors": found["num_errors"]})
    rows.sort(key=lambda r: list(doc["backends"]).index(r["backend"]))  # the document's order
    sized = [r for r in rows if r["num_bytes"] is not None]
    usable = [r for r in sized if r["runs_on"] is not False and not r["num_errors"]]
    smallest = min(usable, key=lambda r: r["num_bytes"], default=None)
    largest = max(sized, key=lambda r: r["num_bytes"], default=None)
    return {"num_bytes": smallest["num_bytes"] if smallest else None, "device": smallest and smallest["device"],
            "fits": (smallest["device"] or {}).get("fits") if smallest else (False if device else None),
            "num_errors": errors, "num_warnings": warnings, "first_error": first, "backends": rows,
            "smallest": smallest and smallest["backend"], "largest": largest and largest["backend"],
            "num_fit": sum(1 for r in usable if (r["device"] or {}).get("fits", True))}


def _fit(doc: dict) -> dict:
    runs_on = (doc.get("device") or {}).get("runs_on") or {}
    best, first, errors, none_fit = None, None, 0, []
    for name, r in doc["results"].items():
        if "error" in r:
            errors += 1
            first = first or {"code": "rejected", "message": r["error"], "where": name}
        elif r["value"] is None:
            none_fit.append(name)
        elif runs_on.get(name) is not False and (best is None or (not r["independent"], r["value"])
                                                  > (not best[1]["independent"], best[1]["value"])):
            best = (name, r)  # a value the budget binds before one that any value fits
    n = best[1]["report"]["num_bytes"] if best and best[1].get("report") else None
    device = _device(n, doc.get("device"))
    budget = _against(n, doc["budget"]) or {"num_bytes": doc["budget"], "share": None, "fits": False}
    return {"num_bytes": n, "device": device, "budget": budget, "fits": best is not None, "num_errors": errors,
            "first_error": first, "variable": doc["variable"], "backend": best and best[0],
            "value": best and ("any" if best[1]["independent"] else best[1]["value"]), "none_fit": none_fit}


#: The sweep columns as the options name them (a row's place in the sweep, for people).
_AXES = {"num_topk": "top-k", "num_experts": "experts", "num_ranks": "ranks", "num_max_tokens_per_rank": "tokens",
         "use_fp8_dispatch": "dtype"}


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "FP8" if value else "BF16"
    return format_int(value) if isinstance(value, int) else str(value)


def _sweep(doc: dict) -> dict:
    col = {c: i for i, c in enumerate(doc["columns"])}
    device = doc.get("device")
    first, errors, fit, largest = None, 0, 0, None
    for k, row in enumerate(doc["rows"]):
        where = ", ".join([f"row {k + 1}: {row[col['backend']]}"] + [
            f"{_AXES.get(v, v)} {_cell(row[col[v]])}" for v in doc["varying"] if v != "backend" and v in col])
        problem = row[col["error"]] or row[col["broken_limits"]]
        if problem:
            errors += 1
            first = first or {"code": "rejected" if row[col["error"]] else "broken-limit", "message": problem,
                              "where": where}
            continue
        n = row[col["num_bytes"]]
        fit += device is None or n <= device["num_bytes"]
        if largest is None or n > largest[0]:
            largest = (n, where)
    n = largest[0] if largest else None
    dev = _device(n, device)
    return {"num_bytes": n, "device": dev, "fits": _fits(dev), "num_errors": errors, "first_error": first,
            "num_rows": len(doc["rows"]), "num_fit": fit, "largest": largest and largest[1]}


def _simulate(doc: dict) -> dict:
    regions = doc["regions"]
    fullest = max(regions, key=lambda u: u["peak_used_slots"] / u["reserved_slots"] if u["reserved_slots"] else 0,
                  default=None)
    return {"fits": all(u["within"] for u in regions), **_findings(doc["findings"]), "title": doc.get("title", ""),
            "fullest": fullest and {"phase": fullest["phase"], "region": fullest["region"],
                                    "fill": fullest["peak_used_slots"] / fullest["reserved_slots"]
                                    if fullest["reserved_slots"] else 0.0},
            "time": {phase: t["seconds"] for phase, t in (doc.get("time") or {}).items()}}


def _replay(doc: dict) -> dict:
    wrong = [f["name"] for f in doc["fields"] if f["num_differing"]]
    return {"fits": doc["consistent"], **_findings(doc["findings"]), "num_fields": len(doc["fields"]),
            "num_wrong_fields": len(wrong)}


def _table(key: str):
    return lambda doc: {"count": len(doc[key])}


_BUILDERS = {"hint": _report, "engine": _engine, "layout": _layout, "compare": _compare, "fit": _fit,
             "sweep": _sweep, "simulate": _simulate, "replay": _replay, "models": _table("models"),
             "devices": _table("devices"), "versions": _table("backends")}


def summary(command: str, document: dict) -> dict:
    """The verdict of ``command`` read from its finished JSON ``document`` (pure: the document is
    not changed): the keys of :data:`SUMMARY_KEYS`, then the command's :data:`EXTRA_KEYS`."""
    out = dict.fromkeys(SUMMARY_KEYS)
    out.update(command=command, num_errors=0, num_warnings=0)
    out.update(_BUILDERS[command](document))
    return out


# --- text -------------------------------------------------------------------------------------
def _capacity_parts(s: dict) -> list[tuple[str, ...]]:
    """One piece: the shares of the device and of the budget, and whether it fits them."""
    d, b = s["device"], s["budget"]
    if not d and not b:
        return []
    if d and b and d["fits"] != b["fits"]:
        state = "DOES NOT FIT the " + ("budget" if d["fits"] else "device")
    else:
        state = "fits" if (d or b)["fits"] else "DOES NOT FIT"
    name = d and ("--hbm" if d["name"].startswith("--hbm") else d["name"])
    variants = []
    for dev, bud in (((f"{name} ({format_bytes(d['num_bytes'])})" if d else ""),
                      (f"the budget ({format_bytes(b['num_bytes'])})" if b else "")),
                     (name, "the budget"), ("the device", "the budget"), ("device", "budget")):
        shares = ([f"{d['share'] * 100:.2f} % of {dev}"] if d else []) + ([f"{b['share'] * 100:.2f} % of {bud}"]
                                                                         if b else [])
        variants.append(", ".join(shares) + f": {state}")
    return [tuple(variants)]


def _errors_part(s: dict) -> tuple[str, ...]:
    n = s["num_errors"]
    return (f"{n} error{'s' if n != 1 else ''}",) if n else ("", "")


def _total(n: int) -> tuple[str, ...]:
    return f"{format_bytes(n)} per device ({format_int(n)} B)", f"{format_bytes(n)} per device", format_bytes(n)


def _time(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} us"


def _first_parts(s: dict) -> list[tuple[str, str]]:
    """(full, short) pieces of the first line; a short piece of ``""`` may be left out."""
    c = s["command"]
    if c in ("hint", "engine"):
        return [_total(s["num_bytes"])] + _capacity_parts(s) + [_errors_part(s)]
    if c == "layout":
        return [(f"{s['num_records']} token record layouts ({s['title']})", f"{s['num_records']} record layouts"),
                _errors_part(s)]
    if c == "compare":
        n = len(s["backends"])
        if s["smallest"]:
            parts = [(f"smallest {s['smallest']}: " + _total(s["num_bytes"])[0],
                      f"smallest {s['smallest']}: " + _total(s["num_bytes"])[1])]
        else:
            parts = [(f"none of {n} backends sizes the plan without an error", f"none of {n} backends")]
        parts += _capacity_parts(s)
        if s["device"] is not None:
            parts.append((f"{s['num_fit']} of {n} backends run on it and fit", f"{s['num_fit']} of {n} fit"))
        elif s["smallest"]:
            parts.append((f"{n} backends",))
        big = next((r for r in s["backends"] if r["backend"] == s["largest"]), None)
        if big and big["backend"] != s["smallest"]:
            parts.append((f"largest {big['backend']} {format_bytes(big['num_bytes'])}", ""))
        return parts + [_errors_part(s)]
    if c == "fit":
        label = "tokens per rank" if s["variable"] == "num_max_tokens_per_rank" else "EP size"
        if s["backend"] is None:
            return [(f"no backend fits the budget of {format_bytes(s['budget']['num_bytes'])} at any {label}",
                     "nothing fits the budget"), _errors_part(s)]
        else:
            value = s["value"] if s["value"] == "any" else format_int(s["value"])
            parts = [(f"largest {label}: {s['backend']} {value}",), _total(s["num_bytes"])]
            parts += _capacity_parts({**s, "device": None})  # the budget's share (the device's is in --json)
        if s["none_fit"]:
            parts.append((f"nothing fits for {', '.join(s['none_fit'])}", f"{len(s['none_fit'])} fit nothing"))
        return parts + [_errors_part(s)]
    if c == "sweep":
        parts = [(f"{format_int(s['num_rows'])} configurations", f"{format_int(s['num_rows'])} rows")]
        if s["num_bytes"] is not None:
            parts.append((f"largest {format_bytes(s['num_bytes'])} per device ({s['largest']})",
                          f"largest {format_bytes(s['num_bytes'])}"))
        parts += _capacity_parts(s)
        if s["device"]:
            parts.append((f"{format_int(s['num_fit'])} fit",))
        n = s["num_errors"]
        return parts + [(f"{format_int(n)} with an error or a broken limit", f"{format_int(n)} with errors")
                        if n else ("",)]
    if c == "simulate":
        f = s["fullest"]
        parts = [("every region held the routing" if s["fits"] else "a region overflowed its reservation",
                  "all within" if s["fits"] else "OVERFLOW")]
        if s["time"]:
            parts.append((", ".join(f"{p} {_time(t)}" for p, t in s["time"].items()), ""))
        if f:
            parts.append((f"fullest: {f['phase']} {f['region']} {f['fill'] * 100:.1f} %",
                          f"fullest region {f['fill'] * 100:.1f} %"))
        return parts + [_errors_part(s)]
    if c == "replay":
        n, k = s["num_fields"], s["num_wrong_fields"]
        text = f"every one of {n} fields reads back as written" if not k else f"{k} of {n} fields read back wrong"
        return [(text,), _errors_part(s)]
    return [(f"{s.get('count', 0)} {c}",)]


def _fit_line(parts: list[tuple[str, ...]], width: int | None, prefix: str) -> str:
    """The pieces joined with ``; ``, each in its longest variant that lets the line fit
    ``width`` (the last pieces shorten first; an empty variant leaves the piece out)."""
    chosen = [0] * len(parts)

    def line() -> str:
        return prefix + "; ".join(t for t in (p[k] for p, k in zip(parts, chosen)) if t)

    if width is not None:
        for k in range(len(parts) - 1, -1, -1):
            while len(line()) > width and chosen[k] < len(parts[k]) - 1:
                chosen[k] += 1
        for k in range(len(parts)):  # then give the first pieces back what room is left
            while chosen[k] > 0:
                chosen[k] -= 1
                if len(line()) > width:
                    chosen[k] += 1
                    break
    text = line()
    if width is not None and len(text) > width:  # then the middle pieces go, the last first
        for k in range(len(parts) - 2, 0, -1):
            chosen[k] = len(parts[k])
            parts[k] = parts[k] + ("",)
            text = line()
            if len(text) <= width:
                return text
    return text if width is None or len(text) <= width else text[:width - 1] + "…"


def verdict_lines(s: dict, width: int | None = None) -> list[str]:
    """The two lines a command's text opens with: the answer (total, share of the device or
    budget, fits or not, how many errors), then the first error (cut to ``width`` with ``…``; the
    findings below have it whole) or how many warnings there are."""
    first = _fit_line(_first_parts(s), width, "verdict: ")
    e = s["first_error"]
    if e is None:
        w = s["num_warnings"]
        second = "  no errors" + (f"; {w} warning{'s' if w != 1 else ''} below" if w else "")
    else:
        where = f" ({e['where']})" if e["where"] else ""
        head = f"  {'first ' if s['num_errors'] > 1 else ''}error{where}: "
        tail = f"  [{e['code']}]"
        message = " ".join(e["message"].split())
        if width is not None and len(head) + len(message) + len(tail) > width:
            room = width - len(head) - len(tail) - 1
            if room < 20:  # a long row name: keep the message, drop where
                head = f"  {'first ' if s['num_errors'] > 1 else ''}error: "
                room = width - len(head) - len(tail) - 1
            message = message[:max(room, 0)].rstrip() + "…"
        second = head + message + tail
    return [first, second]


def verdict_text(s: dict, width: int | None = None) -> str:
    """:func:`verdict_lines` and a blank line, to put before a command's text."""
    return "\n".join(verdict_lines(s, width)) + "\n\n"
