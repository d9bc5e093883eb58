"""One module per upstream library family; each turns a Plan into a Report.

* :mod:`epbuf.backends.ascend` — DeepEP-Ascend ``EPBuffer``
* :mod:`epbuf.backends.deepep_v2`, :mod:`epbuf.backends.deepep_v1` — DeepEP V2 and V1 (legacy)
* :mod:`epbuf.backends.mori_ep` — MORI-EP ``EpDispatchCombineHandle`` (AMD ROCm)
* :mod:`epbuf.backends.pplx` — pplx-kernels ``AllToAll`` (internode NVSHMEM, intranode CUDA IPC)

The registry that maps backend names to these modules is ``epbuf.plan.BACKENDS``.
"""
