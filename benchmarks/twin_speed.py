"""The twin's dispatch + combine against the floor: a plain ``all_to_all_single`` of the same bytes.

On 2 gloo ranks, per token count, each iteration times (after a barrier each, alternating which
goes first) one ``epbuf.twin.deep_ep`` dispatch + combine and the floor: two bare
``all_to_all_single`` calls moving exactly the bytes the twin's two record exchanges moved
(same split sizes, buffers allocated before the clock starts; no count exchange, no packing,
no reduction). Modes: ``ll`` (``low_latency_dispatch`` BF16 + ``low_latency_combine``) and
``normal`` (``get_dispatch_layout`` + intranode ``dispatch`` with top-k + ``combine``), hidden
7,168, top-k 8, 64 experts (``NVSHMEM_QP_DEPTH`` raised for 4,096 tokens, as upstream asks).
Figures: medians over the iterations of the slower rank;
``ratio = twin / floor`` (target <= 1.5).

    python benchmarks/twin_speed.py
    python benchmarks/twin_speed.py --tokens 16,128 --iters 11 --modes ll
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # the spawned ranks import this module


class _Recorder:
    """Wraps the engine's exchange to record the split sizes (rows x stride) each call moves."""

    def __init__(self, engine) -> None:
        self.engine, self.calls, self._inner = engine, [], engine.exchange
        engine.exchange = self

    def __call__(self, send, send_counts, recv_counts, what, key=None):
        stride = int(send.shape[1])
        self.calls.append(([c * stride for c in send_counts], [c * stride for c in recv_counts]))
        return self._inner(send, send_counts, recv_counts, what, key=key)

    def stop(self) -> None:
        self.engine.exchange = self._inner


def bench(rank: int, num_ranks: int, token_counts: list[int], modes: list[str], hidden: int, topk: int,
          iters: int) -> list[dict]:
    import torch
    import torch.distributed as dist

    import epbuf.twin.deep_ep as deep_ep

    num_experts = 64
    group = dist.group.WORLD
    # Upstream's low-latency calls assert NVSHMEM_QP_DEPTH >= (T + 1) * 2 (default 1024): set it as a user would.
    os.environ["NVSHMEM_QP_DEPTH"] = str(max(1024, (max(token_counts) + 1) * 2))
    rows = []
    for mode in modes:
        for num_tokens in token_counts:
            g = torch.Generator().manual_seed(rank)
            x = torch.randn((num_tokens, hidden), generator=g).to(torch.bfloat16)
            idx = torch.rand((num_tokens, num_experts), generator=g).argsort(dim=1)[:, :topk].contiguous()
            w = torch.rand((num_tokens, topk), generator=g)
            if mode == "ll":
                buffer = deep_ep.Buffer(group, 0, deep_ep.Buffer.get_low_latency_rdma_size_hint(
                    num_tokens, hidden, num_ranks, num_experts), low_latency_mode=True, num_qps_per_rank=1)

                def twin():
                    recv_x, _, handle, _, _ = buffer.low_latency_dispatch(x, idx, num_tokens, num_experts,
                                                                          use_fp8=False)
                    return buffer.low_latency_combine(recv_x, idx, w, handle)[0]
            else:
                buffer = deep_ep.Buffer(group, max(c.get_nvl_buffer_size_hint(hidden * 2, num_ranks) for c in (
                    deep_ep.Buffer.get_dispatch_config(num_ranks), deep_ep.Buffer.get_combine_config(num_ranks))), 0)

                def twin():
                    per_rank, _, per_expert, in_rank, _ = buffer.get_dispatch_layout(idx, num_experts)
                    recv_x, _, recv_w, _, handle, _ = buffer.dispatch(
                        x, num_tokens_per_rank=per_rank, is_token_in_rank=in_rank, num_tokens_per_expert=per_expert,
                        topk_idx=idx, topk_weights=w)
                    return buffer.combine(recv_x, handle, recv_w)[0]

            recorder = _Recorder(buffer._engine)
            twin()
            recorder.stop()
            plans = [(torch.empty(sum(s), dtype=torch.uint8), torch.empty(sum(r), dtype=torch.uint8), s, r)
                     for s, r in recorder.calls]

            def floor():
                for send, recv, s, r in plans:
                    dist.all_to_all_single(recv, send, r, s, group=group)

            runs = {"twin": twin, "floor": floor}
            for fn in runs.values():
                fn()
            times: dict = {k: [] for k in runs}
            for i in range(iters):
                for name in (list(runs) if i % 2 == 0 else list(runs)[::-1]):
                    dist.barrier()
                    start = time.perf_counter()
                    runs[name]()
                    times[name].append(time.perf_counter() - start)
            rows.append(dict(mode=mode, tokens=num_tokens, bytes=sum(sum(s) for s, _ in recorder.calls),
                             times={k: statistics.median(v) for k, v in times.items()}))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="16,128,512,4096", help="tokens per rank (= num_max_dispatch_tokens_per_rank)")
    ap.add_argument("--modes", default="ll,normal")
    ap.add_argument("--hidden", type=int, default=7168)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--iters", type=int, default=21)
    args = ap.parse_args(argv)

    from epbuf.runtime.testing import run_gloo

    token_counts = [int(t) for t in args.tokens.split(",")]
    ranks = run_gloo(bench, 2, token_counts, args.modes.split(","), args.hidden, args.topk, args.iters,
                     timeout=3600, collective_timeout=300)
    print(f"{'mode':6} {'tokens':>6} {'MiB sent':>9} {'twin ms':>9} {'floor ms':>9} {'ratio':>6}")
    for pair in zip(*ranks):
        twin = max(r["times"]["twin"] for r in pair)
        floor = max(r["times"]["floor"] for r in pair)
        print(f"{pair[0]['mode']:6} {pair[0]['tokens']:>6,} {pair[0]['bytes'] / 2**20:>9.2f} {twin * 1e3:>9.2f} "
              f"{floor * 1e3:>9.2f} {twin / floor:>6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
