"""Command line: `python -m inference generate "prompt" [--model ...] [--temperature ...]`."""
from __future__ import annotations

import argparse
import sys

from .errors import EngineError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inference", description="Pagoda inference engine")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="generate text for a prompt, streaming it to stdout")
    gen.add_argument("prompt")
    gen.add_argument("--model", default=None, help="built-in name or a Hugging Face folder")
    gen.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0)
    gen.add_argument("--max-tokens", type=int, default=256)
    gen.add_argument("--seed", type=int, default=None)
    gen.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")
    gen.add_argument("--raw", action="store_true", help="send the prompt as is, without the chat template")
    gen.add_argument("--tensor-parallel-size", type=int, default=1, help="GPUs (processes) to split the model over")
    args = parser.parse_args(argv)

    from .llm import LLM
    from .sampling_params import SamplingParams

    llm = None
    try:
        params = SamplingParams(temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
                                max_tokens=args.max_tokens, seed=args.seed, stop=args.stop)
        kwargs = {"device": args.device, "tensor_parallel_size": args.tensor_parallel_size}
        if args.model:
            kwargs["model"] = args.model
        llm = LLM(progress=False, **kwargs)
        prompt = args.prompt
        if not args.raw:
            prompt = llm.tokenizer.apply_chat_template([{"role": "user", "content": prompt}],
                                                       add_generation_prompt=True, tokenize=False)
        for text in llm.stream(prompt, params, add_special_tokens=args.raw):
            sys.stdout.write(text)
            sys.stdout.flush()
        sys.stdout.write("\n")
    except (EngineError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if llm is not None:
            llm.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
