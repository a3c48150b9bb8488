"""The workload room: a reference CLIP training step, the memory recorder and the leak verdict.

``memlog`` (the ``npudoctor.memlog`` log) and ``leak`` (the verdict) are pure Python and torch-free; the
other modules import torch only inside functions, so importing this package never imports torch. The core
(``model``, ``parsers``, ``checks``, ``probes``) never imports this room.
"""
