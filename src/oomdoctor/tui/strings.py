"""Every text the TUI shows, in English and Chinese: one catalog, looked up with ``t(key, lang)``.

Rule texts (titles, why, cost, judge) come from the rules themselves; this file holds only what the
interface says. No textual import: the catalog is checked by plain unit tests.
"""

from __future__ import annotations

from oomdoctor.i18n import Lang

TEXTS: dict[str, dict[str, str]] = {
    # App and footer keys (``key_<binding id>``)
    "key_quit": {"en": "Quit", "zh": "退出"},
    "key_quit_tip": {
        "en": "Leave oomdoctor (stops a trial it started)",
        "zh": "退出 oomdoctor(会停止它启动的试跑)",
    },
    "key_lang": {"en": "中文", "zh": "English"},
    "key_lang_tip": {"en": "Switch the interface to Chinese", "zh": "界面切换为英文"},
    "key_apply": {"en": "Apply", "zh": "应用"},
    "key_apply_tip": {
        "en": "Write this change into a new trial folder (your files stay untouched)",
        "zh": "把这项修改写入新的试跑目录(不改动原文件)",
    },
    "key_next": {"en": "Next", "zh": "下一个"},
    "key_next_tip": {"en": "Show the next alternative change", "zh": "查看下一个备选修改"},
    "key_explain": {"en": "Explain", "zh": "详解"},
    "key_explain_tip": {"en": "Why this change, in full", "zh": "查看这项修改的完整说明"},
    "key_copy": {"en": "Command", "zh": "命令"},
    "key_copy_tip": {
        "en": "Show the training command, ready to select and copy",
        "zh": "显示训练命令,便于选中复制",
    },
    "key_trial": {"en": "Trial", "zh": "试跑"},
    "key_trial_tip": {"en": "Run a short trial of the new config", "zh": "用新配置做一次短时试跑"},
    "key_runs": {"en": "Runs", "zh": "运行"},
    "key_runs_tip": {"en": "Pick another run in this folder", "zh": "选择本目录中的其他运行"},
    "key_answer": {"en": "Answer", "zh": "回答"},
    "key_answer_tip": {"en": "Answer the question with its number", "zh": "按编号回答问题"},
    "key_skip": {"en": "Skip", "zh": "跳过"},
    "key_skip_tip": {"en": "Leave this question unanswered", "zh": "暂不回答这个问题"},
    "key_tab_facts": {"en": "Facts", "zh": "事实"},
    "key_tab_facts_tip": {
        "en": "What was read from the config, log and GPU",
        "zh": "从配置、日志和 GPU 读到的信息",
    },
    "key_tab_proposal": {"en": "Proposal", "zh": "建议"},
    "key_tab_proposal_tip": {"en": "Questions and the proposed change", "zh": "问题与建议的修改"},
    "key_tab_history": {"en": "History", "zh": "记录"},
    "key_tab_history_tip": {"en": "Changes made in this session", "zh": "本次会话做过的修改"},
    "key_open": {"en": "Open", "zh": "打开"},
    "key_open_tip": {"en": "Open the selected run", "zh": "打开选中的运行"},
    "key_demo": {"en": "Demo", "zh": "演示"},
    "key_demo_tip": {"en": "Open the bundled demo case", "zh": "打开内置演示案例"},
    "key_back": {"en": "Back", "zh": "返回"},
    "key_back_tip": {"en": "Go back to the previous screen", "zh": "返回上一屏"},
    "key_stop": {"en": "Stop", "zh": "停止"},
    "key_stop_tip": {
        "en": "Stop the trial (only the process oomdoctor started)",
        "zh": "停止试跑(只停 oomdoctor 启动的进程)",
    },
    "key_rediagnose": {"en": "Proposals", "zh": "重新诊断"},
    "key_rediagnose_tip": {
        "en": "Diagnose the failed trial and go back to proposals",
        "zh": "诊断失败的试跑并回到修改建议",
    },
    "key_measure": {"en": "Measure", "zh": "统计长度"},
    "key_measure_tip": {
        "en": "Tokenize the dataset as LLaMA-Factory does and use the real sample lengths",
        "zh": "按 LLaMA-Factory 的方式分词,用实际样本长度重新诊断",
    },
    "key_cancel_measure": {"en": "Stop measuring", "zh": "停止统计"},
    "key_cancel_measure_tip": {"en": "Stop counting the sample lengths", "zh": "停止统计样本长度"},
    "key_close": {"en": "Close", "zh": "关闭"},
    "key_close_tip": {"en": "Close this window", "zh": "关闭此窗口"},
    # Tabs
    "tab_facts": {"en": "[f] Facts", "zh": "[f] 事实"},
    "tab_proposal": {"en": "[p] Proposal", "zh": "[p] 建议"},
    "tab_history": {"en": "[h] History", "zh": "[h] 记录"},
    # Run header and loading
    "run_config": {"en": "config", "zh": "配置"},
    "run_log": {"en": "log", "zh": "日志"},
    "run_none": {"en": "(none)", "zh": "(无)"},
    "run_demo": {"en": "demo case", "zh": "演示案例"},
    "loading": {"en": "Reading the config, log and GPU…", "zh": "正在读取配置、日志和 GPU……"},
    # Picker
    "picker_title": {"en": "Runs in {folder}", "zh": "{folder} 中的运行"},
    "picker_scanning": {
        "en": "Looking for LLaMA-Factory runs in {folder}…",
        "zh": "正在 {folder} 中查找 LLaMA-Factory 运行……",
    },
    "picker_none": {
        "en": "No LLaMA-Factory run found here (no config with model_name_or_path, no *.log, nohup.out or "
        "saves/**/running_log.txt). Open the bundled demo case, or start again with --config and --log.",
        "zh": "这里没有找到 LLaMA-Factory 运行(没有含 model_name_or_path 的配置,也没有 *.log、nohup.out 或 "
        "saves/**/running_log.txt)。可以打开内置演示案例,或用 --config 和 --log 重新启动。",
    },
    "picker_stopped_early": {
        "en": "The scan stopped after {entries} entries; pass --config/--log for runs deeper down.",
        "zh": "扫描在 {entries} 个条目后停止;更深层的运行请用 --config/--log 指定。",
    },
    "picker_col_when": {"en": "#", "zh": "#"},
    "picker_col_run": {"en": "Config and log, newest first", "zh": "配置与日志(最新在前)"},
    "picker_demo_row": {
        "en": "(demo) the course config with an OOM log",
        "zh": "(演示)课程配置与一份显存溢出日志",
    },
    "picker_demo_button": {"en": "Open the demo case (d)", "zh": "打开演示案例 (d)"},
    # OOM summary
    "oom_none": {"en": "No OOM in the log", "zh": "日志中没有显存溢出"},
    "oom_no_log": {"en": "No log given: judged from the config alone", "zh": "未提供日志:仅根据配置判断"},
    "oom_at": {"en": "Out of memory at {phase}", "zh": "显存溢出发生在{phase}"},
    "oom_step": {"en": "step {step}", "zh": "第 {step} 步"},
    "oom_step_of": {"en": "step {step} of {total}", "zh": "第 {step}/{total} 步"},
    "oom_filled_by": {"en": "filled by {cause}", "zh": "占用来源:{cause}"},
    "oom_requested": {
        "en": "asked for {requested}, {free} free of {capacity}",
        "zh": "申请 {requested},总量 {capacity} 中空闲 {free}",
    },
    "oom_requested_short": {"en": "asked for {requested}", "zh": "申请 {requested}"},
    "oom_reserved": {"en": "{reserved} reserved but unallocated", "zh": "已预留未分配 {reserved}"},
    "phase_load": {"en": "loading the weights", "zh": "加载权重时"},
    "phase_first_batch": {"en": "the first batch", "zh": "第一个 batch"},
    "phase_long_sample": {"en": "a long sample mid-training", "zh": "训练中途的长样本"},
    "phase_eval": {"en": "evaluation", "zh": "验证阶段"},
    "phase_save": {"en": "checkpoint saving", "zh": "保存检查点时"},
    "phase_optimizer_step": {"en": "the first optimizer update", "zh": "第一次优化器更新"},
    "phase_unknown": {"en": "an unknown point", "zh": "未知时刻"},
    "phase_none": {"en": "no point (it did not run out)", "zh": "无(未溢出)"},
    "cause_weights": {"en": "the weights", "zh": "模型权重"},
    "cause_activations": {"en": "activations", "zh": "激活值"},
    "cause_logits": {"en": "logits and the loss", "zh": "logits 与损失"},
    "cause_eval_batch": {"en": "the eval batch", "zh": "验证 batch"},
    "cause_optimizer_state": {"en": "optimizer state", "zh": "优化器状态"},
    "cause_save_copy": {"en": "a copy made while saving", "zh": "保存时的副本"},
    "cause_fragmentation": {"en": "fragmentation", "zh": "显存碎片"},
    "cause_other_process": {"en": "another process on the card", "zh": "卡上的其他进程"},
    "cause_host_ram": {"en": "host RAM", "zh": "主机内存"},
    "cause_request_exceeds_card": {"en": "a request larger than the card", "zh": "超过整卡容量的申请"},
    "cause_unknown": {"en": "unknown", "zh": "未知"},
    # Facts view
    "facts_model": {"en": "Model", "zh": "模型"},
    "facts_params": {"en": "{params} params", "zh": "{params} 参数"},
    "facts_method": {"en": "Method", "zh": "方法"},
    "facts_method_qlora": {"en": "qlora ({bits}-bit base + LoRA)", "zh": "qlora({bits} 位量化底座 + LoRA)"},
    "facts_stage": {"en": "stage {stage}", "zh": "阶段 {stage}"},
    "facts_batch": {"en": "Batch", "zh": "Batch"},
    "facts_batch_value": {
        "en": "{micro} per GPU × {accum} accumulation = {effective} effective",
        "zh": "单卡 {micro} × 梯度累积 {accum} = 有效 {effective}",
    },
    "facts_batch_value_gpus": {
        "en": "{micro} per GPU × {accum} accumulation × {gpus} GPUs = {effective} effective",
        "zh": "单卡 {micro} × 梯度累积 {accum} × {gpus} 卡 = 有效 {effective}",
    },
    "facts_sequence": {"en": "Sequence", "zh": "序列长度"},
    "facts_cutoff": {"en": "cutoff_len {cutoff}", "zh": "cutoff_len {cutoff}"},
    "facts_longest": {"en": "longest real sample {tokens} tokens", "zh": "实际最长样本 {tokens} tokens"},
    "facts_p99": {"en": "p99 {tokens}", "zh": "99 分位 {tokens}"},
    "facts_measured": {"en": "measured", "zh": "已实测"},
    "facts_truncated": {"en": "{count} samples truncated", "zh": "{count} 条样本被截断"},
    "facts_longest_unknown": {"en": "longest real sample unknown", "zh": "实际最长样本未知"},
    "facts_packing": {"en": "packing on", "zh": "packing 已开启"},
    "facts_precision": {"en": "Precision", "zh": "精度"},
    "facts_checkpointing": {"en": "Checkpointing", "zh": "梯度检查点"},
    "facts_on_default": {"en": "on (by default)", "zh": "开启(默认)"},
    "facts_on": {"en": "on", "zh": "开启"},
    "facts_off": {"en": "off", "zh": "关闭"},
    "facts_quantization": {"en": "Quantization", "zh": "量化"},
    "facts_quant_value": {"en": "{bits}-bit {qtype} ({method})", "zh": "{bits} 位 {qtype}({method})"},
    "facts_none": {"en": "none", "zh": "无"},
    "facts_deepspeed": {"en": "DeepSpeed", "zh": "DeepSpeed"},
    "facts_zero": {"en": "ZeRO-{stage}", "zh": "ZeRO-{stage}"},
    "facts_offload_optimizer": {"en": "optimizer offload", "zh": "优化器卸载"},
    "facts_offload_param": {"en": "parameter offload", "zh": "参数卸载"},
    "facts_ds_missing": {"en": "{path} (file not found)", "zh": "{path}(找不到文件)"},
    "facts_eval": {"en": "Eval batch", "zh": "验证 batch"},
    "facts_eval_default": {"en": "{batch} (8 by default)", "zh": "{batch}(默认 8)"},
    "facts_eval_every": {"en": "evaluation every {steps} steps", "zh": "每 {steps} 步验证一次"},
    "facts_eval_on": {"en": "evaluation on", "zh": "会做验证"},
    "facts_eval_off": {"en": "no evaluation", "zh": "不做验证"},
    "facts_gpu": {"en": "GPU", "zh": "GPU"},
    "facts_gpu_value": {"en": "{name}, {total}", "zh": "{name},{total}"},
    "facts_bf16_yes": {"en": "bf16 supported", "zh": "支持 bf16"},
    "facts_bf16_no": {"en": "no bf16", "zh": "不支持 bf16"},
    "facts_gpu_others": {
        "en": "other processes: {count} using {used}",
        "zh": "其他进程:{count} 个,占用 {used}",
    },
    "facts_gpu_more": {"en": "+{count} more GPUs", "zh": "另有 {count} 块 GPU"},
    "facts_no_gpu": {"en": "no NVIDIA GPU", "zh": "没有 NVIDIA GPU"},
    "facts_no_gpu_reason": {"en": "not available: {reason}", "zh": "不可用:{reason}"},
    "facts_oom": {"en": "OOM", "zh": "显存溢出"},
    "facts_estimate": {"en": "Estimate", "zh": "估算"},
    "facts_estimate_value": {
        "en": "peak {peak} allocated, nvidia-smi {band}; largest term: {term}",
        "zh": "峰值 {peak}(已分配),nvidia-smi {band};最大项:{term}",
    },
    "facts_band": {"en": "{low}–{high}", "zh": "约 {low}–{high}"},
    # The estimator's reserve band can reach past the card; nvidia-smi never shows more than the card.
    "facts_band_capped": {
        "en": "{low} up to the whole card ({total}): the allocator would fill it",
        "zh": "{low} 直到整卡 {total}(分配器会把整卡占满)",
    },
    "facts_band_over": {
        "en": "more than the whole card ({total})",
        "zh": "超过整卡 {total}",
    },
    "facts_fits": {"en": "fits", "zh": "放得下"},
    "facts_does_not_fit": {"en": "does not fit", "zh": "放不下"},
    "facts_unknown": {"en": "unknown", "zh": "未知"},
    "facts_no_config": {"en": "no config given", "zh": "未提供配置"},
    "facts_findings": {"en": "Noticed", "zh": "注意到"},
    "term_weights": {"en": "weights", "zh": "权重"},
    "term_trainable_state": {"en": "trainable state", "zh": "可训练状态"},
    "term_activations": {"en": "activations", "zh": "激活值"},
    "term_logits_loss": {"en": "logits + loss", "zh": "logits 与损失"},
    "term_eval": {"en": "eval", "zh": "验证"},
    "term_overhead": {"en": "overhead", "zh": "额外开销"},
    # Questions
    "question_header": {"en": "Question {index} of {count}", "zh": "问题 {index}/{count}"},
    "question_hint": {
        "en": "The files cannot tell this. Press a number, click an answer, or 0 to skip.",
        "zh": "文件里看不出这一点。按数字键或点击答案,按 0 跳过。",
    },
    "question_skip": {"en": "0 Skip", "zh": "0 跳过"},
    # Proposal view
    "proposal_header": {"en": "Proposal {index} of {count}", "zh": "建议 {index}/{count}"},
    "proposal_none": {
        "en": "No change to propose: nothing in the facts points at a memory to cut.",
        "zh": "没有可提的修改:现有事实没有指向需要削减的显存。",
    },
    "proposal_change": {"en": "What would change", "zh": "将要修改"},
    "proposal_why": {"en": "Why this memory", "zh": "为什么针对这部分显存"},
    "proposal_cost": {"en": "Cost", "zh": "代价"},
    "proposal_judge": {"en": "How to judge it worked", "zh": "如何判断有效"},
    "proposal_already_on": {"en": "Already on (not counted again)", "zh": "已经开启(不重复计算)"},
    "proposal_effect": {"en": "Estimated effect", "zh": "预计效果"},
    "proposal_effect_value": {"en": "peak {before} → {after}", "zh": "峰值 {before} → {after}"},
    "proposal_effect_fits": {"en": "fits the card", "zh": "能放进这张卡"},
    "proposal_effect_no_fit": {"en": "still too big for the card", "zh": "仍然超出这张卡"},
    "proposal_requires": {"en": "Requires", "zh": "前提"},
    "proposal_manual": {
        "en": "This one is done by hand: oomdoctor cannot write it into the config.",
        "zh": "这一项需要手动处理:oomdoctor 无法把它写进配置。",
    },
    "proposal_no_config": {
        "en": "No config was given, so nothing can be written; pass --config to apply.",
        "zh": "未提供配置,无法写入;请用 --config 指定后再应用。",
    },
    "proposal_alternatives": {"en": "Alternatives (n)", "zh": "备选(n)"},
    "proposal_env": {"en": "environment", "zh": "环境变量"},
    "proposal_file": {"en": "new file", "zh": "新文件"},
    "proposal_removed": {"en": "(removed)", "zh": "(删除)"},
    "proposal_applied": {"en": "Written to {folder}", "zh": "已写入 {folder}"},
    "proposal_command": {
        "en": "Run it with (also saved as {script}; t runs a short trial):",
        "zh": "运行命令(也已保存为 {script};t 短时试跑):",
    },
    "proposal_measure_hint": {
        "en": "Press a (or m anywhere) to measure them now: oomdoctor tokenizes the dataset with the "
        "model's template, then diagnoses again with the real lengths. LLaMA-Factory and the model's "
        "tokenizer must be on this machine.",
        "zh": "按 a(或在任何页面按 m)立即统计:oomdoctor 用模型模板对数据集分词,再用实际长度重新诊断。"
        "本机需要装有 LLaMA-Factory 和该模型的分词器。",
    },
    "proposal_rule": {"en": "rule {rule}", "zh": "规则 {rule}"},
    # Apply dialog
    "apply_title": {"en": "Write this change into a new folder", "zh": "把修改写入新目录"},
    "apply_folder": {"en": "Folder (must not exist yet):", "zh": "目录(必须尚不存在):"},
    "apply_write": {"en": "Write", "zh": "写入"},
    "apply_cancel": {"en": "Cancel", "zh": "取消"},
    "apply_exists": {
        "en": "{folder} already exists: choose a new name",
        "zh": "{folder} 已存在:请换一个名字",
    },
    "apply_empty": {"en": "Give a folder name", "zh": "请填写目录名"},
    # Explain dialog
    "explain_title": {"en": "About this change", "zh": "关于这项修改"},
    "explain_docs": {"en": "In detail", "zh": "详细说明"},
    "explain_next": {"en": "Next checks", "zh": "后续检查"},
    "explain_files": {"en": "Files written beside the config", "zh": "与配置一起写入的文件"},
    "explain_env": {"en": "Environment for the run", "zh": "运行所需环境变量"},
    "explain_findings": {"en": "What was noticed", "zh": "注意到的情况"},
    # Error dialog
    "error_title": {"en": "That did not work", "zh": "操作失败"},
    "error_unexpected": {"en": "Unexpected error: {kind}: {detail}", "zh": "意外错误:{kind}:{detail}"},
    "error_ok": {"en": "OK", "zh": "确定"},
    # History
    "history_empty": {"en": "No change written yet in this session.", "zh": "本次会话还没有写入任何修改。"},
    "history_col_folder": {"en": "Folder", "zh": "目录"},
    "history_col_change": {"en": "Change", "zh": "修改"},
    "history_col_outcome": {"en": "Outcome", "zh": "结果"},
    "history_col_peak": {"en": "Peak", "zh": "峰值"},
    "outcome_written": {"en": "written", "zh": "已写入"},
    "outcome_running": {"en": "trial running", "zh": "试跑中"},
    "outcome_passed": {"en": "trial passed", "zh": "试跑通过"},
    "outcome_failed": {"en": "trial failed", "zh": "试跑失败"},
    "outcome_oom": {"en": "trial ran out of memory", "zh": "试跑显存溢出"},
    "outcome_stopped": {"en": "trial stopped", "zh": "试跑已停止"},
    "outcome_timeout": {"en": "trial timed out", "zh": "试跑超时"},
    # Trial screen
    "trial_title": {"en": "Short trial of {folder}", "zh": "短时试跑 {folder}"},
    "trial_memory": {"en": "Memory {used} of {total}", "zh": "显存 {used} / {total}"},
    "trial_memory_host": {
        "en": "Process memory {used} (no GPU: host RSS)",
        "zh": "进程内存 {used}(无 GPU:主机 RSS)",
    },
    "trial_util": {"en": "Utilisation {util}", "zh": "利用率 {util}"},
    "trial_power": {"en": "Power {power}", "zh": "功耗 {power}"},
    "trial_step": {"en": "Step {step} of {total}", "zh": "步数 {step}/{total}"},
    "trial_step_unknown": {"en": "Step –", "zh": "步数 –"},
    "trial_elapsed": {"en": "{elapsed} s", "zh": "{elapsed} 秒"},
    "trial_starting": {"en": "Starting {command}", "zh": "正在启动 {command}"},
    "trial_stopping": {"en": "Stopping the trial…", "zh": "正在停止试跑……"},
    "trial_finished": {
        "en": "Finished: {outcome}, peak {peak}, {wall} s",
        "zh": "结束:{outcome},峰值 {peak},用时 {wall} 秒",
    },
    "trial_still_failing": {
        "en": "It still failed: press d to diagnose this trial and go back to proposals.",
        "zh": "仍然失败:按 d 诊断这次试跑并回到修改建议。",
    },
    "trial_passed_hint": {
        "en": "It passed: c shows the command for the full run; b goes back.",
        "zh": "通过:按 c 查看完整训练的命令;b 返回。",
    },
    # Measuring real lengths
    "measure_loading": {
        "en": "Measuring lengths: loading LLaMA-Factory and the tokenizer… (s stops)",
        "zh": "统计长度:正在加载 LLaMA-Factory 和分词器……(s 停止)",
    },
    "measure_progress": {
        "en": "Measuring lengths: {done}/{total} samples (s stops)",
        "zh": "统计长度:已分词 {done}/{total} 条(s 停止)",
    },
    "measure_done": {
        "en": "Measured {samples} samples: longest {longest} tokens, {truncated} cut at cutoff_len {cutoff}",
        "zh": "已统计 {samples} 条样本:最长 {longest} token,cutoff_len {cutoff} 会截断 {truncated} 条",
    },
    "measure_stopped": {"en": "Measuring stopped", "zh": "已停止统计长度"},
    "value_na": {"en": "n/a", "zh": "无"},
    # --- messages added by the diag work (keep each group together) ---
    "facts_account": {"en": "Card memory", "zh": "显存账目"},
    # (end of diag)
    # --- messages added by the probe work (keep each group together) ---
    # (end of probe)
    # --- messages added by the watch work (keep each group together) ---
    "key_watch_diagnose": {"en": "Diagnose", "zh": "诊断"},
    "key_watch_diagnose_tip": {
        "en": "Open the log in the diagnosis view (the training goes on)",
        "zh": "在诊断视图中打开日志(训练继续运行)",
    },
    "key_watch_back": {"en": "Back", "zh": "返回"},
    "key_watch_back_tip": {"en": "Stop watching; the training goes on", "zh": "停止监视;训练继续运行"},
    "watch_screen_title": {
        "en": "Watching {config} (read only: the training is never signalled)",
        "zh": "正在监视 {config}(只读:不会向训练发送任何信号)",
    },
    "watch_legend": {
        "en": "green: used · red: limit · yellow: peak so far · magenta: validation (estimate) · cyan: longest batch (estimate) · blue: next save (estimate)",
        "zh": "绿:已用 · 红:上限 · 黄:目前峰值 · 品红:验证(估算)· 青:最长批次(估算)· 蓝:下次保存(估算)",
    },
    "watch_starting": {
        "en": "Reading the config and looking for the training...",
        "zh": "正在读取配置并查找训练进程……",
    },
    "watch_waiting": {
        "en": "Waiting for the training: no process names this config or its output_dir yet.",
        "zh": "等待训练启动:还没有进程的命令行包含这个配置或它的 output_dir。",
    },
    "watch_status": {
        "en": "pid {pids} · step {step} / {total} · loss {loss} · next validation at step {eval} · next save at step {save}",
        "zh": "pid {pids} · 第 {step} / {total} 步 · loss {loss} · 下次验证第 {eval} 步 · 下次保存第 {save} 步",
    },
    "watch_no_warning": {
        "en": "No warning: what is coming fits in what is left.",
        "zh": "没有预警:后面需要的内存都在剩余范围内。",
    },
    "watch_first_warning": {
        "en": "First warning ({elapsed} s in): {text}",
        "zh": "第一条预警(开始后 {elapsed} 秒):{text}",
    },
    "watch_ended": {
        "en": "The run has ended. The diagnosis of its log (d: open it with its proposals):",
        "zh": "训练已结束。日志诊断如下(按 d 打开诊断视图查看修改建议):",
    },
    "watch_no_readings": {
        "en": "No warning can be judged without a reading of the run's memory (RECORD_VRAM=1 in its environment logs it).",
        "zh": "没有训练内存的读数,无法判断预警(在训练环境中设置 RECORD_VRAM=1 即会记录)。",
    },
    "watch_log_only": {
        "en": "Following the log alone: no process of this run is visible here (another container or a scheduler?), so no process memory; {file} written {age} s ago.",
        "zh": "仅跟随日志:这里看不到这次训练的进程(在另一个容器中或由调度器启动?),因此没有进程内存;{file} {age} 秒前写入。",
    },
    # (end of watch)
    # --- messages added by the tui work (keep each group together) ---
    "command_title": {"en": "The training command", "zh": "训练命令"},
    "command_how_to_copy": {
        "en": "To copy it: select the line with Shift+drag (Option+drag on a Mac), then Ctrl+C "
        "(Ctrl+Shift+C or Cmd+C in some terminals).",
        "zh": "复制方法:按住 Shift 拖动选中这一行(Mac 上按住 Option),再按 Ctrl+C"
        "(部分终端为 Ctrl+Shift+C 或 Cmd+C)。",
    },
    "command_script": {
        "en": "Or run the script that holds it:\n  bash {script}",
        "zh": "或直接运行保存它的脚本:\n  bash {script}",
    },
    "command_clipboard_note": {
        "en": "oomdoctor also asked the terminal to put it on the clipboard; JupyterLab's terminal and "
        "many SSH terminals ignore that request, so check before pasting.",
        "zh": "oomdoctor 也请求终端把它放进剪贴板;JupyterLab 终端和很多 SSH 终端会忽略这个请求,粘贴前请确认。",
    },
    "cmp_baseline_name": {"en": "original run ({log})", "zh": "原始运行({log})"},
    "cmp_baseline_change": {"en": "(as it was)", "zh": "(原配置)"},
    "cmp_baseline_delta": {"en": "baseline", "zh": "基线"},
    "cmp_baseline_note": {
        "en": "The original run's row comes from its log: memory in use when it ran out (not a sampled "
        "peak), the steps it completed, how it ended.",
        "zh": "原始运行一行取自它的日志:显存不足那一刻的占用(不是采样峰值)、完成的步数、结束方式。",
    },
    "cmp_delta_wall": {"en": "{wall} s", "zh": "{wall} 秒"},
    "cmp_failed_not_saving": {"en": "(it failed: not a saving)", "zh": "(失败了,不算节省)"},
    "history_origin": {"en": "Run that failed:", "zh": "失败的运行:"},
    "history_restored": {
        "en": "Reopened: the changes and trials below were made here earlier (trials/).",
        "zh": "重新打开:下面的修改和试跑是之前在这里做的(trials/)。",
    },
    "history_col_from": {"en": "Made from", "zh": "基于"},
    "history_folder": {"en": "Changes and their trials, in {folder}/:", "zh": "修改及其试跑,位于 {folder}/:"},
    "history_from_original": {"en": "the run that failed", "zh": "失败的运行"},
    "key_compare": {"en": "Compare", "zh": "对比"},
    "key_compare_tip": {
        "en": "Every trial of this run side by side, under the run that failed",
        "zh": "把这次运行的所有试跑与失败的运行并排对比",
    },
    "compare_none": {"en": "No trial has finished yet.", "zh": "还没有完成的试跑。"},
    "trial_eta": {"en": "about {eta} s left", "zh": "约剩 {eta} 秒"},
    "trial_phase": {"en": "now: {phase}", "zh": "当前:{phase}"},
    "trial_phase_load": {"en": "loading", "zh": "加载"},
    "trial_phase_train": {"en": "training", "zh": "训练"},
    "trial_phase_eval": {"en": "validation", "zh": "验证"},
    "trial_phase_save": {"en": "saving", "zh": "保存"},
    "trial_peak": {"en": "Peak {peak}", "zh": "峰值 {peak}"},
    "trial_estimate": {"en": "Estimate {estimate}", "zh": "估算 {estimate}"},
    "trial_log_hint": {
        "en": "Log, last lines of {count} (o unfolds)",
        "zh": "日志,共 {count} 行中的最后几行(o 展开)",
    },
    "trial_log_hint_open": {"en": "Log, {count} lines (o folds)", "zh": "日志,共 {count} 行(o 收起)"},
    "chart_gpu": {"en": "memory per GPU (GiB over s)", "zh": "每卡显存(GiB,随时间)"},
    "chart_host": {"en": "process RSS (GiB over s)", "zh": "进程内存(GiB,随时间)"},
    "chart_limit": {"en": "card limit", "zh": "显卡上限"},
    "chart_update": {"en": "1st update", "zh": "首次更新"},
    "chart_eval": {"en": "validation", "zh": "验证"},
    "chart_save": {"en": "save", "zh": "保存"},
    "chart_x": {"en": "s", "zh": "秒"},
    "key_toggle_log": {"en": "Log", "zh": "日志"},
    "key_toggle_log_tip": {"en": "Unfold or fold the trial's log", "zh": "展开或收起试跑日志"},
    "trial_blocked_title": {"en": "This trial cannot work yet", "zh": "这次试跑还无法进行"},
    "trial_no_llamafactory": {
        "en": "LLaMA-Factory's {program} is not installed where oomdoctor runs. Install it in this "
        "environment (pip install llamafactory==0.9.5, or pip install 'oomdoctor[train]'), or start "
        "oomdoctor from the environment you train in.",
        "zh": "oomdoctor 所在环境里没有 LLaMA-Factory 的 {program}。请在这个环境安装"
        "(pip install llamafactory==0.9.5,或 pip install 'oomdoctor[train]'),或在训练用的环境里启动 oomdoctor。",
    },
    "trial_missing_packages": {
        "en": "This change needs {packages}, which is not installed where training runs. Install it "
        "(pip install {pip}) in the environment that runs llamafactory-cli, then press t again.",
        "zh": "这项修改需要 {packages},训练环境中尚未安装。请在运行 llamafactory-cli 的环境里安装"
        "(pip install {pip}),然后再按 t。",
    },
    "trial_failed_other": {
        "en": "It failed, but not for memory: {error}",
        "zh": "失败了,但不是显存问题:{error}",
    },
    "facts_fits_yet_ran_out": {
        "en": "fits by this estimate, yet the run ran out: its failing step had longer samples than "
        "assumed, or the allocator's fragments took the rest",
        "zh": "按此估算放得下,但运行确实溢出了:失败那一步的样本比假设更长,或分配器的碎片占去了余量",
    },
    "facts_estimate_assumed_label": {"en": "Assumed", "zh": "估算假设"},
    "facts_estimate_assumed_measure": {
        "en": "every sample padded to cutoff_len {cutoff}: press m to measure the real lengths",
        "zh": "每条样本都补齐到 cutoff_len {cutoff}:按 m 统计真实长度",
    },
    "facts_estimate_assumed": {
        "en": "every sample padded to cutoff_len {cutoff} (the real lengths are unknown)",
        "zh": "每条样本都补齐到 cutoff_len {cutoff}(真实长度未知)",
    },
    "steps_title": {"en": "A short trial", "zh": "短时试跑"},
    "steps_question": {
        "en": "How many optimizer steps? The run's schedule reaches its first validation or save by step "
        "{default}; the trial moves both to its last step, so each is passed once.",
        "zh": "试跑多少个优化步?按原配置的计划,第 {default} 步前会到第一次验证或保存;"
        "试跑会把两者都挪到最后一步,各经历一次。",
    },
    "steps_probe": {"en": "Probe: longest samples first", "zh": "探测:最长样本排在最前"},
    "steps_probe_hint": {
        "en": "On: one step meets the worst batch, the first update, a validation and a save. Off: the first "
        "steps as they come.",
        "zh": "开启:一步就遇到最坏批次、第一次更新、一次验证和一次保存。关闭:按原顺序跑前几步。",
    },
    "steps_start": {"en": "Start", "zh": "开始"},
    "steps_bad": {"en": "A whole number of at least 1, please.", "zh": "请输入不小于 1 的整数。"},
    "trial_probe_fallback": {
        "en": "[oomdoctor] no probe here ({reason}): the first steps as they come instead",
        "zh": "[oomdoctor] 这里无法探测({reason}):改为按原顺序跑前几步",
    },
    "apply_already": {
        "en": "This change was already written from this run, in {folder}: Write makes another copy.",
        "zh": "这项修改已从本次运行写入 {folder}:再写入会多出一份副本。",
    },
    "key_previous": {"en": "Previous", "zh": "上一个"},
    "key_previous_tip": {"en": "Show the previous change", "zh": "查看上一个修改"},
    # (end of tui)
    # --- messages added by the facts work (keep each group together) ---
    # (end of facts)
    # --- messages added by the startup work (keep each group together) ---
    # (end of startup)
    # --- messages added by the hostile work (keep each group together) ---
    # (end of hostile)
    # --- messages added by the bigl work (keep each group together) ---
    # (end of bigl)
}


def t(key: str, lang: Lang, **fields: object) -> str:
    """The interface text ``key`` in ``lang`` with ``fields`` filled in."""
    return TEXTS[key][lang].format(**fields)
