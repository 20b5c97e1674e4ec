"""The `oomdoctor` command: with no verb it opens the TUI; each verb also works headless with --json.

Each verb lives in ``oomdoctor.commands.<verb>`` with ``register(subparsers)`` and ``run(args) -> int``.
Modules are imported only for the verb that runs, so start-up stays light.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from oomdoctor import __version__
from oomdoctor.errors import EXIT_BAD_INPUT, BadInput
from oomdoctor.i18n import default_lang

VERBS: dict[str, str] = {
    "demo": "Open the TUI on the bundled demo case (the course config with a real-looking OOM) / 打开内置演示案例",
    "diagnose": "Locate the OOM in a config + log and propose one change / 定位显存溢出并给出一项修改",
    "patch": "Write the proposed change into a new folder / 把修改写入新目录",
    "estimate": "Estimate peak GPU memory per term and phase / 按分项与阶段估算显存峰值",
    "lengths": "Real token lengths of the configured dataset / 统计数据集实际 token 长度",
    "trial": "Run a short trial and record memory samples / 短时试跑并记录显存采样",
    "watch": "Live GPU panel, touching nothing / 实时 GPU 面板,不干预任何进程",
    "compare": "Compare trials (or two configs) / 对比多次试跑(或两份配置)",
    "tui": "Open the interactive app (same as no verb) / 打开交互界面(同不带子命令)",
}


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with one line instead of a usage dump on bad arguments."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"oomdoctor: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="oomdoctor", description="Diagnose CUDA out-of-memory in LLaMA-Factory runs.")
    parser.add_argument("--version", action="version", version=f"oomdoctor {__version__}")
    parser.add_argument("--lang", choices=["en", "zh"], default=None, help="language (default from LANG)")
    sub = parser.add_subparsers(dest="verb", parser_class=_Parser)
    for verb, help_text in VERBS.items():
        module = importlib.import_module(f"oomdoctor.commands.{verb}")
        p = sub.add_parser(verb, help=help_text, description=help_text)
        p.add_argument("--lang", choices=["en", "zh"], default=argparse.SUPPRESS, help="language (default from LANG)")
        module.register(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.lang is None:
        args.lang = default_lang()
    verb = args.verb or "tui"
    module = importlib.import_module(f"oomdoctor.commands.{verb}")
    try:
        return int(module.run(args))
    except BadInput as err:
        sys.stderr.write(f"oomdoctor: {err}\n")
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `oomdoctor diagnose | head`: the reader left; stop quietly, as other command-line tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
