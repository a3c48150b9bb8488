"""Where Ascend software lives on a node: the paths and names the versions and libraries probes both use.

Constants only (no imports), so any command can use them without start-up cost.
"""

ASCEND = "/usr/local/Ascend"
# Written by the CANN installer: where CANN was installed when not under /usr/local/Ascend.
CANN_INSTALL_RECORD = "/etc/Ascend/ascend_cann_install.info"
# Package folder under an Ascend base -> package kind; each holds <version>/ folders and a `latest` link.
PACKAGE_FOLDERS = {"ascend-toolkit": "toolkit", "nnae": "nnae"}
INFO_FILES = {"toolkit": "ascend_toolkit_install.info", "nnae": "ascend_nnae_install.info"}
# Set by CANN's set_env.sh; the runtime and torch_npu load CANN from there.
HOME_VARIABLES = ("ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME")
# What set_env.sh exports that points at the sourced install (ASCEND_OPP_PATH at <install>/opp), in the
# order the libraries checks trust them to say which install was sourced.
SOURCED_INSTALL_VARIABLES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH", "ASCEND_OPP_PATH")
# Libraries shipped by CANN (toolkit/nnae) and the driver: missing ones mean CANN is absent or not sourced.
CANN_LIBRARY_PATTERN = (
    r"^lib(?:hccl|ascendcl|acl_\w+|ge_\w+|graph|runtime|register|c_sec|mmpa|opapi|"
    r"nnopbase|profapi|msprofiler|ascend_\w+|tsdclient|drvdsmi_host|dcmi|hccl_\w+|"
    r"platform|error_manager|aicpu_\w+|tiling_api|fmk_\w+|ascendalog|slog)\.so"
)
