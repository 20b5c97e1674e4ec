"""Apply one proposed change to a config in a new trial folder (see ``writer``), keeping the user's text."""

from oomdoctor.patch.templates import deepspeed_template_names, load_deepspeed_template
from oomdoctor.patch.writer import PatchResult, build_command, write_patched_config

__all__ = [
    "PatchResult",
    "build_command",
    "deepspeed_template_names",
    "load_deepspeed_template",
    "write_patched_config",
]
