#!/usr/bin/env python3
"""device-summary.py DIR SECONDS: the markdown summary of a device check, from the files
backend/cuda/device-check.sh left in DIR (CSV and JSON outputs of kvplan, stages.tsv, the
environment records). Writes DIR/summary.md and prints it.

Every section reads defensively: a missing, empty, truncated or malformed file, or a null where
a number was expected, gives a line saying so, never an exception, so a partial run still gets
its summary. Tested through the dry run (tests/test_device.c) on the cpu backend's outputs."""
import csv, json, os, sys

d, secs = sys.argv[1], sys.argv[2]


def path(name):
    return os.path.join(d, name)


def text(name, limit=4000):
    try:
        with open(path(name), errors="replace") as f:
            return f.read(limit).strip()
    except OSError:
        return ""


def rows(name):
    try:
        with open(path(name), newline="", errors="replace") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error):
        return []


def num(x):
    """A float, or None for a null, an empty cell or text."""
    try:
        return None if x is None or x == "" else float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, spec=".4g", suffix=""):
    v = num(x)
    return "n/a" if v is None else f"{v:{spec}}{suffix}"


def pct(x, signed=False):
    v = num(x)
    return "n/a" if v is None else f"{100 * v:{'+' if signed else ''}.1f} %"


lines = ["# H200 device check" + (" (dry run on a CPU)" if "dry run: 1" in text("environment.txt") else ""), "",
         f"Written by backend/cuda/device-check.sh in {secs} s."]
env = text("environment.txt")
if env:
    lines += ["", "```", env, "```"]

st = []
try:
    with open(path("stages.tsv")) as f:
        st = list(csv.DictReader(f, delimiter="\t"))
except (OSError, csv.Error):
    pass
lines += ["", "## Stages", "", "| stage | seconds | exit | limit (s) |", "|---|---|---|---|"]
for r in st:
    lines.append(f"| {r.get('stage')} | {r.get('seconds')} | {r.get('exit')} | {r.get('limit')} |")
if not st:
    lines.append("| (no stage ran) | | | |")

lines += ["", "## Device and libraries", ""]
smi = text("nvidia-smi.csv") or text("nvidia-smi.txt", 600)
lines += ["```", smi or "no nvidia-smi output", "```", "", text("cublas.txt", 600).split("\n")[0] or "libcublas: not recorded"]
ver = text("version.txt", 1000)
if ver:
    lines += ["", "```", ver, "```"]

sel = rows("selftest.csv")
lines += ["", "## Selftest", ""]
if not sel:
    lines.append("No selftest rows (see selftest.err in the archive: " + (text("selftest.err", 300).replace("\n", " ") or "empty") + ").")
else:
    bad = [r for r in sel if r.get("result") != "ok"]
    lines.append(f"{len(sel) - len(bad)} of {len(sel)} checks passed.")
    for r in bad:
        lines.append(f"- FAILED {r.get('kernel')} {r.get('shape')}: error {fmt(r.get('error'))} over {fmt(r.get('tolerance'))}")

# The kernel bench: one file (kernel-bench.csv, all of it) or its two halves, each its own stage.
kb_files = [n for n in ("kernel-bench.csv", "kernel-bench-decode.csv", "kernel-bench-prefill.csv") if os.path.exists(path(n))]
kb = [r for n in kb_files for r in rows(n)]
lines += ["", "## Ceilings and kernels", ""]
if not kb:
    errs_kb = " ".join(text(n, 300).replace("\n", " ") for n in ("kernel-bench.err", "kernel-bench-decode.err", "kernel-bench-prefill.err"))
    lines.append("No measurements (see kernel-bench*.err: " + (errs_kb.strip() or "empty") + ").")
else:
    lines += ["| kernel | shape | time | rate | of ceiling |", "|---|---|---|---|---|"]
    for r in kb:
        lines.append(f"| {r.get('what')} | {r.get('shape')} | {fmt(r.get('seconds'), '.3g', ' s')} | "
                     f"{fmt(r.get('rate'))} {r.get('unit') or ''} | {pct(r.get('share_of_ceiling'))} |")
    # The targets (docs/cuda.md): decode >= 80 % of the copy bandwidth at batch >= 64 and
    # context >= 4096; tensor-core prefill >= 50 % of the GEMM ceiling at 4096 tokens.
    lines += ["", "Targets:", ""]
    for r in kb:
        what, shape, share = str(r.get("what") or ""), str(r.get("shape") or ""), num(r.get("share_of_ceiling"))
        if what.startswith("attn_decode"):
            try:
                b = int(shape.split("batch ")[1].split()[0])
                c = int(shape.split("context ")[1].split()[0])
            except (IndexError, ValueError):
                continue
            if b >= 64 and c >= 4096:
                verdict = "n/a" if share is None else ("met" if share >= 0.8 else "missed")
                lines.append(f"- {what}, {shape}: {pct(share)} of copy bandwidth (target 80 %): {verdict}")
        elif what.startswith("attn_prefill") and "tensor cores" in what:
            verdict = "n/a" if share is None else ("met" if share >= 0.5 else "missed")
            lines.append(f"- {what}, {shape}: {pct(share)} of the GEMM ceiling (target 50 %): {verdict}")

cal = rows("calibration.csv")
lines += ["", "## Calibration", ""]
errs = sorted(abs(v) for v in (num(r.get("error")) for r in cal) if v is not None)
if errs:
    lines.append(f"{len(cal)} steps fitted; median |error| {100 * errs[len(errs) // 2]:.1f} %.")
else:
    lines.append("No calibration rows (see calibrate.err).")
prof = text("h200.calibrated.yaml", 2000)
if prof:
    lines += ["", "```yaml", prof, "```"]

for name in sorted(os.listdir(d)):
    if not (name.startswith("validate-") and name.endswith(".json")):
        continue
    s = name[len("validate-"):-len(".json")]
    lines += ["", f"## Validation: {s}", ""]
    try:
        with open(path(name)) as f:
            v = json.load(f)
    except (OSError, ValueError):
        lines.append("No result (empty or malformed JSON; see validate-" + s + ".err).")
        continue
    if not isinstance(v, dict):
        lines.append("Unexpected JSON shape.")
        continue
    lines += ["| metric | predicted | measured | error |", "|---|---|---|---|"]
    for r in v.get("comparison") or []:
        if isinstance(r, dict):
            lines.append(f"| {r.get('metric')} | {fmt(r.get('predicted'))} | {fmt(r.get('measured'))} | {pct(r.get('error'), True)} |")
    val = v.get("validation") if isinstance(v.get("validation"), dict) else {}
    lines.append(f"\nMedian |error| (throughput, mean TPOT): {pct(val.get('median_key_error'))}.")

out = "\n".join(lines) + "\n"
with open(path("summary.md"), "w") as f:
    f.write(out)
print(out)
