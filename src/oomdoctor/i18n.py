"""Two languages for every user-facing text: English and Chinese.

Texts that come from rules are ``{"en": ..., "zh": ...}`` dicts (see ``LocalText``). Texts that the code
itself prints live in ``MESSAGES`` below, keyed by a short name, and are looked up with ``msg()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
LocalText = Mapping[str, str]


def default_lang(environ: Mapping[str, str] | None = None) -> Lang:
    """The language from the environment: OOMDOCTOR_LANG, then LC_ALL / LC_MESSAGES / LANG (zh_* gives zh)."""
    env = os.environ if environ is None else environ
    for key in ("OOMDOCTOR_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(key, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def pick(text: LocalText | str | None, lang: Lang) -> str:
    """The text in ``lang``, falling back to the other language rather than to nothing."""
    if text is None:
        return ""
    if isinstance(text, str):
        return text
    return text.get(lang) or text.get("en") or text.get("zh") or ""


def msg(key: str, lang: Lang | None = None, **fields: object) -> str:
    """A code-owned message. With ``lang=None`` both languages are joined (for one-line errors)."""
    entry = MESSAGES[key]
    if lang is None:
        en = entry["en"].format(**fields)
        zh = entry["zh"].format(**fields)
        return f"{en} / {zh}"
    return entry[lang].format(**fields)


def both(key: str, **fields: object) -> dict[str, str]:
    """A code-owned message as a ``LocalText`` dict (for JSON output and findings)."""
    entry = MESSAGES[key]
    return {lang: entry[lang].format(**fields) for lang in LANGS}


# Code-owned messages. Rules carry their own texts in rules/*.yaml.
MESSAGES: dict[str, dict[str, str]] = {
    "file_missing": {"en": "{what} not found: {path}", "zh": "找不到{what_zh}:{path}"},
    "not_a_file": {"en": "{path} is not a file", "zh": "{path} 不是文件"},
    "yaml_malformed": {"en": "{path} is not valid YAML ({detail})", "zh": "{path} 不是有效的 YAML({detail})"},
    "yaml_not_mapping": {
        "en": "{path} is not a LLaMA-Factory config (expected a mapping of keys)",
        "zh": "{path} 不是 LLaMA-Factory 配置(应为键值映射)",
    },
    "log_binary": {"en": "{path} looks like a binary file, not a text log", "zh": "{path} 看起来是二进制文件,不是文本日志"},
    "log_empty": {"en": "{path} is empty", "zh": "{path} 是空文件"},
    "out_exists": {
        "en": "{path} already exists; oomdoctor writes only into new folders",
        "zh": "{path} 已存在;oomdoctor 只写入新目录",
    },
    "bad_answer": {
        "en": "--answer {key}={value}: allowed values are {allowed}",
        "zh": "--answer {key}={value}:可选值为 {allowed}",
    },
    "bad_answer_syntax": {"en": "--answer expects key=value, got {value!r}", "zh": "--answer 应写成 key=value,收到 {value!r}"},
    "unknown_answer_key": {"en": "--answer: unknown question {key!r}", "zh": "--answer:未知问题 {key!r}"},
    "need_config_or_log": {"en": "give --config, --log or both", "zh": "请提供 --config、--log 或两者"},
    "gpu_no_pynvml": {"en": "nvidia-ml-py (pynvml) is not installed, so GPUs cannot be read", "zh": "未安装 nvidia-ml-py(pynvml),无法读取 GPU"},
    "gpu_no_driver_library": {"en": "no NVIDIA driver found (NVML library missing): no NVIDIA GPU on this machine", "zh": "未找到 NVIDIA 驱动(缺少 NVML 库):本机没有 NVIDIA GPU"},
    "gpu_driver_not_loaded": {"en": "the NVIDIA driver is installed but not loaded", "zh": "已安装 NVIDIA 驱动,但驱动未加载"},
    "gpu_nvml_failed": {"en": "NVML could not start: {detail}", "zh": "NVML 初始化失败:{detail}"},
    "gpu_none_visible": {"en": "no GPU is visible with CUDA_VISIBLE_DEVICES={value!r}", "zh": "CUDA_VISIBLE_DEVICES={value!r} 下没有可见的 GPU"},
    # facts/config.py and patch/ (config reader, patch writer, `oomdoctor patch`)
    "file_unreadable": {"en": "{path} cannot be read ({detail})", "zh": "无法读取 {path}({detail})"},
    "config_binary": {"en": "{path} looks like a binary file, not a YAML config", "zh": "{path} 看起来是二进制文件,不是 YAML 配置"},
    "config_not_utf8": {
        "en": "{path} is not UTF-8 text (LLaMA-Factory reads configs as UTF-8)",
        "zh": "{path} 不是 UTF-8 文本(LLaMA-Factory 按 UTF-8 读取配置)",
    },
    "config_empty": {"en": "{path} is empty", "zh": "{path} 是空文件"},
    "config_bad_value": {
        "en": "{path}: {field} should be {expected}, got {value!r}",
        "zh": "{path}:{field} 应为{expected_zh},实际为 {value!r}",
    },
    "config_is_llamaboard": {
        "en": "{path} is a LLaMA Board saved-arguments file; give the training_args.yaml the WebUI writes into the output folder",
        "zh": "{path} 是 LLaMA Board 的“保存训练参数”文件;请改用 WebUI 写在输出目录里的 training_args.yaml",
    },
    "deepspeed_malformed": {
        "en": "DeepSpeed config {path} is not valid JSON ({detail})",
        "zh": "DeepSpeed 配置 {path} 不是有效的 JSON({detail})",
    },
    "patch_no_oom": {
        "en": "no out-of-memory found, so there is no change to write",
        "zh": "没有发现显存不足,因此没有要写入的修改",
    },
    "patch_needs_answers": {
        "en": "no change can be chosen until these are answered (add --answer key=value):",
        "zh": "需要先回答以下问题才能选定修改(添加 --answer key=value):",
    },
    "patch_no_proposal": {"en": "no rule proposed a change for this case", "zh": "没有规则针对此情况提出修改"},
    "patch_manual": {
        "en": "this advice cannot be written into a config: {title}",
        "zh": "这条建议无法写入配置:{title}",
    },
    "patch_unknown_rule": {
        "en": "--rule {rule}: not among the proposals for this case ({available})",
        "zh": "--rule {rule}:不在本次候选修改中({available})",
    },
    "patch_cannot_edit": {
        "en": "{path} cannot be edited in place ({detail})",
        "zh": "无法在原位修改 {path}({detail})",
    },
    "patch_stale": {
        "en": "{path} changed since the diagnosis: {field} is now {now!r}, the proposal was made for {expected!r}; diagnose again",
        "zh": "{path} 在诊断后被修改:{field} 现为 {now!r},而修改建议基于 {expected!r};请重新诊断",
    },
    "patch_paths_note": {
        "en": "Relative paths are kept as written; LLaMA-Factory resolves them from the folder the command runs in (run_dir).",
        "zh": "相对路径保持原样;LLaMA-Factory 以运行命令的目录(run_dir)为起点解析它们。",
    },
    "patch_written": {"en": "Wrote {folder}", "zh": "已写入 {folder}"},
    "patch_run_with": {"en": "Run it with:", "zh": "运行命令:"},
    "patch_run_dir": {
        "en": "Relative paths in the config ({keys}) resolve from {run_dir}, so the command starts there.",
        "zh": "配置中的相对路径({keys})以 {run_dir} 为起点解析,因此命令在该目录下运行。",
    },
    "launcher_bad": {"en": "--launcher {launcher!r} cannot be split into words ({detail})", "zh": "--launcher {launcher!r} 无法拆分成命令参数({detail})"},
    "launcher_empty": {"en": "--launcher {launcher!r} names no program to run", "zh": "--launcher {launcher!r} 没有给出要运行的程序"},
    "launcher_not_found": {"en": "the launcher program {program!r} was not found (not on PATH, not beside this Python); install LLaMA-Factory here or give --launcher with a full path", "zh": "找不到启动程序 {program!r}(不在 PATH 中,也不在当前 Python 旁边);请在此环境安装 LLaMA-Factory,或用 --launcher 给出完整路径"},
    "trial_bad_steps": {"en": "--steps must be a whole number of at least 1, got {value!r}", "zh": "--steps 必须是不小于 1 的整数,收到 {value!r}"},
    "trial_bad_timeout": {"en": "--timeout must be a positive number of seconds, got {value!r}", "zh": "--timeout 必须是正的秒数,收到 {value!r}"},
    "trial_other_processes": {"en": "other processes already use the GPU, the trial's peak will include them: {listing}", "zh": "GPU 上已有其他进程,试跑的峰值会包含它们的占用:{listing}"},
}
