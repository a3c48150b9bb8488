"""The vendor's own code definitions, read from the excerpts in tests/data/samples/vendor.

``checks/vendor_codes.yaml`` ships the facts (number, name, component, class) of every code these excerpts
define; ``tests/test_vendor_codes.py`` checks the YAML against them entry by entry, the way
``test_versions_matrix`` checks ``compat_matrix.yaml`` against its Markdown. To refresh the YAML after
refreshing an excerpt::

    python -m tests.vendor_codes > checks/vendor_codes.yaml

The excerpts keep their source header (repository@commit path); the YAML cites the same sources.
"""

from __future__ import annotations

import re
import sys
from typing import Dict, List, Mapping, Tuple

from tests.samples import SAMPLES

VENDOR = SAMPLES / "vendor"

# family -> excerpt file; the family names are those of vendor_codes.yaml.
EXCERPTS: Mapping[str, Tuple[str, ...]] = {
    "acl": ("acl_base.h_error-codes_Ascend-pytorch.txt",),
    "runtime": ("rt_error_codes.h_Ascend-pytorch.txt",),
    "ge": ("ge_error_codes.h_Ascend-pytorch.txt",),
    "hccl": ("hccl_types.h_HcclResult_Ascend-pytorch.txt",),
    "torch_npu": ("NPUException_ERR-codes_Ascend-pytorch.txt",),
    "dcmi": ("dcmi_interface_api.h_error-codes_hicann-driver.txt",),
    # the driver's own return codes, which the runtime prints as `drvRetCode=6`
    "driver": ("ascend_hal_error.h_drvError_hicann-driver.txt",),
    # the task scheduler's codes (retCode=0xNN), then the two tables that take them to an ACL_ERROR_RT code
    "ts": ("task_scheduler_error.h_hicann-runtime.txt", "error_code.cc_ts-to-rt_hicann-runtime.txt",
           "errcode_manage.cc_rt-to-acl_hicann-runtime.txt"),
    # the newer registry first: where both define a code, its title and class win
    "registry": ("error_code.json_hicann-runtime.txt", "error_code.json_hicann-metadef-8.5.0.txt"),
}
SOURCE_HEADER = re.compile(r"^# source: (?P<repository>[^@\s]+)@(?P<commit>[0-9a-f]{40}) (?P<path>\S+)", re.M)


def _body(name: str) -> str:
    text = (VENDOR / name).read_text(encoding="utf-8")
    return text.partition("\n# ---\n")[2]


def source(name: str) -> Dict[str, str]:
    """repository, commit and path named by an excerpt's header."""
    match = SOURCE_HEADER.search((VENDOR / name).read_text(encoding="utf-8"))
    assert match, f"{name}: no '# source: owner/repo@commit path' header"
    return match.groupdict()


def acl_codes(name: str) -> Dict[str, str]:
    """``static const int ACL_ERROR_X = N;`` (acl_base.h, ge_error_codes.h): number -> name, success left out."""
    found = re.findall(r"^static const (?:int|uint32_t) (ACL_\w+) = (\d+)U?;", _body(name), re.M)
    return {number: symbol for symbol, number in found if number != "0"}


def rt_codes(name: str) -> Dict[str, str]:
    """``#define ACL_ERROR_RT_X 107000 // comment`` (rt_error_codes.h): number -> name, success left out."""
    found = re.findall(r"^#define +(ACL\w+) +(\d+)", _body(name), re.M)
    return {number: symbol for symbol, number in found if number != "0"}


def hccl_codes(name: str) -> Dict[str, str]:
    """The HcclResult enum: number -> name (HCCL_E_RESERVED has no number and is no error)."""
    found = re.findall(r"^\s*(HCCL_\w+) = (\d+),", _body(name), re.M)
    return {number: symbol for symbol, number in found if number != "0"}


def torch_npu_codes(name: str) -> Dict[str, Dict[str, List[str]]]:
    """torch_npu's sub-modules (2 digits -> name) and error kinds (3 digits -> [enum name, printed words])."""
    body = _body(name)
    modules = dict(re.findall(r"(\w+) = (\d+)", re.search(r"enum class SubModule \{([^}]*)\}", body).group(1)))
    kinds_enum = re.search(r"enum class ErrCode \{(.*?)\};", body, re.S).group(1)
    kinds = dict(re.findall(r"(\w+) = (\d+)", kinds_enum))
    words = dict(re.findall(r"\{ErrCode::(\w+), \"([^\"]*)\"\}", body))
    printed = dict(re.findall(r"\{SubModule::(\w+), \"([^\"]*)\"\}", body))
    return {
        "submodules": {f"{int(number):02d}": printed[symbol] for symbol, number in modules.items()},
        "kinds": {f"{int(number):03d}": [symbol, words[symbol]] for symbol, number in kinds.items()
                  if number != "0"},
    }


def dcmi_codes(name: str) -> Dict[str, str]:
    """``#define DCMI_ERR_CODE_X (DCMI_ERROR_CODE_BASE - N)``: the signed code -> name."""
    base = int(re.search(r"^#define DCMI_ERROR_CODE_BASE \((-\d+)\)", _body(name), re.M).group(1))
    found = re.findall(r"^#define (DCMI_ERR_CODE_\w+) +\(DCMI_ERROR_CODE_BASE - (\d+)\)", _body(name), re.M)
    return {str(base - int(offset)): symbol for symbol, offset in found}


