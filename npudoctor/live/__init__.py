"""The live layer of ``npudoctor dashboard``, usable without any UI (nvitop style).

* :mod:`npudoctor.live.devices`: one :class:`~npudoctor.live.devices.Snapshot` of the node per poll, from
  ``npu-smi info`` (Ascend), ``nvidia-smi --query-gpu`` (CUDA nodes) or the host alone, asked through the
  probes' runner; a replayed recording answers the same way.
* :mod:`npudoctor.live.poller`: polls a sampler in a thread, so a slow ``npu-smi`` never blocks a caller;
  says how old the newest answer is.
* :mod:`npudoctor.live.history`: readings over time per chip, and text sparklines.
* :mod:`npudoctor.live.follow`: follows a growing file (rotation and truncation handled).
* :mod:`npudoctor.live.training` and :mod:`npudoctor.live.logtail`: a followed training memory log and
  new log findings under a folder.

Nothing here imports textual; :mod:`npudoctor.tui` only renders what this layer computes.
"""
