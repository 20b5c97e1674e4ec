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
}