def driver_codes(name: str) -> Dict[str, str]:
    """The drvError_t enum (``DRV_ERROR_X = N,``): number -> name; success and the hex placeholders left out."""
    found = re.findall(r"^\s*((?:DRV|DEV)_\w+) = (\d+),", _body(name), re.M)
    return {number: symbol for symbol, number in found if number != "0"}


def ts_codes(names: Tuple[str, ...]) -> Dict[str, List[str]]:
    """The task scheduler's codes: ``0xNN`` -> [TS name, the ACL_ERROR_RT name the runtime reports it as, or
    "" where its tables give none]."""
    enum_name, to_rt, to_acl = names
    ts = {symbol: f"0x{int(value, 16):02x}"
          for symbol, value in re.findall(r"^\s+(TS_\w+) = (0x[0-9A-Fa-f]+),", _body(enum_name), re.M)}
    rt_of = dict(re.findall(r"^\s+\{(TS_\w+), (RT_ERROR_\w+),", _body(to_rt), re.M))
    acl_of = dict(re.findall(r"rtErrMap_\[(RT_ERROR_\w+)\] = \{(ACL\w+),", _body(to_acl)))
    return {value: [symbol, acl_of.get(rt_of.get(symbol, ""), "")]
            for symbol, value in ts.items() if value != "0x00"}


def registry_codes(names: Tuple[str, ...]) -> Dict[str, Dict[str, object]]:
    """CANN's error_code.json registries: code -> title, class (when the entry names one), in (which files)."""
    merged: Dict[str, Dict[str, object]] = {}
    for index, name in enumerate(names):
        for entry in re.split(r"^\s*\{\s*$", _body(name), flags=re.M):
            fields = dict(re.findall(r"\"(ErrCode|errTitle|errClass)\": *\"([^\"]*)\"", entry))
            if "ErrCode" not in fields:
                continue
            code = fields["ErrCode"]
            known = merged.setdefault(code, {"title": fields.get("errTitle", ""), "in": []})
            if fields.get("errClass") and "class" not in known:
                known["class"] = fields["errClass"].strip()
            known["in"].append(index)  # type: ignore[union-attr]
    return merged


def all_families() -> Dict[str, object]:
    return {
        "acl": acl_codes(EXCERPTS["acl"][0]),
        "runtime": rt_codes(EXCERPTS["runtime"][0]),
        "ge": acl_codes(EXCERPTS["ge"][0]),
        "hccl": hccl_codes(EXCERPTS["hccl"][0]),
        "torch_npu": torch_npu_codes(EXCERPTS["torch_npu"][0]),
        "dcmi": dcmi_codes(EXCERPTS["dcmi"][0]),
        "driver": driver_codes(EXCERPTS["driver"][0]),
        "ts": ts_codes(EXCERPTS["ts"]),  # type: ignore[arg-type]
        "registry": registry_codes(EXCERPTS["registry"]),
    }


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_yaml() -> str:
    """checks/vendor_codes.yaml, written from the excerpts."""
    families = all_families()
    out = [
        "# Every error code the vendor defines publicly, as facts (number, name, component, class) extracted from",
        "# the vendor's own definitions; written by `python -m tests.vendor_codes` from the excerpts in",
        "# tests/data/samples/vendor and checked against them by tests/test_vendor_codes.py. What a code means and",
        "# how to fix it, in our words, is in error_codes.yaml (only where a source or a real sample says so).",
        "sources:",
    ]
    for family, names in EXCERPTS.items():
        out.append(f"  {family}:")
        for name in names:
            where = source(name)
            out.append(f"    - {{repository: {where['repository']}, path: {where['path']}, "
                       f"commit: {where['commit']}}}")
    for family in ("acl", "runtime", "ge", "hccl", "dcmi", "driver"):
        out.append(f"{family}:")
        table: Mapping[str, str] = families[family]  # type: ignore[assignment]
        for number in sorted(table, key=lambda n: abs(int(n))):
            out.append(f"  {_quote(number)}: {table[number]}")
    out.append("# retCode: \"task scheduler name > the ACL_ERROR_RT code the runtime reports it as\"")
    out.append("ts:")
    ts: Mapping[str, List[str]] = families["ts"]  # type: ignore[assignment]
    for value in sorted(ts, key=lambda v: int(v, 16)):
        reported = f" > {ts[value][1]}" if ts[value][1] else ""
        out.append(f"  {_quote(value)}: {_quote(ts[value][0] + reported)}")
    torch_npu: Mapping[str, Mapping[str, object]] = families["torch_npu"]  # type: ignore[assignment]
    out.append("torch_npu:")
    out.append("  submodules:")
    for number, module in torch_npu["submodules"].items():
        out.append(f"    {_quote(number)}: {module}")
    out.append("  kinds:")
    for number, (symbol, words) in torch_npu["kinds"].items():  # type: ignore[misc]
        out.append(f"    {_quote(number)}: [{symbol}, {_quote(words)}]")
    out.append("# code: \"title | class (empty where the entry names none) | the sources (indexes into")
    out.append("# sources.registry)\": one string each, so that this file loads in a few milliseconds")
    out.append("registry:")
    registry: Mapping[str, Mapping[str, object]] = families["registry"]  # type: ignore[assignment]
    for code in sorted(registry):
        entry = registry[code]
        indexes = " ".join(str(i) for i in entry["in"])  # type: ignore[attr-defined]
        fields = f"{entry['title']} | {entry.get('class', '')} | {indexes}"
        out.append(f"  {code}: {_quote(fields)}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_yaml())
