"""Profiling doctor: run msprof, read msprof / torch_npu profiler output, and say why the NPU is slow.

A room of its own: the core (model, parsers, checks, probes) never imports it, and it is the only part of
npudoctor that imports pandas (and pyarrow, for reading multi-GB kernel tables in chunks), always lazily.
Entry points: :func:`npudoctor.prof.engine.analyze` (read and judge) and :mod:`npudoctor.prof.launch`
(run a command under msprof). Column spellings are data: ``checks/prof_columns/*.yaml``.
"""
