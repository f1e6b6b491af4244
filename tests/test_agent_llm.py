"""The LLM policy against a real OpenAI-compatible HTTP server on 127.0.0.1 (stdlib http.server in a thread).

Each scenario is one way a reply can go: good code, malformed JSON, no code block, a refusal, HTTP 500,
a reply slower than the client's timeout. Every failure must be an LLMError that names the problem,
and the policy must keep working afterwards (it holds no run state that a failure could corrupt).
"""

import copy
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hello_gpu.agent.candidate import Candidate
from hello_gpu.agent.policies import LLMError, LLMPolicy, make_policy
from hello_gpu.agent.policies.llm import extract_code, resolve_config
from hello_gpu.agent.task import Task

OPS = Path(__file__).resolve().parents[1] / "src" / "hello_gpu" / "ops"
TRITON_SOURCE = (OPS / "vector_add" / "t01_tile_1024.py").read_text()
HIP_SOURCE = (OPS / "reduce_sum" / "v06_grid_stride_vectorized.hip").read_text()
HIP_COMPANION = (OPS / "reduce_sum" / "v06_grid_stride_vectorized.py").read_text()
NEW_TRITON = TRITON_SOURCE.replace("TILE = 1024", "TILE = 2048")
NEW_HIP = HIP_SOURCE.replace("constexpr int UNROLL = 4;", "constexpr int UNROLL = 8;")

GOOD = f"""ACTION: TILE 1024 -> 2048
HYPOTHESIS: half the programs; expect 1.00x-1.02x at 2^28

```python
{NEW_TRITON}```
"""
GOOD_HIP = f"""ACTION: UNROLL 4 -> 8
HYPOTHESIS: eight float4 loads in flight per thread; expect 1.0x-1.03x

```cpp
{NEW_HIP}```
"""
REFUSAL = "I'm sorry, but I can't help with modifying this kernel."
NO_CODE = "You could try a larger TILE, perhaps 2048, and more warps. Let me know how it goes."


def completion(content, **message):
    return {"id": "x", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content,
                                                                            **message}}]}


class Server:
    """A chat-completions endpoint whose next replies are queued per test: (status, body bytes, delay s)."""

    def __init__(self):
        self.replies, self.requests = [], []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):        # keep pytest output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append({"path": self.path, "headers": dict(self.headers),
                                       "body": json.loads(self.rfile.read(length))})
                status, body, delay = outer.replies.pop(0) if outer.replies else (200, b"{}", 0)
                if delay:
                    time.sleep(delay)
                if status is None:                   # not HTTP at all: raw bytes, then close
                    self.wfile.write(body)
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):   # the client gave up (timeout scenario)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def reply(self, body, status=200, delay=0.0):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.replies.append((status, data, delay))

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = Server()
    yield running
    running.close()


def context(route="triton"):
    if route == "triton":
        task = Task(op="vector_add", start="t01_tile_1024", route="triton")
        current = Candidate(id=4, parent_id=1, route="triton", source=TRITON_SOURCE, action="num_warps 4 -> 8",
                            state="accepted")
    else:
        task = Task(op="reduce_sum", start="v06_grid_stride_vectorized", route="hip")
        current = Candidate(id=4, parent_id=1, route="hip", source=HIP_SOURCE, companion=HIP_COMPANION,
                            state="accepted")
    history = [Candidate(id=1, parent_id=None, route=route, source=current.source, companion=current.companion,
                         state="accepted"),
               Candidate(id=2, parent_id=1, route=route, source=current.source + "\n# slower\n",
                         companion=current.companion, action="TILE 1024 -> 512", state="rejected",
                         reason="paired speedup 0.97x [0.96, 0.98]: slower"),
               Candidate(id=3, parent_id=1, route=route, source=current.source + "\n# wrong\n",
                         companion=current.companion, action="drop the mask", state="incorrect",
                         reason="max error 3.1 at shape 1823 (tolerance 1e-5)"),
               current]
    analysis = {"bound": "memory", "fraction_of_attainable": 0.4321, "occupancy_pct": 87.5, "top_stall": "long_scoreboard"}
    return {"task": task, "current": current, "history": history, "analysis": analysis, "round": 5, "seed": 0}


