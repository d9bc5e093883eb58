"""Stand-ins for the GPU parts of an installed vLLM, so that its own argument parser and start-up
code run on a CPU: the compiled extension modules (``vllm._C`` and friends), the CUDA platform
object, the model-class inspection vLLM runs in a subprocess, the process groups, and the EP
libraries themselves (``deep_ep``, ``mori``, ``pplx_kernels``, ``uccl.ep``), whose entry points
record their arguments instead of allocating. Used by :mod:`epbuf.engines.installed.vllm` only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

__all__ = ["Recorder", "install_modules", "platform_class", "CpuGroup", "Group"]

#: Compiled extension modules of the vLLM wheel (``vllm/_C*.so``, ``vllm/_moe_C*.so`` ...): empty modules.
COMPILED_PREFIXES = ("vllm._C", "vllm._moe_C", "vllm._rocm_C", "vllm._flashmla", "vllm.cumem_allocator",
                     "vllm._custom_C", "vllm.vllm_flash_attn._vllm_fa")


class Recorder:
    """The EP library calls made while it is installed: ``calls`` as ``{"library", "name", "args"}``."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def record(self, library: str, name: str, args: dict) -> None:
        self.calls.append({"library": library, "name": name, "args": dict(args)})


def _value(v):
    """A captured argument as plain data (process groups and dtypes by name)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    name = getattr(v, "name", None)
    if name is not None and type(v).__name__ in ("_Kind",):
        return name
    text = str(v)
    return text.replace("torch.", "") if text.startswith("torch.") else type(v).__name__


def _deep_ep(rec: Recorder, real_hint):
    """``deep_ep``: ``Buffer(...)`` and ``Buffer.get_low_latency_rdma_size_hint(...)`` recorded; the
    hint's value is DeepEP's formula as epbuf computes it (``real_hint``), since vLLM passes it on."""
    mod = types.ModuleType("deep_ep")

    class Buffer:
        num_sms = 20

        def __init__(self, group=None, num_nvl_bytes=0, num_rdma_bytes=0, **kwargs):
            rec.record("deep_ep", "Buffer", {"num_nvl_bytes": num_nvl_bytes, "num_rdma_bytes": num_rdma_bytes,
                                              "group_size": group.size() if group is not None else None,
                                              **{k: _value(v) for k, v in kwargs.items()}})

        @staticmethod
        def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts):
            args = dict(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                        num_ranks=num_ranks, num_experts=num_experts)
            rec.record("deep_ep", "Buffer.get_low_latency_rdma_size_hint", args)
            return (rec.hint or real_hint)(**args)

        @staticmethod
        def set_num_sms(n):
            Buffer.num_sms = n

        def destroy(self):
            pass

    class ElasticBuffer:
        def __init__(self, group=None, **kwargs):
            rec.record("deep_ep", "ElasticBuffer", {k: _value(v) for k, v in kwargs.items()})

        def get_theoretical_num_sms(self, *a, **k):
            return 0

        def destroy(self):
            pass

    mod.Buffer, mod.ElasticBuffer = Buffer, ElasticBuffer
    for name in ("Config", "EventOverlap", "EPHandle"):  # type annotations only
        setattr(mod, name, type(name, (), {}))
    return mod


def _mori(rec: Recorder):
    mod = types.ModuleType("mori")
    ops = types.ModuleType("mori.ops")
    shmem = types.ModuleType("mori.shmem")

    class _Kind:
        def __init__(self, name):
            self.name = name

    ops.EpDispatchCombineKernelType = types.SimpleNamespace(**{n: _Kind(n) for n in (
        "IntraNode", "InterNode", "InterNodeV1", "InterNodeV1LL", "AsyncLL")})
    ops.EpDispatchCombineConfig = lambda **kw: rec.record("mori", "EpDispatchCombineConfig",
                                                          {k: _value(v) for k, v in kw.items()}) or kw
    class EpDispatchCombineOp:
        def __init__(self, config):
            rec.record("mori", "EpDispatchCombineOp", {})

    ops.EpDispatchCombineOp = EpDispatchCombineOp
    shmem.shmem_torch_process_group_init = lambda name: rec.record("mori", "shmem_torch_process_group_init",
                                                                   {"group": name})
    mod.ops, mod.shmem = ops, shmem
    return {"mori": mod, "mori.ops": ops, "mori.shmem": shmem}


def _amdsmi():
    """``amdsmi`` as an MI300X (gfx942, 192 GiB) answers it: what ``vllm/platforms/rocm.py`` asks at import."""
    mod = types.ModuleType("amdsmi")
    mod.AmdSmiException = type("AmdSmiException", (Exception,), {})
    mod.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0)
    mod.amdsmi_init = mod.amdsmi_shut_down = lambda *a, **k: None
    mod.amdsmi_get_processor_handles = lambda: [0]
    mod.amdsmi_get_gpu_asic_info = lambda handle: {"target_graphics_version": "gfx942", "market_name": "AMD Instinct MI300X"}
    mod.amdsmi_get_gpu_device_uuid = lambda handle: "GPU-standin"
    mod.amdsmi_get_gpu_memory_total = lambda handle, kind: 192 << 30
    mod.amdsmi_topo_get_link_type = lambda a, b: {"hops": 1, "type": 2}
    mod.amdsmi_topo_get_numa_node_number = lambda handle: 0
    return mod


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the stand-in modules (and empty compiled-extension modules) by name."""

    def __init__(self, modules: dict) -> None:
        self.modules = modules

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.modules or fullname.startswith(COMPILED_PREFIXES):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=fullname in ("mori", "deep_ep"))
        return None

    def create_module(self, spec):
        return self.modules.get(spec.name) or types.ModuleType(spec.name)

    def exec_module(self, module):
        pass


