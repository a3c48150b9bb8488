"""Pure rules, one module per stage. Importing this package registers every check."""

from npudoctor.checks import hccl, libraries, logs, npu_smi, pci, site, versions, workload  # noqa: F401  (registration)
