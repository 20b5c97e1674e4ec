"""The latest marker before the failure wins (facts/log_phase.py `_by_marker`, facts/log_scan.py `_bar`): loss
lines, then the end-of-training summary, then FSDP's state_dict clone warning. Shapes of real logs (FSDP runs
of the HF Trainer that finish training and fail in the final save; a Ray job killed for host RAM after it)."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text

LOSS = "{'loss': 1.2104, 'learning_rate': 0.0, 'epoch': 1.0}"
RUNTIME = (
    "{'train_runtime': 1843.22, 'train_samples_per_second': 5.12, 'train_steps_per_second': 0.16, "
    "'train_loss': 1.3861, 'epoch': 1.0}"
)
OLD_OOM = (
    "CUDA out of memory. Tried to allocate 314.00 MiB (GPU 3; 79.15 GiB total capacity; 77.02 GiB already "
    "allocated; 88.19 MiB free; 77.41 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory "
    "try setting max_split_size_mb to avoid fragmentation."
)


def test_a_failure_after_the_training_summary_is_the_final_save_not_a_step() -> None:
    log = "\n".join([LOSS, RUNTIME, "torch.cuda.OutOfMemoryError: " + OLD_OOM]) + "\n"
    f = parse_log_text(log)
    assert f.oom and f.phase == "save" and f.phase_confidence == "low"
    assert any("saves the model next" in e for e in f.phase_evidence)


def test_a_loss_line_after_the_summary_is_training_again() -> None:
    # a second run (or a resumed one) logging steps again: the latest marker is the loss line
    log = "\n".join([RUNTIME, LOSS, "torch.cuda.OutOfMemoryError: " + OLD_OOM]) + "\n"
    assert parse_log_text(log).phase == "long_sample"


def test_fsdp_clone_warning_cut_at_its_head_still_marks_the_save() -> None:
    # the excerpt starts mid-warning: "Failed to clone() tensor with name" is gone, its later words are not
    line = (
        "ght on rank 3. This may mean that this state_dict entry could point to invalid memory regions after "
        "returning from state_dict() call if this parameter is managed by FSDP. Please check clone implementation "
        "of model.layers.7.self_attn.q_proj.weight. Error: " + OLD_OOM
    )
    f = parse_log_text("\n".join([LOSS, RUNTIME, "....", line]) + "\n")
    assert f.oom and f.phase == "save" and f.phase_confidence == "high"
    assert f.requested_mib == 314.0 and f.capacity_mib is not None


def test_a_finished_bar_redrawn_after_the_summary_keeps_training_finished() -> None:
    log = "\n".join(
        [
            RUNTIME,
            "100%|██████████| 57/57 [30:43<00:00, 32.34s/it]",
            "100%|██████████| 57/57 [30:43<00:00, 32.34s/it]",
            "Memory on the node (IP: 10.0.7.2, ID: 3e9f0a) where the task (task ID: 51c2, name=head, rank=0,, "
            "pid=812, memory used",
        ]
    )
    f = parse_log_text(log + "\n")
    assert f.oom and f.ran_out_of == "host"
    assert f.phase == "save" and f.good_steps == 57


def test_an_unfinished_bar_after_the_summary_is_read_as_training() -> None:
    log = "\n".join(
        [
            RUNTIME,
            " 40%|████      | 23/57 [12:00<17:44, 31.30s/it]",
            "torch.cuda.OutOfMemoryError: " + OLD_OOM,
        ]
    )
    assert parse_log_text(log + "\n").phase == "long_sample"


def test_ray_memory_monitor_message_is_host_ram_in_full_and_cut() -> None:
    full = (
        "Memory on the node (IP: 10.0.3.17, ID: 6f2c0d1e9b) where the task (task ID: 8c1f, name=PPORayActor.fit, "
        "pid=2211, memory used=61.20GB) was running was 243.10GB / 251.50GB (0.9666), which exceeds the memory "
        "usage threshold of 0.95. Ray killed this worker (ID: a9b8) because it was the most recently scheduled task"
    )
    cut = "Memory on the node (IP: 10.0.3.17, ID: 6f2c0d1e9b) where the task (task ID: 8c1f, name=head, rank=0,, pid=2211"
    for line in (full, cut):
        f = parse_log_text(line + "\n")
        assert f.oom and f.ran_out_of == "host", line
    # a line about the node's memory that is no kill message stays nothing
    assert not parse_log_text("Memory on the node is 251.50GB in total\n").oom
