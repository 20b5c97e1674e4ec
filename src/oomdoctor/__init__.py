"""oomdoctor: find which GPU memory overflowed in a LLaMA-Factory run, change one thing, try it, compare."""

__version__ = "0.1.0"