def policy_for(server, **options):
    return make_policy("llm", base_url=server.url, model="test-model", api_key="sk-test", environ={},
                       config_path="/nonexistent/llm.toml", **options)


def test_good_reply_becomes_a_candidate_and_the_request_carries_source_analysis_and_history(server):
    server.reply(completion(GOOD))
    ctx = context()
    (candidate,) = policy_for(server).propose(ctx)
    assert candidate.source == NEW_TRITON
    assert candidate.parent_id == 4 and candidate.route == "triton" and candidate.state == "proposed"
    assert candidate.action == "TILE 1024 -> 2048"
    assert "half the programs" in candidate.hypothesis
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "test-model"
    prompt = "\n".join(message["content"] for message in body["messages"])
    assert TRITON_SOURCE in prompt                                  # the current source, whole
    assert '"fraction_of_attainable": 0.4321' in prompt and '"bound": "memory"' in prompt
    assert "long_scoreboard" in prompt
    assert "TILE 1024 -> 512 -> rejected (paired speedup 0.97x" in prompt      # previous attempts, verdicts
    assert "drop the mask -> incorrect" in prompt


def test_hip_reply_keeps_the_launcher_unless_rewritten(server):
    server.reply(completion(GOOD_HIP))
    ctx = context("hip")
    (candidate,) = policy_for(server).propose(ctx)
    assert candidate.source == NEW_HIP and candidate.companion == HIP_COMPANION
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    assert HIP_SOURCE in prompt and HIP_COMPANION in prompt
    launcher = "import torch\n\ndef run(kernel, x, out=None):\n    return out\n"
    server.reply(completion(GOOD_HIP + f"\n```python\n{launcher}```\n"))
    (rewritten,) = policy_for(server).propose(ctx)
    assert rewritten.companion == launcher


@pytest.mark.parametrize("status, body, kind, words", [
    (200, b"this is { not json", "malformed", "not JSON"),
    (200, json.dumps({"error": "no choices here"}).encode(), "malformed", "choices[0].message"),
    (200, json.dumps(completion(NO_CODE)).encode(), "no-code", "no ```python code block"),
    (200, json.dumps(completion(REFUSAL)).encode(), "refusal", "refused"),
    (200, json.dumps(completion(None, refusal="I will not do that.")).encode(), "refusal", "refused: I will not"),
    (500, b'{"error": "the model crashed"}', "http", "HTTP 500"),
    (429, b'{"error": "rate limited"}', "http", "HTTP 429"),
])
def test_bad_replies_raise_clear_errors_and_leave_state_intact(server, status, body, kind, words):
    server.reply(body, status=status)
    ctx = context()
    before = copy.deepcopy(ctx)
    policy = policy_for(server)
    with pytest.raises(LLMError) as raised:
        policy.propose(ctx)
    assert raised.value.kind == kind
    assert words in str(raised.value)
    assert ctx == before                      # nothing the loop holds was touched
    assert not policy.exhausted
    # The same policy works again on the next round: a failure leaves nothing broken behind.
    server.reply(completion(GOOD))
    (candidate,) = policy.propose(ctx)
    assert candidate.source == NEW_TRITON


def test_a_reply_that_is_not_http_is_named(server):
    server.reply(b"HELLO THERE\r\n\r\n", status=None)
    with pytest.raises(LLMError, match="broken HTTP reply") as raised:
        policy_for(server).propose(context())
    assert raised.value.kind == "malformed"


def test_a_slow_reply_times_out_with_a_clear_error(server):
    server.reply(completion(GOOD), delay=2.0)
    policy = policy_for(server, timeout_s=0.3)
    started = time.perf_counter()
    with pytest.raises(LLMError) as raised:
        policy.propose(context())
    assert raised.value.kind == "timeout"
    assert "did not answer within 0.3 s" in str(raised.value)
    assert time.perf_counter() - started < 1.8             # gave up at the timeout, not after the reply


