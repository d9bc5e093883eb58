"""Text rendering of reports for people. No arithmetic beyond formatting lives here.

* :mod:`.tables` — wrapped lines, tables that fit a width, byte cells, findings (every renderer)
* :mod:`.report` — ``epbuf hint`` (:func:`render_report`) and ``epbuf layout`` (:func:`render_layout`)
* :mod:`.compare` — ``epbuf compare`` and ``epbuf fit``: backends side by side
* :mod:`.sweep` — ``epbuf sweep``
* :mod:`.engine` — ``epbuf engine`` (:func:`render_engine_report`)

Each module is loaded on first use of one of its names (a command renders one kind of output).
"""

from .._lazy import exports

__all__ = ["table", "bytes_cell", "render_report", "render_layout", "render_inputs", "render_compare",
           "render_fit", "render_sweep", "render_engine_report"]

_WHERE = {"wrap": "tables", "table": "tables", "bytes_cell": "tables", "render_inputs": "tables",
          "render_report": "report", "render_layout": "report", "render_compare": "compare", "render_fit": "compare",
          "render_sweep": "sweep", "render_engine_report": "engine"}
__getattr__, __dir__ = exports(__name__, _WHERE)
