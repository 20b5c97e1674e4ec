"""accelerate's mixed precision upcasts the model's outputs (the full-vocabulary logits) to fp32: its frames,
the predicate it applies to each output tensor included, are a loss over the logits."""

from __future__ import annotations

from oomdoctor.facts.log import parse_log_text
from oomdoctor.facts.logits import logits_frame

# a training step whose innermost frames are accelerate's convert_to_fp32 of the outputs (unsloth / HF Trainer
# under fp16 autocast)
UPCAST = """\
***** Running training *****
Traceback (most recent call last):
  File "/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", line 3318, in training_step
    loss = self.compute_loss(model, inputs)
  File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 822, in forward
    return model_forward(*args, **kwargs)
  File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 810, in __call__
    return convert_to_fp32(self.model_forward(*args, **kwargs))
  File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 789, in convert_to_fp32
    return recursively_apply(_convert_to_fp32, tensor, test_type=_is_fp16_bf16_tensor)
  File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 126, in recursively_apply
    elif test_type(data):
  File "/usr/local/lib/python3.10/dist-packages/accelerate/utils/operations.py", line 782, in _is_fp16_bf16_tensor
    return hasattr(tensor, "dtype") and tensor.dtype in (torch.float16, torch.bfloat16)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.94 GiB. GPU 0 has a total capacity of 22.17 GiB of which 5.76 GiB is free.
"""


def test_the_upcast_predicate_is_a_frame_over_the_logits() -> None:
    f = parse_log_text(UPCAST)
    assert f.phase == "first_batch" and f.frames[-1] == "_is_fp16_bf16_tensor"
    assert logits_frame(f.frames) is not None
