"""Byte identity of two submission files' kernels: every gfx950 and sm_90 build of every kernel
variant, built from each file with a fresh Triton cache, compared instruction by instruction.

    python tools/byte_identity.py OLD [NEW] [--json PATH] [--triton installed|DIR]

OLD, NEW: a file, or a git revision of this repository (its submission.py: `339ee55`); NEW
defaults to this repository's submission.py. The builds are those tools/compile_report.py
reports and predicts from, taken from NEW's dispatch (kernel_variants and candidate_variants
for gfx950 and sm90: every form the leaderboard cases can run or first-call tuning can time,
the combine kernel's and the fp8 quantization of Q's forms; the Gluon kernel in each merge),
each built from OLD's and NEW's kernel of the same name. Compared: gfx950's amdgcn
instructions with the kernel descriptor's .amdhsa_ lines (registers, LDS), sm_90's SASS (ptxas
-> cuobjdump), in both with the debug lines (.loc, .file, the debug sections), comments,
labels and the kernel's symbol name set aside. Exit 0 when every build is identical. Each file
builds in its own process with its own empty TRITON_CACHE_DIR (a cache hit would compare a
build with itself). It builds with the runner's Triton 3.6.0 unless --triton names another
(tools/common.py, run_with_triton).
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))


def amdgcn_instructions(asm, kernel_name):
    """The instruction lines of an amdgcn text, and its .amdhsa_ descriptor lines; no debug
    sections, directives, labels, comments or symbol name."""
    kept, debug = [], False
    for line in asm.splitlines():
        text = re.split(r"\s;|^;|//", line, maxsplit=1)[0].strip()
        if text.startswith(".section"):
            debug = ".debug" in text
            continue
        if debug or not text or text.endswith(":"):
            continue
        if text.startswith(".") and not text.startswith(".amdhsa_"):
            continue
        kept.append(text.replace(kernel_name, "KERNEL"))
    return kept


def sass_instructions(sass, kernel_name):
    """The instruction text of cuobjdump -sass output (addresses and encodings dropped)."""
    kept = []
    for line in sass.splitlines():
        matched = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?;)", line)
        if matched:
            kept.append(matched[1].replace(kernel_name, "KERNEL"))
    return kept


def _sass(cubin):
    from triton.backends.nvidia.compiler import get_ptxas
    cuobjdump = Path(get_ptxas(90).path).parent / "cuobjdump"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(cuobjdump), "-sass", str(path)], capture_output=True, text=True,
                              check=True).stdout


def build_specs():
    """[(target, kernel name, signature, constexprs, num_warps, num_stages, gluon)] of compile_report's builds
    (from the module compile_report holds: NEW)."""
    import compile_report as report
    sub = report.sub
    specs = {}

    def add(target, fn, signature, consts, warps, stages):
        specs.setdefault((target, fn.__name__, tuple(consts.items()), warps, stages),
                         (target, fn.__name__, signature, consts, warps, stages, False))
    for target, (_, arch, _, platform) in report.TARGETS.items():
        for variant in report.kernel_variants(target) + report.candidate_variants(target):
            add(target, *variant)
        with report._dispatching_as(target):  # every candidate's whole fallback order, its combine forms too
            choices = {choice for case in report.LEADERBOARD_CASES
                       for choice in sub.ranked_candidates(*case, sub.torch.device("cpu")) if choice.path == "triton"}
        for launch in sorted(choices):
            for variant in sub.variants_for(arch, platform, launch.block_n, launch.num_warps, launch.num_stages,
                                            launch.scores, launch.merge):
                if variant.gluon:
                    continue
                add(target, *report._build_spec(variant), variant.num_warps, variant.num_stages)
                if variant.merge == sub.MERGE_COMBINE:
                    for dims in (sub.V_HEAD_DIM, sub.COMBINE_DIMS_SPLIT):
                        add(target, sub._mla_combine_kernel, report.COMBINE_SIGNATURE,
                            {"CHUNK": min(launch.num_splits, sub.COMBINE_MAX_CHUNK), "DIMS": dims}, 4, 1)
    specs = list(specs.values())
    if report.sub.gl is not None:
        for merge in report.GLUON_MERGES:
            specs.append(("gfx950", "_gluon_split_kernel", report.GLUON_SIGNATURE,
                          {"BLOCK_N": report.sub.GL_BLOCK_N, "MERGE": merge}, report.sub.GL_NUM_WARPS, 1, True))
    return specs


def build(module, spec):
    """{"instructions": n, "sha256": ...} of one spec built from `module`'s kernel, or {"error": ...}."""
    import triton
    import compile_report as report
    target_name, name, signature, consts, warps, stages, gluon = spec
    fn = getattr(module, name)  # a kernel the file lacks: AttributeError, loudly
    target = report.TARGETS[target_name][0]
    attrs = report._attrs(fn, signature, target.backend)
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource
        source = GluonASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
        options = {"num_warps": warps}
    else:
        source = triton.compiler.ASTSource(fn=fn, signature=signature, constexprs=consts, attrs=attrs)
        options = {"num_warps": warps, "num_stages": stages}
    try:
        compiled = triton.compile(source, target=target, options=options)
    except Exception as exc:  # noqa: BLE001 - a failed build is compared as its error's type
        return {"error": type(exc).__name__}
    if target.backend == "hip":
        lines = amdgcn_instructions(compiled.asm["amdgcn"], compiled.metadata.name)
    else:
        lines = sass_instructions(_sass(compiled.asm["cubin"]), compiled.metadata.name)
    return {"instructions": len(lines), "sha256": hashlib.sha256("\n".join(lines).encode()).hexdigest()}


