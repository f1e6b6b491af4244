"""The logic of ``hello-gpu model run`` and ``hello-gpu model profile`` (cli.py only parses the arguments).

Every output goes to ``--out`` or to the user data folder (:func:`hello_gpu.models.run.default_out_dir`),
never into the tracked tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .backends import BACKENDS, REPLACEMENTS
from .checkpoint import CheckpointError, load_checkpoint, load_tokenizer
from .llama import CONFIGS, build_model, config_named, parse_dtype
from .run import default_out_dir, render_run, run_model


def _say(console, text: str, **style) -> None:
    console.print(text, markup=False, highlight=False, soft_wrap=True, **style)


def resolve_device(name: str | None) -> torch.device:
    if name is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no GPU here (torch.cuda.is_available() is False); use --device cpu")
    return device


def parse_backends(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"--backend {text!r}: known backends are {', '.join(BACKENDS)} (comma-separated)")
    return names


def load_model(*, config: str | None, checkpoint: str | None, device: torch.device, dtype, seed: int):
    """(model, tokenizer or None, note): a checkpoint folder if given, else random weights of ``config``."""
    if checkpoint:
        model = load_checkpoint(checkpoint, device=device, dtype=dtype)
        tokenizer, why = load_tokenizer(checkpoint)
        return model, tokenizer, f"weights from {checkpoint}" + (f"; token ids only: {why}" if why else "")
    return build_model(config_named(config or "tiny"), device=device, dtype=dtype, seed=seed), None, \
        f"random weights, seed {seed}"


def default_dtype(device: torch.device):
    """bf16 on a GPU (the issue's targets); float32 on the CPU, where bf16 matmuls are slow."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def model_run(args, console) -> int:
    try:
        device = resolve_device(args.device)
        dtype = parse_dtype(args.dtype) if args.dtype else default_dtype(device)
        backends = parse_backends(args.backend)
        unknown = sorted(set(args.force or ()) - set(REPLACEMENTS))
        if unknown:
            raise ValueError(f"--force {', '.join(unknown)}: known replacements are {', '.join(REPLACEMENTS)}")
        if args.batch < 1 or args.prompt < 1 or args.new < 2:
            raise ValueError("--batch and --prompt must be at least 1, --new at least 2")
        model, tokenizer, note = load_model(config=args.config, checkpoint=args.checkpoint, device=device,
                                            dtype=dtype, seed=args.seed)
    except (ValueError, CheckpointError, OSError) as error:
        _say(console, f"model run: {error}", style="bold red")
        return 2
    prompt = None
    if args.text is not None:
        if tokenizer is None:
            _say(console, "model run: --text needs --checkpoint with a tokenizer.json and the tokenizers package; "
                          "without them the model takes token ids (random, --prompt of them)", style="bold red")
            return 2
        ids = tokenizer.encode(args.text).ids
        prompt = torch.tensor([ids] * args.batch, dtype=torch.long)
    if (prompt.shape[1] if prompt is not None else args.prompt) + args.new > model.config.max_position:
        _say(console, f"model run: prompt + new tokens exceed the model's {model.config.max_position} positions",
             style="bold red")
        return 2
    _say(console, f"{model.config.name}: {model.config.parameter_count() / 1e6:,.2f} M parameters, {note}")
    out = Path(args.out) if args.out else default_out_dir("run", model.config.name)
    # Written after every backend: a run stopped half-way keeps the backends it measured.
    result = run_model(model, backends, batch=args.batch, prompt_length=args.prompt, new=args.new, seed=args.seed,
                       prompt=prompt, force=args.force or (), console=console, progress=console.is_terminal,
                       on_run=lambda partial: partial.write(out))
    render_run(result, console)
    if tokenizer is not None:
        for run in result.runs:
            _say(console, f"{run.backend}: {tokenizer.decode(run.tokens[0])!r}")
    _say(console, f"wrote {result.write(out)}")
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


def model_profile(args, console) -> int:
    from .profile import profile_llama, profile_table, profile_vision

    try:
        device = resolve_device(args.device)
        dtype = parse_dtype(args.dtype) if args.dtype else default_dtype(device)
        name = "vision" if args.vision else (args.config or "tiny")
        out = Path(args.out) if args.out else default_out_dir("profile", name)
        trace = out / "trace.json"
        if args.vision:
            profile = profile_vision(device=device, dtype=dtype, batch=args.batch, size=args.image_size,
                                     steps=args.steps, trace_path=trace)
        else:
            if args.backend not in BACKENDS:
                raise ValueError(f"--backend {args.backend!r}: known backends are {', '.join(BACKENDS)}")
            model, _, note = load_model(config=args.config, checkpoint=args.checkpoint, device=device, dtype=dtype,
                                        seed=args.seed)
            profile = profile_llama(model, backend=args.backend, batch=args.batch, prompt=args.prompt,
                                    phase=args.phase, steps=args.steps, trace_path=trace)
            profile.notes.append(note)
    except (ValueError, CheckpointError, OSError) as error:
        _say(console, f"model profile: {error}", style="bold red")
        return 2
    for table in profile_table(profile):
        console.print(table)
    for note in profile.notes:
        _say(console, f"note: {note}")
    path = out / "model-profile.json"
    path.write_text(json.dumps(profile.to_dict(), indent=2), encoding="utf-8")
    _say(console, f"wrote {path} and {trace} (open it in https://ui.perfetto.dev)")
    if args.json:
        print(json.dumps(profile.to_dict(), indent=2))
    return 0


CONFIG_NAMES = tuple(CONFIGS)
