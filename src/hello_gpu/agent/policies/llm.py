"""The LLM policy: any OpenAI-compatible chat endpoint proposes the next kernel.

``POST {base_url}/chat/completions`` with a JSON body (standard library ``urllib.request``; no client
package). Where the settings come from, first found wins, per setting:

1. options to :func:`hello_gpu.agent.policies.make_policy` (``base_url=``, ``model=``, ``api_key=``,
   ``timeout_s=``);
2. the environment: ``HELLO_GPU_LLM_BASE_URL``, ``HELLO_GPU_LLM_MODEL``, ``HELLO_GPU_LLM_API_KEY``,
   ``HELLO_GPU_LLM_TIMEOUT_S``;
3. a TOML file, ``~/.config/hello-gpu/llm.toml`` (or ``HELLO_GPU_LLM_CONFIG``)::

       base_url = "http://127.0.0.1:8000/v1"
       model = "qwen2.5-coder-32b-instruct"
       api_key = "..."          # optional: local servers often need none
       timeout_s = 120

The prompt carries the task, the current source (and the HIP launcher), the analysis and the previous
attempts with their verdicts. The reply's fenced code block of the route's language (```cpp / ```hip /
```cuda for HIP, ```python for Triton) becomes the candidate; a ```python block beside a HIP kernel is
its new launcher. The candidate then goes through the same pipeline as any other: compile, check,
anti-cheat, paired timing.

Every failure raises :class:`LLMError` with ``kind`` (``config``, ``unreachable``, ``timeout``,
``http``, ``malformed``, ``refusal``, ``no-code``, ``repeat``) and a message naming the problem. The
policy holds no run state: the loop records the error on the round and continues or stops, and nothing
it stored is lost.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..candidate import Candidate

CONFIG_PATH = Path("~/.config/hello-gpu/llm.toml")
ENVIRONMENT = {"base_url": "HELLO_GPU_LLM_BASE_URL", "model": "HELLO_GPU_LLM_MODEL",
               "api_key": "HELLO_GPU_LLM_API_KEY", "timeout_s": "HELLO_GPU_LLM_TIMEOUT_S"}
# A hosted model writing a 200-line kernel takes 30-90 s; 120 s leaves room without hanging a run.
DEFAULT_TIMEOUT_S = 120.0
HISTORY_LIMIT = 12                  # previous attempts shown in the prompt (most recent last)
REPLY_EXCERPT = 300                 # characters of a bad reply quoted in an error

LANGUAGES = {"hip": ("cpp", "c++", "hip", "cuda", "cu", "c"), "triton": ("python", "py")}
KERNEL_MARKERS = {"hip": "__global__", "triton": "@triton.jit"}
_FENCE = re.compile(r"```[ \t]*([A-Za-z+#]*)[^\n]*\n(.*?)```", re.DOTALL)
_REFUSAL = re.compile(r"\b(I can(?:no|')t|I cannot|I am unable|I'm unable|I won't|I will not|I'm sorry|I am sorry|"
                      r"as an AI|not able to (?:help|assist))\b", re.IGNORECASE)


class LLMError(RuntimeError):
    """The endpoint did not give a usable candidate. ``kind`` says which way it failed."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class LLMConfig:
    base_url: str
    model: str
    api_key: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    temperature: float = 0.0

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"


def _read_config_file(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        import tomllib
    except ModuleNotFoundError:                   # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise LLMError("config", f"{path}: reading TOML needs Python 3.11 (tomllib) or the tomli package; "
                                     f"set {', '.join(ENVIRONMENT.values())} instead") from None
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, ValueError) as error:
        raise LLMError("config", f"{path}: cannot read the LLM settings: {error}") from None
    unknown = sorted(set(data) - set(ENVIRONMENT) - {"temperature"})
    if unknown:
        raise LLMError("config", f"{path}: unknown settings {', '.join(unknown)}; known: "
                                 f"{', '.join([*ENVIRONMENT, 'temperature'])}")
    return data


