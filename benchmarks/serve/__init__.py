"""`python -m benchmarks.serve`: the serving benchmark, like `vllm bench serve`.

Streams random-token prompts of `--input-len` tokens, each answered with exactly `--output-len` tokens
(greedy, `ignore_eos`), through `/v1/completions`, `/v1/chat/completions` and the chat WebSocket,
closed-loop (`--max-concurrency`) or at Poisson arrivals (`--request-rate`); reports throughput and
TTFT / TPOT / ITL / end-to-end percentiles and errors. In the same run, after the server has stopped
(so they never share the device), the offline `LLMEngine` serves the same prompts closed-loop at the
same concurrency: server / engine is the headline. A pinned-vs-cold TTFT probe through
/v1/chat/completions (a tenant's 2,000-token system prompt, pinned by the platform, + a 50-token
question) stands beside the engine's own pinned / cold TTFT. `--sweep` runs concurrency 1, 64, 256.

Modules: model_folder (the random-weight model the server loads), seed (the server's database, by the
project's manage.py commands), server (daphne as deploy/run.sh starts it), clients (SSE and
WebSocket), load (closed loop / Poisson), stats (percentiles), engine_run (the offline engine, its
own process), probe (pinned vs cold), report (the tables).
"""
