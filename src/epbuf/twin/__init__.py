"""CPU twins of the EP libraries' Python APIs: code written for the library runs on
``torch.distributed`` (gloo on CPU) with the same names, signatures, return shapes and dtypes,
buffers checked against epbuf's exact sizes and upstream's refusals raised on every rank.

``epbuf.twin.deep_ep``
    DeepEP V1's ``Buffer`` (``deep_ep/buffers/legacy.py @dd758ca``); ``deep_ep.install()``
    makes ``import deep_ep`` give it.
``epbuf.twin.pplx_kernels``
    pplx-kernels' ``AllToAll.intranode`` / ``internode`` (``src/pplx_kernels/all_to_all.py
    @12cecfd``); ``pplx_kernels.install()`` makes ``import pplx_kernels`` give it.
``epbuf.twin.mori``
    MORI-EP's ``EpDispatchCombineConfig`` and ``EpDispatchCombineOp`` (``python/mori/ops/
    dispatch_combine.py @624002c``); ``mori.install()`` makes ``import mori`` give it.

The engine underneath (``_engine*.py``): one agreement all-gather per call (refusals and
counts), then one ``all_to_all_single`` of records packed by :mod:`epbuf.codec`. Importing
``epbuf.twin`` imports nothing else; the twins need torch (``epbuf[torch]``).
See docs/guides/twin.md.
"""
