"""Node profiles: what a node is expected to be, and the thresholds checks use.

Thresholds live here (and in ``profiles/*.yaml``), never as constants in checks. A site profile names
only what it changes; everything else comes from ``profiles/default.yaml`` (``extends: default``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, Mapping, NamedTuple, Optional

from npudoctor.errors import InputError
from npudoctor.model.inventory import PINNABLE


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> Dict[str, Any]:
    merged: Dict[str, Any] = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class NodeProfile:
    name: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, dotted: str, default: Any = None) -> Any:
        """``profile.get("hccl.connect_timeout_s.min")``: what this profile says (a check reads the value in force,
        shipped default included, through :func:`npudoctor.knowledge.setting`)."""
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def expected_chip_count(self) -> Optional[int]:
        value = self.get("node.npu_count")
        return int(value) if value is not None else None


# -- the schema ---------------------------------------------------------------------------------------------
class ProfileError(InputError, ValueError):
    """A profile breaks the schema: one line naming the file and the key."""


class Field(NamedTuple):
    """One profile key: its type ("int", "number", "str", "severity", "bool"), range and meaning."""

    kind: str
    minimum: Optional[float] = None
    maximum: Optional[float] = None
    nullable: bool = False
    doc: str = ""


SEVERITIES = ("warn", "fail")

# Every key a profile may set, dotted, with the code that reads it. One place: a room that adds a section
# (`prof:`, `train:`, `fleet:`) lists its keys here and their defaults in profiles/default.yaml; a test
# holds the two together and proves each key changes what npudoctor does.
PROFILE_SCHEMA: Dict[str, Field] = {
    "name": Field("str", doc="profile name shown in reports"),
    "description": Field("str", doc="for people"),
    "extends": Field("str", nullable=True, doc="shipped profile name or path this one builds on"),
    "node.npu_count": Field("int", 1, 4096, nullable=True, doc="SMI003/PCI001: expected NPUs (or chips)"),
    "node.chip_family": Field("str", nullable=True, doc="PCI001: expected chip family, e.g. 910B"),
    "commands.timeout_s": Field("number", 0.1, 3600, doc="hccn_tool and other commands"),
    "commands.npu_smi_timeout_s": Field("number", 0.1, 3600, doc="npu-smi info"),
    "pcie.link_width_downgrade": Field("severity", doc="PCI003: link narrower than the device supports"),
    "pcie.link_speed_downgrade": Field("severity", doc="PCI003: link slower than the device supports"),
    "pcie.aer_correctable_warn": Field("int", 1, 1 << 62, nullable=True,
                                       doc="PCI005: correctable AER errors since boot that WARN (null: not judged)"),
    "hccl.connect_timeout_s.min": Field("int", 0, 10 ** 6, doc="HCCL005: lowest HCCL_CONNECT_TIMEOUT"),
    "hccl.connect_timeout_s.max": Field("int", 0, 10 ** 6, doc="HCCL005: highest HCCL_CONNECT_TIMEOUT"),
    "hccl.device_ip_missing": Field("severity", doc="HCCL012: NPU RoCE port without an IP"),
    "hccl.hccn_tool.max_timeouts": Field("int", 0, 1000, doc="hccn_tool timeouts before the rest is skipped"),
    "hccl.hccn_tool.budget_s": Field("number", 0.1, 86400, doc="all hccn_tool calls together"),
    "versions.python_timeout_s": Field("number", 0.1, 3600, doc="target interpreter reading package metadata"),
    "versions.cann_newer_than_matrix": Field("severity", doc="VER004: CANN newer than torch_npu was built for"),
    "versions.driver_cann_mismatch": Field("severity", doc="VER007: driver and CANN do not list each other"),
    "npu_smi.health_detail_max_chips": Field("int", 0, 4096, doc="SMI002: chips whose health detail is read"),
    "npu_smi.ecc.isolated_pages_limit": Field("int", 1, 1 << 20, doc="SMI002/SMI005: isolated pages that FAIL"),
    "npu_smi.ecc.isolated_pages_warn_share": Field("number", 0, 1, doc="SMI002/SMI005: share of the limit that WARNs"),
    "npu_smi.ecc.double_bit": Field("severity", doc="SMI002/SMI005: a double-bit (uncorrectable) ECC error"),
    "npu_smi.ecc.single_bit_warn": Field("int", 1, 1 << 40, nullable=True,
                                         doc="SMI005: single-bit errors that WARN (null: not judged)"),
    "npu_smi.temperature_warn_c": Field("number", 0, 200, doc="SMI007: chip temperature that WARNs"),
    "npu_smi.temperature_fail_c": Field("number", 0, 200, doc="SMI007: chip temperature that FAILs"),
    "npu_smi.power_warn_w": Field("number", 0, 10000, nullable=True,
                                  doc="SMI007: chip power that WARNs (null: not judged)"),
    "npu_smi.aicore_clock_min_ratio": Field("number", 0, 1, doc="SMI008: AI Core clock over its rated clock"),
    "npu_smi.aicore_clock_busy_pct": Field("number", 0, 100, doc="SMI008: AI Core use from which the clock is judged"),
    "libraries.set_env_timeout_s": Field("number", 0.1, 3600, doc="LIB002: bash sourcing set_env.sh"),
    "libraries.import_timeout_s": Field("number", 0.1, 36000, doc="LIB005 (--level 2): import and one op"),
    "logs.newest_files": Field("int", 1, 100000, doc="LOG001: newest plogs scanned per directory"),
    "logs.max_bytes_per_file": Field("int", 1, 1 << 40, doc="LOG001: bytes read from the end of each"),
    # The reference training step (`check --level 3`, `train-step`, `leak analyze`).
    "train.timeout_s": Field("number", 1, 86400, doc="--level 3: the training child is killed after this long"),
    "train.steps": Field("int", 1, 100000, doc="--level 3: steps of the tiny CLIP"),
    "train.batch": Field("int", 2, 65536, doc="--level 3: batch size"),
    "train.loss_drop_min": Field("number", 0, 1, doc="TRN002: fraction the loss must fall"),
    "train.data_wait_max_fraction": Field("number", 0, 1, doc="TRN005: share of step time waiting for data"),
    "train.ops_tolerance": Field("number", 0, 1, doc="TRN004: relative error of an fp32 operator"),
    "train.compare_cpu.loss_rtol": Field("number", 0, 1, doc="TRN004: loss difference device vs CPU"),
    "train.compare_cpu.grad_norm_rtol": Field("number", 0, 1, doc="TRN004: gradient-norm difference"),
    "train.leak.warmup_fraction": Field("number", 0, 0.9, doc="TRN003: largest share of steps the found warm-up takes"),
    "train.leak.alpha": Field("number", 0, 0.5, doc="TRN003: Mann-Kendall significance of a rise"),
    "train.leak.min_device_slope_bytes_per_step": Field("number", 0, 1 << 40, doc="TRN003: device slope (0: none)"),
    "train.leak.min_host_slope_bytes_per_step": Field("number", 0, 1 << 40, doc="TRN003: host slope (0: none)"),
    "train.leak.min_growth_bytes": Field("number", 0, 1 << 50, doc="TRN003: smallest RSS rise over the window"),
    "train.leak.min_exact_growth_bytes": Field("number", 0, 1 << 50,
                                               doc="TRN003: smallest allocator (device, malloc) rise over the window"),
    "train.leak.oom_horizon_steps": Field("number", 0, 1e12, doc="TRN003: a rise filling memory this soon is a leak"),
    # The profiling doctor (`prof analyze`, `prof run`, `check --prof`).
    "prof.min_task_us": Field("number", 0, 1e9, doc="PROF001: tasks shorter than this are not reported"),
    "prof.top_n": Field("int", 1, 10000, doc="operators listed per finding and per core type"),
    "prof.bound_ratio": Field("number", 0, 1, doc="PROF002: no pipe ratio above this = no bound"),
    "prof.aicpu_fail_share": Field("number", 0, 1, doc="PROF001: AI CPU share of device time that FAILs"),
    "prof.no_bound_warn_share": Field("number", 0, 1, doc="PROF002: no-bound share of AI Core time that WARNs"),
    "prof.cube_utilization_min_pct": Field("number", 0, 100, doc="PROF003: lowest time-weighted cube use"),
    "prof.block_dim_warn_share": Field("number", 0, 1, doc="PROF004: share with a block dim off the core count"),
    "prof.free_warn_share": Field("number", 0, 1, doc="PROF006: device idle share of the step that WARNs"),
    "prof.free_fail_share": Field("number", 0, 1, doc="PROF006: device idle share of the step that FAILs"),
    "prof.dynamic_warn_share": Field("number", 0, 1, doc="PROF008: dynamic-shape share that WARNs"),
    "prof.communication_warn_share": Field("number", 0, 1, doc="PROF009: exposed communication share"),
    "prof.link_min_size_mb": Field("number", 0, 1e9, doc="PROF010: smallest transfer judged for bandwidth"),
    **{f"prof.link_min_bandwidth_gbps.{transport}": Field("number", 0, 1e6, nullable=True,
                                                         doc=f"PROF010: lowest {transport} GB/s (null: not judged)")
       for transport in ("SDMA", "RDMA", "HCCS", "PCIE", "SIO")},
    "prof.memory_unused_warn_share": Field("number", 0, 1, doc="PROF011: reserved-never-allocated share"),
    "prof.dataloader_warn_us": Field("number", 0, 1e12, doc="PROF012: a DataLoader call this long WARNs"),
    "prof.gc_warn_us": Field("number", 0, 1e12, doc="PROF013: a garbage collection this long WARNs"),
    "prof.syncbn_max_calls": Field("int", 0, 10 ** 9, doc="PROF014: SyncBatchNorm calls per rank allowed"),
    "prof.sync_after_launch_warn_share": Field("number", 0, 1, doc="PROF015: launches followed by a sync"),
    "prof.aicore_freq_drop_warn_share": Field("number", 0, 1, doc="PROF016: AI Core frequency below rated"),
    "prof.host_compile_warn_calls": Field("int", 0, 10 ** 9, doc="PROF020: operator compilations that WARN"),
    **{f"prof.small_transfer_mb.{transport}": Field("number", 0, 1e9, nullable=True,
                                                   doc=f"PROF017: a {transport} transfer under this is small")
       for transport in ("SDMA", "RDMA")},
    "prof.small_transfer_warn_share": Field("number", 0, 1, doc="PROF017: small transfers' share of the time"),
    "prof.rank_gap_warn_share": Field("number", 0, 10, doc="PROF018: gap between ranks over the mean"),
    "prof.rdma_retransmission_ms": Field("number", 0, 1e9, doc="PROF021: RDMA transit time of a retransmission"),
    "prof.op_min_share": Field("number", 0, 1, doc="PROF022-PROF024: an operator shape's share of compute time "
                               "below which it is not judged"),
    "prof.cube_mac_ratio": Field("number", 0, 1, doc="PROF022: aic_mac_ratio at or above this is mac-bound"),
    "prof.cube_mte2_ratio": Field("number", 0, 1, doc="PROF022: aic_mte2_ratio at or above this is mte2-bound"),
    "prof.cube_inner_axis": Field("int", 1, 1 << 20, doc="PROF022: inner axes of matmul inputs multiples of this"),
    "prof.fa_mte2_ratio": Field("number", 0, 1, doc="PROF023: aic_mte2_ratio at or above this is mte2-bound"),
    "prof.fa_vec_ratio": Field("number", 0, 1, doc="PROF023: forward aiv_vec_ratio at or above this is vec-bound"),
    "prof.fa_fixpipe_ratio": Field("number", 0, 1, doc="PROF023: backward aic_fixpipe_ratio bound bar"),
    "prof.fa_axis": Field("int", 1, 1 << 20, doc="PROF023: head dim and sequence length multiples of this"),
    "prof.vector_pipe_ratio": Field("number", 0, 1, doc="PROF024: a vec/mte2/mte3 ratio at or above this is bound"),
    "prof.vector_total_ratio": Field("number", 0, 3, doc="PROF024: vec + mte2 + mte3 at or above this is busy"),
    "prof.fusible_min_ops": Field("int", 2, 64, doc="PROF025: fewest operators in a sequence"),
    "prof.fusible_max_ops": Field("int", 2, 64, doc="PROF025: most operators in a sequence"),
    "prof.fusible_min_repeats": Field("int", 2, 10 ** 9, doc="PROF025: times a sequence must repeat"),
    "prof.fusible_host_busy_share": Field("number", 0, 1, doc="PROF025: device busy below this share of a "
                                          "sequence's span = host-bound"),
    "prof.fusible_mte_share": Field("number", 0, 10, doc="PROF025: data movement above this share of the "
                                    "cores' busy time = copy-bound"),
    "prof.fusible_min_span_share": Field("number", 0, 1, doc="PROF025: share of the analysed span a "
                                         "host-bound sequence must cover"),
    "prof.quiet_idle_min_us": Field("number", 1000, 1e12, doc="PROF030: device idle this long is judged"),
    "prof.quiet_idle_max_calls_per_s": Field("number", 0, 1e9, doc="PROF030: fewer host CANN calls = silent"),
    "prof.quiet_idle_max_host_share": Field("number", 0, 1, doc="PROF030: host call time share under = silent"),
    "prof.affinity_min_calls": Field("int", 1, 10 ** 9, doc="PROF031: sequences found before a fused API WARNs"),
    "prof.contention_drop_warn_share": Field("number", 0, 1, doc="PROF032: SDMA slower beside matmuls by"),
    "prof.unaligned_warn_share": Field("number", 0, 1, doc="PROF033: unaligned SDMA transfers' time share"),
    "prof.link_gap_warn_share": Field("number", 0, 10, doc="PROF034: gap between links of a transport / mean"),
    "prof.pp_stage_gap_warn_share": Field("number", 0, 10, doc="PROF035: gap between pipeline stages / mean"),
    "prof.run_timeout_s": Field("number", 1, 10 ** 7, doc="`prof run`: the profiled command is stopped after"),
    "prof.export_timeout_s": Field("number", 1, 10 ** 6, doc="`prof run`: msprof --export"),
    # The fleet room (site pins, `npudoctor collective`, `onboard`).
    "fleet.pin_mismatch": Field("severity", doc="SITE001: a value differing from the profile's inventory pins"),
    "fleet.collective.busbw_gbps.all_reduce": Field("number", 0, 1e6, nullable=True,
                                                    doc="COL002: expected all_reduce bus bandwidth, GB/s"),
    "fleet.collective.busbw_gbps.all_gather": Field("number", 0, 1e6, nullable=True,
                                                    doc="COL002: expected all_gather bus bandwidth, GB/s"),
    "fleet.collective.busbw_gbps.broadcast": Field("number", 0, 1e6, nullable=True,
                                                   doc="COL002: expected broadcast bus bandwidth, GB/s"),
    "fleet.collective.min_busbw_fraction": Field("number", 0, 1, doc="COL002: share of the expected busbw"),
    "fleet.collective.slow_rank_factor": Field("number", 1, 1000, doc="COL003: slowest rank / median rank"),
    "inventory": Field("inventory", doc="SITE001: the node's expected values (`profile derive` writes them)"),
}


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def _type_name(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"[:60]


def _check_field(spec: Field, value: Any, where: str) -> Any:
    """The value, normalised (severities lower-case), or ProfileError naming ``where``."""
    if value is None:
        if spec.nullable:
            return None
        raise ProfileError(f"{where}: must not be null")
    if spec.kind == "severity":
        if isinstance(value, str) and value.strip().lower() in SEVERITIES:
            return value.strip().lower()
        hint = _did_you_mean(value.lower(), SEVERITIES) if isinstance(value, str) else ""
        shown = repr(value) if isinstance(value, str) else _type_name(value)
        raise ProfileError(f"{where}: {shown} is not a severity (warn or fail){hint}")
    if spec.kind == "inventory":
        return _check_inventory(value, where)
    if spec.kind == "str":
        if isinstance(value, str):
            return value
        raise ProfileError(f"{where}: expected a string, got {_type_name(value)}")
    if spec.kind == "bool":
        if isinstance(value, bool):
            return value
        raise ProfileError(f"{where}: expected true or false, got {_type_name(value)}")
    # Numbers: bool is an int to Python, never to a profile; inf and nan are no timeout.
    wanted = "an integer" if spec.kind == "int" else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProfileError(f"{where}: expected {wanted}, got {_type_name(value)}")
    if spec.kind == "int" and isinstance(value, float):
        if not value.is_integer():
            raise ProfileError(f"{where}: expected {wanted}, got {value!r}")
        value = int(value)
    if value != value or value in (float("inf"), float("-inf")):
        raise ProfileError(f"{where}: expected a finite number, got {value!r}")
    if (spec.minimum is not None and value < spec.minimum) or (spec.maximum is not None and value > spec.maximum):
        raise ProfileError(f"{where}: {value!r} is out of range ({spec.minimum:g} to {spec.maximum:g})")
    return value


def _check_inventory(value: Any, where: str) -> Any:
    """Pins under ``inventory:``: known keys (model.inventory.PINNABLE), each a text, a number, a list of
    them (bus ids; values that differ between chips) or null (not pinned)."""
    if not isinstance(value, Mapping):
        raise ProfileError(f"{where}: expected a mapping of pinned values, got {_type_name(value)}")
    scalar = (str, int, float)
    for key, pinned in flatten(value).items():
        if key not in PINNABLE:
            raise ProfileError(f"{where}.{key}: unknown inventory key{_did_you_mean(key, PINNABLE)}")
        if pinned is None or (isinstance(pinned, scalar) and not isinstance(pinned, bool)):
            continue
        if isinstance(pinned, list) and all(isinstance(v, scalar) and not isinstance(v, bool) for v in pinned):
            continue
        raise ProfileError(f"{where}.{key}: expected a value or a list of values, got {_type_name(pinned)}")
    return value


def _inferred(value: Any) -> Field:
    """The schema of a default.yaml key a room shipped without listing it here (lenient at run time; the
    test that holds default.yaml and PROFILE_SCHEMA together fails until it is listed)."""
    if isinstance(value, bool):
        return Field("bool")
    if isinstance(value, (int, float)):
        return Field("number", nullable=True)
    return Field("str", nullable=True)


def validate_profile(data: Any, source: str, defaults: Optional[Mapping[str, Any]] = None,
                     schema: Optional[Mapping[str, Field]] = None) -> Dict[str, Any]:
    """``data`` checked against the schema (types, ranges, known keys); severities normalised.

    Raises :class:`ProfileError` with one line: ``site.yaml: node.npu_cuont: unknown key (did you mean
    node.npu_count?)``. ``defaults`` (the shipped default profile) adds keys a room shipped there.

    >>> validate_profile({"pcie": {"link_width_downgrade": "FAIL"}}, "s.yaml")
    {'pcie': {'link_width_downgrade': 'fail'}}
    >>> validate_profile({"node": {"npu_cuont": 8}}, "s.yaml")
    Traceback (most recent call last):
    ...
    npudoctor.model.profile.ProfileError: s.yaml: node.npu_cuont: unknown key (did you mean node.npu_count?)
    """
    fields: Dict[str, Field] = dict(schema if schema is not None else PROFILE_SCHEMA)
    for key, value in flatten(defaults or {}).items():
        fields.setdefault(key, _inferred(value))
    sections = {key.rsplit(".", i)[0] for key in fields for i in range(1, key.count(".") + 1)}
    if not isinstance(data, Mapping):
        raise ProfileError(f"{source}: a profile must be a YAML mapping, got {_type_name(data)}")

    def walk(node: Mapping[Any, Any], prefix: str) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for raw_key, value in node.items():
            key = f"{prefix}{raw_key}"
            where = f"{source}: {key}"
            if not isinstance(raw_key, str):
                raise ProfileError(f"{where}: keys must be strings")
            if key in fields:
                out[raw_key] = _check_field(fields[key], value, where)
            elif key in sections:
                if not isinstance(value, Mapping):
                    raise ProfileError(f"{where}: expected a mapping (section), got {_type_name(value)}")
                out[raw_key] = walk(value, key + ".")
            else:
                raise ProfileError(f"{where}: unknown key{_did_you_mean(key, [*fields, *sections])}")
        return out

    return walk(data, "")


def flatten(data: Mapping[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}`` (leaves only; lists are leaves).

    >>> flatten({"driver": "23.0.7", "chips": {"model": "910B3", "bus_ids": ["0000:c1:00.0"]}})
    {'driver': '23.0.7', 'chips.model': '910B3', 'chips.bus_ids': ['0000:c1:00.0']}
    """
    out: Dict[str, Any] = {}
    for key, value in data.items():
        # dict first: the fleet view flattens 50,000 inventories, and typing.Mapping's isinstance is slow.
        if (type(value) is dict or isinstance(value, Mapping)) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
