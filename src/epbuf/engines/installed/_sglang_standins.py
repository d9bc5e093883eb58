"""Stand-ins for the GPU parts of an installed SGLang (and Megatron-core), so that their own parsers,
resolution pipelines and dispatcher code run on a CPU: a CUDA or ROCm device answered from a
:class:`Device` (``torch.cuda`` queries, SGLang's ``nvidia-smi`` / ``rocm-smi`` memory probes),
compiled or GPU-only packages as empty modules (:data:`ABSENT`), the process groups, and the EP
libraries (``deep_ep``, ``mori``) whose entry points record their arguments instead of allocating.
Used by :mod:`epbuf.engines.installed.sglang` and :mod:`epbuf.engines.installed.megatron` only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

__all__ = ["ABSENT", "Device", "Recorder", "StandInGroup", "install", "uninstall", "patch_torch"]

#: Packages SGLang imports on its CUDA path whose code is compiled or GPU-only; they are empty
#: modules whose attributes are inert classes (nothing of theirs is called before the EP library).
ABSENT = ("torchvision", "pynvml", "sgl_kernel", "deep_gemm", "flashinfer", "aiter")


class Device:
    """The GPU the engine is told it runs on."""

    def __init__(self, name: str, num_bytes: int, rocm: bool = False, num_sms: int = 132, capability=(9, 0)):
        self.name, self.num_bytes, self.rocm, self.num_sms, self.capability = name, num_bytes, rocm, num_sms, capability


class Recorder:
    """The EP library calls made while installed: ``calls`` as ``{"library", "name", "args"}``."""

    def __init__(self) -> None:
        self.calls: list[dict] = []

    def record(self, library: str, name: str, args: dict) -> None:
        self.calls.append({"library": library, "name": name, "args": {k: _plain(v) for k, v in args.items()}})


class _Current:
    """The recorder the stand-in libraries report to: the engine keeps the modules it imported once,
    so one set of stand-ins serves every resolution in a process, each with its own recorder."""

    recorder = Recorder()

    @classmethod
    def record(cls, library: str, name: str, args: dict) -> None:
        cls.recorder.record(library, name, args)


def _plain(v):
    """A captured argument as plain data (dtypes and kernel kinds by name)."""
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    if isinstance(v, _Kind):
        return v.name
    text = str(v)
    return text.replace("torch.", "") if text.startswith("torch.") else type(v).__name__


class _Kind:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


class StandInGroup:
    """A process group of ``size`` ranks seen from rank 0; ``cpu_group`` and ``device_group`` are itself."""

    def __init__(self, size: int) -> None:
        self._size = size
        self.cpu_group = self.device_group = self
        self.world_size = size
        self.rank_in_group = 0

    def size(self) -> int:
        return self._size

    def rank(self) -> int:
        return 0


def _deep_ep(rec: Recorder):
    """``deep_ep``: ``Buffer`` records its construction; the size hints are DeepEP's own arithmetic
    as :mod:`epbuf.backends.deepep_v1` computes it (the engine passes their values on), at the
    ``Buffer.num_sms`` the engine sets."""
    from ...backends import deepep_v1

    mod = types.ModuleType("deep_ep")

    class Config:
        def __init__(self, *args, **kwargs):
            self._cfg = deepep_v1.Config(*args, **kwargs)
            self.num_sms = self._cfg.num_sms

        def get_nvl_buffer_size_hint(self, hidden_bytes, num_ranks):
            return self._cfg.get_nvl_buffer_size_hint(hidden_bytes, num_ranks)

        def get_rdma_buffer_size_hint(self, hidden_bytes, num_ranks):
            return self._cfg.get_rdma_buffer_size_hint(hidden_bytes, num_ranks)

    def _wrap(cfg):
        out = Config.__new__(Config)
        out._cfg, out.num_sms = cfg, cfg.num_sms
        return out

    class Buffer:
        num_sms = 20

        def __init__(self, group=None, num_nvl_bytes=0, num_rdma_bytes=0, **kwargs):
            self.group, self.num_nvl_bytes, self.num_rdma_bytes = group, num_nvl_bytes, num_rdma_bytes
            self.low_latency_mode = kwargs.get("low_latency_mode", False)
            rec.record("deep_ep", "Buffer", {"group_size": group.size() if group is not None else None,
                                             "num_nvl_bytes": num_nvl_bytes, "num_rdma_bytes": num_rdma_bytes,
                                             "num_sms": Buffer.num_sms, **kwargs})

        @staticmethod
        def get_dispatch_config(num_ranks):
            return _wrap(deepep_v1.get_dispatch_config(num_ranks, Buffer.num_sms))

        @staticmethod
        def get_combine_config(num_ranks):
            return _wrap(deepep_v1.get_combine_config(num_ranks, Buffer.num_sms))

        @staticmethod
        def get_low_latency_rdma_size_hint(num_max_dispatch_tokens_per_rank, hidden, num_ranks, num_experts):
            args = dict(num_max_dispatch_tokens_per_rank=num_max_dispatch_tokens_per_rank, hidden=hidden,
                        num_ranks=num_ranks, num_experts=num_experts)
            rec.record("deep_ep", "Buffer.get_low_latency_rdma_size_hint", args)
            return deepep_v1.get_low_latency_rdma_size_hint(**args)

        @staticmethod
        def set_num_sms(n):
            Buffer.num_sms = n

        def clean_low_latency_buffer(self, *args):
            pass

    class ElasticBuffer:
        num_bytes = 0  # read by SGLang's log line only

        def __init__(self, group=None, **kwargs):
            rec.record("deep_ep", "ElasticBuffer", {"group_size": group.size() if group is not None else None, **kwargs})

    mod.Buffer, mod.Config, mod.ElasticBuffer = Buffer, Config, ElasticBuffer
    utils = types.ModuleType("deep_ep.utils")
    utils.EventHandle = utils.EventOverlap = type("Event", (), {})
    mod.utils = utils
    return {"deep_ep": mod, "deep_ep.utils": utils}


def _mori(rec: Recorder):
    import dataclasses

    mod, ops, shmem = (types.ModuleType(n) for n in ("mori", "mori.ops", "mori.shmem"))
    ops.EpDispatchCombineKernelType = types.SimpleNamespace(**{n: _Kind(n) for n in (
        "IntraNode", "InterNode", "InterNodeV1", "InterNodeV1LL", "AsyncLL")})
    names = ("data_type", "rank", "world_size", "hidden_dim", "scale_dim", "scale_type_size", "max_token_type_size",
             "max_num_inp_token_per_rank", "num_experts_per_rank", "num_experts_per_token", "warp_num_per_block",
             "block_num", "max_total_recv_tokens", "use_external_inp_buf", "kernel_type", "gpu_per_node",
             "rdma_block_num", "num_qp_per_pe", "quant_type")
    config = dataclasses.make_dataclass("EpDispatchCombineConfig", [(n, object, None) for n in names])

    def make_config(**kwargs):
        rec.record("mori", "EpDispatchCombineConfig", kwargs)
        return config(**kwargs)

    make_config.__dataclass_fields__ = config.__dataclass_fields__
    ops.EpDispatchCombineConfig = config
    ops.EpDispatchCombineOp = lambda cfg: rec.record("mori", "EpDispatchCombineOp", dataclasses.asdict(cfg)) or \
        types.SimpleNamespace(config=cfg)
    shmem.shmem_torch_process_group_init = lambda name: None
    mod.ops, mod.shmem = ops, shmem
    return {"mori": mod, "mori.ops": ops, "mori.shmem": shmem}


class _Inert(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return name


class _AbsentModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(name, (), {"__init__": lambda self, *a, **k: None})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, modules: dict) -> None:
        self.modules = modules

    def find_spec(self, fullname, path=None, target=None):
        if fullname in self.modules or fullname.split(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return self.modules.get(spec.name) or _AbsentModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []


_FINDER: list = []


def install(rec: Recorder) -> _Finder:
    """Put the stand-in modules first on ``sys.meta_path`` (once per process, after ``transformers``
    has decided that ``torchvision`` is absent) and send their calls to ``rec``; returns the finder."""
    _Current.recorder = rec
    if not _FINDER:
        try:
            import transformers.utils.import_utils  # noqa: F401  (reads the real package list first)
        except ImportError:
            pass
        _FINDER.append(_Finder({**_deep_ep(_Current), **_mori(_Current)}))
        sys.meta_path.insert(0, _FINDER[0])
    return _FINDER[0]


def uninstall(finder: _Finder) -> None:
    """Stop recording (the modules stay: the engine holds them)."""
    _Current.recorder = Recorder()


def patch_torch(device: Device) -> None:
    """``torch.cuda`` (and ``torch.version``) answer as ``device`` would."""
    import torch

    props = types.SimpleNamespace(total_memory=device.num_bytes, multi_processor_count=device.num_sms,
                                  name=device.name, major=device.capability[0], minor=device.capability[1],
                                  gcnArchName="gfx942" if device.rocm else "")
    torch.cuda.is_available = lambda: True
    if device.rocm:
        torch.version.hip, torch.version.cuda = "6.4", None
    else:
        torch.version.cuda = "12.8"
    torch.cuda.device_count = lambda: 8
    torch.cuda.get_device_capability = lambda *a, **k: device.capability
    torch.cuda.current_device = lambda: 0
    torch.cuda.get_device_name = lambda *a, **k: device.name
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.mem_get_info = lambda *a, **k: (device.num_bytes, device.num_bytes)
    torch._C._distributed_c10d._register_process_group = lambda name, group: None  # MoRI's shmem group
    torch.distributed.get_rank = lambda *a, **k: 0  # rank 0 of every group (DeepEPConfig logs on rank 0)
    torch.cuda.Stream = type("Stream", (), {"__init__": lambda self, *a, **k: None, "wait_stream": lambda self, *a: None})
