"""The record of one model's shape: what an expert-parallel buffer depends on."""

from __future__ import annotations

from .._record import Record

__all__ = ["ModelSpec"]


class ModelSpec(Record):
    """The shape of one MoE model, as far as expert-parallel buffers care.

    Attributes:
        name: preset key, lower-case with dashes (``"deepseek-v3"``). For a spec read by
            :func:`~epbuf.models.read_model_config`: the config's ``model_type`` (``""`` if absent).
        title: display name (``"DeepSeek-V3"``); for a config file, its folder's name.
        hidden: hidden size (elements per token) — Plan ``hidden``.
        num_experts: routed experts (shared experts not included) — Plan ``num_experts``.
        num_topk: routed experts per token — Plan ``num_topk``.
        num_shared_experts: shared experts every token also runs (not dispatched by
            expert parallelism); 0 when none. A model whose config gives one fused shared
            FFN of some width (Qwen2-MoE ``shared_expert_intermediate_size``) counts 1 and
            says so in ``notes``.
        num_layers: decoder layers (``num_hidden_layers``), dense ones included; 0 = unknown.
        dtype: the config's ``torch_dtype``/``dtype`` as written (``""`` when absent);
            weight quantization, when any, is in ``notes``.
        source: the ``config.json`` copy the numbers come from (repo, path and commit,
            or the file read).
        notes: anything a reader of the numbers should know (``""`` when nothing).
        aliases: other accepted names (matched like ``name``).
        hf_id: Hugging Face repo id of the model (``"deepseek-ai/DeepSeek-V3"``).
        verified: ``True`` when every number was read from a copy of the published config.
    """

    name: str
    title: str
    hidden: int
    num_experts: int
    num_topk: int
    num_shared_experts: int = 0
    num_layers: int = 0
    dtype: str = ""
    source: str = ""
    notes: str = ""
    aliases: tuple = ()
    hf_id: str = ""
    verified: bool = True

    def plan_fields(self) -> dict:
        """The :class:`~epbuf.plan.Plan` fields this model fixes.

        >>> from epbuf.models import get_model
        >>> get_model("mixtral-8x7b").plan_fields()
        {'hidden': 4096, 'num_topk': 2, 'num_experts': 8, 'model': 'mixtral-8x7b'}
        """
        return {
            "hidden": self.hidden,
            "num_topk": self.num_topk,
            "num_experts": self.num_experts,
            "model": self.name or self.title,
        }
