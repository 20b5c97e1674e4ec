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


class Bilingual(str):
    """Both languages joined ("en / zh"), as a one-line error on a terminal shows them, keeping each
    language apart for a screen that knows which one its user reads (``in_lang``)."""

    en: str
    zh: str

    def __new__(cls, en: str, zh: str) -> Bilingual:
        text = super().__new__(cls, f"{en} / {zh}")
        text.en, text.zh = en, zh
        return text

    def in_lang(self, lang: Lang) -> str:
        return self.zh if lang == "zh" else self.en


def in_lang(text: object, lang: Lang) -> str:
    """``text`` in ``lang`` when it carries both languages (a ``Bilingual``, or an error made of one)."""
    if isinstance(text, BaseException) and len(text.args) == 1:
        text = text.args[0]
    return text.in_lang(lang) if isinstance(text, Bilingual) else str(text)


def msg(key: str, lang: Lang | None = None, /, **fields: object) -> str:
    """A code-owned message. With ``lang=None`` both languages are joined (for one-line errors)."""
    entry = MESSAGES[key]
    if lang is None:
        return Bilingual(entry["en"].format(**fields), entry["zh"].format(**fields))
    return entry[lang].format(**fields)


def both(key: str, /, **fields: object) -> dict[str, str]:
    """A code-owned message as a ``LocalText`` dict (for JSON output and findings)."""
    entry = MESSAGES[key]
    return {lang: entry[lang].format(**fields) for lang in LANGS}


# --- `--help` texts ------------------------------------------------------------------------------------
# argparse keeps each help text as one plain string, fixed when the parser is built, so the command line
# picks the language first (``set_help_lang``) and every ``help=`` is written as ``help_text(en, zh)``:
# both languages sit side by side where the option is defined, and neither can be forgotten.

_help_lang: Lang = "en"


def set_help_lang(lang: Lang) -> None:
    """The language the next ``help_text`` calls return (anything but "zh" means English)."""
    global _help_lang
    _help_lang = "zh" if lang == "zh" else "en"


def help_text(en: str, zh: str) -> str:
    """A command-line help text in the language set by ``set_help_lang`` (English until set)."""
    return zh if _help_lang == "zh" else en


