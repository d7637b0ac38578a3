"""The build subprocess of tools/gfx950/build.py (runs under the runner's Triton): reads the
request JSON on stdin, prints one JSON line: the amdgcn text and the launch facts."""
import ast
import importlib.util
import json
import os
import sys
import traceback
import types
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
BUILD_WORKER_ENV = "GFX950_BUILD_WORKER"


class DescribedTensor:
    """What Triton's binder reads of a tensor: its dtype, address and size."""

    def __init__(self, dtype, address, nbytes):
        self.dtype, self._address, self._nbytes = dtype, address, nbytes

    def data_ptr(self):
        return self._address

    def ptr_range(self):
        return self._nbytes


# A script's module (`python my_test.py` defines its kernel in __main__) is loaded here under
# this name, so its `if __name__ == "__main__":` block stays off, and only from its
# definitions: the statements below run, its calls, loops and `with` blocks do not (they are
# the script's work, a launch or a gfx950.emulate among them).
SCRIPT_MODULE = "__gfx950_script__"
DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign,
               ast.AnnAssign, ast.AugAssign, ast.If, ast.Try)


def load_script(path):
    """The definitions of the script at `path` as a module: each top-level definition run in
    turn (one that fails, such as a tensor made on a GPU, skipped and remembered)."""
    module = types.ModuleType(SCRIPT_MODULE)
    module.__file__ = path
    sys.modules[SCRIPT_MODULE] = module
    module.skipped = []
    for statement in ast.parse(Path(path).read_text(), path).body:
        if not isinstance(statement, DEFINITIONS):
            continue
        code = compile(ast.Module([statement], type_ignores=[]), path, "exec")
        try:
            exec(code, module.__dict__)  # noqa: S102 - the kernel author's own file, as an import would run it
        except Exception as exc:  # noqa: BLE001 - named if the kernel is then missing
            module.skipped.append(f"line {statement.lineno}: {type(exc).__name__}: {exc}")
    return module


def load_kernel(request):
    if request["module"] == "__main__":
        module = load_script(request["file"])
    else:
        module = sys.modules.get(request["module"])
        if module is None or getattr(module, "__file__", None) != request["file"]:
            spec = importlib.util.spec_from_file_location(request["module"], request["file"])
            module = importlib.util.module_from_spec(spec)
            sys.modules[request["module"]] = module
            spec.loader.exec_module(module)
    if not hasattr(module, request["name"]):
        skipped = "; ".join(getattr(module, "skipped", []))
        raise AttributeError(f"{request['file']} defines no {request['name']}" + (f" (skipped: {skipped})" if skipped
                                                                                 else ""))
    return getattr(module, request["name"])


def argument(description, torch):
    kind = description["kind"]
    if kind == "tensor":
        dtype = getattr(torch, description["dtype"].removeprefix("torch."))
        return DescribedTensor(dtype, description["address"], description["nbytes"])
    return None if kind == "none" else description["value"]


def main():
    request = json.loads(sys.stdin.read())
    os.environ[BUILD_WORKER_ENV] = "1"  # gfx950.emulate in the kernel's module refuses to run here
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile as triton_compile, make_backend
    from triton.runtime.jit import create_function_from_signature

    kernel = load_kernel(request)
    target = GPUTarget("hip", "gfx950", 64)
    backend = make_backend(target)
    binder = create_function_from_signature(kernel.signature, kernel.params, backend)
    args = [argument(d, torch) for d in request["arguments"]]
    kwargs = {**request["constexprs"], **request["options"]}
    bound, specialization, options = binder(*args, **kwargs)
    options, signature, constexprs, attrs = kernel._pack_args(backend, kwargs, bound, specialization, options)
    source_class = ASTSource
    if getattr(kernel, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource
        source_class = GluonASTSource
    compiled = triton_compile(source_class(kernel, signature, constexprs, attrs), target=target,
                              options=options.__dict__)
    params = [(name, kind) for name, kind in signature.items() if kind != "constexpr"]
    print(json.dumps({"name": compiled.metadata.name, "asm": compiled.asm["amdgcn"],
                      "shared": compiled.metadata.shared, "num_warps": compiled.metadata.num_warps,
                      "params": params, "signature": signature, "triton": triton.__version__}))


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # noqa: BLE001 - the parent reports it with the kernel's name
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2500:]}"}))
