"""aiter's FP8 MLA decode (AMD's hand-written gfx950 code objects) executed on the gfx950 emulator.

launch.py: the decode launch from aiter's public contract; metadata.py: the persistent work
partition; reduce.py: the reduce; standin.py: an `aiter` module for a CPU; install.py: the
single place that reaches into submission.py; run.py: the checked runs and the results file.
docs/aiter_mla_emulated.md says what it runs and what it assumes.
"""