# Code-owned messages. Rules carry their own texts in rules/*.yaml.
MESSAGES: dict[str, dict[str, str]] = {
    "file_missing": {"en": "{what} not found: {path}", "zh": "找不到{what_zh}:{path}"},
    "not_a_file": {"en": "{path} is not a file", "zh": "{path} 不是文件"},
    "yaml_malformed": {"en": "{path} is not valid YAML ({detail})", "zh": "{path} 不是有效的 YAML({detail})"},
    "yaml_not_mapping": {
        "en": "{path} is not a LLaMA-Factory config (expected a mapping of keys)",
        "zh": "{path} 不是 LLaMA-Factory 配置(应为键值映射)",
    },
    "log_binary": {
        "en": "{path} looks like a binary file, not a text log",
        "zh": "{path} 看起来是二进制文件,不是文本日志",
    },
    "log_empty": {"en": "{path} is empty", "zh": "{path} 是空文件"},
    "out_exists": {
        "en": "{path} already exists; oomdoctor writes only into new folders",
        "zh": "{path} 已存在;oomdoctor 只写入新目录",
    },
    "bad_answer": {
        "en": "--answer {key}={value}: allowed values are {allowed}",
        "zh": "--answer {key}={value}:可选值为 {allowed}",
    },
    "bad_answer_syntax": {
        "en": "--answer expects key=value, got {value!r}",
        "zh": "--answer 应写成 key=value,收到 {value!r}",
    },
    "unknown_answer_key": {"en": "--answer: unknown question {key!r}", "zh": "--answer:未知问题 {key!r}"},
    "need_config_or_log": {"en": "give --config, --log or both", "zh": "请提供 --config、--log 或两者"},
    # rules/ (loader, engine) and `oomdoctor diagnose`
    "unknown_question": {
        "en": "--answer {question}=...: no such question (questions: {allowed})",
        "zh": "--answer {question}=...:没有这个问题(可回答的问题:{allowed})",
    },
    "rule_dir_missing": {"en": "rules folder not found", "zh": "找不到规则目录"},
    "rule_bad_yaml": {"en": "not valid YAML: {detail}", "zh": "不是有效的 YAML:{detail}"},
    "rule_not_mapping": {
        "en": "a rule file holds one mapping (one decision node)",
        "zh": "规则文件应只包含一个映射(一个决策节点)",
    },
    "rule_missing_text": {
        "en": "{where}: the {language} text is missing",
        "zh": "{where}:缺少 {language} 文本",
    },
    "rule_missing_field": {"en": "{where}: {name} is required", "zh": "{where}:缺少必填项 {name}"},
    "rule_unknown_field": {"en": "{where}: unknown field {name!r}", "zh": "{where}:未知字段 {name!r}"},
    "rule_unknown_operator": {
        "en": "{where}: unknown operator {op!r} (known: {known})",
        "zh": "{where}:未知运算符 {op!r}(可用:{known})",
    },
    "rule_bad_fact": {"en": "unknown fact path {path!r}: {problem}", "zh": "未知事实路径 {path!r}:{problem}"},
    "rule_bad_placeholder": {
        "en": "placeholder {ref!r} names nothing: {problem}",
        "zh": "占位符 {ref!r} 无法对应:{problem}",
    },
    "rule_builtin_question": {
        "en": "question {question!r} is built in: give only its key",
        "zh": "问题 {question!r} 是内置问题:只写 key 即可",
    },
    "rule_question_needs_text": {
        "en": "question {question!r} needs a text and at least two answers",
        "zh": "问题 {question!r} 需要问题文本和至少两个答案",
    },
    "rule_question_conflict": {
        "en": "question {question!r} offers other answers in {other}",
        "zh": "问题 {question!r} 在 {other} 中的答案选项不同",
    },
    "rule_bad_env": {
        "en": "environment variable name {name!r} must be UPPER_CASE",
        "zh": "环境变量名 {name!r} 应为大写字母",
    },
    "rule_duplicate_id": {
        "en": "duplicate id {id!r} (first in {other})",
        "zh": "重复的 id {id!r}(首次出现在 {other})",
    },
    "rule_dangling_next": {
        "en": "next names {id!r}, which is no other node",
        "zh": "next 指向 {id!r},但没有这个节点",
    },
    "template_missing": {
        "en": "DeepSpeed template {path} cannot be read ({detail})",
        "zh": "无法读取 DeepSpeed 模板 {path}({detail})",
    },
    "q_phase": {"en": "At which point did it stop?", "zh": "训练在哪一步停下?"},
    "q_phase_load": {
        "en": "While loading the model, before any training step",
        "zh": "加载模型时,还没开始训练",
    },
    "q_phase_first_batch": {"en": "At the first training step", "zh": "第一个训练步"},
    "q_phase_long_sample": {
        "en": "After some good steps (a longer batch came)",
        "zh": "已正常训练若干步之后(遇到更长的批次)",
    },
    "q_phase_eval": {"en": "During evaluation (validation)", "zh": "验证(评估)时"},
    "q_phase_save": {"en": "While saving a checkpoint", "zh": "保存检查点时"},
    "q_phase_optimizer_step": {
        "en": "At the first parameter update (optimizer step)",
        "zh": "首次更新参数(优化器步)时",
    },
    "q_weights_loaded": {
        "en": "Did the weights finish loading ('Loading checkpoint shards' reached 100%, or training started)?",
        "zh": "权重是否已加载完成(“Loading checkpoint shards”到了 100%,或训练已开始)?",
    },
    "q_weights_loaded_yes": {"en": "Yes", "zh": "是"},
    "q_weights_loaded_no": {"en": "No", "zh": "否"},
    "q_memory_kind": {"en": "Which memory ran out?", "zh": "哪种内存不足?"},
    "q_memory_kind_gpu": {
        "en": "GPU memory: the log says 'CUDA out of memory'",
        "zh": "显存:日志中有 “CUDA out of memory”",
    },
    "q_memory_kind_host": {
        "en": "System RAM: the process was 'Killed', with no Python traceback",
        "zh": "系统内存:进程被 “Killed”,没有 Python 报错栈",
    },
    "q_card_bf16": {"en": "Does the training GPU support bf16?", "zh": "训练所用的显卡是否支持 bf16?"},
    "q_card_bf16_yes": {
        "en": "Yes: Ampere or newer (A100, A10, L4, H100, RTX 30/40/50)",
        "zh": "支持:Ampere 及更新(A100、A10、L4、H100、RTX 30/40/50)",
    },
    "q_card_bf16_no": {
        "en": "No: V100, T4, P100, RTX 20 or older",
        "zh": "不支持:V100、T4、P100、RTX 20 及更早",
    },
    "requires_missing": {
        "en": "needs the Python package {package} where training runs; it is not installed here (pip install {package})",
        "zh": "训练环境需要安装 Python 包 {package};本机尚未安装(pip install {package})",
    },
    "requires_installed": {
        "en": "needs the Python package {package} where training runs (installed here)",
        "zh": "训练环境需要 Python 包 {package}(本机已安装)",
    },
    "effect_unavailable": {"en": "estimate unavailable: {error}", "zh": "无法估算:{error}"},
    "effect_phase": {
        "en": "peak allocated in the {phase} phase, before and after",
        "zh": "{phase}阶段的已分配峰值,修改前后对比",
    },
    "effect_other_peak": {
        "en": "after this change the largest peak is in the {phase} phase ({mib} MiB): judge the fit there",
        "zh": "修改后最大的峰值在{phase}阶段({mib} MiB):能否放下要看那里",
    },
    "estimate_phase_load": {"en": "load", "zh": "加载"},
    "estimate_phase_train": {"en": "training step", "zh": "训练步"},
    "estimate_phase_eval": {"en": "evaluation", "zh": "验证"},
    "f_no_log": {
        "en": "No log given: where memory ran out stays unknown until you answer the phase question.",
        "zh": "未提供日志:回答“在哪一步停下”之前,无法定位是哪部分内存不足。",
    },
    "f_log_only": {
        "en": "No config given: values come from the log; give --config to write the change.",
        "zh": "未提供配置:数值取自日志;提供 --config 才能写出修改。",
    },
    "f_traceback_cut": {
        "en": "The log ends inside a traceback, before its error line: treated as an out-of-memory where it stopped; say which memory if asked.",
        "zh": "日志在报错栈中途结束,没有最后的报错行:按在停止处内存不足处理;如被问到,请说明是哪种内存。",
    },
    "f_other_error": {
        "en": "The run failed for another reason, not memory: {error}",
        "zh": "训练因其他原因失败,不是内存不足:{error}",
    },
    "f_no_oom": {
        "en": "No out-of-memory error in this log: nothing to fix here.",
        "zh": "日志中没有内存不足的报错,这里无需修改。",
    },
    "f_phase_answer_over_log": {
        "en": "You answered phase {answer}; the log pointed to {log}. Your answer is used.",
        "zh": "你回答的阶段是 {answer},日志显示为 {log};以你的回答为准。",
    },
    "f_phase_evidence": {"en": "Located at {phase}: {evidence}", "zh": "定位为 {phase}:{evidence}"},
    "f_phase_by_schedule": {
        "en": "Located at {phase}: the log shows it failed after step {step}, where the Trainer evaluates "
        "or saves, and with this config's eval/save schedule only {phase} runs at that step.",
        "zh": "定位为 {phase}:日志显示它在第 {step} 步之后、Trainer 验证或保存的地方失败,按这份配置的验证/保存"
        "间隔,这一步只会进行{phase}。",
    },
    "f_request": {
        "en": "It asked for {requested} MiB with {free} MiB free on a {capacity} MiB card.",
        "zh": "申请 {requested} MiB 时,{capacity} MiB 的显卡只剩 {free} MiB 空闲。",
    },
    "f_reserve_would_fit": {
        "en": "Free ({free} MiB) plus reserved-but-unallocated ({reserved} MiB) would have covered the {requested} MiB request: the memory was there, split into pieces.",
        "zh": "空闲({free} MiB)加上已预留未分配({reserved} MiB)足够这次 {requested} MiB 的申请:空间是有的,只是被切成了碎块。",
    },
    "f_alloc_retries": {
        "en": "The allocator had to free its cache and retry {count} time(s) before this: memory was already tight.",
        "zh": "此前分配器已释放缓存并重试 {count} 次:显存早已吃紧。",
    },
    "f_self_listed": {
        "en": "Process {pid} in the message is this run itself (its use matches what PyTorch reserved, or the card "
        "could not hold it besides this run): not counted as another process.",
        "zh": "报错中的进程 {pid} 就是本次训练自身(占用与 PyTorch 预留量一致,或显卡装不下它与本次训练两者):"
        "不算作其他进程。",
    },
    "f_other_processes": {
        "en": "Other processes held {mib} MiB of this card (pid {pids}).",
        "zh": "其他进程占用了这张卡 {mib} MiB(pid {pids})。",
    },
    "f_effective_batch": {
        "en": "Effective batch: {micro} per GPU x {acc} accumulation x {world} GPU(s) = {effective} samples per update.",
        "zh": "有效批次:单卡 {micro} × 累积 {acc} × {world} 张卡 = 每次更新 {effective} 条样本。",
    },
    "f_eval_batch_default": {
        "en": "per_device_eval_batch_size is not set, so evaluation runs 8 samples at a time (training: {micro}).",
        "zh": "未设置 per_device_eval_batch_size,验证默认每次 8 条(训练为 {micro} 条)。",
    },
    "f_multi_gpu_no_deepspeed": {
        "en": "{world} GPUs without DeepSpeed: every GPU holds a full copy of the model, its gradients and optimizer state.",
        "zh": "{world} 张卡未使用 DeepSpeed:每张卡都保存一整份模型、梯度和优化器状态。",
    },
    "f_cutoff_above_longest": {
        "en": "cutoff_len {cutoff} is at or above the longest sample ({longest} tokens): batches are padded to their own longest sample, so lowering cutoff_len to anything above {longest} saves nothing.",
        "zh": "cutoff_len {cutoff} 不小于最长样本({longest} token):批次按自身最长样本填充,把上限降到 {longest} 以上的任何值都省不了显存。",
    },
    "f_fitting_micro_batch": {
        "en": "The estimate's largest micro-batch under {margin}% of the {capacity} MiB card: {batch}, with "
        "gradient_accumulation_steps {accumulation} to keep {effective} samples per update.",
        "zh": "按估算,{capacity} MiB 显卡 {margin}% 以内能放下的最大单卡 batch 为 {batch};配合梯度累积 "
        "{accumulation},每次更新仍为 {effective} 条样本。",
    },
    "f_weights_share": {
        "en": "The weights alone take about {weights} MiB, {share}% of the {capacity} MiB card.",
        "zh": "仅模型权重就约占 {weights} MiB,是 {capacity} MiB 显卡的 {share}%。",
    },
    "f_dominant_term": {
        "en": "The estimate's largest term is {term}: about {mib} MiB.",
        "zh": "估算中占用最大的一项是 {term}:约 {mib} MiB。",
    },
    "f_in_effect": {
        "en": "Already in effect, not new options: {items}.",
        "zh": "已经生效的设置(不能当作新优化):{items}。",
    },
    "f_change_not_computable": {
        "en": "{rule}: the change needs {field}, which is unknown here.",
        "zh": "{rule}:这项修改需要 {field},但目前未知。",
    },
    "f_inexact_product": {
        "en": "{field} x {partner} cannot stay exactly {before}: it becomes {after}.",
        "zh": "{field} × {partner} 无法精确保持 {before}:变为 {after}。",
    },
    "in_gc_default": {
        "en": "gradient checkpointing (LLaMA-Factory default)",
        "zh": "梯度检查点(LLaMA-Factory 默认开启)",
    },
    "in_gc": {"en": "gradient checkpointing", "zh": "梯度检查点"},
    "in_fp16": {"en": "fp16 mixed precision", "zh": "fp16 混合精度"},
    "in_bf16": {"en": "bf16 mixed precision", "zh": "bf16 混合精度"},
    "in_pure_bf16": {"en": "pure bf16", "zh": "纯 bf16"},
    "in_liger": {"en": "Liger kernel", "zh": "Liger kernel"},
    "in_quant": {"en": "{bits}-bit quantization", "zh": "{bits} bit 量化"},
    "in_zero": {"en": "DeepSpeed ZeRO-{stage}", "zh": "DeepSpeed ZeRO-{stage}"},
    "in_offload_optimizer": {"en": "optimizer offload", "zh": "优化器卸载"},
    "in_offload_param": {"en": "parameter offload", "zh": "参数卸载"},
    "phase_load": {"en": "loading the weights", "zh": "加载权重"},
    "phase_first_batch": {"en": "the first batch", "zh": "第一批"},
    "phase_long_sample": {"en": "a longer batch after good steps", "zh": "正常若干步后的长批次"},
    "phase_eval": {"en": "evaluation", "zh": "验证"},
    "phase_save": {"en": "saving a checkpoint", "zh": "保存检查点"},
    "phase_optimizer_step": {"en": "the first optimizer step", "zh": "首次优化器更新"},
    "phase_unknown": {"en": "an unknown point", "zh": "未知位置"},
    "phase_none": {"en": "nowhere (no OOM)", "zh": "无(未发生内存不足)"},
    "cause_weights": {"en": "the weights", "zh": "模型权重"},
    "cause_activations": {"en": "stored activations", "zh": "中间激活"},
    "cause_logits": {"en": "logits and the loss", "zh": "logits 与损失计算"},
    "cause_eval_batch": {"en": "the evaluation batch", "zh": "验证批次"},
    "cause_optimizer_state": {"en": "optimizer state", "zh": "优化器状态"},
    "cause_save_copy": {"en": "the copy made while saving", "zh": "保存时额外的副本"},
    "cause_fragmentation": {"en": "fragmentation", "zh": "显存碎片"},
    "cause_other_process": {"en": "another process on the card", "zh": "卡上的其他进程"},
    "cause_host_ram": {"en": "system RAM", "zh": "系统内存"},
    "cause_request_exceeds_card": {"en": "a request larger than the card", "zh": "超过整卡容量的申请"},
    "cause_unknown": {"en": "unknown", "zh": "未知"},
    "r_oom": {"en": "Out of memory at {phase}: {cause}.", "zh": "在{phase}时内存不足:{cause}。"},
    "r_oom_step": {
        "en": "Out of memory at step {step}, {phase}: {cause}.",
        "zh": "第 {step} 步、{phase}时内存不足:{cause}。",
    },
    "r_no_oom": {"en": "No out-of-memory in this log.", "zh": "日志中没有内存不足。"},
    # The OOM message's numbers, each only when the log gave it (a CPU OOM names no card).
    "r_num_requested": {"en": "Tried to allocate {mib} MiB", "zh": "申请 {mib} MiB"},
    "r_num_capacity": {"en": "card {mib} MiB", "zh": "显卡 {mib} MiB"},
    "r_num_free": {"en": "free {mib} MiB", "zh": "空闲 {mib} MiB"},
    "r_num_reserved": {"en": "reserved but unallocated {mib} MiB", "zh": "已预留未分配 {mib} MiB"},
    "r_numbers_sep": {"en": "; ", "zh": ";"},
    "r_numbers_end": {"en": ".", "zh": "。"},
    "r_findings": {"en": "What the files show", "zh": "从文件中看到"},
    "r_proposal": {"en": "Change one thing", "zh": "只改一项"},
    "r_manual": {
        "en": "Do this by hand (the config cannot carry it)",
        "zh": "需要手动处理(无法写进配置)",
    },
    "r_why": {"en": "Why", "zh": "原因"},
    "r_cost": {"en": "Cost", "zh": "代价"},
    "r_judge": {"en": "How to judge it", "zh": "如何判断"},
    "r_already_on": {"en": "Already on", "zh": "已经开启"},
    "r_requires": {"en": "Requires", "zh": "依赖"},
    "r_env": {"en": "Environment for the run", "zh": "运行时的环境变量"},
    "r_files": {"en": "Written beside the config", "zh": "与配置一起写出的文件"},
    "r_effect": {
        "en": "Estimated peak (allocated): {before} MiB -> {after} MiB",
        "zh": "估算峰值(已分配):{before} MiB -> {after} MiB",
    },
    "r_effect_fits": {"en": "fits the card", "zh": "放得下"},
    "r_effect_not_fits": {"en": "still over the card", "zh": "仍超出显卡容量"},
    "r_alternatives": {"en": "If that is not for you", "zh": "其他可选"},
    "r_questions": {"en": "Questions the files cannot answer", "zh": "文件无法回答的问题"},
    "r_answer_hint": {
        "en": "answer with --answer {question}=<{allowed}>",
        "zh": "用 --answer {question}=<{allowed}> 回答",
    },
    "r_no_proposal": {
        "en": "No change to propose yet: answer the questions above.",
        "zh": "暂时无法给出修改:请先回答上面的问题。",
    },
    "r_no_rule": {
        "en": "No rule matches these facts; the findings above are what is known.",
        "zh": "没有规则匹配这些事实;以上发现就是目前已知的信息。",
    },
    "r_patch_hint": {"en": "Write it into a new folder:", "zh": "写入新目录:"},
    "lengths_file_bad": {
        "en": "{path} is not a lengths file from `oomdoctor lengths --json` ({detail})",
        "zh": "{path} 不是 `oomdoctor lengths --json` 生成的长度文件({detail})",
    },
    "arg_positive_number": {
        "en": "expected a positive number, got {value!r}",
        "zh": "应为正数,收到 {value!r}",
    },
    "arg_positive_int": {
        "en": "expected a positive whole number, got {value!r}",
        "zh": "应为正整数,收到 {value!r}",
    },
    "gpu_no_pynvml": {
        "en": "nvidia-ml-py (pynvml) is not installed, so GPUs cannot be read",
        "zh": "未安装 nvidia-ml-py(pynvml),无法读取 GPU",
    },
    "gpu_no_driver_library": {
        "en": "no NVIDIA driver found (NVML library missing): no NVIDIA GPU on this machine",
        "zh": "未找到 NVIDIA 驱动(缺少 NVML 库):本机没有 NVIDIA GPU",
    },
    "gpu_driver_not_loaded": {
        "en": "the NVIDIA driver is installed but not loaded",
        "zh": "已安装 NVIDIA 驱动,但驱动未加载",
    },
    "gpu_nvml_failed": {"en": "NVML could not start: {detail}", "zh": "NVML 初始化失败:{detail}"},
    "gpu_none_visible": {
        "en": "no GPU is visible with CUDA_VISIBLE_DEVICES={value!r}",
        "zh": "CUDA_VISIBLE_DEVICES={value!r} 下没有可见的 GPU",
    },
    # facts/config.py and patch/ (config reader, patch writer, `oomdoctor patch`)
    "file_unreadable": {"en": "{path} cannot be read ({detail})", "zh": "无法读取 {path}({detail})"},
    "config_binary": {
        "en": "{path} looks like a binary file, not a YAML config",
        "zh": "{path} 看起来是二进制文件,不是 YAML 配置",
    },
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
    "patch_no_proposal": {
        "en": "no rule proposed a change for this case",
        "zh": "没有规则针对此情况提出修改",
    },
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
    "launcher_bad": {
        "en": "--launcher {launcher!r} cannot be split into words ({detail})",
        "zh": "--launcher {launcher!r} 无法拆分成命令参数({detail})",
    },
    "launcher_empty": {
        "en": "--launcher {launcher!r} names no program to run",
        "zh": "--launcher {launcher!r} 没有给出要运行的程序",
    },
    "launcher_not_found": {
        "en": "the launcher program {program!r} was not found (not on PATH, not beside this Python); install LLaMA-Factory here or give --launcher with a full path",
        "zh": "找不到启动程序 {program!r}(不在 PATH 中,也不在当前 Python 旁边);请在此环境安装 LLaMA-Factory,或用 --launcher 给出完整路径",
    },
    "trial_bad_steps": {
        "en": "--steps must be a whole number of at least 1, got {value!r}",
        "zh": "--steps 必须是不小于 1 的整数,收到 {value!r}",
    },
    "trial_bad_timeout": {
        "en": "--timeout must be a positive number of seconds, got {value!r}",
        "zh": "--timeout 必须是正的秒数,收到 {value!r}",
    },
    "trial_other_processes": {
        "en": "other processes already use the GPU, the trial's peak will include them: {listing}",
        "zh": "GPU 上已有其他进程,试跑的峰值会包含它们的占用:{listing}",
    },
    # --- estimate (estimate/memory.py): assumptions shown with every estimate
    "est_model_unknown": {
        "en": "the shape of model {name} is unknown (missing {missing}): put its config.json on this machine or use a model name oomdoctor knows",
        "zh": "不知道模型 {name} 的结构(缺少 {missing}):请把它的 config.json 放到本机,或使用 oomdoctor 认识的模型名",
    },
    "est_note_eager_default": {
        "en": "{model} runs eager attention under flash_attn: auto unless FlashAttention-2 is installed: the attention scores (heads x length^2) are counted",
        "zh": "{model} 在 flash_attn: auto 下,若未安装 FlashAttention-2 会用 eager 注意力:已计入注意力分数(头数 x 长度^2)",
    },
    "est_note_packing": {
        "en": "packing is on: every sequence is filled to cutoff_len ({cutoff})",
        "zh": "已开启 packing:每条序列都拼满到 cutoff_len({cutoff})",
    },
    "est_note_cutoff_len": {
        "en": "the real longest sample is unknown, so batches are assumed padded to cutoff_len ({cutoff}); run `oomdoctor lengths` or pass --longest-tokens for a tighter estimate",
        "zh": "不知道实际最长样本,按 cutoff_len({cutoff})填充估算;运行 `oomdoctor lengths` 或给出 --longest-tokens 可估得更准",
    },
    "est_note_pairs": {
        "en": "stage {stage} feeds two sequences per sample (chosen and rejected, or target and KL)",
        "zh": "{stage} 阶段每条样本输入两条序列(chosen 与 rejected,或目标与 KL)",
    },
    "est_note_eval_len": {
        "en": "the longest eval sample is unknown: eval batches are assumed as long as training ones ({length} tokens)",
        "zh": "不知道验证集最长样本:按训练批次长度({length} token)估算验证批次",
    },
    "est_note_unknown_targets": {
        "en": "lora_target names not recognised, not counted: {names}",
        "zh": "无法识别的 lora_target 名称,未计入:{names}",
    },
    "est_note_moe_lora": {
        "en": "MoE experts are fused weights in transformers 5: LoRA is counted on attention (and shared experts) only",
        "zh": "transformers 5 中 MoE 专家是融合权重:LoRA 只按注意力层(及共享专家)计入",
    },
    "est_note_freeze": {
        "en": "freeze tuning: the last 2 layers are counted as trainable (LLaMA-Factory's default)",
        "zh": "冻结微调:按 LLaMA-Factory 默认,最后 2 层计为可训练",
    },
    "est_note_unknown_optim": {
        "en": "optimizer {optim} is not in the table: counted like AdamW (two states per parameter)",
        "zh": "优化器 {optim} 不在表中:按 AdamW(每个参数两份状态)计算",
    },
    "est_note_offload_param": {
        "en": "ZeRO-3 parameter offload: weights live in host RAM and are fetched layer by layer",
        "zh": "ZeRO-3 参数卸载:权重放在内存中,按层取用",
    },
    "est_note_offload_optimizer": {
        "en": "optimizer offload: optimizer state lives in host RAM (with LoRA it was small anyway)",
        "zh": "优化器卸载:优化器状态放在内存中(LoRA 下它本来就小)",
    },
    "est_note_offload_without_zero": {
        "en": "offload is set but no DeepSpeed ZeRO config was read: nothing is counted as offloaded",
        "zh": "设置了卸载,但未读到 DeepSpeed ZeRO 配置:不按卸载计算",
    },
    "est_note_reference_model": {
        "en": "a frozen reference model is loaded next to the policy (full/freeze tuning)",
        "zh": "全参/冻结微调时,策略模型旁还要加载一份冻结的参考模型",
    },
    "est_note_liger": {
        "en": "Liger kernel fuses lm_head and cross-entropy in training: no logits tensor; evaluation still builds full logits",
        "zh": "Liger kernel 在训练时融合 lm_head 与交叉熵:不生成完整 logits;验证时仍会生成",
    },
    "est_note_grads_freed": {
        "en": "gradient_accumulation_steps 1: gradients are freed after every step, so the forward pass runs without them (the optimizer step holds them)",
        "zh": "gradient_accumulation_steps 为 1:每步之后梯度被释放,前向时不占显存(优化器更新时才占)",
    },
    "est_note_lora_dropout": {
        "en": "lora_dropout {dropout}: every adapted linear keeps its own dropped-out input and mask (0 would share the input)",
        "zh": "lora_dropout {dropout}:每个加了 LoRA 的线性层都保存自己的 dropout 输入与掩码(设为 0 则共用输入)",
    },
    "est_note_no_eval": {
        "en": "no evaluation is configured: the eval phase is 0",
        "zh": "未配置验证:验证阶段记为 0",
    },
    "est_note_creep": {
        "en": "every batch has a new length, so PyTorch keeps freed blocks cached: nvidia-smi's high end assumes reserved creeps to {creep} x the working memory (measured on the course's V100 pair)",
        "zh": "每个批次长度不同,PyTorch 会缓存释放的显存块:nvidia-smi 上限按保留显存增长到工作显存的 {creep} 倍估计(依据课程 V100 两组实测)",
    },
    "est_note_tight": {
        "en": "the tensors fit the {total} MiB card but PyTorch's cache would grow past it, so nvidia-smi will show the card full: the allocator frees its cache and retries before failing, and an OOM there comes from fragmentation (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True helps)",
        "zh": "张量本身放得进 {total} MiB 的卡,但 PyTorch 的缓存会超过它,所以 nvidia-smi 会显示整卡占满:分配器会先释放缓存再重试,此时若仍 OOM,原因是碎片(设置 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True 有帮助)",
    },
    "est_note_per_gpu": {"en": "figures are per GPU ({gpus} GPUs)", "zh": "数字按单卡计({gpus} 张卡)"},
    "cmp_review_title": {"en": "Config review: {old} -> {new}", "zh": "配置对比:{old} -> {new}"},
    "cmp_no_changes": {"en": "No field differs.", "zh": "没有不同的字段。"},
    "cmp_h_field": {"en": "field", "zh": "字段"},
    "cmp_h_change": {"en": "change", "zh": "改动"},
    "cmp_h_memory": {"en": "memory", "zh": "显存"},
    "cmp_h_risks": {"en": "risks", "zh": "风险"},
    "cmp_memory_less": {"en": "less", "zh": "减少"},
    "cmp_memory_more": {"en": "more", "zh": "增加"},
    "cmp_memory_none": {"en": "no effect", "zh": "无影响"},
    "cmp_memory_depends": {"en": "depends", "zh": "视情况"},
    "cmp_memory_unknown": {"en": "unknown", "zh": "未知"},
    "cmp_warnings": {"en": "Warnings", "zh": "提醒"},
    "cmp_keeps_effective_batch": {
        "en": "changed together with {partner}: the effective batch stays {before}",
        "zh": "与 {partner} 一起改动,有效批次仍为 {before}",
    },
    "cmp_many_changes": {
        "en": "{count} things changed at once ({fields}): a trial cannot tell which one made the difference; change one at a time.",
        "zh": "一次改了 {count} 项({fields}):试跑无法判断是哪一项起了作用;请每次只改一项。",
    },
    "cmp_only_targets": {"en": "Only {fields} targets the memory.", "zh": "其中只有 {fields} 针对显存。"},
    "cmp_none_targets": {
        "en": "None of them lowers memory without also changing the training or cutting samples.",
        "zh": "其中没有一项是在不改变训练、不截断样本的前提下降低显存的。",
    },
    "cmp_adds_memory": {"en": "{field} adds memory.", "zh": "{field} 会增加显存。"},
    "cmp_cuts_samples": {
        "en": "{field} cuts long samples (check the real token lengths first).",
        "zh": "{field} 会截断长样本(先检查实际 token 长度)。",
    },
    "cmp_changes_training": {
        "en": "{field} changes the training, not the memory.",
        "zh": "{field} 改变的是训练本身,而不是显存。",
    },
    "cmp_trials_title": {"en": "Trials compared", "zh": "试跑对比"},
    "cmp_h_trial": {"en": "trial", "zh": "试跑"},
    "cmp_h_peak_mib": {"en": "peak MiB", "zh": "最高采样 MiB"},
    "cmp_h_peak_gib": {"en": "peak GiB", "zh": "约 GiB"},
    "cmp_h_wall": {"en": "wall s", "zh": "整次耗时 秒"},
    "cmp_h_outcome": {"en": "outcome", "zh": "运行结果"},
    "cmp_h_steps": {"en": "steps", "zh": "步数"},
    "cmp_h_eval_loss": {"en": "eval loss", "zh": "验证 Loss"},
    "cmp_h_delta": {"en": "vs first", "zh": "与第一组相比"},
    "cmp_first": {"en": "(reference)", "zh": "(基准)"},
    "cmp_delta": {"en": "{mib} MiB ({gib} GiB), {wall} s", "zh": "{mib} MiB(约 {gib} GiB),{wall} 秒"},
    "cmp_peak_note": {
        "en": "Peak: the highest whole-card reading sampled every 0.2 s over the whole command (like nvidia-smi); short spikes between samples can be missed. Wall time includes loading, training, validation and saving.",
        "zh": "最高采样显存:整条命令运行期间每 200 毫秒采样一次整卡占用(与 nvidia-smi 同口径)的最高读数,可能漏掉采样间隔中的瞬时高点。耗时包含加载、训练、验证和保存。",
    },
    "cmp_peak_note_host": {
        "en": "Peak: no NVIDIA GPU, so this is the highest RSS (system memory) of the trial's process tree, sampled every 0.2 s over the whole command. Wall time includes loading, training, validation and saving.",
        "zh": "最高采样值:没有 NVIDIA GPU,这里是试跑进程树的最高常驻内存(系统内存),整条命令运行期间每 200 毫秒采样一次。耗时包含加载、训练、验证和保存。",
    },
    "cmp_what_changed": {"en": "What changed", "zh": "改动内容"},
    "cmp_no_config_change": {"en": "no config field differs", "zh": "配置字段没有不同"},
    "cmp_outcome_oom": {"en": "out of memory at {phase}", "zh": "在{phase}时内存不足"},
    "cmp_outcome_timed_out": {"en": "stopped at the time limit", "zh": "达到时间上限后被停止"},
    "cmp_outcome_stopped": {"en": "stopped by the user", "zh": "被手动停止"},
    "cmp_outcome_failed": {"en": "failed (exit {code})", "zh": "失败(退出码 {code})"},
    "cmp_outcome_ok": {"en": "finished normally", "zh": "正常结束"},
    "cmp_outcome_ok_warned": {
        "en": "allocation warnings ({count}), then finished normally",
        "zh": "出现过显存分配告警({count} 次),随后正常结束",
    },
    "cmp_saved": {"en": ", saved {name}", "zh": ",保存 {name}"},
    "cmp_not_a_trial": {
        "en": "{path} is not a trial folder (no result.json); give trial folders, or two .yaml configs",
        "zh": "{path} 不是试跑目录(没有 result.json);请给出试跑目录,或两份 .yaml 配置",
    },
    "cmp_bad_result": {"en": "{path} cannot be read ({detail})", "zh": "无法读取 {path}({detail})"},
    "cmp_need_trials": {
        "en": "give at least one trial folder, or two .yaml configs",
        "zh": "请至少给出一个试跑目录,或两份 .yaml 配置",
    },
    "cmp_mixed_args": {
        "en": "give either trial folders or exactly two .yaml configs, not a mix",
        "zh": "请只给试跑目录,或恰好两份 .yaml 配置,不要混用",
    },
    "cmp_trial_many_changes": {
        "en": "{trial} differs from {first} in more than one thing ({fields}): the difference cannot be put down to one change.",
        "zh": "{trial} 与 {first} 不止一处不同({fields}):差异无法归因于某一项改动。",
    },
    "cmp_unknown_data": {
        "en": "cannot tell whether {trial} used the same data (dataset fingerprint unknown).",
        "zh": "无法判断 {trial} 是否使用了相同的数据(数据指纹未知)。",
    },
    "cmp_other_data": {
        "en": "{trial} used other data than {first}: the numbers are not comparable.",
        "zh": "{trial} 与 {first} 使用的数据不同:数字不能直接比较。",
    },
    "cmp_other_model": {
        "en": "{trial} trained another model ({b}) than {first} ({a}): not comparable.",
        "zh": "{trial} 训练的模型({b})与 {first}({a})不同:不能直接比较。",
    },
    "cmp_other_precision": {
        "en": "{trial} ran in {b}, {first} in {a}: memory and time are only comparable if precision is the change under test.",
        "zh": "{trial} 使用 {b},{first} 使用 {a}:只有当精度正是本次要测试的改动时,显存与耗时才可比较。",
    },
    "cmp_other_gpu": {
        "en": "{trial} ran on {b}, {first} on {a}: not comparable.",
        "zh": "{trial} 运行在 {b},{first} 运行在 {a}:不能直接比较。",
    },
    "cmp_other_source": {
        "en": "{trial}'s peak is {b}, {first}'s is {a} (GPU memory vs host RSS): not comparable.",
        "zh": "{trial} 的峰值来自 {b},{first} 的来自 {a}(GPU 显存与主机内存):不能直接比较。",
    },
    "cmp_other_steps": {
        "en": "{trial} ran {b} steps, {first} ran {a}: wall times are not comparable.",
        "zh": "{trial} 跑了 {b} 步,{first} 跑了 {a} 步:耗时不能直接比较。",
    },
    "trial_source_host": {"en": "host RSS, no NVIDIA GPU", "zh": "主机内存 RSS,无 NVIDIA GPU"},
    "trial_source_gpu": {"en": "GPU, whole card", "zh": "GPU 整卡"},
    "trial_heartbeat": {
        "en": "{elapsed:.0f} s: peak so far {peak:,.0f} MiB ({source})",
        "zh": "{elapsed:.0f} 秒:目前最高 {peak:,.0f} MiB({source})",
    },
    "trial_progress": {
        "en": "step {step}/{total} · {elapsed:.1f} s · peak so far {peak:,.0f} MiB ({source})",
        "zh": "第 {step}/{total} 步 · {elapsed:.1f} 秒 · 目前最高 {peak:,.0f} MiB({source})",
    },
    "trial_starting": {
        "en": "Trial: {steps} steps, time limit {timeout:.0f} s, folder {out}",
        "zh": "试跑:{steps} 步,时限 {timeout:.0f} 秒,目录 {out}",
    },
    "trial_outcome_ok": {"en": "Trial finished normally.", "zh": "试跑正常结束。"},
    "trial_outcome_oom": {"en": "Trial ran out of memory.", "zh": "试跑内存不足。"},
    "trial_outcome_failed": {"en": "Trial failed (exit code {code}).", "zh": "试跑失败(退出码 {code})。"},
    "trial_outcome_timed_out": {
        "en": "Trial stopped at the time limit (it is never retried).",
        "zh": "试跑达到时间上限,已停止(不会自动重试)。",
    },
    "trial_outcome_stopped": {"en": "Trial stopped by the user.", "zh": "试跑已被手动停止。"},
    "trial_peak": {
        "en": "Peak: {mib:,.0f} MiB ({gib:.2f} GiB), {source}, highest of {samples} samples",
        "zh": "最高采样:{mib:,.0f} MiB(约 {gib:.2f} GiB),{source},{samples} 次采样中的最高值",
    },
    "trial_wall": {
        "en": "Whole command: {wall:.2f} s (the Trainer's own train_runtime: {runtime} s)",
        "zh": "整次命令耗时:{wall:.2f} 秒(Trainer 自身记录的 train_runtime:{runtime} 秒)",
    },
    "trial_steps": {
        "en": "Steps: {done}/{total}; eval loss {eval_loss}; last checkpoint {checkpoint}",
        "zh": "步数:{done}/{total};验证 Loss {eval_loss};最后保存的检查点 {checkpoint}",
    },
    "trial_oom": {"en": "Ran out at {phase} ({cause}): {line}", "zh": "在{phase}时内存不足({cause}):{line}"},
    "trial_warnings": {
        "en": "{count} warning(s) in the log, first: {first}",
        "zh": "日志中有 {count} 条告警,第一条:{first}",
    },
    "trial_others_note": {
        "en": "{count} other process(es) were on the GPU: the peak includes them",
        "zh": "GPU 上有 {count} 个其他进程:最高采样包含它们的占用",
    },
    "trial_folder": {
        "en": "Trial folder: {folder}  (compare: oomdoctor compare <earlier trial> {folder})",
        "zh": "试跑目录:{folder}(对比:oomdoctor compare <之前的试跑> {folder})",
    },
    "watch_title": {"en": "oomdoctor watch  {time}  (read only)", "zh": "oomdoctor watch  {time}(只读)"},
    "watch_every": {"en": "every {interval:g} s", "zh": "每 {interval:g} 秒刷新"},
    "watch_no_gpu": {"en": "No NVIDIA GPU here: {reason}", "zh": "这里没有 NVIDIA GPU:{reason}"},
    "watch_util_power": {"en": "util {util}  power {power}", "zh": "利用率 {util}  功率 {power}"},
    "watch_no_processes": {"en": "no compute processes", "zh": "没有计算进程"},
    "watch_host": {
        "en": "Host RAM (what a bare 'Killed' runs out of)",
        "zh": "主机内存(单独出现 Killed 时耗尽的就是它)",
    },
    "watch_hint": {
        "en": "Ctrl+C stops this monitor only, never the training.",
        "zh": "Ctrl+C 只退出本监控,不会停止训练。",
    },
    "watch_bad_interval": {
        "en": "--interval must be a positive number of seconds, got {value!r}",
        "zh": "--interval 必须是正的秒数,收到 {value!r}",
    },
    # log reader (facts/log*.py)
    "log_dir_empty": {
        "en": "{path} holds no training log (looked for {names})",
        "zh": "{path} 中没有训练日志(查找了 {names})",
    },
    "log_ev_frame": {"en": "the traceback passes through {frame}: {why}", "zh": "调用栈经过 {frame}:{why}"},
    "log_ev_marker": {
        "en": 'last marker before the failure: "{line}" ({why})',
        "zh": '出错前最后的标记:"{line}"({why})',
    },
    "log_ev_steps_estimated": {
        "en": "a progress bar without its step count had run for a while: about {n} steps at its rate ({bar})",
        "zh": "一个看不到步数的进度条已运行了一段时间:按其速度约 {n} 步({bar})",
    },
    "log_ev_steps": {
        "en": "{n} optimizer steps had completed before it ran out ({bar})",
        "zh": "内存耗尽前已完成 {n} 个优化步({bar})",
    },
    "log_ev_loss_dicts": {
        "en": "{n} training loss lines were printed before it ran out: steps had completed",
        "zh": "内存耗尽前已打印 {n} 行训练 loss:已有训练步完成",
    },
    "log_ev_no_step": {
        "en": "training had started but no optimizer step had completed ({bar})",
        "zh": "训练已开始,但还没有完成任何优化步({bar})",
    },
    "log_ev_no_step_info": {
        "en": "no progress bar or loss line before the failure: taken as the first step (the excerpt may be cut)",
        "zh": "出错前没有进度条或 loss 行:按第一步处理(日志可能不完整)",
    },
    "log_ev_setup": {
        "en": 'a training engine had been set up: "{line}" ({why})',
        "zh": '此前已构建训练引擎:"{line}"({why})',
    },
    "log_ev_forward_only": {
        "en": "only model-forward frames, and nothing in the log says whether it was training or evaluation",
        "zh": "调用栈只有模型前向,日志中看不出是训练还是验证",
    },
    "log_ev_nothing": {
        "en": "the log says memory ran out but nothing in it tells when",
        "zh": "日志显示内存耗尽,但看不出发生在哪个阶段",
    },
    "log_ev_cut": {
        "en": "the traceback is cut before its error line: the phase is where it failed",
        "zh": "调用栈在错误行之前被截断:阶段按出错位置判断",
    },
    "log_ev_killed_save": {
        "en": "killed without a traceback right after step {n}, a multiple of {k} (a usual save_steps; the Trainer default is 500): most likely while saving a checkpoint",
        "zh": "在第 {n} 步之后被直接杀死、没有调用栈;{n} 是 {k} 的倍数(常见的 save_steps,Trainer 默认 500):很可能发生在保存检查点时",
    },
    "log_ev_killed_training": {
        "en": "killed without a traceback during training (after {n} steps): the log cannot tell what filled host RAM",
        "zh": "训练中(已完成 {n} 步)被直接杀死、没有调用栈:日志看不出是什么占满了主机内存",
    },
    "log_ev_after_step": {
        "en": "it failed after step {n} had completed, in the hook where the Trainer evaluates and saves: "
        "evaluation or checkpoint save (the config's eval_steps / save_steps tell which)",
        "zh": "在第 {n} 步完成之后、Trainer 做验证和保存的钩子里失败:是验证或保存检查点"
        "(配置中的 eval_steps / save_steps 可以区分)",
    },
    "log_ev_after_train": {
        "en": "training had finished; what ran after it is not in the log",
        "zh": "训练已结束;之后运行的内容不在日志中",
    },
    "log_ctx_load": {"en": "the model was being loaded", "zh": "模型正在加载"},
    "log_ctx_train": {"en": "training was running", "zh": "正在训练"},
    "log_ctx_eval": {"en": "an evaluation was running", "zh": "正在验证"},
    "log_ctx_save": {"en": "a checkpoint was being saved", "zh": "正在保存检查点"},
    "log_ctx_after_train": {"en": "training had finished", "zh": "训练已结束"},
    "log_ctx_zero_init": {
        "en": "DeepSpeed was building the ZeRO optimizer",
        "zh": "DeepSpeed 正在构建 ZeRO 优化器",
    },
    "log_ev_earlier_run": {
        "en": "the log holds {runs} runs; the last one that failed is reported",
        "zh": "日志中有 {runs} 次运行;报告的是最后一次失败的运行",
    },
    "log_unreadable": {"en": "{path} cannot be read ({detail})", "zh": "无法读取 {path}({detail})"},
    # --- estimate and lengths commands
    "est_unknown_card": {
        "en": "unknown card {name!r}; known: {known} (or give --gpu-mib N)",
        "zh": "未知显卡 {name!r};可选:{known}(或用 --gpu-mib N 直接给出显存)",
    },
    "est_arg_positive": {"en": "expected a positive number, got {value!r}", "zh": "应为正数,收到 {value!r}"},
    "est_header": {"en": "Memory estimate for {model} ({source})", "zh": "显存估算:{model}({source})"},
    "est_setup": {
        "en": "{method}, precision {precision}, gradient checkpointing {gc}, attention {attention}",
        "zh": "{method},精度 {precision},梯度检查点 {gc},注意力实现 {attention}",
    },
    "est_on": {"en": "on", "zh": "开"},
    "est_off": {"en": "off", "zh": "关"},
    "est_batch_line": {
        "en": "Worst training batch: {batch} x {length} tokens ({why})",
        "zh": "最坏的训练批次:{batch} x {length} token({why})",
    },
    "est_eval_line": {
        "en": "Eval batch: {batch} x {length} tokens",
        "zh": "验证批次:{batch} x {length} token",
    },
    "est_len_longest": {
        "en": "the longest sample, rounded up to a multiple of 8",
        "zh": "最长样本,向上取整到 8 的倍数",
    },
    "est_len_cutoff": {
        "en": "cutoff_len: the longest sample is unknown",
        "zh": "cutoff_len:不知道实际最长样本",
    },
    "est_terms_header": {"en": "Terms (MiB)", "zh": "分项(MiB)"},
    "est_term_weights": {"en": "weights", "zh": "模型权重"},
    "est_term_trainable_state": {
        "en": "trainable state (grads + optimizer)",
        "zh": "可训练状态(梯度 + 优化器)",
    },
    "est_term_activations": {"en": "stored activations", "zh": "保存的中间结果"},
    "est_term_logits_loss": {"en": "logits + loss", "zh": "logits 与损失"},
    "est_term_eval": {"en": "eval batch logits", "zh": "验证批次 logits"},
    "est_term_overhead": {"en": "other allocations", "zh": "其他分配"},
    "est_dominant": {"en": "<- largest in training", "zh": "<- 训练中最大"},
    "est_phases_header": {"en": "Peak allocated by phase (MiB)", "zh": "各阶段已分配峰值(MiB)"},
    "est_phase_load": {"en": "load", "zh": "加载"},
    "est_phase_train": {"en": "train step", "zh": "训练步"},
    "est_phase_eval": {"en": "eval", "zh": "验证"},
    "est_peak": {
        "en": "Peak allocated (torch max_memory_allocated): {peak} MiB",
        "zh": "已分配峰值(torch max_memory_allocated):{peak} MiB",
    },
    "est_band": {
        "en": "nvidia-smi should show {low} - {high} MiB (allocator cache + CUDA context)",
        "zh": "nvidia-smi 预计显示 {low} - {high} MiB(分配器缓存 + CUDA 上下文)",
    },
    "est_card_fits": {
        "en": "Card {card} ({total} MiB): fits, {headroom} MiB to spare at the high end",
        "zh": "显卡 {card}({total} MiB):放得下,按上限还剩 {headroom} MiB",
    },
    "est_card_tight": {
        "en": "Card {card} ({total} MiB): the tensors fit ({peak} MiB at the peak), but with PyTorch's cache the run does not fit with room to spare (--json: fits false, allocated_fits true); the cache fills the card, which is expected with batches of varying length",
        "zh": "显卡 {card}({total} MiB):张量放得下(峰值 {peak} MiB),但算上 PyTorch 的缓存就没有余量了(--json:fits 为 false,allocated_fits 为 true);缓存会占满整卡,批次长度不一时这属正常",
    },
    "est_band_fills": {
        "en": "nvidia-smi should show {low} MiB up to the whole card ({total} MiB): the cache fills it",
        "zh": "nvidia-smi 预计显示 {low} MiB,直至占满整卡({total} MiB):缓存会把卡占满",
    },
    "est_band_over": {
        "en": "nvidia-smi cannot show it: the allocated peak plus the CUDA context ({low} MiB) is more than the card ({total} MiB)",
        "zh": "nvidia-smi 显示不了:已分配峰值加 CUDA 上下文({low} MiB)已超过整卡({total} MiB)",
    },
    "est_card_no": {
        "en": "Card {card} ({total} MiB): does not fit, the allocated peak alone is {peak} MiB",
        "zh": "显卡 {card}({total} MiB):放不下,仅已分配峰值就有 {peak} MiB",
    },
    "est_card_unknown": {
        "en": "Card unknown: give --gpu NAME or --gpu-mib N to check the fit",
        "zh": "不知道显卡:用 --gpu 名称 或 --gpu-mib N 检查是否放得下",
    },
    "est_fitting_batch": {
        "en": "Largest micro-batch under {margin}% of the card with the same effective batch: {batch} (gradient_accumulation_steps {accumulation})",
        "zh": "在显卡 {margin}% 以内、有效批次不变时,最大单卡 batch:{batch}(gradient_accumulation_steps {accumulation})",
    },
    "est_fitting_none": {
        "en": "No micro-batch stays under {margin}% of the card with these lengths and eval batch",
        "zh": "在当前长度与验证批次下,没有任何单卡 batch 能保持在显卡 {margin}% 以内",
    },
    "est_assumptions": {"en": "Assumptions:", "zh": "估算假设:"},
    "len_no_model": {
        "en": "{path} has no model_name_or_path: cannot find a tokenizer",
        "zh": "{path} 没有 model_name_or_path:找不到分词器",
    },
    "len_no_tokenizer": {
        "en": "no tokenizer for {model} on this machine (local folder, Hugging Face or ModelScope cache); download the model first or point model_name_or_path at its folder",
        "zh": "本机找不到 {model} 的分词器(本地目录、Hugging Face 或 ModelScope 缓存);请先下载模型,或把 model_name_or_path 指向模型目录",
    },
    "len_no_dataset": {"en": "{path} names no dataset", "zh": "{path} 没有指定 dataset"},
    "len_no_dataset_dir": {
        "en": "dataset_dir {path} not found (relative paths are read from the current folder, as LLaMA-Factory does); run from the LLaMA-Factory folder",
        "zh": "找不到 dataset_dir {path}(相对路径按当前目录解析,与 LLaMA-Factory 相同);请在 LLaMA-Factory 目录下运行",
    },
    "len_needs_llamafactory": {
        "en": "counting tokens needs LLaMA-Factory installed in this Python (pip install 'oomdoctor[train]'): {detail}",
        "zh": "统计 token 需要在当前 Python 环境安装 LLaMA-Factory(pip install 'oomdoctor[train]'):{detail}",
    },
    "len_bad_args": {
        "en": "LLaMA-Factory rejected the data settings: {detail}",
        "zh": "LLaMA-Factory 不接受这些数据设置:{detail}",
    },
    "len_tokenizer_failed": {
        "en": "could not load the tokenizer from {model}: {detail}",
        "zh": "无法从 {model} 加载分词器:{detail}",
    },
    "len_dataset_failed": {"en": "could not read the dataset: {detail}", "zh": "无法读取数据集:{detail}"},
    "len_progress": {"en": "tokenizing {done}/{total} samples", "zh": "正在分词 {done}/{total} 条样本"},
    "len_header": {
        "en": "Token lengths of {datasets} with template {template} (as LLaMA-Factory builds them)",
        "zh": "{datasets} 的 token 长度,模板 {template}(与 LLaMA-Factory 构造方式一致)",
    },
    "len_train": {
        "en": "train: {samples} samples, longest {max}, p50 {p50}, p95 {p95}, p99 {p99}",
        "zh": "训练集:{samples} 条,最长 {max},p50 {p50},p95 {p95},p99 {p99}",
    },
    "len_eval": {"en": "eval: {samples} samples, longest {max}", "zh": "验证集:{samples} 条,最长 {max}"},
    "len_truncated": {
        "en": "cutoff_len {cutoff}: {truncated} samples would be cut",
        "zh": "cutoff_len {cutoff}:{truncated} 条样本会被截断",
    },
    "len_padded": {
        "en": "the worst batch is padded to {padded} tokens, not to cutoff_len: lowering cutoff_len above {max} saves nothing",
        "zh": "最坏批次按 {padded} token 填充,而不是 cutoff_len:把 cutoff_len 降到 {max} 以上不会省显存",
    },
    "len_next": {
        "en": "next: oomdoctor estimate --config {config} --longest-tokens {max}{eval_part}",
        "zh": "下一步:oomdoctor estimate --config {config} --longest-tokens {max}{eval_part}",
    },
    "est_note_ppo": {
        "en": "PPO also holds a reward/value model and generation buffers: not counted here",
        "zh": "PPO 还会占用奖励/价值模型与生成缓存:此处未计入",
    },
    # --- messages added by the diag work (keep each group together) ---
    "f_phase_by_logits_size": {
        "en": "Placed at {phase}: the message has no frames, but its request ({request} MiB) is this batch's logits "
        "(micro-batch x padded length x vocabulary x bytes), a tensor only the training step's loss allocates.",
        "zh": "定位为{phase}:报错没有调用栈,但其申请量({request} MiB)正是本批次的 logits(micro-batch x 填充长度 x "
        "词表 x 字节数),只有训练步的损失计算会分配这个张量。",
    },
    "log_ev_forward_is_step": {
        "en": "a parameter gather or the attention kernel inside a forward, and no evaluation or generation in the "
        "log: the training step's forward",
        "zh": "前向中的参数汇集或注意力内核,且日志中没有验证或生成:是训练步的前向",
    },
    "f_no_error_line": {
        "en": "No error line: the log ends inside a traceback before its error, so whether memory ran out cannot "
        "be told from it (a cut ValueError has the same frames). Paste the lines after the traceback, or say "
        "which memory ran out.",
        "zh": "没有报错行:日志在报错栈中途结束,看不出是否内存不足(其他报错也有同样的调用栈)。请贴出报错栈之后的几行,"
        "或说明是哪种内存不足。",
    },
    "r_no_error_line": {
        "en": "No error line in this log: cannot tell whether memory ran out.",
        "zh": "日志中没有报错行:无法判断是否内存不足。",
    },
    "acct_line": {
        "en": "card {card} MiB = this run {run} (PyTorch {alloc} + reserved-unused {unused} + other non-PyTorch "
        "{nonpt}) + other processes {others} + free {free}",
        "zh": "整卡 {card} MiB = 本次运行 {run}(PyTorch 已分配 {alloc} + 已预留未使用 {unused} + 其他非 PyTorch "
        "{nonpt})+ 其他进程 {others} + 空闲 {free}",
    },
    "acct_line_reserve": {
        "en": "card {card} MiB = this run at least {run} (PyTorch {alloc} + reserved-unused {unused}; its CUDA "
        "context is not stated) + outside this run's reserve {outside} (its CUDA context, other processes) "
        "+ free {free}",
        "zh": "整卡 {card} MiB = 本次运行至少 {run}(PyTorch 已分配 {alloc} + 已预留未使用 {unused};其 CUDA "
        "上下文未列出)+ 本次运行预留之外 {outside}(其 CUDA 上下文、其他进程)+ 空闲 {free}",
    },
    "acct_self_pid": {
        "en": "Process {pid} in the message is this run itself, listed under its host pid",
        "zh": "报错中的进程 {pid} 就是本次运行自身,以宿主机 pid 列出",
    },
    "acct_whose_context": {
        "en": "Process {pid}: {mib} MiB, a bare CUDA context (another rank's stray context or an idle kernel)",
        "zh": "进程 {pid}:{mib} MiB,只是一个 CUDA 上下文(其他 rank 误建的上下文或空闲内核)",
    },
    "acct_whose_stranger": {
        "en": "Process {pid}: {mib} MiB held by another job",
        "zh": "进程 {pid}:{mib} MiB,被另一个任务占用",
    },
    "acct_whose_unclear": {
        "en": "Process {pid}: {mib} MiB, cannot tell from the log whether it is part of this run (another rank, "
        "its vLLM engine, this notebook's kernel) or another job",
        "zh": "进程 {pid}:{mib} MiB,日志看不出它属于本次运行(另一个 rank、它的 vLLM 引擎、本 notebook 的内核)"
        "还是另一个任务",
    },
    "acct_outside_big": {
        "en": "{mib} MiB in use outside this run's reserve is more than a CUDA context (up to {ctx} MiB): another "
        "process very likely holds part of the card",
        "zh": "本次运行预留之外在用 {mib} MiB,超出一个 CUDA 上下文(至多 {ctx} MiB):很可能有其他进程占用了这张卡",
    },
    "r_account": {"en": "Memory on the card:", "zh": "显存账目:"},
    "log_ev_mmap_at_start": {
        "en": "the process could not map a library or a weights file into memory before any training: its start "
        "(imports) or loading, with system RAM or the address space exhausted",
        "zh": "在任何训练之前进程就无法把库或权重文件映射进内存:发生在启动(导入)或加载时,系统内存或地址空间已耗尽",
    },
    "log_ev_conflict_load_steps": {
        "en": "but {n} training step(s) had completed before it: a loading marker and a step counter disagree, "
        "so the phase is asked, not guessed",
        "zh": "但此前已完成 {n} 个训练步:加载标记与步数计数相互矛盾,因此询问阶段而不是猜测",
    },
    "f_ranks_first": {
        "en": "{first} ran out of memory first (of {n} processes in the log): the diagnosis is of its failure.",
        "zh": "{first} 最先显存不足(日志中共 {n} 个进程):诊断针对它的失败。",
    },
    "f_ranks_same_cause": {
        "en": "{others} ran out of memory too: the same cause on each, so one change serves them all.",
        "zh": "{others} 也显存不足:各自原因相同,一处修改对它们都适用。",
    },
    "f_ranks_torn_down": {
        "en": "{others} stopped after it (the launcher's SIGTERM / ChildFailedError, NCCL aborting): torn down, "
        "not failures of their own.",
        "zh": "{others} 在它之后停止(启动器的 SIGTERM / ChildFailedError、NCCL 中止):是被连带终止,不是各自的失败。",
    },
    "f_ranks_root_cause": {
        "en": "torchrun's summary names rank {rank} as the first observed failure.",
        "zh": "torchrun 的汇总把 rank {rank} 列为最先观察到的失败。",
    },
    # (end of diag)
    # --- messages added by the probe work (keep each group together) ---
    "probe_no_info": {
        "en": "a probe needs the dataset's dataset_info.json: {path} ({detail})",
        "zh": "探测试跑需要数据集的 dataset_info.json:{path}({detail})",
    },
    "probe_remote_data": {
        "en": "a probe copies local data only: dataset {name} is on a hub (download it and list it with file_name)",
        "zh": "探测试跑只能复制本地数据:数据集 {name} 来自在线仓库(请先下载,并在 dataset_info.json 中用 file_name 指向它)",
    },
    "probe_unknown_dataset": {
        "en": "dataset {name} has no local file in dataset_info.json",
        "zh": "dataset_info.json 中数据集 {name} 没有本地文件",
    },
    "probe_how_sorted": {
        "en": "Training rows sorted by real token count, longest first, shuffling off (disable_shuffling): the first micro-batch holds the {batch} longest samples, {longest} tokens padded to {padded} ({tokens} tokens in the batch), the largest padded batch the run can build.",
        "zh": "训练样本按实际 token 数从长到短排序并关闭打乱(disable_shuffling):第一个 micro-batch 就是最长的 {batch} 条样本,最长 {longest} token、补齐到 {padded}(整批 {tokens} token),即整个训练中可能出现的最大补齐批次。",
    },
    "probe_how_cut": {
        "en": "The longest sample ({longest} tokens) is cut to cutoff_len {cutoff}, as in the run.",
        "zh": "最长样本({longest} token)会像正式训练一样被截断到 cutoff_len {cutoff}。",
    },
    "probe_how_group_by_length": {
        "en": "group_by_length is on: its sampler also puts the group holding the longest sample first; the probe's first batch is the {batch} longest, padded the same way.",
        "zh": "已开启 group_by_length:它的采样器同样把含最长样本的一组放在最前;探测的第一批是最长的 {batch} 条,补齐方式相同。",
    },
    "probe_how_packing": {
        "en": "packing is on: samples are packed into sequences of up to cutoff_len {cutoff}, so every batch is about {batch} x {cutoff} tokens whatever the order; the first is as big as any.",
        "zh": "已开启 packing:样本被拼接成不超过 cutoff_len {cutoff} 的序列,无论顺序如何每批约 {batch} x {cutoff} token;第一批与任何一批一样大。",
    },
    "probe_how_neat_packing": {
        "en": "neat_packing is on: samples are packed into sequences of up to cutoff_len {cutoff} with each sample's own attention, so every batch is about {batch} x {cutoff} tokens; the first is as big as any.",
        "zh": "已开启 neat_packing:样本被拼接成不超过 cutoff_len {cutoff} 的序列且各自保持独立注意力,每批约 {batch} x {cutoff} token;第一批与任何一批一样大。",
    },
    "probe_how_world": {
        "en": "With {gpus} GPUs each GPU's first micro-batch comes from the {rows} longest rows.",
        "zh": "共 {gpus} 张卡:每张卡的第一个 micro-batch 都来自最长的 {rows} 条样本。",
    },
    "probe_how_no_eval": {
        "en": "The config does not validate: there is no validation milestone.",
        "zh": "该配置不做验证:没有验证这一关。",
    },
    "probe_how_eval": {
        "en": "Validation: the {batch} longest samples of {source} ({longest} tokens, padded to {padded}) in one batch of per_device_eval_batch_size {batch}.",
        "zh": "验证:取 {source} 中最长的 {batch} 条样本({longest} token,补齐到 {padded}),按 per_device_eval_batch_size {batch} 组成一批。",
    },
    "probe_how_val_size": {
        "en": "val_size {val_size} draws validation rows at random from the training data; the probe validates on the {batch} longest training rows instead (a split could draw them).",
        "zh": "val_size {val_size} 会从训练数据中随机抽取验证样本;探测改用最长的 {batch} 条训练样本验证(随机划分可能抽到它们)。",
    },
    "probe_how_max_samples": {
        "en": "max_samples {max_samples} is applied when choosing the rows (the first rows of each dataset, as LLaMA-Factory takes them).",
        "zh": "选取样本时已按 max_samples {max_samples} 截取(与 LLaMA-Factory 一样取每个数据集的前若干条)。",
    },
    "probe_starting": {
        "en": "Probe trial into {out}: measuring token lengths, then the longest batches first (time limit {timeout:.0f} s)",
        "zh": "探测试跑,目录 {out}:先统计 token 长度,再让最长的批次最先出现(时间上限 {timeout:.0f} 秒)",
    },
    "probe_milestones": {"en": "Milestones:", "zh": "关卡:"},
    "probe_milestone_passed": {
        "en": "  passed  {name} (step {step}): peak {peak} MiB",
        "zh": "  通过    {name}(第 {step} 步):峰值 {peak} MiB",
    },
    "probe_milestone_failed": {
        "en": "  FAILED  {name}: peak {peak} MiB",
        "zh": "  未通过  {name}:峰值 {peak} MiB",
    },
    "probe_milestone_unreached": {"en": "  -       {name}: not reached", "zh": "  -       {name}:未到达"},
    "probe_milestone_na": {
        "en": "  n/a     {name}: the config does not do this",
        "zh": "  不适用  {name}:该配置不会执行这一步",
    },
    "probe_all_passed": {
        "en": "The probe passed every milestone: the run's known worst moments fit.",
        "zh": "探测通过了所有关卡:整个训练已知的最坏时刻都放得下。",
    },
    "probe_not_passed": {
        "en": "The probe did not pass every milestone: the full run would fail where it stopped.",
        "zh": "探测没有通过所有关卡:完整训练会在它停下的地方失败。",
    },
    "milestone_load": {"en": "load", "zh": "加载"},
    "milestone_longest_batch": {
        "en": "longest micro-batch forward/backward",
        "zh": "最长 micro-batch 前向/反向",
    },
    "milestone_optimizer_step": {"en": "first optimizer update", "zh": "第一次优化器更新"},
    "milestone_eval": {"en": "validation on the longest eval batch", "zh": "最长验证批次的验证"},
    "milestone_save": {"en": "checkpoint save", "zh": "保存检查点"},
    "milestone_short_load": {"en": "load", "zh": "加载"},
    "milestone_short_longest_batch": {"en": "longest batch", "zh": "最长批次"},
    "milestone_short_optimizer_step": {"en": "1st update", "zh": "首次更新"},
    "milestone_short_eval": {"en": "eval", "zh": "验证"},
    "milestone_short_save": {"en": "save", "zh": "保存"},
    "cmp_milestones": {
        "en": "Probe milestones (peak MiB; - not reached, x failed):",
        "zh": "探测关卡(峰值 MiB;- 未到达,x 未通过):",
    },
    "cal_headline": {
        "en": "calibrated by trial {trial}: predicted {predicted:.2f} GiB, measured {measured:.2f} GiB ({kind})",
        "zh": "已按试跑 {trial} 校准:预测 {predicted:.2f} GiB,实测 {measured:.2f} GiB({kind})",
    },
    "cal_headline_no_points": {"en": "calibrated by trial {trial}", "zh": "已按试跑 {trial} 校准"},
    "cal_no_points": {
        "en": "trial {trial} measured no usable peak (no milestone passed, or no samples): nothing to calibrate from",
        "zh": "试跑 {trial} 没有可用的峰值测量(没有通过任何关卡,或没有采样):无法校准",
    },
    "cal_cache_unwritable": {
        "en": "cannot write the calibration cache {path}: {detail}",
        "zh": "无法写入校准缓存 {path}:{detail}",
    },
    "cal_written": {
        "en": "Estimate {fitted}; fitted {constants}; saved to {path} and the user cache",
        "zh": "估算{fitted};拟合结果 {constants};已保存到 {path} 和用户缓存",
    },
    "cal_point": {
        "en": "  {phase:<5} {kind:<10} measured {measured:>9,.0f} MiB  model {before:>9,.0f}  calibrated {after:>9,.0f}",
        "zh": "  {phase:<5} {kind:<10} 实测 {measured:>9,.0f} MiB  模型 {before:>9,.0f}  校准后 {after:>9,.0f}",
    },
    "est_calibrated": {
        "en": "Calibrated: {text} (constants from calibration: {names})",
        "zh": "已校准:{text}(来自校准的常数:{names})",
    },
    "fit_title": {
        "en": "The largest batch that fits: micro-batch {batch}, accumulation {accumulation}, eval batch {eval_batch}",
        "zh": "放得下的最大批次:单卡 batch {batch},梯度累积 {accumulation},验证 batch {eval_batch}",
    },
    "fit_why": {
        "en": "Predicted peak {predicted:,.0f} MiB, under {budget:,.0f} MiB less a {margin} % margin; the effective batch stays {effective}.",
        "zh": "预测峰值 {predicted:,.0f} MiB,低于 {budget:,.0f} MiB 减去 {margin}% 余量;有效批大小保持 {effective}。",
    },
    "fit_cost": {
        "en": "A larger micro-batch is faster per update; a smaller one slower. The updates themselves are the same (batch x accumulation kept).",
        "zh": "单卡 batch 越大每次更新越快,越小越慢;每次更新本身不变(batch x 梯度累积保持不变)。",
    },
    "fit_judge": {
        "en": "The probe passed every milestone; the log's Total train batch size stays {effective}.",
        "zh": "探测通过所有关卡;日志中的 Total train batch size 仍为 {effective}。",
    },
    "fit_bad_margin": {
        "en": "--margin must be between 0 and 0.9 (got {value})",
        "zh": "--margin 必须在 0 到 0.9 之间(当前为 {value})",
    },
    "fit_no_budget": {
        "en": "no NVIDIA GPU is visible: give the memory to fit in with --gpu-mib N",
        "zh": "看不到 NVIDIA GPU:请用 --gpu-mib N 指定可用内存",
    },
    "fit_nothing_fits": {
        "en": "nothing fits: even micro-batch 1 is predicted above {limit:,.0f} MiB (budget {budget:,.0f} MiB less the margin)",
        "zh": "放不下:即使单卡 batch 为 1,预测也超过 {limit:,.0f} MiB(预算 {budget:,.0f} MiB 减去余量)",
    },
    "fit_uncalibrated": {
        "en": "No calibration of this setting yet: the choice rests on the model's constants (a probe of this config calibrates it: oomdoctor trial --probe).",
        "zh": "该设置尚无校准:选择基于模型的默认常数(对此配置运行一次探测即可校准:oomdoctor trial --probe)。",
    },
    "fit_inexact": {
        "en": "Micro-batch {micro_batch} would also fit, but not exactly: accumulation {accumulation} gives an effective batch of {effective_batch} instead of {effective_now}; fit keeps the effective batch exactly.",
        "zh": "单卡 batch {micro_batch} 也放得下,但无法精确保持:梯度累积 {accumulation} 时有效批大小为 {effective_batch} 而非 {effective_now};fit 选择精确保持有效批大小。",
    },
    "fit_recalibrated": {
        "en": "The probe ran out: the activation factor is raised to {scale:.3f} (what the failure proves), and the next candidate chosen with it.",
        "zh": "探测内存不足:激活系数提高到 {scale:.3f}(失败所证明的下限),并据此选择下一个候选。",
    },
    "fit_not_memory": {
        "en": "The probe failed without running out of memory ({outcome}): a smaller batch would not help; stopped.",
        "zh": "探测失败但并非内存不足({outcome}):减小批次无济于事;已停止。",
    },
    "fit_header": {
        "en": "Fit: budget {budget:,.0f} MiB, margin {margin} %, limit {limit:,.0f} MiB; effective batch {effective}",
        "zh": "fit:预算 {budget:,.0f} MiB,余量 {margin}%,上限 {limit:,.0f} MiB;有效批大小 {effective}",
    },
    "fit_calibrated_by": {"en": "Estimate calibrated by trial {trial}", "zh": "估算已按试跑 {trial} 校准"},
    "fit_h_try": {"en": "try", "zh": "尝试"},
    "fit_h_batch": {"en": "batch", "zh": "batch"},
    "fit_h_acc": {"en": "accum.", "zh": "累积"},
    "fit_h_eval": {"en": "eval batch", "zh": "验证 batch"},
    "fit_h_effective": {"en": "effective", "zh": "有效批"},
    "fit_h_predicted": {"en": "predicted MiB", "zh": "预测 MiB"},
    "fit_h_measured": {"en": "measured MiB", "zh": "实测 MiB"},
    "fit_h_outcome": {"en": "outcome", "zh": "结果"},
    "fit_passed": {"en": "passed", "zh": "通过"},
    "fit_failed_at": {"en": "failed at {milestone}", "zh": "在{milestone}失败"},
    "fit_winner": {
        "en": "Winner: micro-batch {batch}, accumulation {accumulation}, eval batch {eval_batch} (effective batch {effective}, {kept}); written to {folder}",
        "zh": "结果:单卡 batch {batch},梯度累积 {accumulation},验证 batch {eval_batch}(有效批大小 {effective},{kept});已写入 {folder}",
    },
    "fit_kept": {"en": "kept", "zh": "保持不变"},
    "fit_not_kept": {"en": "changed", "zh": "已改变"},
    "fit_unchanged": {
        "en": "The config fits as it is (verified by the probe); nothing to change. Record in {folder}",
        "zh": "该配置原样即可放下(已由探测验证);无需修改。记录在 {folder}",
    },
    "fit_no_winner": {
        "en": "No candidate passed its probe ({probes} probe(s)); record in {folder}",
        "zh": "没有候选通过探测(共 {probes} 次探测);记录在 {folder}",
    },
    "fit_run_with": {"en": "Run it with:", "zh": "运行命令:"},
    "fit_probing": {
        "en": "Probe {n}: micro-batch {batch}, accumulation {accumulation}, eval batch {eval_batch} (predicted {predicted:,.0f} MiB)",
        "zh": "第 {n} 次探测:单卡 batch {batch},梯度累积 {accumulation},验证 batch {eval_batch}(预测 {predicted:,.0f} MiB)",
    },
    # (end of probe)
    # --- messages added by the watch work (keep each group together) ---
    "watch_spec_incomplete": {
        "en": "{file}: warning kind {kind!r} needs text and act in en and zh, and a hypothesis",
        "zh": "{file}:预警类型 {kind!r} 需要中英文的 text 和 act,以及 hypothesis",
    },
    "watch_needs_config": {
        "en": "watch --pid needs --config too: the config tells what the run will need",
        "zh": "watch --pid 还需要 --config:配置决定训练后面需要多少内存",
    },
    "wr_title": {
        "en": "oomdoctor watch  {time}  {config}  (read only)",
        "zh": "oomdoctor watch  {time}  {config}(只读)",
    },
    "wr_waiting": {
        "en": "Waiting for the training: no process names this config or its output_dir yet.",
        "zh": "等待训练启动:还没有进程的命令行包含这个配置或它的 output_dir。",
    },
    "wr_run": {
        "en": "pid {pids}  step {step} / {total}  loss {loss}  ETA {eta}",
        "zh": "pid {pids}  第 {step} / {total} 步  loss {loss}  剩余 {eta}",
    },
    "wr_next": {
        "en": "next validation at step {eval}, next save at step {save}",
        "zh": "下次验证在第 {eval} 步,下次保存在第 {save} 步",
    },
    "wr_pool": {
        "en": "{used} / {limit} MiB  peak {peak}  left {left} MiB",
        "zh": "{used} / {limit} MiB  峰值 {peak}  剩余 {left} MiB",
    },
    "wr_phase_lines": {
        "en": "estimate: validation would reach {eval} MiB, the longest batch {batch} MiB, the next save {save} MiB",
        "zh": "估算:验证会到 {eval} MiB,最长批次会到 {batch} MiB,下次保存会到 {save} MiB",
    },
    "wr_limit_card": {"en": "the card", "zh": "显卡"},
    "wr_limit_rlimit_as": {
        "en": "host memory, address-space limit of the training (prlimit --as)",
        "zh": "主机内存,训练进程的地址空间上限(prlimit --as)",
    },
    "wr_limit_cgroup": {"en": "host memory, cgroup limit", "zh": "主机内存,cgroup 上限"},
    "wr_limit_host": {"en": "host RAM", "zh": "主机内存"},
    "wr_warnings": {"en": "Warnings:", "zh": "预警:"},
    "wr_no_warnings": {
        "en": "No warning: what is coming fits in what is left.",
        "zh": "没有预警:后面需要的内存都在剩余范围内。",
    },
    "wr_first": {
        "en": "First warning ({elapsed} s in, at step {step}): {text}",
        "zh": "第一条预警(开始后 {elapsed} 秒,第 {step} 步):{text}",
    },
    "wr_ended": {"en": "The run has ended. The diagnosis of its log:", "zh": "训练已结束。日志诊断如下:"},
    "wr_log_only": {
        "en": "No process of this run is visible here: following its log alone ({file}, written {age} s ago); no process memory.",
        "zh": "这里看不到这次训练的进程:仅跟随它的日志({file},{age} 秒前写入);没有进程内存数据。",
    },
    "wr_limit_log": {
        "en": "the card, reserved memory from the log (RECORD_VRAM)",
        "zh": "显卡,日志中的预留显存(RECORD_VRAM)",
    },
    "wr_limit_estimate": {"en": "the estimate only (no memory readings)", "zh": "仅估算(没有内存读数)"},
    "wr_no_readings": {
        "en": "No warning can be judged: no reading of the run's memory (RECORD_VRAM=1 in the run's environment puts its reserved memory in trainer_log.jsonl).",
        "zh": "无法判断预警:没有训练内存的读数(在训练环境中设置 RECORD_VRAM=1,预留显存会写入 trainer_log.jsonl)。",
    },
    "wr_estimate_only": {
        "en": "card {limit} MiB; no reading of the run's memory",
        "zh": "显卡 {limit} MiB;没有训练内存的读数",
    },
    # (end of watch)
    # --- messages added by the tui work (keep each group together) ---
    # (end of tui)
    # --- messages added by the facts work (keep each group together) ---
    "f_effective_batch_unknown_world": {
        "en": "Per process: {micro} per GPU x {acc} accumulation = {per_process} samples per update, on each of at least {at_least} processes; the log does not say how many, so the effective batch is not known.",
        "zh": "每个进程:单卡 {micro} × 累积 {acc} = 每次更新 {per_process} 条样本;至少有 {at_least} 个进程,日志没有写明进程数,因此有效批次未知。",
    },
    # (end of facts)
    # --- messages added by the startup work (keep each group together) ---
    "cmp_failed_not_saving": {
        "en": "(it failed: a lower peak is not a saving)",
        "zh": "(失败了:峰值更低不算节省)",
    },
    "rules_valid": {
        "en": "{count} rule files in {directory}: all valid",
        "zh": "{directory} 中的 {count} 个规则文件:全部有效",
    },
    # (end of startup)
    # --- messages added by the hostile work (keep each group together) ---
    "in_not_regular": {"en": "{path} is not a file: it is {kind}", "zh": "{path} 不是文件,而是{kind_zh}"},
    "in_too_big": {
        "en": "{path} is {size}: too big for a {what} (at most {limit})",
        "zh": "{path} 有 {size},不可能是{what}(最多 {limit})",
    },
    "in_binary": {
        "en": "{path} looks like a binary file, not a {what}",
        "zh": "{path} 看起来是二进制文件,不是{what}",
    },
    "in_not_utf8": {
        "en": "{path} is not UTF-8 text (at {offset})",
        "zh": "{path} 不是 UTF-8 文本(位置 {offset})",
    },
    "in_yaml_expands": {
        "en": "{path}: the YAML aliases at line {line} expand to more than {limit} values (an alias bomb?)",
        "zh": "{path}:第 {line} 行的 YAML 别名展开后超过 {limit} 个值(别名炸弹?)",
    },
    "in_yaml_recursive": {
        "en": "{path}: the YAML node at line {line} contains itself",
        "zh": "{path}:第 {line} 行的 YAML 节点包含了自身",
    },
    "in_too_deep": {
        "en": "{path}: {where} nests deeper than {limit} levels",
        "zh": "{path}:{where} 嵌套超过 {limit} 层",
    },
    "in_bad_yaml_value": {
        "en": "{path}: a value cannot be read ({detail})",
        "zh": "{path}:有一个值无法读取({detail})",
    },
    "in_bad_json": {"en": "{path} is not valid JSON ({detail})", "zh": "{path} 不是有效的 JSON({detail})"},
    "in_bad_type": {
        "en": "{path}: {key} should be {expected}, got {got}",
        "zh": "{path}:{key} 应为 {expected},实际为 {got}",
    },
    "in_bad_csv": {
        "en": "{path}: line {line} is not CSV ({detail})",
        "zh": "{path}:第 {line} 行不是 CSV 格式({detail})",
    },
    "in_too_many_rows": {"en": "{path} has more than {limit} rows", "zh": "{path} 超过 {limit} 行"},
    "in_line_too_long": {
        "en": "{path}: line {line} is longer than {limit} bytes",
        "zh": "{path}:第 {line} 行超过 {limit} 字节",
    },
    "in_escapes": {
        "en": "{path}: {key} {value!r} points outside {base}",
        "zh": "{path}:{key} {value!r} 指向 {base} 之外",
    },
    "crash": {
        "en": "internal error ({kind}: {detail}); this is not a verdict on the run. Run again with --debug for the traceback",
        "zh": "内部错误({kind}:{detail}),与训练是否失败无关。加 --debug 重新运行可查看调用栈",
    },
    "arg_range": {
        "en": "expected a number from {low} to {high}, got {value!r}",
        "zh": "应为 {low} 到 {high} 之间的数,收到 {value!r}",
    },
    "arg_int_range": {
        "en": "expected a whole number from {low} to {high}, got {value!r}",
        "zh": "应为 {low} 到 {high} 之间的整数,收到 {value!r}",
    },
    "out_is_symlink": {
        "en": "--out {path} is a symbolic link; give a new folder path",
        "zh": "--out {path} 是符号链接;请给出一个新的目录路径",
    },
    "out_in_system": {
        "en": "--out {path} is under {root}; give a folder of your own",
        "zh": "--out {path} 位于 {root} 之下;请给出你自己的目录",
    },
    "out_in_run": {
        "en": "--out {path} lies inside the run's {what} ({base}); write the trial elsewhere so nothing of the run is touched",
        "zh": "--out {path} 位于这次训练的{what}({base})之内;请写到别处,以免改动原训练的文件",
    },
    "out_parent_missing": {
        "en": "--out {path}: its parent folder {parent} cannot be used ({detail})",
        "zh": "--out {path}:其上级目录 {parent} 无法使用({detail})",
    },
    "env_refused": {
        "en": "{path}: env sets {names}, which a trial never applies (only memory settings: {allowed})",
        "zh": "{path}:env 设置了 {names},试跑从不应用这些变量(只允许显存相关设置:{allowed})",
    },
    "env_applied": {"en": "environment for this trial: {pairs}", "zh": "本次试跑的环境变量:{pairs}"},
    "procs_stopped": {
        "en": "stopped {count} leftover process(es) of the trial that had left its process group",
        "zh": "已停止试跑遗留的 {count} 个脱离进程组的进程",
    },
    # (end of hostile)
    # --- messages added by the bigl work (keep each group together) ---
    # (end of bigl)
    # --- messages added by the diag5a work (keep each group together) ---
    "log_ev_after_train_save": {
        "en": "it failed after training had finished and nothing later in the log says what ran: a training script saves the model next (a final evaluation would print its own line first)",
        "zh": "失败发生在训练结束之后,日志中之后没有别的标记:训练脚本接下来保存模型(若是最后的验证,会先打印自己的标记)",
    },
    "log_ev_elided_steps": {
        "en": "the excerpt leaves lines out ([...]) before the traceback and has no error line: it does not show whether any training step had completed",
        "zh": "摘录在调用栈之前省略了若干行([...]),且没有错误行:看不出训练步是否已经完成过",
    },
    "log_ev_bar_finished": {
        "en": "the training bar had reached 100 % ({bar}): the end of an epoch or of training, not a long sample in a step; what ran next (a save, an evaluation, the next epoch's or rollout's set-up) is not in the log",
        "zh": "训练进度条已到 100%({bar}):这是一个 epoch 或整个训练的结束,而不是某一步遇到长样本;之后运行的内容(保存、验证、下一个 epoch 或生成阶段的准备)不在日志中",
    },
    "log_ev_sibling_frames": {
        "en": "the failing process ({own}) printed no frames; the frames are those of {other}, which ran out the same way (data-parallel processes run the same code)",
        "zh": "出错的进程({own})没有打印调用栈;这里用的是同样显存不足的 {other} 的调用栈(数据并行的各进程运行相同的代码)",
    },
    # (end of diag5a)
}
