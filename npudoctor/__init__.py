"""npudoctor: find, explain and fix what breaks training on Huawei Ascend NPU nodes."""

__version__ = "0.1.0"
