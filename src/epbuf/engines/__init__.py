"""What a serving or training *engine* allocates for expert-parallel communication, with the
flags and environment variables it is launched with — offline, exact, with findings and
what to set instead.

Engines (``epbuf engine NAME``, :func:`report`):

========================  ====================================================================
``vllm``                  DeepEP V1 high-throughput / low-latency, DeepEP V2, pplx, MORI (``--all2all-backend``)
``sglang``                DeepEP V1 ``DeepEPBuffer.get_deepep_buffer``, DeepEP V2, MORI (``--moe-a2a-backend``)
``megatron``              Megatron-LM flex dispatcher with DeepEP (``fused_a2a.get_buffer``)
``sgl-kernel-npu``        Ascend ``deep_ep``: the HCCL window (``HCCL_BUFFSIZE``) and the op checks
``mindspeed``             MindSpeed per-group HCCL buffers (``--hccl-group-buffer[-adaptive]``)
``vllm-ascend``           vllm-ascend per-group HCCL buffers and the MC2 window (``HCCL_BUFFSIZE``)
========================  ====================================================================

Each engine is an :class:`EngineSpec`: its knobs (flags and variables, spelled as the engine
spells them, with defaults and ranges), its versions, and a *recipe* that composes the
backend functions (``epbuf.backends.deepep_v1`` / ``deepep_v2``) or the Ascend window checks
into an :class:`~epbuf.engines._report.EngineReport`; ``--uccl-ep`` answers the DeepEP V1 recipes
with UCCL-EP's drop-in (``epbuf.backends.uccl_ep``). Modules are imported on first use.

>>> from epbuf.engines import report
>>> rep = report("vllm", hidden=5120, num_topk=8, num_experts=384, num_ranks=16,
...              flags={"--all2all-backend": "deepep_low_latency", "--enable-eplb": True,
...                     "--num-redundant-experts": 64},
...              env={"VLLM_MOE_DP_CHUNK_SIZE": "2048"}, version="dp-chunk")
>>> [r.value for r in rep.recommendations if r.goal == "limit"]
[1843]

JSON schema ``epbuf.engine/1`` (``epbuf engine NAME --json``; stable: fields are only added)
--------------------------------------------------------------------------------------------
``schema``            ``"epbuf.engine/1"``
``engine``            registry name; ``version`` / ``version_note``: the engine version modelled
``title``             one line
``settings``          ``[{name, value, source, note}]``: every setting used; ``source`` is
                      ``flag``, ``env``, ``default``, ``model`` or ``derived``
``num_bytes``         total bytes allocated per device by these buffers; ``num_bytes_needed``:
                      what the library's own sizing / the op checks need
``device``            ``{name, num_bytes, share}`` or ``null``
``budget``            ``--budget`` bytes or ``null``; ``fits_budget``: bool or ``null``
``errors``            codes of the ``error`` findings (empty: the configuration starts and runs)
``recommendations``   ``[{setting, value, goal, num_bytes, message}]``; ``goal`` is ``load``
                      (smallest value serving ``--max-tokens-under-load``), ``budget`` (largest
                      value within ``--budget``), ``limit`` (largest value a hard limit allows)
                      or ``fix``; ``value`` is ``null`` when nothing satisfies the goal. Each
                      goal is searched alone, so together they may disagree
``to_set``            the same objects: the one consistent set to follow (one value per token
                      count: the load's when given, else the budget's, else the limit's only when
                      the current value is above it; a ``NVSHMEM_QP_DEPTH`` fix for that value)
``report``            an ``epbuf.report/1`` object: one buffer per allocation (NVL, RDMA,
                      low-latency RDMA, HCCL windows ...) with regions, formulas and sources,
                      plus ``findings`` and ``limits``
"""

from __future__ import annotations

from .._lazy import exports

__all__ = ["ENGINES", "EngineSpec", "engine_names", "get_engine", "report", "EngineReport", "Setting"]

# name -> (module, attribute holding its EngineSpec, one-line description). Imported on first use.
ENGINES: dict[str, tuple[str, str, str]] = {
    "vllm": ("epbuf.engines.vllm", "ENGINE", "vLLM: DeepEP V1 high-throughput/low-latency, DeepEP V2, pplx, MORI; "
                                             "UCCL-EP drop-in"),
    "sglang": ("epbuf.engines.sglang", "ENGINE", "SGLang: DeepEPBuffer (DeepEP V1 normal/low_latency/auto), DeepEP V2, "
                                                 "MORI; UCCL-EP drop-in"),
    "megatron": ("epbuf.engines.megatron", "ENGINE", "Megatron-LM: flex dispatcher with DeepEP (fused_a2a.get_buffer)"),
    "sgl-kernel-npu": ("epbuf.engines.sgl_kernel_npu", "ENGINE",
                       "sgl-kernel-npu deep_ep (SGLang on Ascend): HCCL_BUFFSIZE window and op checks"),
    "mindspeed": ("epbuf.engines.mindspeed", "ENGINE", "MindSpeed: per-group HCCL buffers (adaptive and manual)"),
    "vllm-ascend": ("epbuf.engines.vllm_ascend", "ENGINE", "vllm-ascend: per-group HCCL buffers and the MC2 window"),
}

# Where the public names live; imported on first use so that registering the `engine`
# command (epbuf.cli) costs this module only.
_LAZY = {"EngineSpec": "_api", "get_engine": "_api", "report": "_api", "EngineReport": "_report",
         "Setting": "_knobs"}


def engine_names() -> tuple[str, ...]:
    return tuple(ENGINES)


__getattr__, __dir__ = exports(__name__, _LAZY)
