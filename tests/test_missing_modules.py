"""Every command from an install without one of its modules (issue 17 point 3): one line naming the module and
the install hint that matches how npudoctor was installed, exit 2, never a traceback; and a child that fails
(a rank under torchrun) is quoted by its own first error line, with a fix that fits that error.

Modules are hidden by an import hook in a ``sitecustomize`` put first on the path (children inherit it), the
way a venv without them behaves: ``import numpy`` raises ModuleNotFoundError.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest

from tests import profdirs

REPO = Path(__file__).resolve().parents[1]
HOOK = '''
import importlib.abc, os, sys

class _Hide(importlib.abc.MetaPathFinder):
    names = set(filter(None, os.environ.get("NPUDOCTOR_TEST_HIDE", "").split(",")))

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None

# NPUDOCTOR_TEST_HIDE_IN_RANKS: hide only in the processes torchrun starts (they have RANK)
if not os.environ.get("NPUDOCTOR_TEST_HIDE_IN_RANKS") or "RANK" in os.environ:
    sys.meta_path.insert(0, _Hide())
'''


def _env(tmp_path: Path, hide: str, ranks_only: bool = False) -> Dict[str, str]:
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{REPO}", "NPUDOCTOR_TEST_HIDE": hide, "NO_COLOR": "1",
           "OMP_NUM_THREADS": "1"}
    if ranks_only:
        env["NPUDOCTOR_TEST_HIDE_IN_RANKS"] = "1"
    return env


def _npudoctor(args, env, cwd, timeout=600):
    return subprocess.run([sys.executable, "-m", "npudoctor", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def prof_dir(tmp_path_factory) -> str:
    return str(profdirs.msprof_collection(tmp_path_factory.mktemp("prof")))


CASES = [
    # (module hidden, command, what the one line must name)
    ("pandas", ["prof", "analyze", "{prof}"], "pandas comes with npudoctor itself: reinstall it (pip install -e '"),
    ("pandas", ["check", "--prof", "{prof}"], "pandas comes with npudoctor itself"),
    ("textual", ["dashboard", "--demo"], "textual comes with npudoctor itself"),
    ("torch", ["train-step", "--device", "cpu", "--steps", "2"], "pip install torch --index-url"),
    ("numpy", ["train-step", "--device", "cpu", "--steps", "2"], "[train]'"),
    ("torch", ["collective", "--backend", "gloo", "--nproc-per-node", "2"], "pip install torch --index-url"),
    ("numpy", ["collective", "--backend", "gloo", "--nproc-per-node", "2"], "[train]'"),
]


@pytest.mark.parametrize("module,args,hint", CASES, ids=[f"{c[0]}-{c[1][0]}" for c in CASES])
def test_a_missing_module_is_one_line_with_the_install_hint_and_exit_2(tmp_path, prof_dir, module, args, hint):
    done = _npudoctor([a.replace("{prof}", prof_dir) for a in args], _env(tmp_path, module), tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"npudoctor: error: npudoctor {args[0]} needs {module}, "), (
        done.stderr)
    assert hint in lines[0] and str(REPO) in lines[0]  # run from this checkout (cwd is elsewhere): its path


def test_check_with_prof_refuses_before_printing_anything(tmp_path, prof_dir):
    done = _npudoctor(["check", "--prof", prof_dir], _env(tmp_path, "pandas"), tmp_path)
    assert done.returncode == 2 and done.stdout == ""


@pytest.mark.parametrize("module", ["pyarrow"])
def test_an_accelerator_extra_missing_is_no_error(tmp_path, prof_dir, module):
    # without pyarrow the profiling doctor reads through pandas' chunked reader: same command, exit 0/1
    done = _npudoctor(["prof", "analyze", prof_dir], _env(tmp_path, module), tmp_path)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, done.stderr
    assert "npudoctor " in done.stdout


def test_ranks_that_fail_are_quoted_by_their_own_first_error_and_the_fix_fits_it(tmp_path):
    # numpy present for npudoctor, missing in the ranks: they fail with torch's own RuntimeError
    done = _npudoctor(["collective", "--backend", "gloo", "--nproc-per-node", "2", "--sizes", "1K", "--iters",
                       "1", "--warmup", "0"], _env(tmp_path, "numpy", ranks_only=True), tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    title, header = done.stdout.splitlines()[:2]  # the house title line, then what ran
    assert title.startswith("npudoctor ") and " collective, " in title
    assert header == "backend gloo, 2 rank(s) on this node asked for; the run did not finish"
    assert "None" not in header and "0 node(s)" not in header
    text = " ".join(done.stdout.split())
    assert "torchrun exited with code 1: RuntimeError: Numpy is not available" in text, done.stdout
    assert "fix: numpy is missing beside torch: pip install -e '" in text and "HCCL" not in text, done.stdout


def test_hints_follow_how_npudoctor_was_installed(tmp_path, monkeypatch):
    from npudoctor import install

    # a checkout (this one): its own extra, by path, or "." from inside it
    monkeypatch.chdir(REPO)
    assert install.extra_hint("train") == "pip install -e '.[train]'"
    monkeypatch.chdir(tmp_path)
    assert install.extra_hint("prof") == f"pip install -e '{REPO}[prof]'"
    # a wheel: site-packages has no pyproject.toml beside the package
    wheel = tmp_path / "site-packages" / "npudoctor"
    wheel.mkdir(parents=True)
    monkeypatch.setattr(install, "__file__", str(wheel / "install.py"))
    assert install.checkout_root() is None
    assert install.extra_hint("train") == "pip install 'npudoctor[train]'"
    assert install.extra_hint() == "pip install 'npudoctor'"
    # torch: a CPU build unless a torch_npu is installed, then the torch the matrix pairs with it
    monkeypatch.setattr(install, "torch_npu_version", lambda: None)
    assert install.torch_hint().startswith("pip install torch --index-url https://download.pytorch.org/whl/cpu")
    monkeypatch.setattr(install, "torch_npu_version", lambda: "2.1.0.post10")
    assert install.torch_hint() == "pip install torch==2.1.0   # the torch torch_npu 2.1.0.post10 was built for"
    assert install.train_hint().startswith("pip install torch==2.1.0 && pip install 'npudoctor[train]'")