class _Active:
    """The recorder the stand-in modules report to: vLLM imports them once per process and keeps them."""

    recorder: Recorder | None = None
    #: The size hint of the library the stand-in plays (DeepEP's, or UCCL-EP's drop-in's); ``None``: DeepEP's.
    hint = None

    def record(self, library: str, name: str, args: dict) -> None:
        if self.recorder is not None:
            self.recorder.record(library, name, args)


_ACTIVE = _Active()
_FINDER: list = []


def install_modules(rec: Recorder, real_hint, hint=None) -> None:
    """Make ``rec`` the recorder and, the first time, put the stand-in modules first on ``sys.meta_path``
    (they stay: vLLM keeps the modules it imported). ``hint``: the size hint ``deep_ep`` answers with
    (``None``: ``real_hint``, DeepEP's)."""
    _ACTIVE.recorder, _ACTIVE.hint = rec, hint
    if not _FINDER:
        _FINDER.append(_Finder({"deep_ep": _deep_ep(_ACTIVE, real_hint), "amdsmi": _amdsmi(), **_mori(_ACTIVE)}))
        sys.meta_path.insert(0, _FINDER[0])


def uninstall_recorder() -> None:
    _ACTIVE.recorder = None


def platform_class(base, capability: tuple[int, int], name: str, num_bytes: int, count: int, rocm: bool):
    """A subclass of vLLM's CUDA (or ROCm) platform that answers the device questions itself."""
    from vllm.platforms.interface import DeviceCapability

    class StandInPlatform(base):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(*capability)

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return name

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return num_bytes

        @classmethod
        def device_count(cls) -> int:
            return count

        @classmethod
        def is_fully_connected(cls, device_ids) -> bool:
            return True

        @classmethod
        def get_device_uuid(cls, device_id: int = 0) -> str:
            return f"GPU-standin-{device_id}"

    StandInPlatform.__name__ = f"StandIn{base.__name__}"
    StandInPlatform._rocm = rocm
    return StandInPlatform


class CpuGroup:
    """A process group of ``size`` ranks seen from rank 0 (``rank()``, ``size()``)."""

    def __init__(self, size: int) -> None:
        self._size = size

    def rank(self) -> int:
        return 0

    def size(self) -> int:
        return self._size


class Group:
    """A ``GroupCoordinator`` seen from rank 0: ``world_size``, ``rank_in_group``."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.rank_in_group = 0
        self.rank = 0
        self.device_communicator = None


def patch_custom_ops() -> None:
    """The capability queries of ``vllm._custom_ops`` that call compiled kernels at import or
    config time: answered as the CUDA 12 build answers them (block FP8 from sm_90, FP8 from sm_89)."""
    import vllm._custom_ops as ops

    ops.cutlass_scaled_mm_supports_block_fp8 = lambda capability: capability >= 90
    ops.cutlass_scaled_mm_supports_fp8 = lambda capability: capability >= 89
    ops.cutlass_group_gemm_supported = lambda capability: capability >= 90
    import vllm.utils.import_utils as import_utils

    # DeepEP V2 is offered when deep_ep has ElasticBuffer and the runtime NCCL is >= 2.30.4.
    import_utils._get_runtime_nccl_version = lambda: import_utils.DEEPEP_V2_MIN_NCCL_VERSION_RAW
