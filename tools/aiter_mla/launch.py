"""aiter's FP8 MLA decode code objects launched on the gfx950 emulator, as aiter launches them.

    mla_decode_stage1(q, kv, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, num_kv_splits_indptr,
                      work_meta_data, work_indptr, work_info_set, max_seqlen_q, page_size, nhead_kv,
                      softmax_scale, split_data, split_lse, output, q_scale, kv_scale)

is aiter's `mla_decode_stage1_asm_fwd` (csrc/py_itfs_cu/asm_mla.cu at aiter f3be04a) for the one
case we use: fp8 Q and KV, 16 heads, one KV head, one query token. The launch is built here from
that public contract: the KernelArgs struct (every field padded to 16 bytes), 256 threads (4
waves), the grid (persistent: one workgroup per entry of work_indptr; else (1, batch, splits)).
The code objects come from AITER_ASM_DIR (aiter's own name for its `hsa/` directory); nothing of
aiter is in this repository.
"""
import hashlib
import os

import numpy as np
import torch

import gfx950
from gfx950 import _add_tensor, _record_launch
from gfx950.codeobject import CodeObject
from gfx950.dispatch import record
from gfx950.executor import DEFAULT_BUDGET, Kernel
from gfx950.memory import Memory

from .findings import LockstepDispatch, workgroup_class

ASM_DIR_ENV = "AITER_ASM_DIR"
HOW_TO_GET = ("AITER_ASM_DIR is unset: point it at a checkout of ROCm/aiter's hsa/ directory (git clone "
              "https://github.com/ROCm/aiter && git -C aiter checkout f3be04a; AITER_ASM_DIR=aiter/hsa)")
AITER_COMMIT = "f3be04a"   # the runner's aiter, whose launch contract this follows
# aiter's csrc/py_itfs_cu/asm_mla_configs (hsa/gfx950/mla/mla_asm.csv): fp8 Q, fp8 KV, gqa 16, qseqlen 1
OBJECTS = {False: "mla/mla_a8w8_qh16_qseqlen1_gqaratio16.co", True: "mla/mla_a8w8_qh16_qseqlen1_gqaratio16_ps.co"}
THREADS = 256   # bdx: 4 waves of 64
SUB_Q = 128     # query rows a workgroup takes (gdx = cdiv(max_seqlen_q * gqa, SUB_Q))
# asm_mla.cu's KernelArgs, in order; each field occupies 16 bytes (p2 / p3 padding)
KERNEL_ARGS = ("R", "LSE", "Q", "KV", "LTP", "LTD", "LTL", "scalar", "s_MQA", "s_kv_split", "s_Q_Bs", "s_Bs",
               "s_log2_plen", "QTP", "STP", "RP", "QSCALE", "KVSCALE", "out_16_nosplit")
FIELD_BYTES = 16


class AiterEmulationError(ValueError):
    """A launch the emulated aiter refuses: a wrong argument, or a case it does not model."""


def asm_dir():
    """AITER_ASM_DIR, or None when unset."""
    return os.environ.get(ASM_DIR_ENV) or None


def object_path(persistent, directory=None):
    directory = directory or asm_dir()
    if directory is None:
        raise AiterEmulationError(HOW_TO_GET)
    path = os.path.join(directory, "gfx950", OBJECTS[bool(persistent)])
    if not os.path.exists(path):
        raise AiterEmulationError(f"{path} does not exist ({ASM_DIR_ENV} must name aiter's hsa/ directory)")
    return path


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


_KERNELS = {}