def test_an_unreachable_endpoint_is_named():
    server = Server()
    url = server.url
    server.close()                                          # nothing listens on that port now
    policy = make_policy("llm", base_url=url, model="m", environ={}, config_path="/nonexistent", timeout_s=2)
    with pytest.raises(LLMError) as raised:
        policy.propose(context())
    assert raised.value.kind in ("unreachable", "timeout")
    assert url in str(raised.value)


def test_a_reply_repeating_a_tried_source_is_refused(server):
    ctx = context()
    rejected = ctx["history"][1].source
    server.reply(completion(f"ACTION: again\n```python\n{rejected}```"))
    with pytest.raises(LLMError, match="candidate 2 \\(rejected\\)") as raised:
        policy_for(server).propose(ctx)
    assert raised.value.kind == "repeat"


def test_settings_come_from_options_then_environment_then_file(tmp_path):
    config = tmp_path / "llm.toml"
    config.write_text('base_url = "http://file.example/v1"\nmodel = "file-model"\napi_key = "file-key"\ntimeout_s = 7\n')
    from_file = resolve_config({}, environ={}, config_path=config)
    assert (from_file.base_url, from_file.model, from_file.api_key, from_file.timeout_s) == \
        ("http://file.example/v1", "file-model", "file-key", 7.0)
    environ = {"HELLO_GPU_LLM_MODEL": "env-model", "HELLO_GPU_LLM_CONFIG": str(config)}
    from_env = resolve_config({}, environ=environ)
    assert (from_env.base_url, from_env.model) == ("http://file.example/v1", "env-model")
    from_options = resolve_config({"model": "option-model"}, environ=environ)
    assert from_options.model == "option-model"
    assert from_options.url == "http://file.example/v1/chat/completions"


def test_missing_settings_say_where_to_put_them(tmp_path):
    with pytest.raises(LLMError, match="HELLO_GPU_LLM_BASE_URL") as raised:
        LLMPolicy(environ={}, config_path=tmp_path / "absent.toml")
    assert raised.value.kind == "config"
    bad = tmp_path / "bad.toml"
    bad.write_text('base_url = "http://x/v1"\nmodel = "m"\nmodle = "typo"\n')
    with pytest.raises(LLMError, match="unknown settings modle"):
        resolve_config({}, environ={}, config_path=bad)


def test_code_extraction_prefers_the_kernel_block():
    reply = "```bash\npip install x\n```\n```python\nprint(1)\n```\n```python\n@triton.jit\ndef k():\n    pass\n```"
    source, companion = extract_code(reply, "triton")
    assert source.startswith("@triton.jit") and companion is None
    with pytest.raises(LLMError) as raised:
        extract_code("```python\nprint(1)\n```", "hip")
    assert raised.value.kind == "no-code" and "```cpp" in str(raised.value)


def test_an_llm_run_without_an_endpoint_stops_before_writing_anything(tmp_path, monkeypatch, capsys):
    """Bad configuration is refused by name, and no half-made run folder is left behind."""
    from hello_gpu.cli import main
    for name in ("HELLO_GPU_LLM_BASE_URL", "HELLO_GPU_LLM_MODEL", "HELLO_GPU_LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HELLO_GPU_LLM_CONFIG", str(tmp_path / "no-such-llm.toml"))
    run_dir = tmp_path / "run"
    fixtures = Path(__file__).parent / "fixtures" / "ops"
    status = main(["agent", "toy_add", "--ops-root", str(fixtures), "--from", "t01_block_per_program",
                   "--policy", "llm", "--run-dir", str(run_dir)])
    assert status == 2
    assert "no run started: no LLM base url" in capsys.readouterr().out
    assert not run_dir.exists()
    assert main(["agent", "toy_add", "--ops-root", str(fixtures), "--from", "t01_block_per_program",
                 "--policy", "no-such-policy", "--run-dir", str(run_dir)]) == 2
    assert "unknown policy 'no-such-policy'" in capsys.readouterr().out and not run_dir.exists()
