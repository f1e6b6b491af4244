"""agent/: the measure -> locate -> change one thing -> measure again loop, automated.

The pieces, one idea per file:

- :mod:`.candidate`: a candidate kernel (its source, its parent, the action and hypothesis that made
  it, its state and every tool result) and the states it passes through.
- :mod:`.task`: what is being optimised: an operator of ``hello_gpu.ops`` (its spec is the checker's
  reference) and a route, or a KernelBench-style problem file.
- :mod:`.store`: the SQLite candidate store of a run folder; written before and after each step.
- :mod:`.sandbox`: a candidate compiled, checked and timed in a child process with a time limit.
- :mod:`.tools`: compile, check, bench / compare, analyze, accept, record: typed, JSON in and out.
- :mod:`.anticheat`: the checks that reject library fallbacks, cached results, partial writes ...
- :mod:`.policies`: ``scripted`` (offline, deterministic) and ``llm`` (any OpenAI-compatible endpoint).
"""
