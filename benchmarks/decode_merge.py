"""The model's decode attention with its merge fused into the split kernel, against the two-launch kernel.

The hello-gpu decode step calls decode attention once a layer (hello_gpu.models.decode_attention_kernel). Until
session 23 that was two launches: the split kernel (each program a range of keys of one KV head) and a merge kernel
(one program a KV head, reading the splits' partials back). Fused, the last program of a KV head to finish (an
atomic count) merges; the merge kernel and the gap before it go.

prediction: the H100's profile of the 1B's hello-gpu decode step (records/nvidia-h100-80gb-hbm3/models/
  profile.1b.decode.b1.p512.hello-gpu, run of 5af4aad) had the split kernel at ~3.6 us a call and the merge at 2.4
  us, with ~1-2 us of launch gap between two kernels of a CUDA graph. Fused, the last program's merge (~12 KB of
  partials from L2, one round of loads) adds ~1 us to the split kernel's tail: ~2-3 us saved a layer, the step's
  attention (captured here as a step captures it: every layer's call in one CUDA graph, each on its own cache)
  ~1.3-1.5x faster at the 1B's and 8B's batch-1 shapes; ~40 us of the 1B's ~1.07 ms H200 step (~4%), ~80 us of
  the 8B's 4.5 ms (~2%). At batch 16 the split kernel is longer (16x the keys), the saving the same: ~1.05-1.1x
outcome: wrong, slower but at one shape (records/nvidia-h100-80gb-hbm3/decode-merge.json, H100, run of 3a550b2):
  fused over two launches 0.979x [0.978, 0.980] at the 1B (5.92 against 5.81 us a call), 1.023x [1.022, 1.024]
  at the 8B's batch 1, 0.889x [0.887, 0.890] at its batch 16; with PDL 0.925x, 0.950x, 0.844x. The merge kernel
  and its gap cost ~1 us in a graph, not the ~3-4 us the profile's 2.4 us a call suggested, and the last program
  merges only after its own split's work, on the critical path. The merge stays a kernel of its own

Each side is a CUDA graph of a step's calls (16 layers on the 1B, 32 on the 8B), replayed; paired, interleaved,
warm cache (the 8B's 32 caches at batch 1 are 2 x 32 x 1.6 MB = 101 MB, above the 50 MB L2, as in a step), with
and without programmatic dependent launch. Both sides are checked against float64 SDPA first.

    python benchmarks/decode_merge.py > records/nvidia-h200/decode-merge.json
"""

from __future__ import annotations

import json

import torch

from hello_gpu.bench import compare, measure
from hello_gpu.models.backends import REPLACEMENTS, captured_call
from hello_gpu.models.decode_attention_kernel import decode_attention
from hello_gpu.models.llama import attention

# name, batch, query heads, KV heads, cache positions, head dim, position, layers (a step's calls)
CASES = (("1b b1", 1, 32, 8, 768, 64, 640, 16),
         ("8b b1", 1, 32, 8, 768, 128, 640, 32),
         ("8b b16", 16, 32, 8, 640, 128, 576, 32))
SECONDS = 2.0


def layer_inputs(batch, heads, kv_heads, seq, dim, position, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(batch, heads, 1, dim, device="cuda", generator=generator).to(torch.bfloat16)
    keys, values = (torch.randn(batch, kv_heads, seq, dim, device="cuda", generator=generator).to(torch.bfloat16)
                    for _ in range(2))
    mask = torch.arange(seq, device="cuda")[None, :] <= position
    return q, keys, values, mask


def captured(layers, fused: bool, pdl: bool):
    """(graph, outputs): every layer's call captured once, after a warm-up on a side stream."""
    return captured_call(lambda: [decode_attention(q, keys, values, mask, pdl=pdl, fused_merge=fused)
                                  for q, keys, values, mask in layers], warmups=1)


def check(outputs, layers) -> float:
    """The largest error over the registry's bound (<= 1 passes) of the first and last layers' outputs."""
    worst = 0.0
    for out, arguments in ((outputs[0], layers[0]), (outputs[-1], layers[-1])):
        q, keys, values, mask = arguments
        reference = attention(q.double(), keys.double(), values.double(), mask)
        rtol, atol = REPLACEMENTS["attention"].tolerance_of(arguments, q.dtype)
        over = ((out.double() - reference).abs() / (atol + rtol * reference.abs())).max()
        worst = max(worst, float(over))
    if worst > 1:
        raise AssertionError(f"decode attention off by {worst:.2f}x its bound")
    return worst


def case(name, batch, heads, kv_heads, seq, dim, position, layers, pdl):
    inputs = [layer_inputs(batch, heads, kv_heads, seq, dim, position, seed=layer) for layer in range(layers)]
    two_launches, two_outputs = captured(inputs, fused=False, pdl=pdl)
    fused, fused_outputs = captured(inputs, fused=True, pdl=pdl)
    two_launches.replay()
    fused.replay()
    errors = {"two launches": check(two_outputs, inputs), "fused": check(fused_outputs, inputs)}
    baseline = measure(two_launches.replay, cache="warm", max_seconds=SECONDS)
    candidate = measure(fused.replay, cache="warm", max_seconds=SECONDS)
    paired = compare(two_launches.replay, fused.replay, cache="warm", max_seconds=SECONDS)
    return {"case": name, "pdl": pdl, "batch": batch, "heads": heads, "kv_heads": kv_heads, "cache": seq,
            "head_dim": dim, "position": position, "layers": layers, "error_over_bound": errors,
            "two_launches_us_a_call": baseline.summary.median * 1e6 / layers,
            "fused_us_a_call": candidate.summary.median * 1e6 / layers,
            "speedup": paired.speedup.value, "ci95": list(paired.speedup.ci95), "verdict": paired.verdict}


def main() -> None:
    results = [case(*arguments, pdl=pdl) for arguments in CASES for pdl in (False, True)]
    print(json.dumps({"device": torch.cuda.get_device_name(), "vs": "two launches (split, merge)",
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
