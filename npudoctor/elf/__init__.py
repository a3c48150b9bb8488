"""Pure-Python ELF reading and dynamic-loader emulation (no third-party ELF library, never executes files)."""