def spec_name(spec):
    target, name, _, consts, warps, stages, _ = spec
    return f"{target} {name} " + " ".join(f"{k}={v}" for k, v in consts.items()) + f" warps={warps} stages={stages}"


def build_all(path, out):
    """Child process: NEW (this repository's submission.py) lists the builds; the file at `path` builds them."""
    import importlib.util
    import compile_report  # noqa: F401 - holds this repository's submission.py as its `sub`
    spec_source = importlib.util.spec_from_file_location("built_submission", path)
    module = importlib.util.module_from_spec(spec_source)
    spec_source.loader.exec_module(module)
    import triton
    rows = {}
    for spec in build_specs():
        rows[spec_name(spec)] = build(module, spec)
    Path(out).write_text(json.dumps({"triton": triton.__version__, "builds": rows}, indent=1))


def _resolve(name, tmp):
    """A file, or a git revision's submission.py written to tmp -> (path, label)."""
    if Path(name).is_file():
        return Path(name).resolve(), name
    text = subprocess.run(["git", "show", f"{name}:submission.py"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout
    path = Path(tmp) / f"submission_{name}.py"
    path.write_text(text)
    return path, f"{name}:submission.py"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", nargs="?", help="a file or a git revision (its submission.py)")
    parser.add_argument("new", nargs="?", default=str(ROOT / "submission.py"))
    parser.add_argument("--json", metavar="PATH", help="write the comparison (every build) here")
    parser.add_argument("--triton", help="installed, or a directory holding triton (default: the runner's)")
    parser.add_argument("--build-child", nargs=2, metavar=("FILE", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.build_child:
        build_all(*args.build_child)
        return 0
    started = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        files = [_resolve(args.old, tmp), _resolve(args.new, tmp)]
        results = []
        for index, (path, label) in enumerate(files):
            out, cache = Path(tmp) / f"builds_{index}.json", Path(tmp) / f"cache_{index}"
            command = [sys.executable, __file__, "--build-child", str(path), str(out)]
            if args.triton:
                command += ["--triton", args.triton]
            env = {**os.environ, "TRITON_CACHE_DIR": str(cache), "TRITON_ALWAYS_COMPILE": "1"}
            subprocess.run(command, cwd=ROOT, env=env, check=True)
            results.append(json.loads(out.read_text()))
    old, new = (result["builds"] for result in results)
    names = sorted(set(old) | set(new))
    rows = [{"build": name, "old": old.get(name), "new": new.get(name),
             "identical": old.get(name) is not None and old.get(name) == new.get(name) and "error" not in new[name]}
            for name in names]
    same = sum(row["identical"] for row in rows)
    for row in rows:
        print(("identical " if row["identical"] else "DIFFERENT ") + row["build"])
    print(f"{same} of {len(rows)} builds identical ({files[0][1]} against {files[1][1]}, Triton {results[1]['triton']})")
    if args.json:
        import platform
        record = {"command": " ".join(["python", "tools/byte_identity.py", *sys.argv[1:]]),
                  "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "device": f"none (CPU builds on "
                  f"{platform.node()})", "python": sys.version.split()[0], "triton": results[1]["triton"],
                  "old": files[0][1], "new": files[1][1], "builds": len(rows), "identical": same,
                  "seconds": round(time.time() - started), "rows": rows}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0 if same == len(rows) else 1


if __name__ == "__main__":
    if "--build-child" in sys.argv:
        from common import run_with_triton
        run_with_triton(__file__)
    sys.exit(main())
