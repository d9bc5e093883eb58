"""``epbuf serve``: the calculator as a web page and a JSON API whose endpoints answer these very
commands' documents (:mod:`epbuf.api`, :mod:`epbuf.webapi`), on this machine only unless ``--host``
says otherwise. Ctrl-C stops it with exit status 130."""

from __future__ import annotations

import argparse

from ._options import int_arg


def configure(p: argparse.ArgumentParser, command: str) -> None:
    p.description = ("Serve a page and a JSON API (/api/hint, /api/fit, ... with the options and JSON of these "
                     "commands) at http://HOST:PORT/. Listens on 127.0.0.1, this machine only, unless --host says "
                     "otherwise; there is no authentication.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every network, "
                        "with a warning)")
    p.add_argument("--port", type=int_arg("0..65535; 0 picks a free port", lo=0), default=8000,
                   help="TCP port (default 8000; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.add_argument("--time-limit", dest="time_limit", metavar="SECONDS", type=int_arg(">= 1 (seconds)"), default=60,
                   help="seconds one request may compute before it is stopped with a 422 naming the limit (default 60)")
    p.add_argument("--workers", metavar="N", type=int_arg("1..64"), default=4,
                   help="threads that run the quick commands (default 4; sweeps and simulations have 2 more); "
                        "more requests wait, and past 1,024 waiting get 503")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..serve import serve

    if args.workers > 64:
        from ..errors import InvalidArgumentError, Problem

        raise InvalidArgumentError([Problem("workers", args.workers, "allowed 1..64")])
    return serve(args.host, args.port, open_browser=args.open, time_limit=float(args.time_limit),
                 workers=args.workers)
