# source: npudoctor developers
# what: a stand-in for CANN's `msprof` command line, for testing `npudoctor prof run` on machines without CANN
# note: CONSTRUCTED: it runs the --application command (output and exit code pass through), prints the console
# note: lines of the real msprof quick-start sample, and copies a PROF_* folder laid out from real samples
# note: (FAKE_MSPROF_TEMPLATE) into --output. FAKE_MSPROF_NO_EXPORT=1: the collection leaves only raw data and
# note: `--export=on --output=PROF_DIR` writes mindstudio_profiler_output, as msprof does for a killed run.
# ---
import json
import os
import shlex
import shutil
import subprocess
import sys


def main() -> int:
    options = dict(arg[2:].split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
    template = os.environ["FAKE_MSPROF_TEMPLATE"]
    name = os.path.basename(template.rstrip("/"))
    if options.get("export") == "on":
        shutil.copytree(os.path.join(template, "mindstudio_profiler_output"),
                        os.path.join(options["output"], "mindstudio_profiler_output"))
        return 0
    output = options["output"]
    print("[INFO] Start profiling....", flush=True)
    code = 0
    app = subprocess.Popen(shlex.split(options["application"]))
    try:
        code = app.wait()
    except KeyboardInterrupt:
        code = app.wait()
        code = code if code else 130
    target = os.path.join(output, name)
    ignore = shutil.ignore_patterns("mindstudio_profiler_output") if os.environ.get("FAKE_MSPROF_NO_EXPORT") else None
    shutil.copytree(template, target, ignore=ignore)
    with open(os.path.join(output, "fake_msprof_args.json"), "w") as handle:
        json.dump(sys.argv[1:], handle)
    print(f"[INFO] Start export data in {name}..", flush=True)
    print(f"[INFO] Process profiling data complete. Data is saved in {target}.", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
