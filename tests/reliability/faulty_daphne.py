"""daphne with two faults that a request can trigger, for the fault tests (never used in production).

    python tests/reliability/faulty_daphne.py -b 127.0.0.1 -p 8001 pagoda.asgi:application

The engine core runs in a child process: this file is also that child's program
(`faulty_daphne.py core FD PID`), which installs the faults and then runs the real core.

A request whose prompt token ids contain POISON makes the model runner raise RuntimeError while that
request is in the step (one request's computation fails: the engine must fail it alone). One that
contains CRASH raises a BaseException the engine does not isolate: its step loop dies (a crashed loop,
which engine_runtime's watchdog must notice and restart). Send them as /v1/completions token-id prompts.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "platform"), str(ROOT)]

POISON = [31337, 4242, 31337, 4242]
CRASH = [27182, 8182, 27182, 8182]


class InjectedLoopCrash(BaseException):
    """Not an Exception: the engine's per-request isolation does not catch it, the loop dies."""


def _contains(ids: list[int], marker: list[int]) -> bool:
    n = len(marker)
    return any(ids[i:i + n] == marker for i in range(len(ids) - n + 1))


def install_faults() -> None:
    from inference.model_runner import ModelRunner

    execute = ModelRunner.execute

    def faulty_execute(self, out):
        for s in out.scheduled:
            ids = s.seq.prompt_token_ids
            if _contains(ids, CRASH):
                raise InjectedLoopCrash("injected engine loop crash")
            if _contains(ids, POISON):
                raise RuntimeError("injected failure of one request")
        return execute(self, out)

    ModelRunner.execute = faulty_execute


if __name__ == "__main__":
    if sys.argv[1:2] == ["core"]:
        install_faults()
        from inference import engine_core

        sys.argv[1:] = sys.argv[2:]
        engine_core.main()
    else:
        from inference.core_client import CoreClient
        from daphne.cli import CommandLineInterface

        CoreClient.core_command = [sys.executable, str(Path(__file__).resolve()), "core"]
        CommandLineInterface().run(sys.argv[1:])