def resolve_config(options: dict | None = None, environ: dict | None = None,
                   config_path: str | Path | None = None) -> LLMConfig:
    """The settings from options, else the environment, else the config file; an error names what is missing."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    environ = os.environ if environ is None else environ
    path = Path(config_path or options.get("config_path") or environ.get("HELLO_GPU_LLM_CONFIG") or CONFIG_PATH)
    path = path.expanduser()
    from_file = _read_config_file(path)
    settings = {}
    for key, variable in ENVIRONMENT.items():
        value = options.get(key, environ.get(variable) or from_file.get(key))
        if value is not None:
            settings[key] = value
    for key in ("base_url", "model"):
        if not settings.get(key):
            raise LLMError("config", f"no LLM {key.replace('_', ' ')}: pass {key}=..., set {ENVIRONMENT[key]}, "
                                     f"or write {key} = \"...\" in {path}")
    try:
        timeout = float(settings.get("timeout_s", DEFAULT_TIMEOUT_S))
    except (TypeError, ValueError):
        raise LLMError("config", f"timeout_s must be a number of seconds, got {settings['timeout_s']!r}") from None
    if not settings["base_url"].startswith(("http://", "https://")):
        raise LLMError("config", f"base_url must start with http:// or https://, got {settings['base_url']!r}")
    temperature = float(options.get("temperature", from_file.get("temperature", 0.0)))
    return LLMConfig(base_url=str(settings["base_url"]), model=str(settings["model"]),
                     api_key=settings.get("api_key") or None, timeout_s=timeout, temperature=temperature)


# --------------------------------------------------------------------------------------------- prompt
SYSTEM_PROMPT = """You optimise one GPU kernel at a time for speed, keeping its results exact within the \
task's tolerance. Change one thing per attempt, state why it should be faster, and predict by how much.
Rules: the kernel must do all of the work itself (no PyTorch or vendor-library calls for the computation, \
no caching between calls, no side streams or threads, no lower precision than declared); keep the file's \
entry point, signature and run() function; return the whole file.
Reply format: a line 'ACTION: <the one change, short>', a line 'HYPOTHESIS: <why faster, predicted speedup>', \
then the complete new file in one fenced code block ({fence}){companion_note}."""


def _describe_task(task) -> str:
    fields = {"operator": task.op, "route": task.route, "starting rung": task.start,
              "dtypes": ", ".join(task.dtypes) or "the operator's", "benchmark shape": task.bench_shape,
              "check shapes": list(task.check_shapes) or "the operator's edge shapes",
              "deterministic required": task.deterministic}
    if task.problem_path:
        fields["KernelBench problem"] = task.problem_path
    return "\n".join(f"- {key}: {value}" for key, value in fields.items())


def _describe_history(history: list[Candidate]) -> str:
    if not history:
        return "(none yet)"
    lines = []
    for candidate in history[-HISTORY_LIMIT:]:
        verdict = candidate.state + (f" ({candidate.reason})" if candidate.reason else "")
        speedup = (candidate.results.get("compare") or {}).get("speedup") if isinstance(candidate.results, dict) else None
        extra = f", speedup {speedup}" if speedup is not None else ""
        lines.append(f"- candidate {candidate.id} (parent {candidate.parent_id}): {candidate.action or 'start'} "
                     f"-> {verdict}{extra}")
    return "\n".join(lines)


def build_messages(context: dict) -> list[dict]:
    """The chat messages for one proposal: system rules, then the task, source, analysis and history."""
    task, current = context["task"], context["current"]
    fence = "```cpp" if task.route == "hip" else "```python"
    companion_note = (" and, only if the launch must change, the launcher in a second ```python block"
                      if current.companion else "")
    parts = [f"Task:\n{_describe_task(task)}",
             f"Analysis of the current kernel (profile and roofline):\n"
             f"{json.dumps(context.get('analysis') or {}, sort_keys=True, default=str)}",
             f"Previous attempts and their verdicts:\n{_describe_history(context.get('history') or [])}",
             f"Current source (candidate {current.id}):\n{fence}\n{current.source}\n```"]
    if current.companion:
        parts.append(f"Its launcher (Python):\n```python\n{current.companion}\n```")
    parts.append(f"Round {context.get('round', 0)}. Propose the next candidate.")
    return [{"role": "system", "content": SYSTEM_PROMPT.format(fence=fence, companion_note=companion_note)},
            {"role": "user", "content": "\n\n".join(parts)}]


# --------------------------------------------------------------------------------------------- transport
def chat(config: LLMConfig, messages: list[dict]) -> str:
    """One chat completion; the reply's text. Every failure is an :class:`LLMError` naming it."""
    body = json.dumps({"model": config.model, "messages": messages, "temperature": config.temperature}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(config.url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as response:   # noqa: S310 - http(s) only
            raw = response.read()
    except urllib.error.HTTPError as error:
        detail = error.read()[:REPLY_EXCERPT].decode("utf-8", errors="replace") if error.fp else ""
        raise LLMError("http", f"{config.url} answered HTTP {error.code} {error.reason}: {detail}".rstrip(": ")) from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, (TimeoutError, socket.timeout)):
            raise LLMError("timeout", f"{config.url} did not answer within {config.timeout_s:g} s") from None
        raise LLMError("unreachable", f"cannot reach {config.url}: {error.reason}") from None
    except (TimeoutError, socket.timeout):
        raise LLMError("timeout", f"{config.url} did not answer within {config.timeout_s:g} s") from None
    except OSError as error:                 # connection reset mid-reply and the like
        raise LLMError("unreachable", f"{config.url}: the connection failed: {error}") from None
    except http.client.HTTPException as error:   # not HTTP at all, or a body cut short
        raise LLMError("malformed", f"{config.url} sent a broken HTTP reply: {type(error).__name__}: {error}") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise LLMError("malformed", f"{config.url} replied with something that is not JSON ({error.msg} at "
                                    f"character {error.pos}): {text[:REPLY_EXCERPT]!r}") from None
    try:
        message = data["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise LLMError("malformed", f"{config.url} replied JSON without choices[0].message: "
                                    f"{text[:REPLY_EXCERPT]!r}") from None
    if not isinstance(message, dict):
        raise LLMError("malformed", f"choices[0].message is not an object: {text[:REPLY_EXCERPT]!r}")
    if message.get("refusal"):
        raise LLMError("refusal", f"the model refused: {str(message['refusal'])[:REPLY_EXCERPT]}")
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        finish = data["choices"][0].get("finish_reason") if isinstance(data["choices"][0], dict) else None
        kind = "refusal" if finish == "content_filter" else "malformed"
        raise LLMError(kind, f"the reply has no text (finish_reason {finish!r}): {text[:REPLY_EXCERPT]!r}")
    return content


# --------------------------------------------------------------------------------------------- reply
def extract_code(reply: str, route: str) -> tuple[str, str | None]:
    """(kernel source, launcher or None) from the reply's fenced blocks.

    HIP: the first ```cpp/```hip/```cuda block holding ``__global__`` (else the first such block), and a
    ```python block as the launcher. Triton: the ```python block holding ``@triton.jit`` (else the first).
    """
    blocks = [(language.lower(), code) for language, code in _FENCE.findall(reply)]
    wanted = LANGUAGES[route]
    mine = [code for language, code in blocks if language in wanted]
    if route == "hip" and not mine:
        mine = [code for language, code in blocks if not language and KERNEL_MARKERS["hip"] in code]
    if route == "triton" and not mine:
        mine = [code for language, code in blocks if not language and KERNEL_MARKERS["triton"] in code]
    if not mine:
        if _REFUSAL.search(reply):
            raise LLMError("refusal", f"the model refused or gave no code: {reply.strip()[:REPLY_EXCERPT]!r}")
        fence = "```cpp" if route == "hip" else "```python"
        raise LLMError("no-code", f"the reply has no {fence} code block: {reply.strip()[:REPLY_EXCERPT]!r}")
    marked = [code for code in mine if KERNEL_MARKERS[route] in code]
    source = (marked or mine)[0]
    companion = None
    if route == "hip":
        launchers = [code for language, code in blocks if language in LANGUAGES["triton"]]
        companion = launchers[0] if launchers else None
    return source, companion


def _labelled(reply: str, label: str) -> str | None:
    match = re.search(rf"^\s*\**{label}\**\s*:\s*(.+)$", reply, re.IGNORECASE | re.MULTILINE)
    return match.group(1).strip() if match else None


class LLMPolicy:
    """One chat completion per proposal, its code block the candidate."""

    name = "llm"

    def __init__(self, *, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 timeout_s: float | None = None, config_path: str | Path | None = None,
                 temperature: float | None = None, environ: dict | None = None):
        self.config = resolve_config({"base_url": base_url, "model": model, "api_key": api_key,
                                      "timeout_s": timeout_s, "temperature": temperature},
                                     environ=environ, config_path=config_path)
        self.exhausted = False           # a model always has another idea; the loop's stop rules decide

    def propose(self, context: dict) -> list[Candidate]:
        current, history = context["current"], context.get("history") or []
        reply = chat(self.config, build_messages(context))
        source, companion = extract_code(reply, current.route)
        if not source.endswith("\n"):
            source += "\n"
        if companion is None:
            companion = current.companion          # the launcher stays unless the reply rewrites it
        candidate = Candidate(id=None, parent_id=current.id, route=current.route, source=source, companion=companion,
                              action=(_labelled(reply, "ACTION") or "llm edit")[:200],
                              hypothesis=_labelled(reply, "HYPOTHESIS") or
                              _FENCE.split(reply)[0].strip()[:500] or "the model gave no hypothesis")
        for earlier in [*history, current]:
            if earlier.source_sha256 == candidate.source_sha256:
                raise LLMError("repeat", f"the model returned the source of candidate {earlier.id} "
                                         f"({earlier.state}) unchanged")
        return [candidate]
