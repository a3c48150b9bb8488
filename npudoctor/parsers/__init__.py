"""Pure readers of recorded text: npu-smi layouts, version files, plog/slog, ATC, profiler CSVs. No I/O."""