def load_kernel(path):
    """(CodeObject, emulator Kernel) of a code object file, cached by its bytes' hash."""
    key = sha256(path)
    if key not in _KERNELS:
        code = CodeObject(path)
        program = code.program()
        lds = code.descriptor["group_segment_fixed_size"]
        _KERNELS[key] = (code, Kernel(program, lds, THREADS // 64))
    return _KERNELS[key]


class EmulatedLaunch:
    """What one launch ran: the file, its hash, the grid and the wave instructions."""

    def __init__(self, path, grid, dispatch):
        self.path, self.grid, self.instructions = path, grid, dispatch.instructions
        self.sha256 = sha256(path)
        self.record = dispatch.record()   # issue 43's launch record: what each workgroup did


def _kernargs(values):
    """KernelArgs bytes from {field: int address / int / float}."""
    segment = bytearray(FIELD_BYTES * len(KERNEL_ARGS))
    for i, name in enumerate(KERNEL_ARGS):
        value = values.get(name, 0)
        if isinstance(value, float):
            raw = np.float32(value).tobytes()
        else:
            raw = (int(value) & (2 ** 64 - 1)).to_bytes(8, "little")
        segment[FIELD_BYTES * i:FIELD_BYTES * i + len(raw)] = raw
    return bytes(segment)


def _check(condition, message):
    if not condition:
        raise AiterEmulationError(f"mla_decode_stage1_asm_fwd: {message}")


def mla_decode_stage1(q, kv, qo_indptr, kv_indptr, kv_indices, kv_last_page_lens, num_kv_splits_indptr,
                      work_meta_data, work_indptr, work_info_set, max_seqlen_q, page_size, nhead_kv, softmax_scale,
                      split_data, split_lse, output, q_scale=None, kv_scale=None, order=None, detectors=True,
                      budget=DEFAULT_BUDGET, launches=None, findings=None):
    """aiter's mla_decode_stage1_asm_fwd on the emulator (see the module docstring); launches: a
    list the EmulatedLaunch is appended to; findings: a findings.Findings whose accepted kinds are
    recorded instead of stopping the run (None: every finding stops it)."""
    persistent = num_kv_splits_indptr is None
    _check(q.dtype == kv.dtype == torch.float8_e4m3fn, f"fp8 e4m3fn Q and KV only (got {q.dtype}, {kv.dtype})")
    _check(q.dim() == 3 and q.shape[1:] == (16, 576) and q.is_contiguous(), f"q (tokens, 16, 576) contiguous, "
           f"got {tuple(q.shape)}")
    _check(nhead_kv == 1 and max_seqlen_q == 1 and page_size == 1, "one KV head, one query token, page size 1 only")
    _check(q_scale is not None and kv_scale is not None, "fp8 Q needs q_scale and kv_scale")
    batch = qo_indptr.shape[0] - 1
    kv_split = split_data.shape[1]
    path = object_path(persistent)
    _, kernel = load_kernel(path)
    memory, storages, address = Memory(), {}, {}

    def add(name, tensor):
        address[name] = _add_tensor(memory, tensor, name, storages)
        return address[name]

    values = {"R": add("splitData", split_data), "LSE": add("splitLse", split_lse), "Q": add("Q", q),
              "KV": add("KV", kv), "LTP": add("kv_indptr", kv_indptr), "LTD": add("kv_page_indices", kv_indices),
              "LTL": add("kv_last_page_lens", kv_last_page_lens), "QTP": add("qo_indptr", qo_indptr),
              "RP": add("output", output), "QSCALE": add("q_scale", q_scale), "KVSCALE": add("kv_scale", kv_scale),
              "scalar": float(softmax_scale), "s_MQA": 16 * max_seqlen_q, "s_kv_split": kv_split,
              "s_Q_Bs": q.stride(0) * q.element_size() * max_seqlen_q, "s_Bs": kv.stride(0) * kv.element_size(),
              "s_log2_plen": int(np.log2(page_size)), "out_16_nosplit": kv_split}
    if persistent:
        _check(work_meta_data is not None and work_indptr is not None and work_info_set is not None,
               "the persistent launch needs work_meta_data, work_indptr and work_info_set")
        pointers = [int(v) for v in work_meta_data.view(torch.int64)[:2].tolist()]
        _check(pointers == [work_indptr.data_ptr(), work_info_set.data_ptr()],
               "work_meta_data does not point at this work_indptr and work_info_set (get_mla_metadata_v1 fills it "
               "with their addresses)")
        # the kernel dereferences work_meta_data: give it the emulator's addresses of the same two tensors
        device_pointers = torch.tensor([add("work_indptr", work_indptr), add("work_info_set", work_info_set)],
                                       dtype=torch.int64)
        values["STP"] = add("work_meta_data", device_pointers)
        grid = (work_indptr.shape[0] - 1, 1, 1)
    else:
        values["STP"] = add("num_kv_splits_indptr", num_kv_splits_indptr)
        grid = (-(-max_seqlen_q * 16 // SUB_Q), batch, kv_split)
    segment = _kernargs(values)
    kernarg = np.frombuffer(segment + b"\0" * 64, dtype=np.uint8).copy()
    base = memory.add_region(kernarg, "kernel arguments", writable=False)
    dispatch = LockstepDispatch(kernel, memory, base, segment, grid, budget=budget, detectors=detectors)
    if findings is not None:
        dispatch.workgroup_class = workgroup_class(findings)
    name = f"aiter {os.path.basename(path)[:-3]}"
    try:
        with np.errstate(all="ignore"):
            dispatch.run(order=order)
    except gfx950.EmulationError as exc:   # eval.py's verdict names it even where the caller catches it
        record(name, failure=str(exc))
        raise
    launch = EmulatedLaunch(path, grid, dispatch)
    record(name, dispatch.instructions)
    _record_launch(dispatch)   # GFX950_RECORD=PATH: the launch record, as for a Triton kernel
    if launches is not None:
        launches.append(launch)
    return launch


__all__ = ["mla_decode_stage1", "AiterEmulationError", "asm_dir", "object_path", "load_kernel", "HOW_TO_GET",
           "ASM_DIR_ENV", "AITER_COMMIT", "gfx950"]
