"""The chat turn's split attention (50 new queries after 2,000 cached keys, 8B shape, 64-row graph
shape, 8 splits), launched eagerly a few times so that ncu can profile one split and one merge launch.

Run: ncu --clock-control none -k regex:_prefill_ --launch-skip 4 --launch-count 2 --set detailed \
         python docs/experiments/2026-12-04c/attn_ncu.py
"""
import sys

import torch

sys.path.insert(0, ".")
from kernels.bench import PREFIX_CACHED, PREFIX_GRAPH_MAX_SEQ, PREFIX_GRAPH_ROWS, PREFIX_NEW, PrefixCase  # noqa: E402

case = PrefixCase(PREFIX_NEW, PREFIX_CACHED, 1)
print(case.check("split", PREFIX_GRAPH_ROWS, PREFIX_GRAPH_ROWS, max_seq_len=PREFIX_GRAPH_MAX_SEQ))
for _ in range(4):
    case.call("split", PREFIX_GRAPH_ROWS, PREFIX_GRAPH_ROWS, max_seq_len=PREFIX_GRAPH_MAX_SEQ)
torch.cuda.synchronize()
