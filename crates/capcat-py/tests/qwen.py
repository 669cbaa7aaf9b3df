"""The demo's workload from Python: Qwen2.5-0.5B's shape, 24 decoder layers
with four hooks each (two bf16 projections, an f32 norm, i64 position
ids), hidden size 896, two tokens per record; 96 records a step, so 128
steps make the demo's 12,288 records."""

from __future__ import annotations

from typing import Dict

import ml_dtypes
import numpy as np

LAYERS = 24
HIDDEN = 896
TOKENS = 2
RECORDS_PER_STEP = LAYERS * 4


def step_tensors(step: int) -> Dict[str, np.ndarray]:
    """One step's tensors, the same bytes for the same step."""
    rng = np.random.default_rng(step)
    tensors = {}
    for layer in range(LAYERS):
        base = f"model.layers.{layer}."
        for module in ("self_attn.o_proj", "mlp.down_proj"):
            bits = rng.integers(0, 1 << 16, size=(TOKENS, HIDDEN), dtype=np.uint16)
            tensors[base + module] = bits.view(ml_dtypes.bfloat16)
        tensors[base + "post_attention_layernorm"] = rng.standard_normal(
            (TOKENS, HIDDEN), dtype=np.float32
        )
        tensors[base + "self_attn.position_ids"] = np.arange(
            step * TOKENS, (step + 1) * TOKENS, dtype=np.int64
        )
    return tensors
