#!POPCORN leaderboard amd-mixed-mla
#!POPCORN gpu MI355X
"""MLA decode (DeepSeek-R1 forward_absorb) on the MXFP4 KV cache, for the MI355X (gfx950).

custom_kernel(data) -> (total_q, 16, 512) bf16 attention output; data is the runner's (q, kv_data, qo_indptr,
kv_indptr, config). 16 query heads share one 576-wide latent KV head; the values are its first 512 dims.

Contents, top-down (every definition uses only definitions below it; tests/test_top_down.py):
  1. custom_kernel and plan/run   the input's key -> its plan -> plan.run; a key's first call plans: validate, tune,
                                 choose, plan, check; the plans, their first run's checks, the launches; STATE
  2. the Gluon kernel (ONCE)      gfx950: the raw tile copied to LDS once, read as K and V
  3. the standard-Triton kernels  SCALED (Q to e4m3, scaled-MFMA scores), BF16 (the portable fallback), combine,
                                 Q to fp8 for aiter; below them the helpers they share
  4. the first call's planning    tuning, the choice, the report, the machine probes, launches and their variants
  5. aiter                        fp8 Q + fp8 KV through aiter's persistent decode
  6. validation                   bad input -> ValueError / TypeError naming the argument
  7. errors, the device, warnings what every part above shares
  8. the generated tables         MEASURED DISPATCH, MEASURED MACHINE, EMULATOR PROVEN, MI355X PREDICTION

Environment: MLA_PATH=triton|aiter forces a path, MLA_CONVERT=portable the portable conversion,
MLA_GLUON=0 turns the Gluon kernel off, MLA_CHECK=1 checks the indptr values on every call, MLA_TUNE=0
turns first-call tuning off (1: also on a CPU), MLA_TABLE=0 ignores the table, MLA_PROBES=0 the machine
probes; each is read when a key is planned, never in a timed call. tests/test_surface.py declares the names
eval.py, tools/ and tests/ use; docs/design.md the design,
docs/code_notes.md the longer reasons behind each definition.
"""
import contextlib
import dataclasses
import functools
import hashlib
import inspect
import math
import os
import re
import sys
import time
import warnings
import weakref
from collections import OrderedDict
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from task import input_t, output_t


def _import_gluon():
    """(gluon, gluon.language, None) with the CDNA4 operations the Gluon kernel uses, else (None, None, why)."""
    try:
        from triton.experimental import gluon as gluon_module
        from triton.experimental.gluon import language as gluon_language
        cdna4 = gluon_language.amd.cdna4
        needed = (cdna4.async_copy.buffer_load_to_shared, cdna4.async_copy.commit_group, cdna4.async_copy.wait_group,
                  cdna4.async_copy.load_shared_relaxed, cdna4.mfma_scaled, cdna4.mfma, cdna4.buffer_load,
                  cdna4.buffer_store, cdna4.get_mfma_scale_layout, gluon_language.amd.AMDMFMALayout,
                  gluon_language.DistributedLinearLayout, gluon_language.SharedLinearLayout,
                  gluon_language.SwizzledSharedLayout)
        del needed
    except Exception as exc:  # noqa: BLE001 - any failure means no Gluon kernel
        return None, None, f"{type(exc).__name__}: {exc}"[:200]
    return gluon_module, gluon_language, None


gluon, gl, GLUON_ERROR = _import_gluon()

NUM_HEADS = 16
QK_HEAD_DIM = 576  # keys: all 576 dims
V_HEAD_DIM = 512  # values: the first 512 dims of the same rows
ROPE_DIM = QK_HEAD_DIM - V_HEAD_DIM  # 64
PACKED_ROW_BYTES = QK_HEAD_DIM // 2  # 288 bytes of e2m1 pairs per token
SCALE_COLS = QK_HEAD_DIM // 32  # 18 e8m0 scales per token
WORD_BYTES = 4  # the kernels read the packed codes as int32 words: 8 codes, 1/4 of a block
ROPE_PAD_BYTES = 64  # SCALED and ONCE: the 64 rope dims padded to 128 (the scaled instruction's K), as e2m1 pairs
LOG2E = 1.4426950408889634

CONFIG_EXPECTED = {"num_heads": NUM_HEADS, "num_kv_heads": 1, "qk_head_dim": QK_HEAD_DIM, "kv_lora_rank": V_HEAD_DIM,
                   "qk_rope_head_dim": ROPE_DIM, "v_head_dim": V_HEAD_DIM, "q_seq_len": 1}

# The e2m1 -> bf16 conversion (CONVERT): gfx950's instruction, or portable Triton (the fallback).
PORTABLE, GFX950 = 0, 2
CONVERT_NAMES = {PORTABLE: "portable", GFX950: "gfx950"}
LOG2_SHIFT = {PORTABLE: 14, GFX950: 0}  # it returns values x 2^-shift (keeps the portable arithmetic in range)
MERGE_DIRECT, MERGE_COMBINE, MERGE_FUSED = 0, 1, 2
MERGE_NAMES = {MERGE_DIRECT: "direct", MERGE_COMBINE: "combine", MERGE_FUSED: "fused"}
# Kernel families (SCORES): BF16 converts each tile to bf16 for both dots; SCALED quantizes Q to
# e4m3 and scores on the scaled MFMA, K never converted; ONCE: SCALED's, the tile read once (Gluon, gfx950).
BF16_SCORES, SCALED_SCORES, ONCE_SCORES = 0, 1, 2
FAMILY_NAMES = {BF16_SCORES: "bf16", SCALED_SCORES: "scaled", ONCE_SCORES: "once"}
# ONCE: each of 4 warps takes p against its first valid tile's maximum; a later p > 2^ONCE_OVERFLOW_LOG2: its tiles again
ONCE_GROUPS = 4
ONCE_OVERFLOW_LOG2 = 16.0
COMBINE_MAX_CHUNK = 32  # splits the combine kernel holds in registers at once (a running rescale across chunks)
COMBINE_DIMS_SPLIT = 256  # dims per combine program, unless batch x 16 programs fill the GPU (then all 512)
# The FUSED merge's pass by the form's warps: (heads, splits) whose partials one pass loads before its first wait,
# the most a gfx950 build holds spill-free with Triton 3.6.0 (16 heads x 4 splits spill the 4-warp forms; any pass
# of more than 4 heads spills the 8-warp SCALED form, at 256 registers); other warp counts: 4 heads, 1 split a pass.
FUSED_MERGE_PASS = {4: (16, 2), 8: (4, 16)}

# Compile-time constants the kernels read as globals (Triton accepts tl.constexpr globals).
NUM_HEADS_C, QK_DIM_C, V_DIM_C = tl.constexpr(NUM_HEADS), tl.constexpr(QK_HEAD_DIM), tl.constexpr(V_HEAD_DIM)
ROPE_C, SCALE_COLS_C, ROPE_PAD_BYTES_C = tl.constexpr(ROPE_DIM), tl.constexpr(SCALE_COLS), tl.constexpr(ROPE_PAD_BYTES)
ONCE_GROUPS_C, ONCE_OVERFLOW_LOG2_C = tl.constexpr(ONCE_GROUPS), tl.constexpr(ONCE_OVERFLOW_LOG2)
PORTABLE_C, GFX950_C = tl.constexpr(PORTABLE), tl.constexpr(GFX950)
DIRECT_C, FUSED_C = tl.constexpr(MERGE_DIRECT), tl.constexpr(MERGE_FUSED)


# =======================================================================================
# 1. custom_kernel and plan/run: the input's key -> its plan -> plan.run (plan once, run many)
# =======================================================================================

def custom_kernel(data: input_t) -> output_t:
    """The timed call: the input's key (input_key) -> its plan -> plan.run(data). A key not seen yet is planned by
    _first_call (validation, tuning, the choice, the plan, its checks); a steady-state call reads no environment,
    makes no choice and checks nothing the key fixed (tests/test_plan_run.py counts its calls)."""
    try:
        key = input_key(*data)
        plan = STATE.plans[key]
    except Exception:  # noqa: BLE001 - a new key (KeyError), or input that _first_call rejects by name
        return _first_call(data)
    STATE.plans.move_to_end(key)
    return plan.run(data)


class State:
    """Every piece of this process's mutable state; STATE.reset() starts afresh (tests)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.plans = OrderedDict()  # input_key -> the plan custom_kernel runs; ("choice", ...) -> a choice's plan
        self.tuned = {}  # (arch, batch, kv_len) -> the fastest choice measured in this process
        self.tune_log = fresh_tune_log()  # first-call tuning's record (tuning_report)
        self.predictions = {}  # (batch, kv_len, device, failed variants) -> predicted_choice
        self.flush = {}  # device -> the buffer the cache flush of a timed tuning run writes
        self.machine = {}  # device -> its machine probes' record
        self.failed_variants = set()  # variants that failed to build, fit or launch, or failed a check
        self.warned = set()  # the keys _warn_once has warned for
        self.check_log = []  # (variant, what, seconds, verdict) of every check
        self.launch_marks = None  # (what, start, end) events of every launch while kernel_times_us sets a list
        self.recording = None  # the launches of a plan's first run, while _TritonPlan._first_run sets a list
        self.aiter, self.aiter_error = _import_aiter()  # aiter's decode API, or None and why not


def _first_call(data):
    """A key's first call: validate, tune (the case's first call), choose, plan and run with the checks; the plan
    is kept for the key."""
    q, kv_data, qo_indptr, kv_indptr, batch, kv_len, sm_scale = _validate(data)
    device = q.device
    if _needs_tuning(batch, kv_len, device):
        tune_first_call(batch, kv_len, device, lambda choice: _run_choice(
            choice, q, kv_data, qo_indptr, kv_indptr, batch, sm_scale)[1])
    choice = choose(batch, kv_len, device)
    if choice == AITER_LAUNCH:
        api = STATE.aiter
        try:
            out, plan = _run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, sm_scale)
            return _keep(data, _AiterCall(plan, sm_scale, _first_call), out)
        except Exception as exc:  # noqa: BLE001 - sorted: only a failure inside aiter falls back
            if os.environ.get("MLA_PATH") == "aiter" or _fatal(exc, device) or not _raised_by_aiter(exc, api):
                raise
            _disable_aiter(f"it raised at call time: {error_summary(exc)[:800]}", device)
            choice = choose(batch, kv_len, device)
    out, plan = _run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, sm_scale)
    return _keep(data, plan, out)


def _keep(data, plan, out):
    """plan kept as the one custom_kernel runs for data's key (MLA_CHECK=1: none, every call checks) -> out."""
    if os.environ.get("MLA_CHECK") != "1":
        _plan(input_key(*data), lambda: plan)
    return out


def _run_choice(choice, q, kv_data, qo_indptr, kv_indptr, batch, sm_scale):
    """One call in one choice: its plan for this input (built and checked on a miss) runs -> (output, plan)."""
    device = q.device
    if choice == AITER_LAUNCH:
        kv8, kv_scale = _fp8_operands(kv_data, device)
        key = ("choice", choice, batch, kv8.shape[0], device, kv8.dtype)
        aiter = STATE.aiter
        plan = _plan(key, lambda: _AiterPlan(aiter, batch, kv8.shape[0], device, aiter["fp8"], kv8.dtype),
                     qo_indptr, kv_indptr, kv8.shape[0])
        return plan.run(q, kv8, kv_scale, qo_indptr, kv_indptr, sm_scale), plan
    packed, scales = _mxfp4_operands(kv_data, device)
    if not _word_aligned(packed):
        _warn_once("unaligned", "kv_data['mxfp4'][0] rows are not 4-byte aligned: copying them on every call (slow)")
    key = ("choice", choice, input_key(q, kv_data, qo_indptr, kv_indptr, {}), sm_scale)
    plan = _plan(key, lambda: _TritonPlan(batch, choice, device, sm_scale), qo_indptr, kv_indptr, packed.shape[0])
    return plan.run((q, kv_data, qo_indptr, kv_indptr)), plan


MAX_PLANS = 32


def _plan(key, factory, qo_indptr=None, kv_indptr=None, total_kv=None):
    """The cached plan for key, built by factory() on a miss (after the value check); the least recently used
    is dropped past MAX_PLANS."""
    plan = STATE.plans.get(key)
    if kv_indptr is not None and (plan is None or os.environ.get("MLA_CHECK") == "1"):
        check_indptr_values(qo_indptr, kv_indptr, total_kv)
    if plan is None:
        plan = STATE.plans[key] = factory()
        if len(STATE.plans) > MAX_PLANS:
            STATE.plans.popitem(last=False)
    else:
        STATE.plans.move_to_end(key)
    return plan


class _AiterCall:
    """The aiter plan custom_kernel runs for a key: a failure inside aiter turns aiter off for the process and
    the call is planned again (replan: _first_call), on Triton (MLA_PATH=aiter: it raises)."""

    def __init__(self, plan, sm_scale, replan):
        self.plan, self.sm_scale, self.replan = plan, sm_scale, replan

    def run(self, data):
        q, kv_data, qo_indptr, kv_indptr = data[0], data[1], data[2], data[3]
        kv8, kv_scale = kv_data["fp8"]
        api = STATE.aiter
        try:
            return self.plan.run(q, kv8, kv_scale, qo_indptr, kv_indptr, self.sm_scale)
        except Exception as exc:  # noqa: BLE001 - sorted: only a failure inside aiter falls back
            if os.environ.get("MLA_PATH") == "aiter" or _fatal(exc, q.device) or not _raised_by_aiter(exc, api):
                raise
            _disable_aiter(f"it raised at call time: {error_summary(exc)[:800]}", q.device)
            STATE.plans.pop(input_key(*data), None)
            return self.replan(data)


def input_key(q, kv_data, qo_indptr, kv_indptr, config):
    """What a plan fixes about an input: the config, and of every tensor a path reads its shape, strides, dtype,
    device, address modulo 16 and storage bytes from its first element (what gluon_layout_problem reads)."""
    key = [tuple(config.items())]
    for tensor in (q, qo_indptr, kv_indptr, *kv_data.get("mxfp4", ()), *kv_data.get("fp8", ())):
        key += (tensor.shape, tensor.stride(), tensor.dtype, tensor.device, tensor.data_ptr() % 16,
                tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size())
    return tuple(key)


# --- the plans: what a key's first call prepared, replayed by run -------------------------------------------
class _TritonPlan:
    """One input layout's Triton plan (its key fixes shapes, strides and alignment): the launch, its variants in
    fallback order, the chosen one, the scratch, and the chosen variant's launches as its first run made them
    (replayed by run with the call's tensors in place of that run's)."""

    def __init__(self, batch, launch, device, sm_scale):
        self.batch, self.device, self.sm_scale, self.launch = batch, device, sm_scale, launch
        self.variants = launch_variants(launch, device)
        self.variant = None  # chosen on the first run
        self.scratch = make_scratch(batch, launch.num_splits, device, self.variants)
        self.combine_dims = combine_dims(batch, _num_sms(device))
        self.failures = []  # (variant, why) of the variants this plan dropped
        self.realign = False  # the codes' rows are not 4-byte aligned: copied on every call
        self.launches = None  # [(kernel, grid, argument list, [(position, call tensor index)], constants, what)]
        self.needs_words = False  # a launch reads the codes as int32 words (call tensor 3)

    def _launch(self, variant, args, q_bytes_split):
        _attention(variant, self.launch.num_splits, *args, self.scratch, self.sm_scale, self.combine_dims,
                   q_bytes_split)

    def _timed_check(self, variant, what, check):
        start = time.perf_counter()
        verdict = check()
        STATE.check_log.append((variant, what, time.perf_counter() - start, verdict))
        if verdict is not None:
            raise SelfCheckError(f"wrong answers on the {what}: {verdict}")

    def _first_run(self, args):
        """Keep the first variant passing self_check and this output's check (failures warn; all: NoVariantError);
        its launches recorded for run to replay."""
        q, packed, scales, qo_indptr, kv_indptr, out = args
        for variant in self.variants:
            if variant in STATE.failed_variants:
                self.failures.append((variant, "not run: it failed earlier in this process"))
                continue
            problem = variant.gluon and gluon_layout_problem(q, packed, scales, self.batch, self.launch.num_splits)
            if problem:  # this input's layout only: not a failure of the variant
                self.failures.append((variant, f"not run: {problem}"))
                _warn_once(("layout", variant, problem), f"kernel variant not run ({variant.describe()}: {problem}); "
                                                         f"falling back to the next one")
                continue
            try:
                self._timed_check(variant, "self-check (synthetic input)", lambda: self_check(
                    variant, self.launch.num_splits, (q, packed, scales), self.sm_scale, self.combine_dims))
                STATE.recording = recorded = []
                self._launch(variant, args, Q_BYTES_CHECKED)
                STATE.recording = None
                self._timed_check(variant, "check of the first call's output", lambda: check_output(
                    variant, q, packed, scales, kv_indptr, out, self.scratch, self.sm_scale, check_sample(self.batch)))
            except (KernelLaunchError, SelfCheckError) as exc:  # host-side bugs, OOM, faults propagate
                STATE.failed_variants.add(variant)
                why = error_summary(exc)[:300]
                self.failures.append((variant, why))
                _warn_once(("failed", variant), f"kernel variant failed ({variant.describe()}: {why}); "
                                                f"falling back to the next one")
                continue
            finally:
                STATE.recording = None
            self.variant = variant
            self.launches = self._replayable(recorded, (q, packed, scales, packed.view(torch.int32), qo_indptr,
                                                        kv_indptr, out))
            return
        raise NoVariantError("custom_kernel: no kernel variant could run:\n" + "\n".join(
            f"{variant.describe()}: {why}" for variant, why in self.failures))

    def _replayable(self, recorded, call):
        """The recorded launches with each of the call's tensors marked by position and q_bytes_split Q_BYTES_TIMED;
        None when a launch read a tensor that is neither the call's nor the scratch's (then run launches through
        _attention each time)."""
        scratch_ids = {id(tensor) for tensor in self.scratch}
        launches = []
        for kernel, grid, args, constants, what in recorded:
            slots = []
            for position, arg in enumerate(args):
                if not isinstance(arg, torch.Tensor) or id(arg) in scratch_ids:
                    continue
                found = [index for index, tensor in enumerate(call) if tensor is arg]
                if not found and arg.dtype == torch.int32 and arg.data_ptr() == call[1].data_ptr():
                    found = [3]  # the codes as int32 words (a fresh view each call)
                if not found:
                    return None
                slots.append((position, found[0]))
                self.needs_words = self.needs_words or found[0] == 3
            args = list(args)
            if "q_bytes_split" in kernel.arg_names:
                args[kernel.arg_names.index("q_bytes_split")] = Q_BYTES_TIMED
            launches.append((kernel, grid, args, slots, constants, what))
        return launches or None

    def run(self, data):
        """One call (data: the runner's tuple, or its first four) -> a new output."""
        q, kv_data, qo_indptr, kv_indptr = data[0], data[1], data[2], data[3]
        packed, scales = kv_data["mxfp4"]
        if self.realign:
            packed = packed.contiguous() if packed.stride(0) % WORD_BYTES else packed.clone()
        out = torch.empty((self.batch, NUM_HEADS, V_HEAD_DIM), dtype=torch.bfloat16, device=self.device)
        packed, scales = packed.view(torch.uint8), scales.view(torch.uint8)
        if self.launches is None:
            return self._first_or_unrecorded(q, packed, scales, qo_indptr, kv_indptr, out)
        call = (q, packed, scales, packed.view(torch.int32) if self.needs_words else None, qo_indptr, kv_indptr, out)
        for kernel, grid, template, slots, constants, what in self.launches:
            args = list(template)
            for position, index in slots:
                args[position] = call[index]
            _launch_kernel(kernel, grid, args, constants, what)
        return out

    def _first_or_unrecorded(self, q, packed, scales, qo_indptr, kv_indptr, out):
        """The first run (checks, realignment), or a call of a plan whose launches could not be recorded."""
        if self.variant is None and not _word_aligned(packed):
            self.realign = True
            packed = packed.contiguous() if packed.stride(0) % WORD_BYTES else packed.clone()
        args = (q, packed, scales, qo_indptr, kv_indptr, out)
        if self.variant is None:
            self._first_run(args)
        else:
            self._launch(self.variant, args, Q_BYTES_TIMED)
        return out


AITER_NUM_KV_SPLITS = 32


class _AiterPlan:
    """Metadata buffers, kv_indices, Q's fp8 buffers and quantizer, and the kv_indptr the metadata is from."""

    def __init__(self, api, batch, total_kv, device, q_dtype, kv_dtype):
        self.api, self.batch, self.device = api, batch, device
        self.q_dtype, self.kv_dtype = q_dtype, kv_dtype
        self.checked = set()  # the API functions whose signatures took our arguments
        info = _checked_call(api, "metadata_info", self.checked, batch, 1, NUM_HEADS, q_dtype, kv_dtype,
                             is_sparse=False, fast_mode=False, num_kv_splits=AITER_NUM_KV_SPLITS, intra_batch_mode=True)
        (self.work_meta_data, self.work_indptr, self.work_info_set, self.reduce_indptr, self.reduce_final_map,
         self.reduce_partial_map) = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in info]
        self.kv_indices = torch.arange(total_kv, dtype=torch.int32, device=device)
        self.kv_last_page_len = torch.empty(batch, dtype=torch.int32, device=device)
        self.q8 = torch.empty((batch, NUM_HEADS, QK_HEAD_DIM), dtype=q_dtype, device=device)
        self.q_scale = torch.empty(1, dtype=torch.float32, device=device)
        self.q8_partials = torch.empty(batch, dtype=torch.float32, device=device)
        # "triton" (quantize_q_fp8) or "torch" (its twin), chosen on the first run; the kernel makes e4m3fn only
        self.quantizer = None if q_dtype == torch.float8_e4m3fn else "torch"
        self.built_from = None  # (weakref to kv_indptr, its version counter)

    def forget_metadata(self):
        """Make the next run rebuild the metadata, as a fresh input does (so tuning times aiter as ranked)."""
        self.built_from = None

    def _metadata_current(self, kv_indptr):
        """True when the metadata was built from this very kv_indptr (a weak reference), unmodified since."""
        if self.built_from is None:
            return False
        ref, version = self.built_from
        return ref() is kv_indptr and kv_indptr._version == version

    def _triton_matches_twin(self, q, kv_indptr):
        quantize_q_fp8(q, kv_indptr, self.q8, self.q_scale, self.kv_last_page_len, self.q8_partials)
        q8, q_scale = _quantize_fp8_per_tensor(q, self.q_dtype)
        return (torch.equal(self.q8.view(torch.uint8), q8.view(torch.uint8)) and torch.equal(self.q_scale, q_scale)
                and torch.equal(self.kv_last_page_len, _page_lens(kv_indptr)))

    def _choose_quantizer(self, q, kv_indptr):
        """First run: quantize_q_fp8 must give the twin's results on q8_edge_case and this Q, else the twin (warned)."""
        try:
            ok = all(self._triton_matches_twin(case, kv_indptr) for case in (q8_edge_case(self.batch, self.device), q))
            why = "its bytes differ from torch's"
        except KernelLaunchError as exc:
            ok, why = False, str(exc)[:300]
        self.quantizer = "triton" if ok else "torch"
        if not ok:
            _warn_once(("q8", self.device), f"the Triton fp8 quantization of Q for aiter failed ({why}); "
                                            "quantizing in torch (8 launches more per call)")

    def run(self, q, kv8, kv_scale, qo_indptr, kv_indptr, sm_scale):
        rebuild = not self._metadata_current(kv_indptr)
        if self.quantizer is None:
            self._choose_quantizer(q, kv_indptr)
        if self.quantizer == "triton":  # also writes kv_last_page_len
            quantize_q_fp8(q, kv_indptr, self.q8, self.q_scale, self.kv_last_page_len, self.q8_partials)
            q8, q_scale = self.q8, self.q_scale
        else:
            q8, q_scale = _quantize_fp8_per_tensor(q, self.q_dtype)
            if rebuild:
                self.kv_last_page_len = _page_lens(kv_indptr)
        if rebuild:
            with _marked(AITER_NAMES["metadata_fill"], self.device):
                _checked_call(
                    self.api, "metadata_fill", self.checked, qo_indptr, kv_indptr, self.kv_last_page_len, NUM_HEADS, 1,
                    True, self.work_meta_data, self.work_info_set, self.work_indptr, self.reduce_indptr,
                    self.reduce_final_map, self.reduce_partial_map, page_size=1, kv_granularity=16, max_seqlen_qo=1,
                    uni_seqlen_qo=1, fast_mode=False, max_split_per_batch=AITER_NUM_KV_SPLITS, intra_batch_mode=True,
                    dtype_q=self.q_dtype, dtype_kv=self.kv_dtype)
            self.built_from = (weakref.ref(kv_indptr), kv_indptr._version)
        out = torch.empty((self.batch, NUM_HEADS, V_HEAD_DIM), dtype=torch.bfloat16, device=self.device)
        with _marked(AITER_NAMES["mla_decode_fwd"], self.device):
            _checked_call(
                self.api, "mla_decode_fwd", self.checked, q8, kv8.view(kv8.shape[0], 1, 1, QK_HEAD_DIM), out, qo_indptr,
                kv_indptr, self.kv_indices, self.kv_last_page_len, 1, page_size=1, nhead_kv=1, sm_scale=sm_scale,
                logit_cap=0.0, num_kv_splits=AITER_NUM_KV_SPLITS, q_scale=q_scale, kv_scale=kv_scale,
                intra_batch_mode=True, work_meta_data=self.work_meta_data, work_indptr=self.work_indptr,
                work_info_set=self.work_info_set, reduce_indptr=self.reduce_indptr,
                reduce_final_map=self.reduce_final_map, reduce_partial_map=self.reduce_partial_map)
        return out


# --- a plan's first run: each variant against float32 attention before its first use ------------------------
def self_check(variant, num_splits, like, sm_scale, dims):
    """None when `variant` at `num_splits` (`dims` per combine program) is right on _synthetic_case(like), launched
    as the plan will (the same binary), else what disagreed; KernelLaunchError if it fails to build or launch."""
    q, packed, scales, qo_indptr, kv_indptr = _synthetic_case(variant.block_n, num_splits, like)
    batch = q.shape[0]
    out = torch.empty((batch, NUM_HEADS, V_HEAD_DIM), dtype=torch.bfloat16, device=q.device)
    scratch = make_scratch(batch, num_splits, q.device, [variant])
    _attention(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, sm_scale, dims,
               Q_BYTES_CHECKED)
    return check_output(variant, q, packed, scales, kv_indptr, out, scratch, sm_scale, list(range(batch)))


def check_output(variant, q, packed, scales, kv_indptr, out, scratch, sm_scale, sequences):
    """None when `out` is within SELF_CHECK_ATOL + SELF_CHECK_RTOL * |exact| of float32 attention on `sequences` (NaN
    where exact is; SCALED: its e4m3 Q, bytes quantize_q_reference's), else a line saying what disagreed."""
    index = torch.tensor(sequences, device=q.device)
    q_rows = q.index_select(0, index)
    if variant.scores != BF16_SCORES:
        q8, qs, q_rows = quantize_q_reference(q_rows)
        written_q8 = scratch.q8.view(-1, NUM_HEADS, QK_HEAD_DIM).index_select(0, index)
        written_qs = scratch.qs.view(-1, NUM_HEADS, SCALE_COLS).index_select(0, index)
        if not (torch.equal(written_q8, q8) and torch.equal(written_qs, qs)):
            return "its e4m3 Q bytes differ from quantize_q_reference's"
    exact = _exact_attention(q_rows, packed, scales, kv_indptr, sm_scale, sequences)
    got = out.index_select(0, index).float()
    error = (got - exact).abs()
    bad = ~(error <= SELF_CHECK_ATOL + SELF_CHECK_RTOL * exact.abs()) & ~(exact.isnan() & got.isnan())
    if bool(bad.any()):
        return (f"{int(bad.sum())} of {bad.numel()} elements outside {SELF_CHECK_ATOL} + {SELF_CHECK_RTOL} |exact| "
                f"(max error {float(error.nan_to_num(float('inf')).max()):.3g})")
    return None


SELF_CHECK_ATOL, SELF_CHECK_RTOL = 8e-3, 2e-2  # per element, against float32 attention
REAL_CHECK_SEQUENCES = 8  # sequences of a first call's real input each new variant is checked on


def check_sample(batch):
    """The sequences a first call's output is checked on: up to REAL_CHECK_SEQUENCES, spread evenly, ends included."""
    if batch <= REAL_CHECK_SEQUENCES:
        return list(range(batch))
    return sorted({round(i * (batch - 1) / (REAL_CHECK_SEQUENCES - 1)) for i in range(REAL_CHECK_SEQUENCES)})


def _synthetic_case(block_n, num_splits, like):
    """The MXFP4 input a variant is checked on first, laid out like `like` (the call's q, packed, scales): every code,
    uneven scales, a partial tile, a key that forces ONCE's second pass, full-width scale rows (docs/design.md)."""
    gen = torch.Generator(device="cpu").manual_seed(20261130)
    lengths = (2 * block_n + 5, 2 * block_n + 5, 2 * max(num_splits, 1) * block_n)
    bounds = [sum(lengths[:count]) for count in range(len(lengths) + 1)]
    packed = torch.randint(0, 256, (bounds[-1], 1, PACKED_ROW_BYTES), dtype=torch.uint8, generator=gen)
    scales = torch.randint(123, 128, (bounds[-1], SCALE_COLS), dtype=torch.uint8, generator=gen)
    q = torch.randn((len(lengths), NUM_HEADS, QK_HEAD_DIM), generator=gen).to(torch.bfloat16)
    aligned = bounds[2] + block_n + 7  # sequence 2, split 0's second tile
    signs = (q[2, 0] < 0).to(torch.uint8) * 8 + 7  # e2m1 code of -6 or +6 per dim
    packed[aligned, 0] = signs[0::2] | (signs[1::2] << 4)
    scales[aligned] = 127
    q_like, packed_like, scales_like = like
    device = q_like.device
    kv_indptr = torch.tensor(bounds, dtype=torch.int32, device=device)
    scales = torch.nn.functional.pad(scales, (0, scales_like.shape[1] - SCALE_COLS))
    return (_laid_out_like(q, q_like), _laid_out_like(packed, packed_like), _laid_out_like(scales, scales_like),
            torch.arange(len(lengths) + 1, dtype=torch.int32, device=device), kv_indptr)


def _laid_out_like(values, template):
    """`values` (CPU) on template's device, strides and address modulo 16: a launch on it runs template's binary."""
    storage_elements = 1 + sum((size - 1) * stride for size, stride in zip(values.shape, template.stride()))
    offset = template.data_ptr() % 16 // values.element_size()  # the same address modulo 16
    storage = torch.zeros(storage_elements + offset, dtype=values.dtype, device=template.device)
    view = storage.as_strided(values.shape, template.stride(), offset)
    view.copy_(values.to(template.device))
    return view


E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def _exact_attention(q_rows, packed, scales, kv_indptr, sm_scale, sequences):
    """float32 attention on the dequantized cache for `sequences` (q_rows: their Q (S, 16, 576)) -> (S, 16, 512)."""
    bounds = kv_indptr.tolist()
    table = torch.tensor(E2M1_VALUES, device=packed.device)
    codes_per_row = packed.reshape(packed.shape[0], PACKED_ROW_BYTES)
    out = torch.empty((len(sequences), NUM_HEADS, V_HEAD_DIM), dtype=torch.float32, device=q_rows.device)
    for index, seq in enumerate(sequences):
        rows = codes_per_row[bounds[seq]:bounds[seq + 1]]
        codes = torch.stack((rows & 0xF, rows >> 4), dim=-1).reshape(rows.shape[0], QK_HEAD_DIM).long()
        block_scale = torch.exp2(scales[bounds[seq]:bounds[seq + 1], :SCALE_COLS].float() - 127.0)
        keys = table[codes] * block_scale.repeat_interleave(32, dim=1)
        probs = torch.softmax(q_rows[index].float() @ keys.T * sm_scale, dim=-1)
        out[index] = probs @ keys[:, :V_HEAD_DIM]
    return out


def quantize_q_reference(q):
    """Torch twin of _quantize_e4m3_blocks -> (q8, qs: the kernel's bytes, bit for bit; dequantized Q float32)."""
    batch = q.shape[0]
    blocks = q.float().reshape(batch, NUM_HEADS, SCALE_COLS, 32)
    bits = blocks.abs().amax(dim=-1).contiguous().view(torch.int32)
    exponent = (((bits >> 23) & 0xFF) - 127 - 8 + ((bits & 0x7FFFFF) > 0x600000).to(torch.int32)).clamp(-126, 127)
    q8 = (blocks * torch.exp2(-exponent.float())[..., None]).to(torch.float8_e4m3fn)
    dequantized = q8.float() * torch.exp2(exponent.float())[..., None]
    return (q8.view(torch.uint8).reshape(batch, NUM_HEADS, QK_HEAD_DIM), (exponent + 127).to(torch.uint8),
            dequantized.reshape(batch, NUM_HEADS, QK_HEAD_DIM))


# --- the launches: the host side of every kernel ------------------------------------------------------------
# The split kernels' q_bytes_split (not specialized: one binary): split 0 of a checked call (a plan's first run, a
# self-check) writes Q's e4m3 bytes for check_output; a timed call (run's replays) writes none.
Q_BYTES_CHECKED, Q_BYTES_TIMED = 0, -1


def _attention(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, sm_scale, dims,
               q_bytes_split):
    """One call in one variant (packed / scales: uint8 views): the split kernel, then for MERGE_COMBINE the combine;
    q_bytes_split: Q_BYTES_CHECKED or Q_BYTES_TIMED."""
    batch = out.shape[0]
    qk_scale_log2 = sm_scale * LOG2E * 2.0 ** (0 if variant.scores != BF16_SCORES else LOG2_SHIFT[variant.convert])
    value_scale = 2.0 ** LOG2_SHIFT[variant.convert]
    if variant.gluon:
        _launch_gluon(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2,
                      q_bytes_split)
    else:
        _launch_triton(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2,
                       value_scale, q_bytes_split)
    if variant.merge == MERGE_COMBINE:
        _launch_kernel(_mla_combine_kernel, (batch, NUM_HEADS, V_HEAD_DIM // dims),
                       (out, scratch.part_acc, scratch.part_ml, num_splits, qk_scale_log2, value_scale),
                       dict(CHUNK=min(num_splits, COMBINE_MAX_CHUNK), DIMS=dims, num_warps=4), variant.describe())


def _launch_gluon(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2,
                  q_bytes_split):
    """The ONCE family's Gluon split kernel (gluon_layout_problem must be None for these tensors)."""
    _launch_kernel(
        _gluon_split_kernel, (num_splits, out.shape[0]),
        (q, packed, scales, qo_indptr, kv_indptr, out, scratch.part_acc, scratch.part_ml, scratch.count, scratch.q8,
         scratch.qs, q_bytes_split, packed.shape[0], num_splits, q.stride(0), q.stride(1),
         packed.stride(0), scales.stride(0) // WORD_BYTES, qk_scale_log2),
        dict(BLOCK_N=variant.block_n, MERGE=variant.merge, num_warps=variant.num_warps), variant.describe())


def gluon_layout_problem(q, packed, scales, batch, num_splits):
    """None when the Gluon kernel can read these tensors (uint8 views; attribute reads only), else why not."""
    total_kv = packed.shape[0]
    if packed.data_ptr() % 16 or packed.stride(0) % 16 or scales.data_ptr() % 16:
        return "the MXFP4 codes or scales are not 16-byte aligned"
    if scales.stride(0) % WORD_BYTES or scales.stride(0) < 20:
        return f"scale rows of {scales.stride(0)} bytes (whole int32 words, at least 20, are copied)"
    scale_bytes = _storage_bytes(scales)
    if total_kv and (total_kv - 1) * scales.stride(0) + 20 > scale_bytes:
        return "the scale buffer ends inside its last row's 20 bytes"
    sizes = (_storage_bytes(packed), scale_bytes, _storage_bytes(q),
             batch * max(num_splits, 1) * NUM_HEADS * V_HEAD_DIM * 4)
    if max(sizes) >= GLUON_INT32_BYTES:
        return "a buffer of 2 GB or more (32-bit buffer offsets)"
    return None


def _storage_bytes(tensor):
    """Bytes of tensor's storage from its first element on (what a buffer at its address holds)."""
    return tensor.untyped_storage().nbytes() - tensor.storage_offset() * tensor.element_size()


def _launch_triton(variant, num_splits, q, packed, scales, qo_indptr, kv_indptr, out, scratch, qk_scale_log2,
                   value_scale, q_bytes_split):
    """The standard-Triton split kernel of `variant`'s family in `variant`'s form."""
    shared = (qo_indptr, kv_indptr, out, scratch.part_acc, scratch.part_ml, scratch.count)
    sizes = (packed.shape[0], num_splits, q.stride(0), q.stride(1), packed.stride(0), scales.stride(0),
             qk_scale_log2, value_scale)
    constants = dict(BLOCK_N=variant.block_n, CONVERT=variant.convert, SPLIT_TAIL=variant.split_tail,
                     MERGE=variant.merge, WAVE_FENCES=variant.wave_fences, **fused_merge_constants(variant),
                     num_warps=variant.num_warps, num_stages=variant.num_stages)
    if variant.scores == SCALED_SCORES:
        kernel, args = _scaled_split_kernel, (q, packed, packed.view(torch.int32), scales, *shared, scratch.q8,
                                              scratch.qs, q_bytes_split, *sizes)
        constants["EARLY_TILE"] = variant.early_tile
    else:
        kernel, args = _bf16_split_kernel, (q, packed, scales, *shared, *sizes)
        constants["PIN"] = variant.pin
    _launch_kernel(kernel, (num_splits, out.shape[0]), args, constants, variant.describe())


def fused_merge_constants(variant):
    """The FUSED merge's pass of the variant's warps (FUSED_MERGE_PASS) as the split kernels' MERGE_HEADS and
    MERGE_SPLITS (passed to every form: an ahead-of-time build with Triton 3.9 fails on a defaulted constexpr)."""
    heads, splits = FUSED_MERGE_PASS.get(variant.num_warps, (4, 1))
    return {"MERGE_HEADS": heads, "MERGE_SPLITS": splits}


# --- Q to fp8 per tensor, in one or two Triton launches: the reference's torch bf16 arithmetic, bit for bit ---
#   amax  = max |q|                                      exact
#   scale = bf16(max(amax, bf16(1e-12)) / 448)           float32 division rounded to bf16
#   q8    = e4m3(clamp(bf16(q / scale), -448, 448))      float32 division -> bf16 -> e4m3, RNE
# (its twin: _quantize_fp8_per_tensor, 8 launches; why 1 or 2 launches, and the rounding: docs/design.md)
Q8_ONE_PASS, Q8_AMAX, Q8_QUANTIZE = tl.constexpr(0), tl.constexpr(1), tl.constexpr(2)  # the kernel's PHASE
Q8_ROWS = 16  # (token, head) rows per program in the two-launch form: one token's heads
Q8_ONE_PASS_MAX_ROWS = 64  # one program quantizes all of Q up to batch 4
Q8_WARPS = {Q8_ONE_PASS: 8, Q8_AMAX: 4, Q8_QUANTIZE: 4}
Q8_PARTIALS_BLOCK = tl.constexpr(256)  # block maxima reduced per step (one step up to batch 256)
Q8_AMAX_FLOOR = tl.constexpr(float(torch.tensor(1e-12, dtype=torch.bfloat16)))  # clamp(min=1e-12) of bf16 Q
E4M3_MAX = tl.constexpr(448.0)  # e4m3fn's largest finite value


def quantize_q_fp8(q, kv_indptr, q8, q_scale, page_len, partials):
    """Q (batch, 16, 576) bf16 (unit last stride) -> in place: q8, q_scale (_quantize_fp8_per_tensor's bit for bit),
    page_len; partials: float32 scratch of >= batch elements."""
    batch = q.shape[0]
    for phase, rows, programs, num_warps in q8_launches(batch):
        _launch_kernel(_q_fp8_kernel, (programs,),
                       (q, kv_indptr, partials, q8.view(torch.uint8), q_scale, page_len, batch, programs,
                        q.stride(0), q.stride(1)), dict(ROWS=rows, PHASE=phase, num_warps=num_warps),
                       f"the aiter path's fp8 quantization of Q (phase {int(phase)})")


def q8_launches(batch):
    """[(PHASE, ROWS, programs, num_warps)]: the launches that quantize a Q of `batch` tokens."""
    rows = batch * NUM_HEADS
    if rows <= Q8_ONE_PASS_MAX_ROWS:
        return [(Q8_ONE_PASS, triton.next_power_of_2(rows), 1, Q8_WARPS[Q8_ONE_PASS])]
    programs = triton.cdiv(rows, Q8_ROWS)
    return [(phase, Q8_ROWS, programs, Q8_WARPS[phase]) for phase in (Q8_AMAX, Q8_QUANTIZE)]


def make_scratch(batch, num_splits, device, variants):
    """The buffers every variant in `variants` may use."""
    merges = {variant.merge for variant in variants}
    parts = batch * num_splits if merges - {MERGE_DIRECT} else 1
    scaled = any(variant.scores != BF16_SCORES for variant in variants)

    def buffer(count, dtype, wanted):
        return torch.zeros(count if wanted else 1, dtype=dtype, device=device)
    return Scratch(buffer(parts * NUM_HEADS * V_HEAD_DIM, torch.float32, True),
                   buffer(parts * 2 * NUM_HEADS, torch.float32, True),
                   buffer(batch, torch.int32, MERGE_FUSED in merges),
                   buffer(batch * NUM_HEADS * QK_HEAD_DIM, torch.uint8, scaled),
                   buffer(batch * NUM_HEADS * SCALE_COLS, torch.uint8, scaled))


class Scratch(NamedTuple):
    """A plan's device buffers (one element when unused): partials, FUSED's counters (zeroed), SCALED/ONCE Q bytes."""
    part_acc: torch.Tensor  # (batch, num_splits, 16, 512) float32
    part_ml: torch.Tensor  # (batch, num_splits, 2, 16) float32
    count: torch.Tensor  # (batch,) int32
    q8: torch.Tensor  # (batch, 16, 576) uint8 (e4m3)
    qs: torch.Tensor  # (batch, 16, 18) uint8 (e8m0)


def combine_dims(batch, num_sms):
    """Output dims per combine program (a constexpr: fixed by the plan's batch, its self-check's too)."""
    return V_HEAD_DIM if batch * NUM_HEADS >= num_sms else COMBINE_DIMS_SPLIT


def _launch_kernel(kernel, grid, args, constants, what):
    """kernel[grid](*args, **constants); `what` names the variant in errors. Triton's, its toolchain's and runtime
    errors become KernelLaunchError (fall back); out of memory, a faulted device and host-side bugs propagate."""
    try:
        if STATE.launch_marks is None and STATE.recording is None:
            kernel[grid](*args, **constants)
        else:
            _launch_observed(kernel, grid, args, constants, what)
    except torch.OutOfMemoryError as exc:
        raise torch.OutOfMemoryError(f"custom_kernel: out of device memory launching {what}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - sorted: only a failure to build or launch falls back
        ours = not isinstance(exc, (triton.errors.TritonError, RuntimeError)) and not _raised_by_toolchain(exc)
        if ours:
            raise
        device = args[0].device
        if _device_faulted(device):
            raise RuntimeError(f"custom_kernel: the device faulted launching {what}: {exc}") from exc
        raise KernelLaunchError(f"{what}: {type(exc).__name__}: {exc}") from exc


def _launch_observed(kernel, grid, args, constants, what):
    """kernel[grid](*args, **constants), appended to STATE.recording (a list: a plan's first run) and between
    events appended to STATE.launch_marks (a list: kernel_times_us)."""
    if STATE.recording is not None:
        STATE.recording.append((kernel, grid, args, constants, what))
    with _marked(STATE.launch_marks is not None and _kernel_name(kernel), args[0].device):
        kernel[grid](*args, **constants)


@contextlib.contextmanager
def _marked(name, device):
    """Appends (name, start, end) events around the block to STATE.launch_marks when it is a list."""
    marks = STATE.launch_marks
    if marks is None:
        yield
        return
    start, end = _event(device), _event(device)
    start.record()
    yield
    end.record()
    marks.append((name, start, end))


def _kernel_name(kernel):
    """A kernel's name for the report (a jit function's, the interpreter's, a stand-in's)."""
    return (getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", None)
            or type(kernel).__name__)


# =======================================================================================
# 2. The gfx950 split kernel in Gluon (ONCE family): the raw tile copied to LDS once, read as K and V
# =======================================================================================

# One program per (split, sequence), grid (num_splits, batch), 4 warps, 128-token tiles; SCALED's partials/outputs.
# LDS ring of 3 tiles (44 KB each: one workgroup per CU): codes (128, 256) B, rope (128, 64) B (32 used), scales
# (128, 8) words (0..4 used); row t's units XOR-permuted by t (GL_*_ROW_XOR): no bank conflicts (docs/design.md).
# Stage by iteration (_gl_tiles; slot: tile mod 3; one s_barrier an iteration). Before the loop: copy tiles 0, 1;
# Q -> e4m3 in registers. Iteration i:
#
#   i | wait for  | copy global -> LDS | S = mfma_scaled(Q, K e2m1) | softmax, per warp | V: words -> bf16 -> MFMA
#   --+-----------+--------------------+----------------------------+-------------------+-------------------------
#   0 | tile 0    | tile 2 -> slot 2   | tile 0 (slot 0)            | tile 0            | tile 0 (slot 0)
#   1 | tile 1    | tile 3 -> slot 0   | tile 1 (slot 1)            | tile 1            | tile 1 (slot 1)
#   i | tile i    | tile i+2 -> (i+2)%3| tile i (slot i%3)          | tile i            | tile i (slot i%3)
#
# (wait_group(1): tile i + 1's copy stays in flight while tile i is read.)
# Warp w owns tokens 16w + j, 64 + 16w + j (j < 16) with its own m, l, 16 x 512 accumulator (merged after the
# loop); p against the first valid tile's maximum (no rescale), all tiles again from the true maximum past
# 2^ONCE_OVERFLOW_LOG2 (twin: tests/once_twin.py). Every global access is a buffer op (out of range: zeros).
GL_BLOCK_N = 128
GL_NUM_WARPS = 4
GLUON_INT32_BYTES = 1 << 31  # buffer offsets are 32-bit: every tensor the Gluon kernel reads or writes is smaller
GL_OUT_DIMS = tl.constexpr(128)  # output dims per accumulator chunk (4 chunks: word q of each 16-byte block)
# Row t's unit u (16 B codes, 16 B rope, 8 B scales) is stored at u ^ xor(t), xor(t) = XOR of ROW_XOR[i] over
# the set bits i of t mod 16: no read conflicts in any bank model of tools/lds_banks.py. *_PACKED: 4 bits an entry.
GL_CODE_ROW_XOR = (2, 4, 8, 1)  # xor(t) = t rotated left by 1 in 4 bits
GL_ROPE_ROW_XOR = (0, 1, 2, 1)
GL_SCALE_ROW_XOR = (0, 0, 1, 2, 0, 0, 2)  # the V scales' transposing read pairs rows t and t + 64
GL_CODE_ROW_XOR_PACKED, GL_ROPE_ROW_XOR_PACKED, GL_SCALE_ROW_XOR_PACKED = (
    tl.constexpr(sum(entry << (4 * index) for index, entry in enumerate(table)))
    for table in (GL_CODE_ROW_XOR, GL_ROPE_ROW_XOR, GL_SCALE_ROW_XOR))
GL_MERGE_SPLITS = tl.constexpr(4)  # splits the FUSED merge loads at once (4 x 32 floats per lane)
GL_SCALE_WORDS = tl.constexpr(5)  # the words of a scale row the kernel reads (its 18 bytes)
# FUSED's release in wave 0 only (first lane's index $2 is 0 there); other waves branch over it ($1: an SGPR).
GL_RELEASE_IN_WAVE_0 = tl.constexpr("""
        v_readfirstlane_b32 $1, $2
        s_cmp_lg_u32 $1, 0
        s_cbranch_scc1 .Lmla_release_done_${:uid}
        buffer_wbl2 sc1
        s_waitcnt vmcnt(0)
    .Lmla_release_done_${:uid}:
        """)


def _row_swizzled_bases(unit_elements, units, rows, row_xor):
    """SharedLinearLayout bases (offset bit -> logical (row, column)) of a (rows, units x unit_elements) tile whose
    row t's unit u is stored at u ^ xor(t) (row_xor)."""
    bases = [[0, 1 << bit] for bit in range(unit_elements.bit_length() - 1)]
    bases += [[0, unit_elements << bit] for bit in range(units.bit_length() - 1)]
    return bases + [[1 << bit, unit_elements * (row_xor[bit] if bit < len(row_xor) else 0)]
                    for bit in range(rows.bit_length() - 1)]


if gl is not None:
    # the copies' layouts (a copy instruction has one LDS address per warp): codes, rope 16 B a lane, scales 4 B
    GL_CODE_L = gl.constexpr(gl.BlockedLayout([1, 16], [4, 16], [4, 1], [1, 0]))
    GL_ROPE_L = gl.constexpr(gl.BlockedLayout([1, 16], [16, 4], [4, 1], [1, 0]))
    GL_SCALE_L = gl.constexpr(gl.BlockedLayout([1, 1], [8, 8], [4, 1], [1, 0]))
    # scores (16 heads x 128 tokens, warp w: tokens 16w + j, 64 + 16w + j), values (batched over the warps)
    GL_MMA_S = gl.constexpr(gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 128], transposed=True,
                                                 warps_per_cta=[1, 4]))
    GL_MMA_V = gl.constexpr(gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True,
                                                 warps_per_cta=[4, 1, 1]))
    GL_Q_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=GL_MMA_S.value, k_width=16))
    GL_K_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=GL_MMA_S.value, k_width=16))
    GL_P_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=GL_MMA_V.value, k_width=8))
    GL_V_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=GL_MMA_V.value, k_width=8))
    # the V read: a lane holds 8 tokens (64h + 16w + 4g + r: registers r, h; lanes c, g; warps w) x block c
    GL_V_READ = gl.constexpr(gl.DistributedLinearLayout(
        reg_bases=[[1, 0], [2, 0], [64, 0]], lane_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [4, 0], [8, 0]],
        warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[GL_BLOCK_N, 16]))
    GL_ROW = gl.constexpr(gl.SliceLayout(2, GL_MMA_V.value))  # per (warp, head)
    # the ring (flat), its views undoing the row permutation; GL_V_WORDS (t, 16q + c): word q of block c of row t
    GL_FLAT = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))
    GL_K_CODES, GL_K_ROPE, GL_SCALE_BYTES = (
        gl.constexpr(gl.SharedLinearLayout(offset_bases=_row_swizzled_bases(unit, units, GL_BLOCK_N, table)))
        for unit, units, table in ((16, 16, GL_CODE_ROW_XOR), (16, 4, GL_ROPE_ROW_XOR), (8, 4, GL_SCALE_ROW_XOR)))
    GL_V_WORDS = gl.constexpr(gl.SharedLinearLayout(offset_bases=[[0, 16], [0, 32], [0, 1], [0, 2], [0, 4], [0, 8]] + [
        [1 << bit, GL_CODE_ROW_XOR[bit] if bit < len(GL_CODE_ROW_XOR) else 0] for bit in range(7)]))
    # the V read: whole 16-byte blocks, its 4 words in 4 registers (GL_V_READ's lanes and warps)
    GL_V_BLOCKS = gl.constexpr(gl.DistributedLinearLayout(
        reg_bases=[[0, 16], [0, 32], [1, 0], [2, 0], [64, 0]],
        lane_bases=[[0, 1], [0, 2], [0, 4], [0, 8], [4, 0], [8, 0]],
        warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[GL_BLOCK_N, 64]))
    GL_PUBLIC_REINTERPRET = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))  # 3.6: _reinterpret
    _gl_workgroup_barrier = gl.thread_barrier if hasattr(gl, "thread_barrier") else gl.barrier  # 3.6 / 3.7+

    @gluon.jit(do_not_specialize=["total_kv", "num_splits", "q_bytes_split"])
    def _gluon_split_kernel(
        q_ptr, kv_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr, q8_ptr,
        qs_ptr, q_bytes_split, total_kv, num_splits, q_row_stride, q_head_stride, kv_row_stride, scale_row_words,
        qk_scale_log2,
        BLOCK_N: gl.constexpr, MERGE: gl.constexpr,
    ):
        """The SCALED kernel's program (same arguments and results) in the data flow drawn above; scale_ptr: the
        e8m0 bytes in 4-byte aligned rows of scale_row_words int32 words (>= 5; the kernel reads words 0-4)."""
        gl.static_assert(BLOCK_N == 128, "the warp-split layouts are written for 128-token tiles")
        split = gl.program_id(0)
        seq = gl.program_id(1)
        # Q's loads first, then the range, then the first two tiles' copies, then Q is quantized
        heads = gl.arange(0, NUM_HEADS_C, layout=gl.SliceLayout(1, GL_Q_A))
        q_rows = seq * q_row_stride + heads[:, None] * q_head_stride
        q_nope = gl.amd.cdna4.buffer_load(q_ptr, q_rows + gl.arange(0, V_DIM_C, layout=gl.SliceLayout(0, GL_Q_A))[None, :])
        rope_dims = gl.arange(0, 2 * ROPE_PAD_BYTES_C, layout=gl.SliceLayout(0, GL_Q_A))[None, :]
        q_rope = gl.amd.cdna4.buffer_load(q_ptr, q_rows + V_DIM_C + rope_dims, mask=rope_dims < ROPE_C, other=0.0)
        kv_start, kv_end = _gl_pair(kv_indptr_ptr, seq)
        qo_start, qo_end = _gl_pair(qo_indptr_ptr, seq)
        range_ok, lo, hi = _split_bounds(kv_start, kv_end, (qo_start == seq) & (qo_end == seq + 1), total_kv, split,
                                         num_splits, BLOCK_N)
        rows_end = gl.minimum(hi, total_kv)

        codes = gl.allocate_shared_memory(gl.uint8, [3, BLOCK_N, 256], GL_FLAT)
        rope = gl.allocate_shared_memory(gl.uint8, [3, BLOCK_N, ROPE_PAD_BYTES_C], GL_FLAT)
        scales = gl.allocate_shared_memory(gl.int32, [3, BLOCK_N, 8], GL_FLAT)
        ring = (codes, rope, scales)
        views = (_gl_reinterpret(codes, gl.uint8, [3, BLOCK_N, 256], GL_K_CODES),
                 _gl_reinterpret(rope, gl.uint8, [3, BLOCK_N, ROPE_PAD_BYTES_C], GL_K_ROPE),
                 _gl_reinterpret(codes, gl.int32, [3, BLOCK_N, 64], GL_V_WORDS),
                 _gl_reinterpret(scales, gl.uint8, [3, BLOCK_N, 32], GL_SCALE_BYTES))
        scale_words_ptr = scale_ptr.to(gl.pointer_type(gl.int32))
        offsets = _gl_copy_offsets(kv_row_stride, scale_row_words, BLOCK_N)
        _gl_copy_tile(ring, 0, kv_ptr, scale_words_ptr, offsets, lo, rows_end, kv_row_stride, scale_row_words,
                      BLOCK_N)
        _gl_copy_tile(ring, 1, kv_ptr, scale_words_ptr, offsets, lo + BLOCK_N, rows_end, kv_row_stride,
                      scale_row_words, BLOCK_N)

        q8, qs = _quantize_e4m3_blocks(q_nope.to(gl.float32), NUM_HEADS_C, V_DIM_C // 32)
        q8r, qsr = _quantize_e4m3_blocks(q_rope.to(gl.float32), NUM_HEADS_C, 2 * ROPE_PAD_BYTES_C // 32)
        q8 = gl.convert_layout(q8, GL_Q_A)
        q8r = gl.convert_layout(q8r, GL_Q_A)
        qs = gl.convert_layout(qs, gl.amd.cdna4.get_mfma_scale_layout(GL_Q_A, [NUM_HEADS_C, V_DIM_C // 32]))
        qsr = gl.convert_layout(qsr, gl.amd.cdna4.get_mfma_scale_layout(GL_Q_A, [NUM_HEADS_C, 4]))
        if split == q_bytes_split:  # Q_BYTES_CHECKED: split 0 writes them; Q_BYTES_TIMED: none does
            _gl_store_q(q8, qs, q8r, qsr, q8_ptr, qs_ptr, seq)
        q_ops = (q8, qs, q8r, qsr)

        m_ref, m_true, l_i, accs = _gl_tiles(
            gl.full([4, NUM_HEADS_C], float("-inf"), gl.float32, gl.SliceLayout(2, GL_MMA_V)), q_ops, ring, views,
            kv_ptr, scale_words_ptr, offsets, lo, hi, rows_end, kv_row_stride, scale_row_words, qk_scale_log2, BLOCK_N)
        known = m_ref != float("-inf")
        gap = gl.where(known, (m_true - gl.where(known, m_ref, 0.0)) * qk_scale_log2, 0.0)
        if gl.max(gl.max(gap, axis=1), axis=0) > ONCE_OVERFLOW_LOG2_C:  # again, from the true maximum
            _gl_copy_tile(ring, 0, kv_ptr, scale_words_ptr, offsets, lo, rows_end, kv_row_stride, scale_row_words,
                          BLOCK_N)
            _gl_copy_tile(ring, 1, kv_ptr, scale_words_ptr, offsets, lo + BLOCK_N, rows_end, kv_row_stride,
                          scale_row_words, BLOCK_N)
            m_ref, m_true, l_i, accs = _gl_tiles(m_true, q_ops, ring, views, kv_ptr, scale_words_ptr, offsets, lo, hi,
                                                 rows_end, kv_row_stride, scale_row_words, qk_scale_log2, BLOCK_N)
        _gl_write(m_ref, l_i, accs, range_ok, seq, split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr,
                  count_ptr, qk_scale_log2, MERGE)

    @gluon.jit
    def _gl_reinterpret(desc, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
        if GL_PUBLIC_REINTERPRET:
            view = desc.reinterpret(dtype, shape, layout)
        else:
            view = desc._reinterpret(dtype, shape, layout)
        return view

    @gluon.jit
    def _gl_pair(ptr, first):
        """(ptr[first], ptr[first + 1]) of an int32 array, one buffer load."""
        idx = gl.arange(0, 2, layout=gl.BlockedLayout([2], [64], [4], [0]))
        both = gl.amd.cdna4.buffer_load(ptr, first + idx)
        return gl.sum(gl.where(idx == 0, both, 0), axis=0), gl.sum(gl.where(idx == 1, both, 0), axis=0)

    @gluon.jit
    def _gl_copy_offsets(kv_row_stride, scale_row_words, BLOCK_N: gl.constexpr):
        """(codes, rope, scales) copy offsets from a tile's first row, each position fetching its permuted unit, and
        which rope and scale positions are the row's own (32 rope bytes, 5 scale words): the rest (K's padding, words
        never read) copy zeros, so no copy reads past the row (nor, on the last row, past the buffer)."""
        rows, columns = _gl_source_columns(GL_CODE_L, BLOCK_N, 256, 16, GL_CODE_ROW_XOR_PACKED)
        code_offs = rows * kv_row_stride + columns
        rows, columns = _gl_source_columns(GL_ROPE_L, BLOCK_N, ROPE_PAD_BYTES_C, 16, GL_ROPE_ROW_XOR_PACKED)
        rope_offs = rows * kv_row_stride + 256 + columns
        rope_in_row = columns < ROPE_C // 2
        rows, columns = _gl_source_columns(GL_SCALE_L, BLOCK_N, 8, 2, GL_SCALE_ROW_XOR_PACKED)  # words, 8 B units
        scale_offs = rows * scale_row_words + columns
        scale_in_row = columns < GL_SCALE_WORDS
        return code_offs, rope_offs, scale_offs, rope_in_row, scale_in_row

    @gluon.jit
    def _gl_source_columns(layout: gl.constexpr, BLOCK_N: gl.constexpr, COLUMNS: gl.constexpr, UNIT: gl.constexpr,
                           TABLE: gl.constexpr):
        """(rows (BLOCK_N, 1), source columns (BLOCK_N, COLUMNS)): (t, u UNIT + e) holds (u ^ xor(t)) UNIT + e."""
        rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, layout))[:, None]
        columns = gl.arange(0, COLUMNS, layout=gl.SliceLayout(0, layout))[None, :]
        return rows, ((columns // UNIT) ^ _gl_row_xor(rows, TABLE)) * UNIT + columns % UNIT

    @gluon.jit
    def _gl_row_xor(rows, TABLE: gl.constexpr):
        """xor(t) of a GL_*_ROW_XOR_PACKED table for rows t < 128."""
        found = (rows & 1) * (TABLE & 15)
        for bit in gl.static_range(1, 7):
            found = found ^ (((rows >> bit) & 1) * ((TABLE >> (4 * bit)) & 15))
        return found

    @gluon.jit
    def _gl_tiles(m_ref, q_ops, ring, views, kv_ptr, scale_ptr, offsets, lo, hi, rows_end, kv_row_stride,
                  scale_row_words, qk_scale_log2, BLOCK_N: gl.constexpr):
        """Tiles [lo, hi) (0 and 1 copied) -> per warp and head m_ref, m_true, l (4, 16); 4 acc chunks (4, 16, 128)."""
        ks_l: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(GL_K_B, [BLOCK_N, 16])
        ksr_l: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(GL_K_B, [BLOCK_N, 4])
        q8, qs, q8r, qsr = q_ops
        k_codes, k_rope, v_words, scale_bytes = views
        rope_block = gl.arange(0, 4, layout=gl.SliceLayout(0, ksr_l))
        m_true = gl.full([4, NUM_HEADS_C], float("-inf"), gl.float32, GL_ROW)
        l_i = gl.zeros([4, NUM_HEADS_C], gl.float32, GL_ROW)
        acc0 = gl.zeros([4, NUM_HEADS_C, GL_OUT_DIMS], gl.float32, GL_MMA_V)
        acc1 = gl.zeros([4, NUM_HEADS_C, GL_OUT_DIMS], gl.float32, GL_MMA_V)
        acc2 = gl.zeros([4, NUM_HEADS_C, GL_OUT_DIMS], gl.float32, GL_MMA_V)
        acc3 = gl.zeros([4, NUM_HEADS_C, GL_OUT_DIMS], gl.float32, GL_MMA_V)
        for i in range(gl.cdiv(gl.maximum(hi - lo, 0), BLOCK_N)):
            gl.amd.cdna4.async_copy.wait_group(1)
            _gl_copy_tile(ring, (i + 2) % 3, kv_ptr, scale_ptr, offsets, lo + (i + 2) * BLOCK_N, rows_end,
                          kv_row_stride, scale_row_words, BLOCK_N)
            slot = i % 3
            k = gl.amd.cdna4.async_copy.load_shared_relaxed(k_codes.index(slot).permute([1, 0]), GL_K_B)
            ks = gl.amd.cdna4.async_copy.load_shared_relaxed(scale_bytes.index(slot).slice(0, 16, 1), ks_l)
            kr = gl.amd.cdna4.async_copy.load_shared_relaxed(k_rope.index(slot).permute([1, 0]), GL_K_B)
            ksr = gl.amd.cdna4.async_copy.load_shared_relaxed(scale_bytes.index(slot).slice(16, 4, 1), ksr_l)
            ksr = gl.where((rope_block < ROPE_C // 32)[None, :], ksr, 127)  # padding blocks: scale 1
            s = gl.amd.cdna4.mfma_scaled(q8, qs, "e4m3", k, ks, "e2m1", gl.zeros([NUM_HEADS_C, BLOCK_N], gl.float32, GL_MMA_S))
            s = gl.amd.cdna4.mfma_scaled(q8r, qsr, "e4m3", kr, ksr, "e2m1", s)
            tokens = lo + i * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, GL_MMA_S))
            s = gl.where((tokens < hi)[None, :], s, float("-inf"))
            # (head, 64h + 16w + 4g + r) -> (w, head, 8g + 4h + r): the values' P operand, no data moved
            s = gl.reshape(gl.permute(gl.reshape(s, [NUM_HEADS_C, 2, 4, 4, 4]), [2, 0, 3, 1, 4]), [4, NUM_HEADS_C, 32])
            m_tile = gl.convert_layout(gl.max(s, axis=2), GL_ROW)
            m_true = gl.maximum(m_true, m_tile)
            m_ref = gl.where(m_ref == float("-inf"), m_tile, m_ref)
            m_use = gl.where(m_ref == float("-inf"), 0.0, m_ref) * qk_scale_log2
            p = gl.exp2(s * qk_scale_log2 - gl.expand_dims(gl.convert_layout(m_use, gl.SliceLayout(2, s.type.layout)), 2))
            l_i = l_i + gl.convert_layout(gl.sum(p, axis=2), GL_ROW)
            p = gl.convert_layout(p.to(gl.bfloat16), GL_P_A)
            vsc = gl.amd.cdna4.async_copy.load_shared_relaxed(scale_bytes.index(slot).slice(0, 16, 1), GL_V_READ)
            vscale = (vsc.to(gl.int32) << 23).to(gl.float32, bitcast=True)
            # the tile's words, whole 16-byte blocks per lane, then word q of each block for chunk q
            words = gl.amd.cdna4.async_copy.load_shared_relaxed(v_words.index(slot), GL_V_BLOCKS)
            words = gl.reshape(gl.permute(gl.reshape(words, [BLOCK_N, 2, 2, 16]), [0, 3, 1, 2]), [BLOCK_N, 16, 2, 2])
            even_q, odd_q = gl.split(words)
            words0, words2 = gl.split(even_q)
            words1, words3 = gl.split(odd_q)
            acc0 = _gl_values(words0, vscale, p, acc0)
            acc1 = _gl_values(words1, vscale, p, acc1)
            acc2 = _gl_values(words2, vscale, p, acc2)
            acc3 = _gl_values(words3, vscale, p, acc3)
        gl.amd.cdna4.async_copy.wait_group(0)  # the copies past the range still land in the ring
        return m_ref, m_true, l_i, (acc0, acc1, acc2, acc3)

    @gluon.jit
    def _gl_copy_tile(ring, slot, kv_ptr, scale_ptr, offsets, tile_start, rows_end, kv_row_stride, scale_row_words,
                      BLOCK_N: gl.constexpr):
        """Rows [tile_start, + BLOCK_N) into ring slot `slot`, async (one commit group); rows >= rows_end read 0."""
        codes, rope, scales = ring
        code_offs, rope_offs, scale_offs, rope_in_row, scale_in_row = offsets
        code_offs = code_offs + tile_start * kv_row_stride
        rope_offs = rope_offs + tile_start * kv_row_stride
        scale_offs = scale_offs + tile_start * scale_row_words
        valid = rows_end - tile_start
        if valid >= BLOCK_N:
            gl.amd.cdna4.async_copy.buffer_load_to_shared(codes.index(slot), kv_ptr, code_offs)
            gl.amd.cdna4.async_copy.buffer_load_to_shared(rope.index(slot), kv_ptr, rope_offs, mask=rope_in_row)
            gl.amd.cdna4.async_copy.buffer_load_to_shared(scales.index(slot), scale_ptr, scale_offs, mask=scale_in_row)
        else:
            rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, GL_CODE_L))
            gl.amd.cdna4.async_copy.buffer_load_to_shared(codes.index(slot), kv_ptr, code_offs,
                                                          mask=(rows < valid)[:, None])
            rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, GL_ROPE_L))
            gl.amd.cdna4.async_copy.buffer_load_to_shared(rope.index(slot), kv_ptr, rope_offs,
                                                          mask=(rows < valid)[:, None] & rope_in_row)
            rows = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, GL_SCALE_L))
            gl.amd.cdna4.async_copy.buffer_load_to_shared(scales.index(slot), scale_ptr, scale_offs,
                                                          mask=(rows < valid)[:, None] & scale_in_row)
        gl.amd.cdna4.async_copy.commit_group()

    @gluon.jit
    def _gl_values(words, vscale, p, acc):
        """acc (4, 16, 128) += p (4, 16, 32) @ V, V converted here from words (128 tokens, 16 blocks) int32: word q
        of each block (dims 32c + 8q .. + 7), vscale its token's block scale as a float32 exponent field.
        Column n' = nibble * 64 + byte * 16 + c of acc holds dim 32c + 8q + 2 byte + nibble (_gl_write undoes it)."""
        words = gl.convert_layout(words, vscale.type.layout, assert_trivial=True)
        r0, r1, r2, r3 = gl.inline_asm_elementwise(GFX950_WORD_PAIRS, "=&v,=&v,=&v,=v,v,v", [words, vscale],
                                                   dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True,
                                                   pack=1)
        v = gl.join(gl.join(_gl_halves(r0), _gl_halves(r1)), gl.join(_gl_halves(r2), _gl_halves(r3)))
        # (token = 64h + 16w + 4g + r, c, nibble, byte bit 0, byte bit 1) -> (w, 8g + 4h + r, n')
        v = gl.reshape(v, [2, 4, 4, 4, 16, 2, 2, 2])
        v = gl.reshape(gl.permute(v, [1, 2, 0, 3, 5, 7, 6, 4]), [4, 32, GL_OUT_DIMS])
        return gl.amd.cdna4.mfma(p, gl.convert_layout(v, GL_V_B), acc)

    @gluon.jit
    def _gl_halves(pair):
        """A converted byte (a bf16 pair: low nibble, high nibble) -> the two bf16, joined."""
        low = (pair & 0xFFFF).to(gl.int16).to(gl.bfloat16, bitcast=True)
        high = (pair >> 16).to(gl.int16).to(gl.bfloat16, bitcast=True)
        return gl.join(low, high)

    @gluon.jit
    def _gl_write(m_ref, l_i, accs, range_ok, seq, split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr,
                  count_ptr, qk_scale_log2, MERGE: gl.constexpr):
        """The four warps' (m_ref, l, acc) merged and written by MERGE as _write_result writes them."""
        out_l: gl.constexpr = gl.SliceLayout(0, GL_MMA_V)
        m_all = gl.max(m_ref, axis=0)
        weight = gl.exp2((m_ref - gl.expand_dims(gl.where(m_all == float("-inf"), 0.0, m_all), 0)) * qk_scale_log2)
        l_all = gl.sum(l_i * weight, axis=0)
        heads = gl.arange(0, NUM_HEADS_C, layout=gl.SliceLayout(1, out_l))
        n = gl.arange(0, GL_OUT_DIMS, layout=gl.SliceLayout(0, out_l))
        dims = (32 * (n % 16) + 2 * ((n // 16) % 4) + n // 64)[None, :]  # column n' of chunk 0 -> its dim
        acc0, acc1, acc2, acc3 = accs
        if MERGE == DIRECT_C:
            l_out = gl.convert_layout(l_all, gl.SliceLayout(1, out_l))
            norm = gl.where(range_ok, gl.where(l_out > 0, 1.0 / l_out, 0.0), float("nan"))[:, None]
            base = seq * (NUM_HEADS_C * V_DIM_C) + heads[:, None] * V_DIM_C
            _gl_store_chunk(acc0, weight, norm, out_ptr, base, dims, 0, True)
            _gl_store_chunk(acc1, weight, norm, out_ptr, base, dims, 1, True)
            _gl_store_chunk(acc2, weight, norm, out_ptr, base, dims, 2, True)
            _gl_store_chunk(acc3, weight, norm, out_ptr, base, dims, 3, True)
        else:
            part = seq * num_splits + split
            base = part * (NUM_HEADS_C * V_DIM_C) + heads[:, None] * V_DIM_C
            one = gl.full([NUM_HEADS_C, 1], 1.0, gl.float32, out_l)
            _gl_store_chunk(acc0, weight, one, part_acc_ptr, base, dims, 0, False)
            _gl_store_chunk(acc1, weight, one, part_acc_ptr, base, dims, 1, False)
            _gl_store_chunk(acc2, weight, one, part_acc_ptr, base, dims, 2, False)
            _gl_store_chunk(acc3, weight, one, part_acc_ptr, base, dims, 3, False)
            ml_l: gl.constexpr = gl.BlockedLayout([1], [64], [4], [0])
            rows = part * (2 * NUM_HEADS_C) + gl.arange(0, NUM_HEADS_C, layout=ml_l)
            gl.amd.cdna4.buffer_store(gl.convert_layout(gl.where(range_ok, m_all, float("nan")), ml_l), part_ml_ptr,
                                      rows)
            gl.amd.cdna4.buffer_store(gl.convert_layout(l_all, ml_l), part_ml_ptr, rows + NUM_HEADS_C)
            if MERGE == FUSED_C:  # FUSED: the sequence's last program merges (see _write_result)
                finished = _gl_release_and_count(count_ptr, seq)
                if (finished & (num_splits - 1)) == 0:
                    _gl_merge_splits(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2)

    @gluon.jit
    def _gl_store_chunk(acc, weight, scale, ptr, base, dims, q: gl.constexpr, OUT_BF16: gl.constexpr):
        """Chunk q of acc, the four warps merged with `weight` (4, 16), times `scale` (16, 1), to ptr[base + dim]."""
        merged = gl.sum(acc * gl.expand_dims(weight, 2), axis=0) * scale
        if OUT_BF16:
            merged = merged.to(gl.bfloat16)
        gl.amd.cdna4.buffer_store(merged, ptr, base + dims + 8 * q)

    @gluon.jit
    def _gl_release_and_count(count_ptr, seq):
        """FUSED: stores waited, barrier, wave 0 writes the L2 back, lane 0 adds 1 to count[seq] -> the new count."""
        lanes_l: gl.constexpr = gl.BlockedLayout([1], [64], [4], [0])
        lane = gl.arange(0, 256, layout=lanes_l)  # the 4 warps x 64 lanes
        lane = gl.inline_asm_elementwise("s_waitcnt vmcnt(0)", "=v,0", [lane], dtype=gl.int32, is_pure=False,
                                         pack=1)
        _gl_workgroup_barrier()
        first = lane == 0
        lane = gl.inline_asm_elementwise(GL_RELEASE_IN_WAVE_0, "=v,=&s,0", [lane], dtype=(gl.int32, gl.int32),
                                         is_pure=False, pack=1)[0]
        before = gl.amd.cdna4.buffer_atomic_add(count_ptr.to(gl.pointer_type(gl.uint32)), lane * 0 + seq,
                                                gl.full(lane.shape, 1, gl.uint32, lanes_l), mask=first,
                                                sem="relaxed", scope="gpu")  # CDNA4's integer add: uint32
        return gl.sum(gl.where(first, before.to(gl.int32), 0), axis=0) + 1

    @gluon.jit
    def _gl_merge_splits(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2):
        """FUSED, last program: after the acquire, out[seq] from its partials (_merge_step), GL_MERGE_SPLITS a trip."""
        acc_l: gl.constexpr = gl.BlockedLayout([GL_MERGE_SPLITS, 1, 4], [1, 2, 32], [1, 4, 1], [2, 1, 0])
        ml_l: gl.constexpr = gl.SliceLayout(2, acc_l)  # (split, head)
        out_l: gl.constexpr = gl.SliceLayout(0, acc_l)  # (head, dim)
        head_l: gl.constexpr = gl.SliceLayout(0, ml_l)
        heads = gl.inline_asm_elementwise("buffer_inv sc1", "=v,0", [gl.arange(0, NUM_HEADS_C, layout=head_l)],
                                          dtype=gl.int32, is_pure=False, pack=1)
        splits = gl.arange(0, GL_MERGE_SPLITS, layout=gl.SliceLayout(1, ml_l))
        ml_offs = splits[:, None] * (2 * NUM_HEADS_C) + heads[None, :]
        acc_heads = gl.convert_layout(heads, gl.SliceLayout(1, out_l))
        rows = acc_heads[:, None] * V_DIM_C + gl.arange(0, V_DIM_C, layout=gl.SliceLayout(0, out_l))[None, :]
        acc_offs = gl.expand_dims(gl.convert_layout(splits, gl.SliceLayout(1, gl.SliceLayout(2, acc_l))), 1)[:, :, None] \
            * (NUM_HEADS_C * V_DIM_C) + rows[None, :, :]
        m_run = gl.full([NUM_HEADS_C], float("-inf"), gl.float32, head_l)
        l_run = gl.zeros([NUM_HEADS_C], gl.float32, head_l)
        acc_run = gl.zeros([NUM_HEADS_C, V_DIM_C], gl.float32, out_l)
        invalid = gl.zeros([NUM_HEADS_C], gl.int32, head_l)
        for first in range(0, num_splits, GL_MERGE_SPLITS):
            part = seq * num_splits + first
            real = (first + splits) < num_splits
            m = gl.amd.cdna4.buffer_load(part_ml_ptr, part * (2 * NUM_HEADS_C) + ml_offs, mask=real[:, None],
                                         other=float("-inf"))
            l = gl.amd.cdna4.buffer_load(part_ml_ptr, part * (2 * NUM_HEADS_C) + NUM_HEADS_C + ml_offs,
                                         mask=real[:, None], other=0.0)
            acc = gl.amd.cdna4.buffer_load(part_acc_ptr, part * (NUM_HEADS_C * V_DIM_C) + acc_offs,
                                           mask=gl.convert_layout(real[:, None], ml_l)[:, :, None], other=0.0)
            invalid = gl.maximum(invalid, gl.max((m != m).to(gl.int32), axis=0))
            m = gl.where(m != m, float("-inf"), m)
            m_new = gl.maximum(m_run, gl.max(m, axis=0))
            m_ref = gl.where(m_new > float("-inf"), m_new, 0.0)  # exp2(-inf) = 0 for empty splits
            run_weight = gl.exp2((m_run - m_ref) * qk_scale_log2)
            weight = gl.exp2((m - m_ref[None, :]) * qk_scale_log2)
            acc_run = acc_run * gl.convert_layout(run_weight, gl.SliceLayout(1, out_l))[:, None] \
                + gl.sum(acc * weight[:, :, None], axis=0)
            l_run = l_run * run_weight + gl.sum(l * weight, axis=0)
            m_run = m_new
        norm = gl.where(l_run > 0, 1.0 / l_run, 0.0)
        norm = gl.convert_layout(gl.where(invalid > 0, float("nan"), norm), gl.SliceLayout(1, out_l))
        gl.amd.cdna4.buffer_store((acc_run * norm[:, None]).to(gl.bfloat16), out_ptr,
                                  seq * (NUM_HEADS_C * V_DIM_C) + rows)

    @gluon.jit
    def _gl_store_q(q8, qs, q8r, qsr, q8_ptr, qs_ptr, seq):
        """The quantized Q (a checked call's split 0) to q8 (batch, 16, 576) / qs (batch, 16, 18), for the self-check."""
        heads = gl.arange(0, NUM_HEADS_C, layout=gl.SliceLayout(1, GL_Q_A))[:, None]
        dims = gl.arange(0, V_DIM_C, layout=gl.SliceLayout(0, GL_Q_A))[None, :]
        rope_dims = gl.arange(0, 2 * ROPE_PAD_BYTES_C, layout=gl.SliceLayout(0, GL_Q_A))[None, :]
        rows = seq * (NUM_HEADS_C * QK_DIM_C) + heads * QK_DIM_C
        gl.amd.cdna4.buffer_store(q8.to(gl.uint8, bitcast=True), q8_ptr, rows + dims)
        gl.amd.cdna4.buffer_store(q8r.to(gl.uint8, bitcast=True), q8_ptr, rows + V_DIM_C + rope_dims,
                                  mask=rope_dims < ROPE_C)
        qs_l: gl.constexpr = qs.type.layout
        rows = seq * (NUM_HEADS_C * SCALE_COLS_C) + gl.arange(0, NUM_HEADS_C, layout=gl.SliceLayout(1, qs_l))[:, None] * SCALE_COLS_C
        gl.amd.cdna4.buffer_store(qs, qs_ptr, rows + gl.arange(0, V_DIM_C // 32, layout=gl.SliceLayout(0, qs_l))[None, :])
        qsr_l: gl.constexpr = qsr.type.layout
        rows = seq * (NUM_HEADS_C * SCALE_COLS_C) + gl.arange(0, NUM_HEADS_C, layout=gl.SliceLayout(1, qsr_l))[:, None] * SCALE_COLS_C
        blocks = gl.arange(0, 4, layout=gl.SliceLayout(0, qsr_l))[None, :]
        gl.amd.cdna4.buffer_store(qsr, qs_ptr, rows + V_DIM_C // 32 + blocks, mask=blocks < ROPE_C // 32)


# =======================================================================================
# 3. The standard-Triton kernels: SCALED, BF16 (the portable fallback), combine, Q to fp8; their helpers
# =======================================================================================

# A call launches a split kernel (_scaled_split_kernel, _bf16_split_kernel), grid (num_splits, batch):
# program (s, b) runs split s of sequence b. Its MERGE constexpr says how a sequence's splits become its output:
#
#   MERGE    the split kernel writes                  then                                                launches
#   DIRECT   out (bf16, normalized): 1 split per seq  -                                                   1
#   COMBINE  part_acc / part_ml (float32 partials)    _mla_combine_kernel (grid (batch, 16, 512 / DIMS))  2
#   FUSED    the partials, then adds 1 to count[b]    the program bringing count[b] to a multiple of      1
#                                                     num_splits (the sequence's last) merges into out
#
# A line `# phase NAME: value` is where tools/phase_probe.py's instrumented copy stores a clock once `value` is ready.

@triton.jit(do_not_specialize=["total_kv", "num_splits", "q_bytes_split"])
def _scaled_split_kernel(
    q_ptr, kv_ptr, kv_words_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr, out_ptr, part_acc_ptr, part_ml_ptr,
    count_ptr, q8_ptr, qs_ptr, q_bytes_split,
    total_kv, num_splits, q_row_stride, q_head_stride, kv_row_stride, scale_row_stride, qk_scale_log2, value_scale,
    BLOCK_N: tl.constexpr, CONVERT: tl.constexpr, SPLIT_TAIL: tl.constexpr, MERGE: tl.constexpr,
    WAVE_FENCES: tl.constexpr = False, EARLY_TILE: tl.constexpr = False, MERGE_HEADS: tl.constexpr = NUM_HEADS_C,
    MERGE_SPLITS: tl.constexpr = 1,
):
    """The SCALED family's program: split s = program_id(0) of num_splits of sequence b = program_id(1).

    q_ptr         (batch, 16, 576) bf16, strides (q_row_stride, q_head_stride, 1)
    kv_ptr        (total_kv, 288) e2m1 pairs as bytes, row stride kv_row_stride bytes (rows 4-byte aligned)
    kv_words_ptr  the same memory as (total_kv, 72) int32 words (EARLY_TILE's first tile: buffer loads)
    scale_ptr     (>= total_kv, >= 18) e8m0 bytes, row stride scale_row_stride; columns 0..17 of rows < total_kv read
    qo_indptr     (batch + 1,) int32, must be 0, 1, ..., batch; kv_indptr (batch + 1,) int32: b's KV rows
    out_ptr       (batch, 16, 512) bf16 contiguous: written by DIRECT, and by FUSED's last program
    part_acc      (batch, num_splits, 16, 512) f32: unnormalized sum of p * v (times 2^-LOG2_SHIFT[CONVERT])
    part_ml       (batch, num_splits, 2, 16) f32: running max (raw score units, NaN: invalid range), sum of p
    count_ptr     (batch,) int32 finished splits per sequence, never reset (FUSED)
    q8_ptr        (batch, 16, 576) e4m3 bytes, qs_ptr (batch, 16, 18) e8m0 bytes: Q as quantized, written by
    q_bytes_split 0 on a checked call (Q_BYTES_CHECKED), by none on a timed one (Q_BYTES_TIMED: -1)
    qk_scale_log2 sm_scale * log2(e) (the scores are exact, no shift); value_scale 2^LOG2_SHIFT[CONVERT]
    WAVE_FENCES   FUSED on AMD: _write_result's wave fences; EARLY_TILE: tile 0's loads before Q's quantization
    MERGE_HEADS, MERGE_SPLITS  FUSED: the last program's merge pass (_merge_splits, FUSED_MERGE_PASS)
    An invalid range (indptr decreasing or past total_kv, qo_indptr not 0..batch) gives NaN, an empty one zeros.
    total_kv, num_splits and q_bytes_split are not specialized: a check on another input runs this very binary."""
    tl.static_assert((CONVERT == PORTABLE_C) | (CONVERT == GFX950_C), "CONVERT must be PORTABLE or GFX950")
    tl.static_assert((MERGE >= 0) & (MERGE <= 2), "MERGE must be DIRECT, COMBINE or FUSED")
    # phase start: tl.program_id(0)
    q_rows = q_ptr + tl.program_id(1) * q_row_stride + tl.arange(0, NUM_HEADS_C)[:, None] * q_head_stride
    if EARLY_TILE:  # Q's loads go out with kv_indptr's: they do not depend on it
        q_nope, q_rope = _load_q_padded(q_rows)
    seq, split, range_ok, lo, full_end, hi = _split_range(qo_indptr_ptr, kv_indptr_ptr, total_kv, num_splits,
                                                          BLOCK_N)
    # phase range: hi
    m_i = tl.full([NUM_HEADS_C], float("-inf"), tl.float32)
    l_i = tl.zeros([NUM_HEADS_C], tl.float32)
    acc_t = tl.zeros([V_DIM_C, NUM_HEADS_C], tl.float32)
    start = lo
    if EARLY_TILE:
        # tile 0's loads, the quantization overlapping them, then tile 0 (masked: maybe the split's only tile)
        loads = _scaled_tile_loads(kv_ptr, kv_words_ptr, scale_ptr, lo, hi, kv_row_stride, scale_row_stride,
                                   BLOCK_N, True)
        q_ops = _quantize_q(q_nope, q_rope, q8_ptr, qs_ptr, seq, split, q_bytes_split)
        # phase q: q_ops[1]
        if lo < hi:
            m_i, l_i, acc_t = _scaled_tile_math(q_ops, loads, lo, hi, qk_scale_log2, m_i, l_i, acc_t, BLOCK_N,
                                                CONVERT, True)
        start = lo + BLOCK_N
    else:
        q_nope, q_rope = _load_q_padded(q_rows)
        q_ops = _quantize_q(q_nope, q_rope, q8_ptr, qs_ptr, seq, split, q_bytes_split)
        # phase q: q_ops[1]
    m_i, l_i, acc_t = _split_tiles(q_ops, kv_ptr, scale_ptr, start, full_end, hi, kv_row_stride, scale_row_stride,
                                   qk_scale_log2, m_i, l_i, acc_t, _scaled_tile, BLOCK_N, CONVERT, 0, SPLIT_TAIL)
    # phase tiles done: l_i
    _write_result(acc_t, m_i, l_i, range_ok, seq, split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr,
                  qk_scale_log2, value_scale, True, MERGE, WAVE_FENCES, MERGE_HEADS, MERGE_SPLITS)
    # phase end: l_i


@triton.jit
def _load_q_padded(q_rows):
    """q_rows (16, 1) pointers to a sequence's bf16 Q rows -> (dims 0..511, the rope dims zero-padded to 128)."""
    q_nope = tl.load(q_rows + tl.arange(0, V_DIM_C)[None, :])
    rope_dims = tl.arange(0, 2 * ROPE_PAD_BYTES_C)
    q_rope = tl.load(q_rows + V_DIM_C + rope_dims[None, :], mask=rope_dims[None, :] < ROPE_C, other=0.0)
    return q_nope, q_rope


@triton.jit
def _quantize_q(q_nope, q_rope, q8_ptr, qs_ptr, seq, split, q_bytes_split):
    """SCALED: Q (_load_q_padded's) -> q_ops (e4m3 dims 0..511, 16 e8m0 scales, e4m3 rope dims padded to 128, 4
    scales); split q_bytes_split (0 on a checked call, -1 none) writes the bytes to q8 (batch, 16, 576), qs
    (batch, 16, 18) for the self-check."""
    q8_nope, qs_nope = _quantize_e4m3_blocks(q_nope.to(tl.float32), NUM_HEADS_C, V_DIM_C // 32)
    q8_rope, qs_rope = _quantize_e4m3_blocks(q_rope.to(tl.float32), NUM_HEADS_C, 2 * ROPE_PAD_BYTES_C // 32)
    if split == 0:  # q_bytes_split as a store mask, not a second branch: that costs a FUSED form a spill (3.6)
        store = (tl.zeros([1, 1], tl.int32) + q_bytes_split) == split
        heads = tl.arange(0, NUM_HEADS_C)[:, None]
        rope_dims = tl.arange(0, 2 * ROPE_PAD_BYTES_C)[None, :]
        q8_rows = q8_ptr + seq * (NUM_HEADS_C * QK_DIM_C) + heads * QK_DIM_C
        qs_rows = qs_ptr + seq * (NUM_HEADS_C * SCALE_COLS_C) + heads * SCALE_COLS_C
        rope_blocks = tl.arange(0, 2 * ROPE_PAD_BYTES_C // 32)[None, :]
        tl.store(q8_rows + tl.arange(0, V_DIM_C)[None, :], q8_nope.to(tl.uint8, bitcast=True), mask=store)
        tl.store(q8_rows + V_DIM_C + rope_dims, q8_rope.to(tl.uint8, bitcast=True), mask=store & (rope_dims < ROPE_C))
        tl.store(qs_rows + tl.arange(0, V_DIM_C // 32)[None, :], qs_nope, mask=store)
        tl.store(qs_rows + V_DIM_C // 32 + rope_blocks, qs_rope, mask=store & (rope_blocks < ROPE_C // 32))
    return q8_nope, qs_nope, q8_rope, qs_rope


# --- one tile of the SCALED family -----------------------------------------------------------
@triton.jit
def _scaled_tile(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride, qk_scale_log2,
                 m_i, l_i, acc_t, BLOCK_N: tl.constexpr, CONVERT: tl.constexpr, PIN: tl.constexpr,
                 MASKED: tl.constexpr):
    """SCALED: one tile, loads then math (_split_tiles' tile function; PIN unused: the conversion is pure)."""
    loads = _scaled_tile_loads(kv_ptr, None, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride, BLOCK_N,
                               MASKED)
    return _scaled_tile_math(q_ops, loads, tile_start, hi, qk_scale_log2, m_i, l_i, acc_t, BLOCK_N, CONVERT,
                             MASKED)


@triton.jit
def _scaled_tile_loads(kv_ptr, kv_words_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride,
                       BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """SCALED: one tile's loads -> (k (BLOCK_N, 256) code bytes, their 16 e8m0 scales, the same bytes as (BLOCK_N,
    64) int32 words, rope codes zero-padded to 64 bytes, their 4 scales (127-padded)); MASKED: rows past hi read 0.
    kv_words_ptr: kv_ptr's int32 view (buffer loads), or None (a cast: the 2-stage 128-token loop spills with it)."""
    kv_rows, scale_rows = _tile_rows(kv_ptr, scale_ptr, tile_start, kv_row_stride, scale_row_stride, BLOCK_N)
    rows_ok = tile_start + tl.arange(0, BLOCK_N) < hi
    rope_bytes = tl.arange(0, ROPE_PAD_BYTES_C)
    rope_blocks = tl.arange(0, ROPE_PAD_BYTES_C // 16)
    rope_real = rope_bytes[None, :] < ROPE_C // 2
    rope_scale_real = rope_blocks[None, :] < ROPE_C // 32
    if MASKED:
        rope_real = rope_real & rows_ok[:, None]
        rope_scale_real = rope_scale_real & rows_ok[:, None]
    # the words last: more bytes in flight at the MFMAs (docs/performance.md, v11)
    k_scales = _load_tile(scale_rows, tl.arange(0, V_DIM_C // 32), rows_ok, MASKED)
    k_rope_scales = tl.load(scale_rows + V_DIM_C // 32 + rope_blocks[None, :], mask=rope_scale_real, other=127)
    k_rope = tl.load(kv_rows + V_DIM_C // 2 + rope_bytes[None, :], mask=rope_real, other=0)
    k = _load_tile(kv_rows, tl.arange(0, V_DIM_C // 2), rows_ok, MASKED)
    # the same bytes again as words (an L2 hit; loading them once costs more: docs/performance.md, v11)
    if kv_words_ptr is None:
        word_rows = kv_rows.to(tl.pointer_type(tl.int32))
    else:
        word_rows = kv_words_ptr + (tile_start + tl.arange(0, BLOCK_N))[:, None] * (kv_row_stride // 4)
    words = _load_tile(word_rows, tl.arange(0, V_DIM_C // 8), rows_ok, MASKED)
    return k, k_scales, words, k_rope, k_rope_scales


@triton.jit
def _scaled_tile_math(q_ops, loads, tile_start, hi, qk_scale_log2, m_i, l_i, acc_t, BLOCK_N: tl.constexpr,
                      CONVERT: tl.constexpr, MASKED: tl.constexpr):
    """SCALED, one tile from its loads: e4m3 Q x e2m1 K on tl.dot_scaled; acc_t (512, 16) += V^T P^T, V in bf16."""
    q8_nope, qs_nope, q8_rope, qs_rope = q_ops
    k, k_scales, words, k_rope, k_rope_scales = loads
    # phase tile loaded: k
    scores = tl.dot_scaled(q8_nope, qs_nope, "e4m3", tl.trans(k), k_scales, "e2m1")
    scores = tl.dot_scaled(q8_rope, qs_rope, "e4m3", tl.trans(k_rope), k_rope_scales, "e2m1", scores)
    # phase tile scores: scores
    if MASKED:
        scores = tl.where((tile_start + tl.arange(0, BLOCK_N) < hi)[None, :], scores, float("-inf"))
    m_i, alpha, p, l_i = _softmax_step(scores, m_i, l_i, qk_scale_log2)
    # phase tile softmax: l_i
    values = _words_to_bf16(words, k_scales, BLOCK_N, V_DIM_C // 8, CONVERT, 0, True)
    acc_t = tl.dot(tl.trans(values), tl.trans(p.to(tl.bfloat16)), acc_t * alpha[None, :])
    # phase tile values: acc_t
    return m_i, l_i, acc_t


# --- the BF16 family ------------------------------------------------------------------------
# SCALED's fallback, NVIDIA's and a CPU's path, a gfx950 tuning candidate: each tile converted once to bf16 (native
# conversion where there is one, else the portable one below) for both dots, scores over 576 dims, values over 512.
@triton.jit(do_not_specialize=["total_kv", "num_splits"])
def _bf16_split_kernel(
    q_ptr, kv_ptr, scale_ptr, qo_indptr_ptr, kv_indptr_ptr, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr,
    total_kv, num_splits, q_row_stride, q_head_stride, kv_row_stride, scale_row_stride, qk_scale_log2, value_scale,
    BLOCK_N: tl.constexpr, CONVERT: tl.constexpr, PIN: tl.constexpr, SPLIT_TAIL: tl.constexpr,
    MERGE: tl.constexpr, WAVE_FENCES: tl.constexpr = False, MERGE_HEADS: tl.constexpr = NUM_HEADS_C,
    MERGE_SPLITS: tl.constexpr = 1,
):
    """The BF16 family's program: the SCALED kernel's grid, arguments (less the int32 view and the Q bytes) and
    results, tiles by _natural_tile; qk_scale_log2 sm_scale * log2(e) * 2^LOG2_SHIFT[CONVERT] (K's shift)."""
    tl.static_assert((CONVERT == PORTABLE_C) | (CONVERT == GFX950_C), "CONVERT must be PORTABLE or GFX950")
    # phase start: tl.program_id(0)
    q_rows = q_ptr + tl.program_id(1) * q_row_stride + tl.arange(0, NUM_HEADS_C)[:, None] * q_head_stride
    seq, split, range_ok, lo, full_end, hi = _split_range(qo_indptr_ptr, kv_indptr_ptr, total_kv, num_splits,
                                                          BLOCK_N)
    # phase range: hi
    q_nope = tl.load(q_rows + tl.arange(0, V_DIM_C)[None, :])
    q_rope = tl.load(q_rows + V_DIM_C + tl.arange(0, ROPE_C)[None, :])
    # phase q: q_rope
    m_i = tl.full([NUM_HEADS_C], float("-inf"), tl.float32)
    l_i = tl.zeros([NUM_HEADS_C], tl.float32)
    acc = tl.zeros([NUM_HEADS_C, V_DIM_C], tl.float32)
    m_i, l_i, acc = _split_tiles((q_nope, q_rope), kv_ptr, scale_ptr, lo, full_end, hi, kv_row_stride,
                                 scale_row_stride, qk_scale_log2, m_i, l_i, acc, _natural_tile, BLOCK_N, CONVERT, PIN,
                                 SPLIT_TAIL)
    # phase tiles done: l_i
    _write_result(acc, m_i, l_i, range_ok, seq, split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr,
                  qk_scale_log2, value_scale, False, MERGE, WAVE_FENCES, MERGE_HEADS, MERGE_SPLITS)
    # phase end: l_i


@triton.jit
def _natural_tile(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride, qk_scale_log2,
                  m_i, l_i, acc, BLOCK_N: tl.constexpr, CONVERT: tl.constexpr, PIN: tl.constexpr,
                  MASKED: tl.constexpr):
    """BF16 family, one tile (_split_tiles' tile function): converted once to bf16, scores over 576 dims, values over
    512. q_ops: (Q's dims 0..511, rope dims) bf16; m_i, l_i (16,), acc (16, 512). MASKED: may pass hi."""
    q_nope, q_rope = q_ops
    kv_rows, scale_rows = _tile_rows(kv_ptr, scale_ptr, tile_start, kv_row_stride, scale_row_stride, BLOCK_N)
    kv_rows = kv_rows.to(tl.pointer_type(tl.int32))  # row starts are 4-byte aligned
    rows_ok = tile_start + tl.arange(0, BLOCK_N) < hi
    words = _load_tile(kv_rows, tl.arange(0, V_DIM_C // 8), rows_ok, MASKED)
    words_rope = _load_tile(kv_rows + V_DIM_C // 8, tl.arange(0, ROPE_C // 8), rows_ok, MASKED)
    scales = _load_tile(scale_rows, tl.arange(0, V_DIM_C // 32), rows_ok, MASKED)
    scales_rope = _load_tile(scale_rows + V_DIM_C // 32, tl.arange(0, ROPE_C // 32), rows_ok, MASKED)
    # phase tile loaded: words
    k = _words_to_bf16(words, scales, BLOCK_N, V_DIM_C // 8, CONVERT, PIN)
    k_rope = _words_to_bf16(words_rope, scales_rope, BLOCK_N, ROPE_C // 8, CONVERT, PIN)
    scores = tl.dot(q_nope, tl.trans(k))
    scores = tl.dot(q_rope, tl.trans(k_rope), scores)
    # phase tile scores: scores
    if MASKED:
        scores = tl.where(rows_ok[None, :], scores, float("-inf"))
    m_i, alpha, p, l_i = _softmax_step(scores, m_i, l_i, qk_scale_log2)
    # phase tile softmax: l_i
    acc = tl.dot(p.to(tl.bfloat16), k, acc * alpha[:, None])
    # phase tile values: acc
    return m_i, l_i, acc


@triton.jit(do_not_specialize=["num_splits"])
def _mla_combine_kernel(out_ptr, part_acc_ptr, part_ml_ptr, num_splits, qk_scale_log2, value_scale,
                        CHUNK: tl.constexpr, DIMS: tl.constexpr):
    """COMBINE: out of one (sequence, head, DIMS dims), grid (batch, 16, 512 / DIMS): CHUNK splits per round trip."""
    seq = tl.program_id(0)
    head = tl.program_id(1)
    dims = tl.program_id(2) * DIMS + tl.arange(0, DIMS)
    m_run = float("-inf")
    l_run = 0.0
    acc_run = tl.zeros([DIMS], tl.float32)
    invalid = 0
    for first in range(0, num_splits, CHUNK):
        splits = first + tl.arange(0, CHUNK)
        in_range = splits < num_splits
        parts = seq * num_splits + splits
        m = tl.load(part_ml_ptr + parts * (2 * NUM_HEADS_C) + head, mask=in_range, other=float("-inf"))
        l = tl.load(part_ml_ptr + parts * (2 * NUM_HEADS_C) + NUM_HEADS_C + head, mask=in_range, other=0.0)
        acc = tl.load(part_acc_ptr + (parts[:, None] * NUM_HEADS_C + head) * V_DIM_C + dims[None, :],
                      mask=in_range[:, None], other=0.0)
        m_run, l_run, acc_run, invalid = _merge_step(m_run, l_run, acc_run, invalid, m, l, acc, qk_scale_log2, False)
    tl.store(out_ptr + (seq * NUM_HEADS_C + head) * V_DIM_C + dims, _merged(acc_run, l_run, invalid, value_scale))


# --- Q to fp8 per tensor for aiter (quantize_q_fp8 launches it) ---------------------------------------------
@triton.jit
def _q_fp8_kernel(q_ptr, kv_indptr_ptr, partials_ptr, q8_ptr, scale_ptr, page_len_ptr, batch, num_partials,
                  q_row_stride, q_head_stride, ROWS: tl.constexpr, PHASE: tl.constexpr):
    """Q to e4m3 per tensor; program p of cdiv(batch * 16, ROWS) owns rows p * ROWS .. (row = token * 16 + head; ROWS
    a multiple of 16). q (batch, 16, 576) bf16, strides (q_row_stride, q_head_stride, 1); kv_indptr (batch + 1,)
    int32; partials (num_partials,) float32; out: q8 (batch, 16, 576) e4m3 bytes, contiguous, scale (1,) float32,
    page_len (batch,) int32. PHASE Q8_ONE_PASS (ROWS >= batch * 16): all; Q8_AMAX: page_len, partials[p] = the
    rows' amax; Q8_QUANTIZE (after Q8_AMAX): the rows, and program 0 the scale."""
    block = tl.program_id(0)
    rows, ok, nope, rope = _q_rows(q_ptr, block * ROWS, batch * NUM_HEADS_C, q_row_stride, q_head_stride, ROWS)
    if PHASE != Q8_QUANTIZE:
        tokens = block * (ROWS // NUM_HEADS_C) + tl.arange(0, ROWS // NUM_HEADS_C)
        real = tokens < batch
        lengths = tl.load(kv_indptr_ptr + tokens + 1, mask=real) - tl.load(kv_indptr_ptr + tokens, mask=real)
        tl.store(page_len_ptr + tokens, lengths, mask=real)
    if PHASE == Q8_AMAX:
        tl.store(partials_ptr + block, tl.maximum(tl.max(tl.abs(nope)), tl.max(tl.abs(rope))))
    else:
        if PHASE == Q8_ONE_PASS:
            amax = tl.maximum(tl.max(tl.abs(nope)), tl.max(tl.abs(rope)))
        else:
            amax = _partials_max(partials_ptr, num_partials)
        scale = tl.div_rn(tl.maximum(amax, Q8_AMAX_FLOOR), E4M3_MAX).to(tl.bfloat16).to(tl.float32)
        out = q8_ptr + rows[:, None] * QK_DIM_C
        inverse = tl.div_rn(tl.full((), 1.0, tl.float32), scale)
        tl.store(out + tl.arange(0, V_DIM_C)[None, :], _e4m3_bytes(nope, inverse), mask=ok[:, None])
        tl.store(out + V_DIM_C + tl.arange(0, ROPE_C)[None, :], _e4m3_bytes(rope, inverse), mask=ok[:, None])
        tl.store(scale_ptr, scale, mask=block == 0)


@triton.jit
def _q_rows(q_ptr, first_row, total_rows, q_row_stride, q_head_stride, ROWS: tl.constexpr):
    """ROWS rows of Q as (batch * 16, 576) from first_row -> (rows, mask, nope (ROWS, 512), rope (ROWS, 64) float32)."""
    rows = first_row + tl.arange(0, ROWS)
    ok = rows < total_rows
    base = q_ptr + (rows // NUM_HEADS_C) * q_row_stride + (rows % NUM_HEADS_C) * q_head_stride
    nope = tl.load(base[:, None] + tl.arange(0, V_DIM_C)[None, :], mask=ok[:, None], other=0.0)
    rope = tl.load(base[:, None] + V_DIM_C + tl.arange(0, ROPE_C)[None, :], mask=ok[:, None], other=0.0)
    return rows, ok, nope.to(tl.float32), rope.to(tl.float32)


@triton.jit
def _e4m3_bytes(values, inverse_scale):
    """e4m3(clamp(bf16(values / scale), -448, 448)) bytes; values * float32(1 / scale) rounds as the quotient does."""
    ratio = (values * inverse_scale).to(tl.bfloat16).to(tl.float32)
    ratio = tl.minimum(tl.maximum(ratio, -E4M3_MAX), E4M3_MAX)
    return ratio.to(tl.float8e4nv).to(tl.uint8, bitcast=True)


@triton.jit
def _partials_max(partials_ptr, num_partials):
    """The largest of partials[0 .. num_partials - 1] (non-negative float32)."""
    amax = tl.zeros((), tl.float32)
    for start in range(0, num_partials, Q8_PARTIALS_BLOCK):
        offsets = start + tl.arange(0, Q8_PARTIALS_BLOCK)
        amax = tl.maximum(amax, tl.max(tl.load(partials_ptr + offsets, mask=offsets < num_partials, other=0.0)))
    return amax


# --- one program: its range, Q, the loop over its tiles -----------------------------------
@triton.jit
def _split_range(qo_indptr_ptr, kv_indptr_ptr, total_kv, num_splits, BLOCK_N: tl.constexpr):
    """-> (seq, split, range_ok, lo, full_end, hi): this program's rows [lo, hi), full tiles up to full_end."""
    split = tl.program_id(0)
    seq = tl.program_id(1)
    kv_start = tl.load(kv_indptr_ptr + seq)
    kv_end = tl.load(kv_indptr_ptr + seq + 1)
    # one test of both loads (two and-ed compares became a branch around the second load on gfx950)
    q_ok = ((tl.load(qo_indptr_ptr + seq) - seq) | (tl.load(qo_indptr_ptr + seq + 1) - (seq + 1))) == 0
    range_ok, lo, hi = _split_bounds(kv_start, kv_end, q_ok, total_kv, split, num_splits, BLOCK_N)
    full_end = lo + tl.maximum(hi - lo, 0) // BLOCK_N * BLOCK_N
    return seq, split, range_ok, lo, full_end, hi


@triton.jit
def _split_bounds(kv_start, kv_end, q_ok, total_kv, split, num_splits, BLOCK_N: tl.constexpr):
    """Split `split` of KV rows [kv_start, kv_end) in whole BLOCK_N tiles -> (range_ok, lo, hi): rows [lo, hi)."""
    range_ok = (kv_start >= 0) & (kv_start <= kv_end) & (kv_end <= total_kv) & q_ok
    kv_end = tl.where(range_ok, kv_end, kv_start)  # an invalid range reads nothing
    tiles_per_split = tl.cdiv(tl.cdiv(kv_end - kv_start, BLOCK_N), num_splits)
    lo = kv_start + split * tiles_per_split * BLOCK_N
    hi = tl.minimum(lo + tiles_per_split * BLOCK_N, kv_end)
    return range_ok, lo, hi


@triton.jit
def _split_tiles(q_ops, kv_ptr, scale_ptr, start, full_end, hi, kv_row_stride, scale_row_stride, qk_scale_log2,
                 m_i, l_i, acc, TILE: tl.constexpr, BLOCK_N: tl.constexpr, CONVERT: tl.constexpr,
                 PIN: tl.constexpr, SPLIT_TAIL: tl.constexpr):
    """Tiles [start, hi) of a split through TILE (_scaled_tile, _natural_tile), carrying the softmax state (m_i, l_i,
    acc). SPLIT_TAIL: full tiles to full_end unmasked, then a masked tail; else all masked (portable forms spill)."""
    if SPLIT_TAIL:
        for tile_start in range(start, full_end, BLOCK_N):
            m_i, l_i, acc = TILE(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride,
                                 qk_scale_log2, m_i, l_i, acc, BLOCK_N, CONVERT, PIN, False)
        tail = tl.maximum(full_end, start)
        if tail < hi:
            m_i, l_i, acc = TILE(q_ops, kv_ptr, scale_ptr, tail, hi, kv_row_stride, scale_row_stride,
                                 qk_scale_log2, m_i, l_i, acc, BLOCK_N, CONVERT, PIN, True)
    else:
        for tile_start in range(start, hi, BLOCK_N):
            m_i, l_i, acc = TILE(q_ops, kv_ptr, scale_ptr, tile_start, hi, kv_row_stride, scale_row_stride,
                                 qk_scale_log2, m_i, l_i, acc, BLOCK_N, CONVERT, PIN, True)
    return m_i, l_i, acc


@triton.jit
def _softmax_step(scores, m_i, l_i, qk_scale_log2):
    """Online softmax over raw scores (16, BLOCK_N) -> (new max, the old sums' rescale factor, p, new sum of p)."""
    m_new = tl.maximum(m_i, tl.max(scores, axis=1))
    alpha = tl.exp2((m_i - m_new) * qk_scale_log2)
    p = tl.exp2(scores * qk_scale_log2 - (m_new * qk_scale_log2)[:, None])
    return m_new, alpha, p, l_i * alpha + tl.sum(p, axis=1)


@triton.jit
def _tile_rows(kv_ptr, scale_ptr, tile_start, kv_row_stride, scale_row_stride, BLOCK_N: tl.constexpr):
    rows = (tile_start + tl.arange(0, BLOCK_N)).to(tl.int64)[:, None]
    return kv_ptr + rows * kv_row_stride, scale_ptr + rows * scale_row_stride


@triton.jit
def _load_tile(base, cols, rows_ok, MASKED: tl.constexpr):
    if MASKED:
        return tl.load(base + cols[None, :], mask=rows_ok[:, None], other=0)
    return tl.load(base + cols[None, :])


@triton.jit
def _quantize_e4m3_blocks(q, ROWS: tl.constexpr, BLOCKS: tl.constexpr):
    """q (ROWS, BLOCKS * 32) float32 -> (q8 e4m3, same shape; e8m0 bytes (ROWS, BLOCKS)): per 32 dims the least e
    with amax / 2^e <= 448, clamped to [-126, 127]; q8 = q / 2^e, to nearest even (twin: quantize_q_reference)."""
    blocks = tl.reshape(q, (ROWS, BLOCKS, 32))
    bits = tl.max(tl.abs(blocks), axis=2).to(tl.int32, bitcast=True)
    # amax = m 2^E with m in [1, 2): 448 = 1.75 * 2^8, so e = E - 8, or E - 7 when m > 1.75
    exponent = ((bits >> 23) & 0xFF) - 127 - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)
    exponent = tl.minimum(tl.maximum(exponent, -126), 127)
    inverse = ((127 - exponent) << 23).to(tl.float32, bitcast=True)
    q8 = tl.reshape(blocks * inverse[:, :, None], (ROWS, BLOCKS * 32)).to(tl.float8e4nv)
    return q8, (exponent + 127).to(tl.uint8)


# --- the program's result, and the merge of a sequence's splits ---------------------------
@triton.jit
def _write_result(acc, m_i, l_i, range_ok, seq, split, num_splits, out_ptr, part_acc_ptr, part_ml_ptr, count_ptr,
                  qk_scale_log2, value_scale, TRANSPOSED: tl.constexpr, MERGE: tl.constexpr,
                  WAVE_FENCES: tl.constexpr, MERGE_HEADS: tl.constexpr, MERGE_SPLITS: tl.constexpr):
    """The result by MERGE (table above): the output (DIRECT; NaN rows: invalid range, zeros: empty) or the partial
    (m NaN: invalid). FUSED: barrier, acq_rel atomic add on count[seq] (a call adds num_splits, a power of two), the
    last program merges; WAVE_FENCES (AMD): its waves' store waits and cache invalidates (docs/design.md)."""
    offsets = _result_offsets(TRANSPOSED)
    if MERGE == DIRECT_C:
        norm = tl.where(l_i > 0, value_scale / l_i, 0.0)
        norm = tl.where(range_ok, norm, float("nan"))
        tl.store(out_ptr + seq * (NUM_HEADS_C * V_DIM_C) + offsets, (acc * _per_head(norm, TRANSPOSED)).to(tl.bfloat16))
        # phase written: l_i
    else:
        heads = tl.arange(0, NUM_HEADS_C)
        part = seq * num_splits + split
        tl.store(part_acc_ptr + part * (NUM_HEADS_C * V_DIM_C) + offsets, acc)
        tl.store(part_ml_ptr + part * (2 * NUM_HEADS_C) + heads, tl.where(range_ok, m_i, float("nan")))
        tl.store(part_ml_ptr + part * (2 * NUM_HEADS_C) + NUM_HEADS_C + heads, l_i)
        # phase written: l_i
        if MERGE == FUSED_C:
            if WAVE_FENCES:
                _wait_for_stores()
            tl.debug_barrier()
            finished = tl.atomic_add(count_ptr + seq, 1, sem="acq_rel", scope="gpu") + 1
            if (finished & (num_splits - 1)) == 0:
                if WAVE_FENCES:  # every wave that reads the partials drops its stale lines first
                    seq = _invalidate_caches(seq)
                _merge_splits(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2, value_scale,
                              MERGE_HEADS, MERGE_SPLITS, WAVE_FENCES)  # the fences are AMD's FUSED forms
                # phase merged: finished


@triton.jit
def _result_offsets(TRANSPOSED: tl.constexpr):
    """Element offsets of a (16, 512) head x dim result in the accumulator's layout ((512, 16) if TRANSPOSED)."""
    heads = tl.arange(0, NUM_HEADS_C)
    dims = tl.arange(0, V_DIM_C)
    if TRANSPOSED:
        offsets = heads[None, :] * V_DIM_C + dims[:, None]
    else:
        offsets = heads[:, None] * V_DIM_C + dims[None, :]
    return offsets


@triton.jit
def _per_head(x, TRANSPOSED: tl.constexpr):
    """A per-head vector (16,) broadcast along the dims of the accumulator's layout."""
    if TRANSPOSED:
        row = x[None, :]
    else:
        row = x[:, None]
    return row


@triton.jit
def _merge_splits(out_ptr, part_acc_ptr, part_ml_ptr, seq, num_splits, qk_scale_log2, value_scale,
                  HEADS: tl.constexpr, SPLITS: tl.constexpr, AMD: tl.constexpr):
    """FUSED, the last program: out[seq] from seq's partials, HEADS heads at a time; each pass issues the loads of
    SPLITS splits before it waits for any (read past the L1: .cg). Where SPLITS > num_splits (both powers of two)
    a pass loads each split SPLITS / num_splits times: their sums scale alike, and acc / l does not move (no masked
    loads: each would be a branch of its own on AMD)."""
    dims = tl.arange(0, V_DIM_C)
    for head0 in tl.static_range(0, NUM_HEADS_C, HEADS):
        heads = head0 + tl.arange(0, HEADS)
        m_run = tl.full([HEADS], float("-inf"), tl.float32)
        l_run = tl.zeros([HEADS], tl.float32)
        acc_run = tl.zeros([HEADS, V_DIM_C], tl.float32)
        invalid = tl.zeros([HEADS], tl.int32)
        for first in range(0, num_splits, SPLITS):
            split = first + tl.arange(0, SPLITS)
            part = seq * num_splits + (split & (num_splits - 1))
            ml_rows = part_ml_ptr + part[:, None] * (2 * NUM_HEADS_C) + heads[None, :]
            m = tl.load(ml_rows, cache_modifier=".cg")
            l = tl.load(ml_rows + NUM_HEADS_C, cache_modifier=".cg")
            acc = tl.load(part_acc_ptr + (part[:, None, None] * NUM_HEADS_C + heads[None, :, None]) * V_DIM_C
                          + dims[None, None, :], cache_modifier=".cg")
            m_run, l_run, acc_run, invalid = _merge_step(m_run, l_run, acc_run, invalid, m, l, acc, qk_scale_log2,
                                                         AMD)
        tl.store(out_ptr + (seq * NUM_HEADS_C + heads[:, None]) * V_DIM_C + dims[None, :],
                 _merged(acc_run, l_run, invalid, value_scale))


@triton.jit
def _merge_step(m_run, l_run, acc_run, invalid, m, l, acc, qk_scale_log2, AMD: tl.constexpr):
    """S splits' m, l (S, H) (raw max, NaN: invalid; sum of p), acc (S, H, D) into the merge (m_run, l_run (H,), acc_run
    (H, D), invalid (H,); H may be absent) -> the merge; split s weighs 2^((m_s - max m) * qk_scale_log2)."""
    invalid = tl.maximum(invalid, tl.max((m != m).to(tl.int32), axis=0))
    m = tl.where(m != m, float("-inf"), m)
    m_new = tl.maximum(m_run, tl.max(m, axis=0))
    m_ref = tl.where(m_new > float("-inf"), m_new, 0.0)  # exp2(-inf) = 0 for empty splits
    run_weight = tl.exp2((m_run - m_ref) * qk_scale_log2)
    weight = tl.exp2((m - m_ref) * qk_scale_log2)
    acc_run = _product(acc_run, tl.broadcast_to(tl.expand_dims(run_weight, -1), acc_run.shape), AMD) + \
        tl.sum(_product(acc, tl.broadcast_to(tl.expand_dims(weight, -1), acc.shape), AMD), axis=0)
    l_run = _product(l_run, run_weight, AMD) + tl.sum(_product(l, weight, AMD), axis=0)
    return m_new, l_run, acc_run, invalid


@triton.jit
def _merged(acc_run, l_run, invalid, value_scale):
    """A finished merge's output (H, D) bf16: value_scale x acc / l; NaN for an invalid range, 0 if no token."""
    norm = tl.where(l_run > 0, value_scale / l_run, 0.0)
    norm = tl.where(invalid > 0, float("nan"), norm)
    return (acc_run * tl.expand_dims(norm, -1)).to(tl.bfloat16)


@triton.jit
def _product(a, b, AMD: tl.constexpr):
    """a x b, elementwise. AMD: one v_mul_f32 in inline asm, rounded, fused into nothing: no v_pk_fma_f32 taking a
    per-head weight from a pair's high half (op_sel:[0,1,0]), whose low-lane accumulation gfx950 intermittently
    skips (ROCm/rocMLIR PR 2459), and no sum over splits that one wave fuses as fma(l0, w0, l1 w1) and another as
    fma(l1, w1, l0 w0): replicated waves then differ in the last bit and race on one LDS word (the emulator)."""
    if AMD:
        return tl.inline_asm_elementwise("v_mul_f32 $0, $1, $2", "=v,v,v", [a, b], dtype=tl.float32, is_pure=True,
                                         pack=1)
    return a * b


@triton.jit
def _wait_for_stores():
    """AMD: s_waitcnt vmcnt(0): this wave waits until its vector memory instructions (stores too) complete."""
    tl.inline_asm_elementwise("s_waitcnt vmcnt(0) ; $0", "=v", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _invalidate_caches(value):
    """AMD: buffer_inv sc1 (this wave's L1 and XCD's L2 drop their lines) -> `value`, so its uses come after."""
    return tl.inline_asm_elementwise("buffer_inv sc1", "=v,0", [value], dtype=tl.int32, is_pure=False, pack=1)


# --- the e2m1 -> bf16 conversion: gfx950's instruction, or portable Triton -----------------
# An e2m1 code sxyz is (-1)^s * {0, 0.5, 1, 1.5, 2, 3, 4, 6}[xyz]; a byte holds two codes, the low nibble the
# even dim. The block scale of 32 dims is the e8m0 byte k, 2^(k - 127).
@triton.jit
def _words_to_bf16(words, scale_bytes, BLOCK_N: tl.constexpr, NUM_WORDS: tl.constexpr,
                   CONVERT: tl.constexpr, PIN: tl.constexpr, PURE: tl.constexpr = False):
    """words (BLOCK_N, NUM_WORDS) int32 (code q of word j: dim 8j + q, bits 4q..4q+3), scale_bytes (BLOCK_N, NUM_WORDS
    // 4) e8m0 -> (BLOCK_N, 8 * NUM_WORDS) bf16 in dim order, times 2^-LOG2_SHIFT[CONVERT] (joins: register moves)."""
    scale_bytes = scale_bytes.to(tl.int32)
    if CONVERT == GFX950_C:
        scale = _per_block(_scale_exponent_field(scale_bytes), BLOCK_N, NUM_WORDS // 4, 4)
        r0, r1, r2, r3 = _word_pairs_gfx950(words, scale, PURE)
    else:
        scale = _per_block(_scale_f32(scale_bytes), BLOCK_N, NUM_WORDS // 4, 4)
        r0 = _word_pairs_portable(words, scale, 0, PIN)
        r1 = _word_pairs_portable(words, scale, 1, PIN)
        r2 = _word_pairs_portable(words, scale, 2, PIN)
        r3 = _word_pairs_portable(words, scale, 3, PIN)
    d0, d1 = _bf16_halves(r0)
    d2, d3 = _bf16_halves(r1)
    d4, d5 = _bf16_halves(r2)
    d6, d7 = _bf16_halves(r3)
    # join(a, b) adds a last axis [a, b]; this nesting gives axes (4, 2, 1) x q's bits
    x = tl.join(tl.join(tl.join(d0, d4), tl.join(d2, d6)), tl.join(tl.join(d1, d5), tl.join(d3, d7)))
    return tl.reshape(x, (BLOCK_N, 8 * NUM_WORDS))


@triton.jit
def _per_block(x, ROWS: tl.constexpr, BLOCKS: tl.constexpr, PER_BLOCK: tl.constexpr):
    """(ROWS, BLOCKS) -> (ROWS, BLOCKS * PER_BLOCK): each value repeated PER_BLOCK times."""
    return tl.reshape(tl.broadcast_to(x[:, :, None], (ROWS, BLOCKS, PER_BLOCK)), (ROWS, BLOCKS * PER_BLOCK))


@triton.jit
def _scale_exponent_field(scale_bytes):
    """e8m0 bytes (int32) as a float32's exponent field, all v_cvt_scalef32_* reads (0: 2^-127, 255: NaN)."""
    return (scale_bytes << 23).to(tl.float32, bitcast=True)


# Byte b of the word $4 -> the bf16 pair $b (low code in the low half), times the scale $5 (the Gluon kernel's too)
GFX950_WORD_PAIRS = tl.constexpr("""
        v_cvt_scalef32_pk_bf16_fp4 $0, $4, $5
        v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]
        v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]
        v_cvt_scalef32_pk_bf16_fp4 $3, $4, $5 op_sel:[1,1,0]
        """)


@triton.jit
def _word_pairs_gfx950(words, scale, PURE: tl.constexpr):
    """CDNA4: each byte's two codes (op_sel picks it) -> a bf16 pair times the float32 scale, exact (LOG2_SHIFT 0).
    PURE=True lets Triton 3.6 pipeline the loop (a tile feeding one dot only); False: no copy per MMA layout."""
    return tl.inline_asm_elementwise(
        asm=GFX950_WORD_PAIRS, constraints="=&v,=&v,=&v,=v,v,v", args=[words, scale],
        dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=PURE, pack=1)


@triton.jit
def _bf16_halves(pair):
    low = pair.to(tl.int16).to(tl.bfloat16, bitcast=True)
    high = (pair >> 16).to(tl.int16).to(tl.bfloat16, bitcast=True)
    return low, high


@triton.jit
def _word_pairs_portable(words, scale, b: tl.constexpr, PIN: tl.constexpr):
    """Byte b of each word -> a bf16 pair (low, high code) * 2^-14, exact for block exponents >= -111 (LOG2_SHIFT)."""
    low = _bf16_bits(_e2m1_times_2_pow_m14((words >> (8 * b)) & 0xF) * scale)
    high = _bf16_bits(_e2m1_times_2_pow_m14((words >> (8 * b + 4)) & 0xF) * scale)
    return _pin(low | (high << 16), PIN)


@triton.jit
def _e2m1_times_2_pow_m14(code):
    """e2m1 codes (int32, 0..15) -> float32 value * 2^-14, exact: sxyz as the fp16 s00xyz000000000 (xy 0: denormal)."""
    half = (((code & 0x7) << 9) | ((code & 0x8) << 12)).to(tl.int16).to(tl.float16, bitcast=True)
    return half.to(tl.float32)


@triton.jit
def _scale_f32(scale_bytes):
    """e8m0 bytes (int32) -> 2^(byte - 127) float32 as the reference: 255 NaN, 0 the subnormal 2^-127 (0x00400000)."""
    bits = tl.where(scale_bytes == 0, 0x00400000, scale_bytes << 23)
    return tl.where(scale_bytes == 255, 0x7FC00000, bits).to(tl.float32, bitcast=True)


@triton.jit
def _bf16_bits(value):
    return value.to(tl.bfloat16).to(tl.int16, bitcast=True).to(tl.int32) & 0xFFFF


@triton.jit
def _pin(x, PIN: tl.constexpr):
    """x (int32 or bf16) unchanged, through an opaque v_mov_b32 if PIN (AMD), lest Triton redo it per MMA layout."""
    if PIN:
        x = tl.inline_asm_elementwise("v_mov_b32 $0, $1", "=v,v", [x], dtype=x.dtype, is_pure=False,
                                      pack=2 if x.dtype == tl.bfloat16 else 1)
    return x


# =======================================================================================
# 4. The first call's planning: tuning, the choice, the report, the machine probes, the variants
# =======================================================================================

# --- first-call tuning: the candidates measured on the machine itself ---------------------------------------
# The runner's untimed first call of a case the table lacks times ranked_candidates, keeps the fastest (docs/design.md).
TUNE_CASES = 8  # the leaderboard's benchmark cases: each gets an equal share of the budgets
TUNE_CASE_WALL_S = 40.0  # one case's builds, checks, first runs, timed runs and kernel times
TUNE_CASE_TIMING_S = 0.5  # of which its timed runs at most
TUNE_TOTAL_WALL_S = TUNE_CASES * TUNE_CASE_WALL_S  # past the eighth case, what is left of this
TUNE_ROUNDS = 8  # timed runs per candidate at most
TUNE_KEEP_WITHIN = 1.25  # after 3 rounds, drop candidates slower than this x the leader
FLUSH_BYTES = 512 << 20  # 2x the MI355X's 256 MB memory-side cache (8x the H200's L2)
FLUSH_REPEATS = 4  # ~0.3 ms of GPU work queued ahead of the start event hides the host's time


def _needs_tuning(batch, kv_len, device):
    mode = os.environ.get("MLA_TUNE", "auto")
    if mode == "0" or os.environ.get("MLA_PATH") is not None:
        return False
    if mode != "1" and device.type != "cuda":
        return False
    arch = _arch(device)
    if (batch, kv_len) in measured_table(device) or (arch, batch, kv_len) in STATE.tuned:
        return False
    return len(STATE.tune_log["cases"]) < TUNE_CASES or STATE.tune_log["spent_wall_s"] < TUNE_TOTAL_WALL_S


def tune_first_call(batch, kv_len, device, run_choice, clock=time.perf_counter, timer=None, profiler=None):
    """Time one case's ranked candidates within its budget; the fastest to STATE.tuned -> the pick. run_choice(choice)
    -> the plan (None for aiter); timer(run, device) -> us; profiler(run, device) -> [(kernel, us)]; clock() -> s.
    A candidate that fails, or ran a fallback, is reported, never picked; OOM, device faults and our bugs raise."""
    timer, profiler = timer or time_call_us, profiler or kernel_times_us
    log = STATE.tune_log
    _log_header(device)
    candidates = ranked_candidates(batch, kv_len, device)
    entry = {"case": (batch, kv_len), "tried": [], "failed": [], "skipped": [], "pick": None,
             "build_s": 0.0, "ran": {}, "kernels": None, "profile_error": None}
    if AITER_LAUNCH in candidates and log["aiter_build"] is None and not _build_aiter(run_choice, clock, device):
        candidates.remove(AITER_LAUNCH)
        entry["failed"].append((AITER_LAUNCH, log["aiter_build"]["error"]))
    wall_start, checks_before = clock(), len(STATE.check_log)
    entry["budget_s"] = budget_s = TUNE_CASE_WALL_S if len(log["cases"]) < TUNE_CASES else \
        min(TUNE_CASE_WALL_S, TUNE_TOTAL_WALL_S - log["spent_wall_s"])  # past the 8 cases: what is left
    alive = []
    for choice in candidates:
        if alive and choice != AITER_LAUNCH and \
                clock() - wall_start + log["build_estimate_s"] > budget_s - TUNE_CASE_TIMING_S:
            entry["skipped"].append(choice)
            continue
        start = clock()
        try:
            plan = run_choice(choice)  # build, checks, first run: untimed
        except Exception as exc:  # noqa: BLE001 - caught: every Triton form failed, or aiter in any way
            if _fatal(exc, device) or not (choice == AITER_LAUNCH or isinstance(exc, NoVariantError)):
                raise
            entry["failed"].append((choice, error_summary(exc)[:200]))
            continue
        finally:
            seconds = clock() - start
            entry["build_s"] += seconds
            log["build_estimate_s"] = max(log["build_estimate_s"], seconds)
        variants = getattr(plan, "variants", None)
        if variants and plan.variant != variants[0]:
            why = "; ".join(f"{variant.describe()}: {reason}" for variant, reason in plan.failures)
            entry["failed"].append((choice, f"its own form failed ({why[:300]}); a fallback ran"))
            continue
        entry["ran"][choice] = plan.variant.describe() if variants else None
        alive.append([choice, []])
    timed, timing_start = list(alive), clock()  # every candidate that ran, with its times; `alive` shrinks
    for round_index in range(TUNE_ROUNDS):
        for candidate in alive:
            candidate[1].append(timer(lambda: _run_as_ranked(run_choice, candidate[0]), device))
        if round_index >= 2 and alive:
            leader = min(sum(t) / len(t) for _, t in alive)
            alive = [c for c in alive if sum(c[1]) / len(c[1]) <= TUNE_KEEP_WITHIN * leader] or alive
        if clock() - timing_start > TUNE_CASE_TIMING_S or clock() - wall_start > budget_s:
            break
    log["spent_timing_s"] += clock() - timing_start
    measured = [(sum(t) / len(t), choice, len(t)) for choice, t in timed if t]
    entry["tried"] = sorted(measured)
    STATE.tuned[(_arch(device), batch, kv_len)] = None  # tuned once, even where none ran (choose: the prediction)
    if measured:
        entry["pick_us"], entry["pick"] = min(measured)[:2]
        STATE.tuned[(_arch(device), batch, kv_len)] = entry["pick"]
        try:
            entry["kernels"] = profiler(lambda: run_choice(entry["pick"]), device)
        except Exception as exc:  # noqa: BLE001 - best effort: the report says why, the call goes on
            if _fatal(exc, device):
                raise
            entry["profile_error"] = error_summary(exc)[:160]
    entry["check_s"] = sum(seconds for _, _, seconds, _ in STATE.check_log[checks_before:])
    entry["wall_s"] = clock() - wall_start
    log["spent_wall_s"] += entry["wall_s"]
    log["cases"].append(entry)
    _print_report(entry)
    return entry["pick"]


def _build_aiter(run_choice, clock, device):
    """aiter's first run (its JIT builds), outside every budget -> whether it ran (else aiter is off)."""
    start, error = clock(), None
    try:
        run_choice(AITER_LAUNCH)
    except Exception as exc:  # noqa: BLE001 - aiter is a library outside our tests: any failure
        if _fatal(exc, device):
            raise
        error = error_summary(exc)[:800]  # a moved API's message ends with its signature
    STATE.tune_log["aiter_build"] = {"seconds": clock() - start, "error": error}
    if error is not None:
        _disable_aiter(f"its first run failed: {error}", device)
    return error is None


def _run_as_ranked(run_choice, choice):
    """One run of `choice` as the ranked mode runs it: a fresh input, so aiter rebuilds its metadata."""
    if choice == AITER_LAUNCH:
        for plan in STATE.plans.values():
            if hasattr(plan, "forget_metadata"):  # an aiter plan
                plan.forget_metadata()
    return run_choice(choice)


def ranked_candidates(batch, kv_len, device):
    """The choices to time: the prediction, then candidate_groups' in turns (every group's first, ...)."""
    groups = candidate_groups(batch, kv_len, device)
    ordered = [predicted_choice(batch, kv_len, device, _num_sms(device))]
    for rank in range(max(len(choices) for _, choices in groups)):
        ordered += [choices[rank] for _, choices in groups if rank < len(choices)]
    return list(dict.fromkeys(ordered))


def candidate_groups(batch, kv_len, device):
    """Tuning's candidates by family and merge -> [(name, [choices, closest first])] (docs/design.md)."""
    num_sms = _num_sms(device)
    scaled = _arch(device) in SCALED_NATIVE
    main_launch = (scaled_launch if scaled else default_launch)(batch, kv_len, num_sms)
    main = _split_neighbours(main_launch, kv_len)
    groups = [("scaled" if scaled else "bf16", main)]
    if scaled:
        if main_launch.block_n == 64:  # fewer than two 128-token tiles per CU (scaled_launch's rule)
            groups.append(("scaled 64-token", [dataclasses.replace(main_launch, num_stages=stages)
                                               for stages in (2, 1)]))
        groups.append(("bf16", [default_launch(batch, kv_len, num_sms)]))
        fused_from = main[:1]
        if gluon_capable(_arch(device)):
            once = _split_neighbours(once_launch(batch, kv_len, num_sms), kv_len)
            groups.append(("once (Gluon)", once))
            fused_from = fused_from + once[:1]
    else:
        other_block_n = 32 if main_launch.block_n == 64 else 64
        other = Launch(other_block_n, 4, _splits_for(batch, kv_len, other_block_n, num_sms))
        groups.append((f"bf16 {other_block_n}-token", _split_neighbours(other, kv_len)))
        fused_from = main
    if batch >= num_sms:  # one split per sequence fills the GPU
        groups.append(("direct", [dataclasses.replace(main_launch, num_splits=1)]))
    fused = [dataclasses.replace(launch, merge=MERGE_FUSED) for launch in fused_from if launch.num_splits > 1]
    if fused:
        groups.append(("fused", fused))
    if STATE.aiter is not None:
        groups.append(("aiter", [AITER_LAUNCH]))
    return groups


def _split_neighbours(launch, kv_len):
    """launch at its own, half and twice its split count, own first (at least one tile a split; one: DIRECT)."""
    counts = [launch.num_splits] + [n for n in (launch.num_splits // 2, launch.num_splits * 2)
                                    if 1 <= n <= _pow2_floor(max(1, triton.cdiv(kv_len, launch.block_n)))]
    return [dataclasses.replace(launch, num_splits=n) for n in counts]


def fresh_tune_log():
    """An empty record of first-call tuning (STATE.tune_log)."""
    return {"header": None, "cases": [], "spent_timing_s": 0.0, "spent_wall_s": 0.0, "printed": set(),
            "aiter_build": None, "build_estimate_s": 0.0, "machine": None}


PATHS = ("triton", "aiter")


# --- the choice: MLA_PATH, the measured table, the tuned choice, else the prediction ------------------------
def choose(batch, kv_len, device):
    """The choice for one case: MLA_PATH, else the measured table, else STATE.tuned, else the prediction."""
    forced = os.environ.get("MLA_PATH")
    if forced is not None and forced not in PATHS:
        _fail(ValueError, f"MLA_PATH must be one of {PATHS}, got {forced!r}")
    if forced == "aiter" and STATE.aiter is None:
        _fail(ValueError, f"MLA_PATH=aiter but aiter is unavailable: {STATE.aiter_error}")
    choice = None
    for known in (measured_table(device).get((batch, kv_len)), STATE.tuned.get((_arch(device), batch, kv_len))):
        if choice is None and known is not None and (known != AITER_LAUNCH or STATE.aiter is not None):
            choice = known
    key = (batch, kv_len, device, len(STATE.failed_variants))  # predicted once per case and failed variants
    if choice is None and key not in STATE.predictions:
        STATE.predictions[key] = predicted_choice(batch, kv_len, device, _num_sms(device))
    choice = STATE.predictions[key] if choice is None else choice
    if forced == "aiter":
        return AITER_LAUNCH
    if forced == "triton" and choice == AITER_LAUNCH:
        return default_launch(batch, kv_len, _num_sms(device))
    if choice != AITER_LAUNCH and _one_stage_only(device) and choice.num_stages != 1 and choice.scores == BF16_SCORES:
        return dataclasses.replace(choice, num_stages=1)
    return choice


def measured_table(device):
    """This architecture's measured choices {(batch, kv_len): Launch}; MLA_TABLE=0 ignores them."""
    table = {} if os.environ.get("MLA_TABLE") == "0" else MEASURED_DISPATCH.get(_arch(device), {})
    return {case: Launch.parse(text) for case, text in table.items()}


def predicted_choice(batch, kv_len, device, num_sms):
    """The choice where nothing was measured (docs/performance.md): gfx950: the model's fastest proven form
    (proven_fastest), else SCALED (312 bytes a token, aiter 576); where it failed, BF16, or aiter above 64k tokens
    once the native conversion failed too. Else BF16."""
    proven = proven_fastest(batch, kv_len, device)
    if proven is not None:
        return proven
    if _arch(device) in SCALED_NATIVE:
        scaled = scaled_launch(batch, kv_len, num_sms)
        if launch_variants(scaled, device)[0] not in STATE.failed_variants:
            return scaled
    launch = default_launch(batch, kv_len, num_sms)
    native = launch_variants(launch, device)[0]
    native_failed = native.convert == PORTABLE or native in STATE.failed_variants
    if STATE.aiter is not None and native_failed and batch * kv_len > 65536:
        return AITER_LAUNCH
    return launch


def proven_fastest(batch, kv_len, device):
    """gfx950: the fastest candidate of PREDICTED_US whose first form is in EMULATOR_PROVEN and has not failed here
    (a ONCE candidate only as the Gluon kernel, the form predicted); None where there is none."""
    if not EMULATOR_PROVEN or _arch(device) != "gfx950":
        return None
    for _, choice in PREDICTED_US.get((batch, kv_len), ()):
        launch = Launch.parse(choice)
        variant = launch_variants(launch, device)[0]
        if variant.describe() in EMULATOR_PROVEN and variant not in STATE.failed_variants and \
                (launch.scores != ONCE_SCORES or variant.gluon):
            return launch
    return None


# --- the first-call report (stderr) and its MEASURED DISPATCH block -----------------------------------------
def _log_header(device):
    """The report's header, once per record; the machine probes (once per process) with it."""
    log = STATE.tune_log
    if log["header"] is None:
        aiter_state = (f"aiter written against {AITER_COMMIT}, found {aiter_commit_found()}" if STATE.aiter is not None
                       else f"aiter: {STATE.aiter_error}")
        log.update(arch=_arch(device), device=_device_name(device), kernel_timer="device events around each launch"
                   if device.type == "cuda" else "host clock, interpreter")
        log["header"] = (f"architecture {log['arch']}, {log['device']}, torch {torch.__version__}, "
                         f"triton {triton.__version__}, {aiter_state}, source {SOURCE_ID}")
        log["machine"] = machine_probes(device)


def _print_report(entry):
    """Print the new header lines, the case's and the block so far (a pool worker may end without atexit)."""
    fresh = [line for line in _header_lines() if line not in STATE.tune_log["printed"]]
    STATE.tune_log["printed"].update(fresh)
    print("\n".join(fresh + _case_lines(entry) + [measured_block()]), file=sys.stderr, flush=True)


def tuning_report():
    """This process's first-call tuning report (docs/design.md, "The report"); "" before any."""
    log = STATE.tune_log
    if log["header"] is None:
        return ""
    lines = _header_lines() + (machine_lines(STATE.tune_log["machine"]) if STATE.tune_log["machine"] else [])
    lines += [line for entry in log["cases"] for line in _case_lines(entry)]
    lines.append(f"  spent: timed runs {log['spent_timing_s']:.2f} s (at most {TUNE_CASE_TIMING_S} s a case), "
                 f"everything {log['spent_wall_s']:.1f} s (at most {TUNE_CASE_WALL_S:.0f} s a case)")
    return "\n".join(lines + [measured_block()])


def _header_lines():
    """The report's lines before the cases: the title with the versions, aiter's build, failed variants."""
    lines = ["submission: first-call tuning (MLA_TUNE=0 turns it off; a candidate reads: family tTILE "
             "wWARPS sSPLITS stSTAGES merge): " + STATE.tune_log["header"]]
    build = STATE.tune_log["aiter_build"]
    if build is not None:
        lines.append(f"  aiter build (its first run: JIT modules; outside the tuning budgets): {build['seconds']:.1f} s"
                     + (f", failed: {build['error']}" if build["error"] else ""))
    return lines + [f"  variant failed: {variant.describe()}" for variant in sorted(STATE.failed_variants)]


def _case_lines(entry):
    """The report's lines for one tuned case."""
    if entry["pick"] is None:
        lines = [f"  case {entry['case']}: no candidate ran: the prediction is used"]
    else:
        lines = [f"  case {entry['case']}: pick {entry['pick']}, {entry['pick_us']:.1f} us"
                 + (f" [ran: {entry['ran'][entry['pick']]}]" if entry["ran"].get(entry["pick"]) else "")]
    if entry["tried"]:
        lines.append("    candidates, mean us (runs): " + "; ".join(
            f"{choice} {us:.1f} ({runs})" for us, choice, runs in entry["tried"]))
    if entry["kernels"] is not None:
        total = sum(us for _, us in entry["kernels"])
        lines.append(f"    kernels of the pick, us each ({STATE.tune_log.get('kernel_timer')}): " + ", ".join(
            f"{name[:48]} {us:.1f}" for name, us in entry["kernels"]) + f"; sum {total:.1f}")
    elif entry["profile_error"]:
        lines.append(f"    kernels of the pick: not timed ({entry['profile_error']})")
    lines += [f"    failed {choice}: {why}" for choice, why in entry["failed"]]
    if entry["skipped"]:
        lines.append(f"    skipped for the case's budget of {entry['budget_s']:.0f} s: "
                     + "; ".join(map(str, entry["skipped"])))
    lines.append(f"    builds and first runs {entry['build_s']:.1f} s (checks {entry['check_s']:.2f} s), "
                 f"all {entry['wall_s']:.1f} s")
    return lines


def measured_block():
    """This process's tuned choices as a MEASURED DISPATCH block, in eval.py's format (`ingest` reads it)."""
    by_arch = {}
    for entry in STATE.tune_log["cases"]:
        if entry["pick"] is not None:
            by_arch.setdefault(STATE.tune_log.get("arch"), {})[entry["case"]] = (entry["pick"], entry["pick_us"])
    provenance = (f"{STATE.tune_log.get('device')}, torch {torch.__version__}, triton {triton.__version__}, "
                  f"{time.strftime('%Y-%m-%d')}: first-call tuning, source {SOURCE_ID}")
    lines = [TABLE_BEGIN, "MEASURED_DISPATCH = {"]
    for arch, cases in sorted(by_arch.items()):
        lines.append(f"    {arch!r}: {{")
        lines += [f"        {case!r}: {str(choice)!r},  # {us:.1f} us" for case, (choice, us) in sorted(cases.items())]
        lines.append("    },")
    lines += ["}", "MEASURED_ON = {"] + [f"    {arch!r}: {provenance!r}," for arch in sorted(by_arch)]
    return "\n".join(lines + ["}", TABLE_END])


def _own_source_id():
    with contextlib.suppress(OSError), open(__file__, encoding="utf-8") as source:
        return source_id(source.read())
    return "unknown"


TABLE_BEGIN = "# --- BEGIN " + "MEASURED DISPATCH ---"  # in two parts: only the blocks hold the markers
TABLE_END = "# --- END " + "MEASURED DISPATCH ---"
MACHINE_BEGIN = "# --- BEGIN " + "MEASURED MACHINE ---"
MACHINE_END = "# --- END " + "MEASURED MACHINE ---"


def source_id(text):
    """sha256 (12 hex digits) of a submission's text without its MEASURED DISPATCH block (BEGIN through END marker)
    and MEASURED MACHINE block (and the newline after it): writing or adding either keeps the id. The one definition:
    eval.py's source_id is this function (ingest compares it); a text without both markers is hashed whole."""
    for begin, end, line_end in ((TABLE_BEGIN, TABLE_END, ""), (MACHINE_BEGIN, MACHINE_END, "\n")):
        if begin in text and end in text:
            text = text.split(begin, 1)[0] + text.split(end, 1)[1].removeprefix(line_end)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# --- Machine probes: the GPU's own parameters for tools/latency_model.py (docs/harness.md) -------------
PROBE_BUDGET_S = 2.0  # all probes' wall time, builds included, at the first tuning call of a process on a GPU
PROBE_RUNS = 5
COPY_BLOCK = 8192  # int32 words one program of the copy moves


def machine_probes(device):
    """This process's probes of `device`: measured (a GPU, unless MLA_PROBES=0) and printed once."""
    if device not in STATE.machine:
        if os.environ.get("MLA_PROBES") == "0" or device.type != "cuda":
            why = "off (MLA_PROBES=0)" if device.type == "cuda" else \
                f"not timed on a {device.type} (Triton's interpreter: no device to time)"
            STATE.machine[device] = {"arch": _arch(device), "device": _device_name(device), "off": why}
        else:
            STATE.machine[device] = measure_machine(device)
        print("\n".join(machine_lines(STATE.machine[device])), file=sys.stderr, flush=True)
    return STATE.machine[device]


def measure_machine(device, sizes=None, clock=time.perf_counter, timer=None, driver=None):
    """Run the probes within PROBE_BUDGET_S -> {"arch", "device", "figures", "skipped", "failed", "wall_s"}.
    A probe after the first is skipped where the time spent plus its estimate (the longest probe so far less
    its first runs, plus the longest first run if its kernel is unbuilt) would pass the budget."""
    sizes, timer, driver = sizes or ProbeSizes(), timer or time_call_us, driver or driver_figures
    record = {"arch": _arch(device), "device": _device_name(device), "figures": dict(driver(device)),
              "skipped": [], "failed": []}
    first_runs_s = []

    def first_run(run):
        began = clock()
        run()
        first_runs_s.append(clock() - began)
    start, longest_s, longest_build_s, built = clock(), 0.0, 0.0, set()
    for index, (name, kernel, run) in enumerate(_probe_steps(device, sizes, timer, record["figures"], first_run)):
        if index and clock() - start + longest_s + (0.0 if kernel in built else longest_build_s) > PROBE_BUDGET_S:
            record["skipped"].append(name)
            continue
        began, runs_before = clock(), len(first_runs_s)
        try:
            record["figures"].update(run())
        except Exception as exc:  # noqa: BLE001 - a probe is never worth the submission
            if _fatal(exc, device):
                raise
            record["failed"].append((name, error_summary(exc)[:200]))
        if index:
            mine = first_runs_s[runs_before:]
            if kernel not in built and mine:
                longest_build_s = max(longest_build_s, mine[0])
            longest_s = max(longest_s, clock() - began - sum(mine))
        built.add(kernel)
    record["wall_s"] = clock() - start
    return record


def _probe_steps(device, sizes, timer, figures, first_run):
    """(name, kernel, run) of each probe in order; run() -> its figures (reading earlier `figures`)."""
    def launches(count):
        return _median_us(lambda: [_probe_empty_kernel[(1,)]() for _ in range(count)], device, timer, first_run)

    def copy():
        src = torch.empty(sizes.copy_bytes // 4, dtype=torch.int32, device=device)
        dst = torch.empty_like(src)
        run = functools.partial(_probe_copy_kernel[(src.numel() // COPY_BLOCK,)], src, dst, BLOCK=COPY_BLOCK,
                                num_warps=8)
        first_run(run)
        best_us = min(timer(run, device) for _ in range(PROBE_RUNS))
        if not torch.equal(src, dst):
            raise RuntimeError("the copy kernel's output differs from its input")
        return {"copy_gbs": 2 * sizes.copy_bytes / best_us / 1e3}

    def hbm():
        chain = _chase_chain(sizes.hbm_region_bytes, sizes.line_bytes, sizes.hbm_hops, device)
        hops = sizes.hbm_hops - 1
        return {"hbm_round_trip_us": (_chase_us(chain, hops, 0, device, timer, first_run)
                                      - figures.get("launch_us", 0.0)) / hops}

    def cycles(atomic, name):  # the same lines read cold in both chases: the difference is warm hops only
        lines = sizes.l2_bytes // sizes.line_bytes
        chain = _chase_chain(sizes.l2_bytes, sizes.line_bytes, lines, device)
        once_us = _chase_us(chain, lines + 1, atomic, device, timer, first_run)
        return {name: (_chase_us(chain, 3 * lines + 1, atomic, device, timer, first_run) - once_us) / (2 * lines)}
    return [("launch", "empty", lambda: {"launch_us": launches(1), "two_launches_us": launches(2)}),
            ("copy", "copy", copy), ("HBM chase", "chase", hbm),
            ("L2 chase", "chase", lambda: cycles(0, "l2_round_trip_us")),
            ("atomic chase", "chase", lambda: cycles(1, "atomic_round_trip_us"))]


def _chase_us(chain, hops, atomic, device, timer, first_run):
    """The median time of a chase of `hops` reads around chain's cycle, checked to end where it should."""
    region, order = chain
    end = torch.empty(1, dtype=torch.int32, device=device)
    us = _median_us(lambda: _probe_chase_kernel[(1,)](region, end, order[0], hops, atomic, 0, region.numel() - 1,
                                                      num_warps=1), device, timer, first_run)
    if int(end.item()) != order[hops % len(order)]:
        raise RuntimeError(f"the chase of {hops} ended at word {int(end.item())}, not {order[hops % len(order)]}")
    return us


def _median_us(run, device, timer, first_run):
    """run() once untimed through first_run (its build), then the median of PROBE_RUNS timed runs."""
    first_run(run)
    return sorted(timer(run, device) for _ in range(PROBE_RUNS))[PROBE_RUNS // 2]


def _chase_chain(region_bytes, line_bytes, count, device):
    """(int32 region, order): `count` random lines (seed 7) whose first words hold the next's index, a cycle."""
    stride = line_bytes // 4
    order = torch.randperm(region_bytes // line_bytes, generator=torch.Generator().manual_seed(7))[:count] * stride
    region = torch.empty(region_bytes // 4, dtype=torch.int32, device=device)
    region[order.to(device)] = order.roll(-1).to(torch.int32).to(device)
    return region, order.tolist()


@triton.jit
def _probe_empty_kernel():
    """Nothing: the launch alone."""
    pass


@triton.jit(do_not_specialize=["start", "hops", "atomic", "increment", "words_mask"])
def _probe_chase_kernel(next_ptr, end_ptr, start, hops, atomic, increment, words_mask):
    """One program: `hops` dependent reads of next_ptr (words_mask + 1 int32 word indices), each at the
    index the previous returned (from `start`, masked), as loads or (atomic != 0) device-scope atomic
    adds of `increment` (0 at run time: a literal 0 becomes a load); the last index to end_ptr[0]."""
    index = start
    for _ in range(hops):
        if atomic != 0:
            index = tl.atomic_add(next_ptr + (index & words_mask), increment, sem="relaxed", scope="gpu")
        else:
            index = tl.load(next_ptr + (index & words_mask))
    tl.store(end_ptr, index)


@triton.jit
def _probe_copy_kernel(src_ptr, dst_ptr, BLOCK: tl.constexpr):
    """dst = src, BLOCK int32 words per program (the grid covers both exactly)."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + offsets, tl.load(src_ptr + offsets))


def driver_figures(device):
    """The driver's CUs, clocks, memory bus width and (where torch has it; else None) XCD count."""
    props = torch.cuda.get_device_properties(device)
    found = {"units": props.multi_processor_count, "clock_mhz": None, "memory_clock_mhz": None,
             "memory_bus_bits": None, "xcds": None}
    with contextlib.suppress(Exception):  # best effort: an older driver module lacks a field
        utils = triton.runtime.driver.active.utils.get_device_properties(device.index or 0)
        found.update(clock_mhz=utils["sm_clock_rate"] / 1e3, memory_clock_mhz=utils["mem_clock_rate"] / 1e3,
                     memory_bus_bits=utils["mem_bus_width"])
    named = [name for name in dir(props) if "xcd" in name.lower() or "xcc" in name.lower()]
    found["xcds"] = getattr(props, named[0]) if named else None
    return found


class ProbeSizes(NamedTuple):
    copy_bytes: int = 1 << 30
    hbm_region_bytes: int = 32 << 20
    hbm_hops: int = 2048
    l2_bytes: int = 512 << 10
    line_bytes: int = 128


def machine_lines(record):
    """The report's lines of the probes: a title, the figures, the seconds, the MEASURED MACHINE block."""
    title = ("submission: machine probes (once per process, before tuning; each timed as the runner times a "
             f"call: cache flush queued, events around the launches): {record['device']}, architecture "
             f"{record['arch']}, source {SOURCE_ID}")
    if "off" in record:
        return [f"{title}: {record['off']}"]
    found = record["figures"]

    def shown(name, unit="us", digits=3):
        return f"{found[name]:.{digits}f} {unit}" if found.get(name) is not None else "not measured"
    lines = [title, f"  launch: empty {shown('launch_us', digits=2)}, two back to back "
                    f"{shown('two_launches_us', digits=2)} (medians of {PROBE_RUNS})",
             f"  copy: {shown('copy_gbs', 'GB/s', 0)} read + written (best of {PROBE_RUNS})",
             f"  one lane's dependent loads, per round trip: HBM (cold lines) {shown('hbm_round_trip_us')}, "
             f"L2 {shown('l2_round_trip_us')}; returning device-scope atomics (L2) {shown('atomic_round_trip_us')}",
             f"  driver: {found.get('units')} CUs, clock {shown('clock_mhz', 'MHz', 0)}, memory clock "
             f"{shown('memory_clock_mhz', 'MHz', 0)} x {found.get('memory_bus_bits')} bits, XCDs "
             f"{found['xcds'] if found.get('xcds') is not None else 'not reported'}"]
    lines += [f"  probe skipped for the budget: {name}" for name in record["skipped"]]
    lines += [f"  probe failed: {name}: {why}" for name, why in record["failed"]]
    lines.append(f"  probes' wall time {record['wall_s']:.2f} s, builds included (budget {PROBE_BUDGET_S:.1f} s): "
                 "the first call's extra time")
    return lines + [machine_block(record)]


def machine_block(record):
    """The probes' figures (5 significant digits) as a MEASURED MACHINE block, in eval.py's format."""
    provenance = (f"{record['device']}, torch {torch.__version__}, triton {triton.__version__}, "
                  f"{time.strftime('%Y-%m-%d')}: machine probes, source {SOURCE_ID}")
    figures = {**record["figures"], "probes_wall_s": record["wall_s"]}
    lines = [MACHINE_BEGIN, "MEASURED_MACHINE = {", f"    {record['arch']!r}: {{"]
    lines += [f"        {name!r}: {float(f'{value:.5g}') if isinstance(value, float) else value!r},"
              for name, value in figures.items()]
    return "\n".join(lines + ["    },", "}", "MACHINE_ON = {", f"    {record['arch']!r}: {provenance!r},", "}",
                              MACHINE_END])


def _device_name(device):
    return torch.cuda.get_device_name(device) if device.type == "cuda" else f"{device.type} (interpreter)"


# --- timing as the runner times a call ----------------------------------------------------------------------
def time_call_us(run, device):
    """One run's microseconds as the runner times it: flush queued, events around, no sync first (CPU: wall clock)."""
    _queue_flush(device)
    start, end = _event(device), _event(device)
    start.record()
    run()
    end.record()
    if device.type == "cuda":
        end.synchronize()
    return start.elapsed_time(end) * 1e3


def kernel_times_us(run, device):
    """[(kernel, us)] of one run after the flush, in launch order: events around each launch (STATE.launch_marks; an
    aiter call: one span; a CPU: host clock). Not torch.profiler: it has hung on gfx950 (docs/design.md)."""
    _queue_flush(device)
    STATE.launch_marks = marks = []
    try:
        run()
    finally:
        STATE.launch_marks = None
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return [(name, start.elapsed_time(end) * 1e3) for name, start, end in marks]


def _queue_flush(device):
    """The cache flush queued ahead of a timed run, as the runner's calls have (a GPU only)."""
    if device.type == "cuda":
        if device not in STATE.flush:
            STATE.flush[device] = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device=device)
        for value in range(FLUSH_REPEATS):
            STATE.flush[device].fill_(value)


def _event(device):
    return torch.cuda.Event(enable_timing=True) if device.type == "cuda" else _HostEvent()


class _HostEvent:
    """torch.cuda.Event's record / elapsed_time (ms) on the host clock, for the (synchronous) interpreter."""
    seconds = None

    def record(self):
        self.seconds = time.perf_counter()

    def elapsed_time(self, end):
        return (end.seconds - self.seconds) * 1e3


# --- the launch record and its kernel forms in fallback order -----------------------------------------------
def launch_variants(launch, device):
    """variants_for of one Launch on `device`: the forms its plan tries, in order."""
    return variants_for(_arch(device), _platform(device), launch.block_n, launch.num_warps, launch.num_stages,
                        launch.scores, launch.merge)


# Native conversions (else portable); on hip the BF16 family runs 1 stage (Triton 3.6: no impure asm pipelined).
NATIVE_CONVERT = {"gfx950": GFX950}
SPLIT_TAIL_CONVERTS = {GFX950}  # unmasked full tiles + a masked tail (elsewhere the second tile copy spills)
PIN_BY_PLATFORM = {"cpu": 0, "cuda": 0, "hip": 1}  # the portable conversion's register pin (_pin)
PLAIN_BLOCK_N = 16  # spill-free without the pin (32 spills on gfx950, triton 3.6); self_check guards it
SCALED_NATIVE = {"gfx950": GFX950}  # the SCALED family's native form (elsewhere its portable twin)
SCALED_FALLBACK_TILE = (64, 4, 1)  # (block_n, num_warps, num_stages): the BF16 launch SCALED falls back to
ONCE_FALLBACK_TILE = (128, 8, 2)  # (block_n, num_warps, num_stages): the SCALED launch ONCE falls back to


def variants_for(arch, platform, block_n, num_warps, num_stages=1, scores=BF16_SCORES, merge=MERGE_COMBINE):
    """The split kernel's variants for one launch, in fallback order. ONCE: Gluon (gluon_capable), then SCALED at
    ONCE_FALLBACK_TILE. SCALED: native or portable, then at one stage, then BF16 at SCALED_FALLBACK_TILE. BF16:
    native, portable + pin, on hip portable without asm (PLAIN_BLOCK_N). FUSED: the first form only, then COMBINE."""
    merge_after = MERGE_COMBINE if merge == MERGE_FUSED else merge
    portable_only = os.environ.get("MLA_CONVERT") == "portable"
    if scores == ONCE_SCORES:
        gluon = gluon_capable(arch) and (block_n, num_warps) == (GL_BLOCK_N, GL_NUM_WARPS)
        order = [Variant(GFX950, 0, block_n, num_warps, 1, False, ONCE_SCORES, gluon=True)] if gluon else []
        order += variants_for(arch, platform, *ONCE_FALLBACK_TILE, SCALED_SCORES)
    elif scores == SCALED_SCORES:
        convert = PORTABLE if portable_only else SCALED_NATIVE.get(arch, PORTABLE)
        order = [Variant(convert, 0, block_n, num_warps, num_stages, True, SCALED_SCORES,
                         early_tile=early_tile(block_n, num_stages))]
        if num_stages > 1:
            order.append(order[0]._replace(num_stages=1, early_tile=early_tile(block_n, 1)))
        order += variants_for(arch, platform, *SCALED_FALLBACK_TILE, BF16_SCORES)
    else:
        order = []
        native = NATIVE_CONVERT.get(arch)
        if native is not None and not portable_only:
            order.append(Variant(native, 0, block_n, num_warps, num_stages, native in SPLIT_TAIL_CONVERTS))
        order.append(Variant(PORTABLE, PIN_BY_PLATFORM[platform], block_n, num_warps, num_stages))
        if platform == "hip":  # no inline asm at all, small tiles: spill-free without the pin
            order.append(Variant(PORTABLE, 0, PLAIN_BLOCK_N, num_warps, 1))
    merged = [variant._replace(merge=merge_after) for variant in order]  # every form's merge, fallbacks' too
    first = [merged[0]._replace(merge=MERGE_FUSED, wave_fences=platform == "hip")] if merge == MERGE_FUSED else []
    return first + merged


def gluon_capable(arch):
    """The Gluon kernel can run: Gluon imports (else GLUON_ERROR), gfx950, not MLA_GLUON=0 or MLA_CONVERT=portable."""
    return (gl is not None and arch == "gfx950" and os.environ.get("MLA_GLUON") != "0"
            and os.environ.get("MLA_CONVERT") != "portable")


def early_tile(block_n, num_stages):
    """SCALED: whether a form loads its first tile before Q is quantized (EARLY_TILE): where it does not spill."""
    return block_n * num_stages <= 128


class Variant(NamedTuple):
    """One compiled form of a split kernel: its constexprs and launch options."""
    convert: int  # PORTABLE or GFX950
    pin: int  # see _pin (portable conversion only)
    block_n: int  # KV tokens per tile
    num_warps: int
    num_stages: int
    split_tail: bool = False  # full tiles unmasked, then one masked tail (see _split_tiles)
    scores: int = 0  # BF16_SCORES (the converted tile in bf16 dots), SCALED_SCORES or ONCE_SCORES
    merge: int = 1  # MERGE_DIRECT, MERGE_COMBINE or MERGE_FUSED
    wave_fences: bool = False  # FUSED, AMD: waves wait for their stores before the release, invalidate before the merge
    early_tile: bool = False  # SCALED: the first tile's loads before Q is quantized (EARLY_TILE)
    gluon: bool = False  # the ONCE family's Gluon kernel (_gluon_split_kernel, gfx950)

    @functools.lru_cache(maxsize=None)  # noqa: B019 - a handful of variants per process; every launch asks
    def describe(self):
        flags = ((self.split_tail, "unmasked full tiles + masked tail"), (self.gluon, "Gluon kernel"),
                 (self.wave_fences, "fences in every wave"), (self.early_tile, "first tile early"))
        return (f"{FAMILY_NAMES.get(self.scores, self.scores)} family, "
                f"{CONVERT_NAMES.get(self.convert, self.convert)} conversion, {self.block_n}-token tiles, "
                f"{self.num_warps} warps, {self.num_stages} stage(s), merge {MERGE_NAMES.get(self.merge, self.merge)}"
                + "".join(f", {text}" for wanted, text in flags if wanted))


def scaled_launch(batch, kv_len, num_sms):
    """The SCALED launch: 2 stages; 128-token tiles, 8 warps at >= 2 tiles a CU, else 64, 4 (docs/performance.md)."""
    if batch * triton.cdiv(kv_len, 128) >= 2 * num_sms:
        return Launch(128, 8, _splits_for(batch, kv_len, 128, num_sms), 2, SCALED_SCORES)
    return Launch(64, 4, _splits_for(batch, kv_len, 64, num_sms), 2, SCALED_SCORES)


def once_launch(batch, kv_len, num_sms):
    """The ONCE launch: the Gluon tile, ~1 program per CU (its 132 KB LDS ring: 1 workgroup a CU), >= 2 tiles each."""
    return Launch(GL_BLOCK_N, GL_NUM_WARPS, _splits_for(batch, kv_len, GL_BLOCK_N, num_sms, 1), 1, ONCE_SCORES)


def default_launch(batch, kv_len, num_sms):
    """64-token tiles, 4 warps at >= 1 tile per SM, else 32 (16 failed self_check on the H200); ~2 programs per SM."""
    block_n = 64 if batch * triton.cdiv(kv_len, 64) >= num_sms else 32
    return Launch(block_n, 4, _splits_for(batch, kv_len, block_n, num_sms))


def _splits_for(batch, kv_len, block_n, num_sms, programs_per_sm=2):
    """Splits per sequence (a power of two), every launch's rule: ~programs_per_sm per SM, >= 2 tiles each."""
    tiles = max(1, triton.cdiv(kv_len, block_n))
    return min(_pow2_floor(triton.cdiv(programs_per_sm * num_sms, batch)), _pow2_floor(tiles // 2))


def _pow2_floor(value):
    return 1 << (max(int(value), 1).bit_length() - 1)


@dataclasses.dataclass(frozen=True, order=True)
class Launch:
    """The one form of a launch choice: the aiter path (AITER_LAUNCH), or the split kernel's tile, warps, programs per
    sequence (a power of two), pipelined stages, family and merge, checked (else ValueError), its merge fitted: DIRECT
    for 1 split, COMBINE for several unless FUSED. Its literal form (tables, report, logs) is str(launch), e.g.
    'scaled t128 w8 s4 st2 combine' or 'aiter'; Launch.parse reads it back (eval.py's ingest too)."""
    block_n: int = 0
    num_warps: int = 0
    num_splits: int = 0
    num_stages: int = 1
    scores: int = BF16_SCORES
    merge: int = MERGE_COMBINE
    path: str = "triton"

    def __post_init__(self):
        sizes = (self.block_n, self.num_warps, self.num_splits, self.num_stages)
        if self.path == "aiter" and sizes + (self.scores, self.merge) == (0, 0, 0, 1, BF16_SCORES, MERGE_COMBINE):
            return
        bad = [name for name, size in zip(LAUNCH_SIZES, sizes) if type(size) is not int or size < 1]  # noqa: E721
        bad += [name for name, size in zip(LAUNCH_SIZES[:3], sizes) if name not in bad and size & (size - 1)]
        if bad or self.path != "triton" or self.scores not in FAMILY_NAMES or self.merge not in MERGE_NAMES:
            _fail(ValueError, f"a launch is Launch(path='aiter') or Launch(block_n, num_warps, num_splits, num_stages, "
                              f"family {tuple(FAMILY_NAMES)}, merge {tuple(MERGE_NAMES)}) with powers of two for the "
                              f"first three; got {self!r} (bad: {', '.join(bad) or 'path, family or merge'})")
        fitted = MERGE_DIRECT if self.num_splits == 1 else MERGE_COMBINE if self.merge == MERGE_DIRECT else self.merge
        object.__setattr__(self, "merge", fitted)

    def __str__(self):
        if self.path == "aiter":
            return "aiter"
        return (f"{FAMILY_NAMES[self.scores]} t{self.block_n} w{self.num_warps} s{self.num_splits} "
                f"st{self.num_stages} {MERGE_NAMES[self.merge]}")

    @classmethod
    def parse(cls, text):
        """str(launch) -> the launch; ValueError naming the text when it is not one."""
        if text == "aiter":
            return cls(path="aiter")
        found = re.fullmatch(r"(\w+) t(\d+) w(\d+) s(\d+) st(\d+) (\w+)", text) if isinstance(text, str) else None
        families = {name: code for code, name in FAMILY_NAMES.items()}
        merges = {name: code for code, name in MERGE_NAMES.items()}
        if found is None or found[1] not in families or found[6] not in merges:
            _fail(ValueError, f"a launch reads 'aiter' or 'FAMILY tTILE wWARPS sSPLITS stSTAGES MERGE' (families "
                              f"{', '.join(families)}; merges {', '.join(merges)}), not {text!r}")
        return cls(*map(int, found.groups()[1:5]), families[found[1]], merges[found[6]])


LAUNCH_SIZES = ("block_n", "num_warps", "num_splits", "num_stages")
AITER_LAUNCH = Launch(path="aiter")


# =======================================================================================
# 5. aiter: fp8 Q + fp8 KV through aiter's persistent decode
# =======================================================================================

# Written against aiter f3be04a, the runner's build (the three calls' arguments, as tests/test_aiter_glue.py's test
# double has them; docs/design.md); _checked_call checks them before a plan's first call: a moved API never crashes.
AITER_COMMIT = "f3be04a"
AITER_NAMES = {"mla_decode_fwd": "aiter.mla.mla_decode_fwd", "metadata_info": "aiter.get_mla_metadata_info_v1",
               "metadata_fill": "aiter.get_mla_metadata_v1"}  # the API dict's keys -> the names messages use


def _import_aiter():
    """-> (aiter's decode API, None) where it can run (ROCm + aiter), else (None, why not)."""
    if not (torch.version.hip and torch.cuda.is_available()):
        return None, "not a ROCm GPU"
    if os.environ.get("MLA_PATH") == "triton":
        return None, "MLA_PATH=triton"
    try:
        from aiter import dtypes as aiter_dtypes, get_mla_metadata_info_v1, get_mla_metadata_v1
        from aiter.mla import mla_decode_fwd
    except Exception as exc:  # noqa: BLE001 - any import failure leaves the Triton path
        why = f"import failed: {exc!r}"
        warnings.warn(f"submission: aiter unavailable, every case runs on Triton ({why})", RuntimeWarning)
        return None, why
    return {"mla_decode_fwd": mla_decode_fwd, "metadata_info": get_mla_metadata_info_v1,
            "metadata_fill": get_mla_metadata_v1, "fp8": aiter_dtypes.fp8}, None


def _disable_aiter(reason, device):
    """aiter failed outside a tuning candidate's run: one warning, and Triton from now on (STATE.aiter unset)."""
    STATE.aiter, STATE.aiter_error = None, reason
    STATE.predictions.clear()
    _warn_once(("aiter", device), f"aiter failed ({reason}); every case runs on Triton from now on")


def _checked_call(api, name, checked, *args, **kwargs):
    """api[name](*args, **kwargs), its signature bound to them first (unless in `checked`): AiterSignatureError."""
    function = api[name]
    if name not in checked:
        try:
            signature = inspect.signature(function)
        except (TypeError, ValueError):  # no Python signature (a compiled function): not checkable
            signature = None
        if signature is not None:
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise AiterSignatureError(
                    f"{AITER_NAMES[name]} does not take the arguments the glue passes ({exc}; written against "
                    f"aiter {AITER_COMMIT}, found {aiter_commit_found()}); its signature: {signature}") from None
        checked.add(name)
    return function(*args, **kwargs)


def aiter_commit_found():
    """The aiter commit imported, per files: the version's '+g<hash>', else the checkout's HEAD, else 'unknown'."""
    with contextlib.suppress(Exception):  # not installed as a distribution: look for a checkout
        import importlib.metadata
        version = importlib.metadata.version("amd-aiter")
        found = re.search(r"[+.]g([0-9a-f]{7,40})", version)
        if found:
            return f"{found.group(1)[:9]} (from the version {version})"
    with contextlib.suppress(Exception):  # no checkout either: "unknown"
        import aiter
        git = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(aiter.__file__))), ".git")
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as head_file:
            head = head_file.read().strip()
        if head.startswith("ref: "):
            with open(os.path.join(git, head[5:]), encoding="utf-8") as ref_file:
                head = ref_file.read().strip()
        return f"{head[:9]} (from the checkout's HEAD)"
    return "unknown"


def _raised_by_aiter(exc, api):
    """True when `exc` came from aiter (its package or an API function on the traceback) or its API moved."""
    if isinstance(exc, AiterSignatureError):
        return True
    codes = {getattr(getattr(f, "__func__", f), "__code__", None) for f in (api or {}).values()}
    return any(code in codes or f"{os.sep}aiter{os.sep}" in code.co_filename for code in _traceback_codes(exc))


class AiterSignatureError(TypeError):
    """An aiter function does not take the arguments the glue passes (its API moved)."""


def _quantize_fp8_per_tensor(q, dtype):
    """Q to fp8 as the reference (quantize_q_fp8's torch twin) -> (q8 contiguous, as aiter reads it, scale (1,))."""
    finfo = torch.finfo(dtype)
    scale = q.abs().amax().clamp(min=1e-12) / finfo.max
    q8 = (q / scale).clamp(min=finfo.min, max=finfo.max).to(dtype).contiguous()
    return q8, scale.to(torch.float32).reshape(1)


def _page_lens(kv_indptr):
    """kv_last_page_len with page size 1: the sequence lengths (the torch twin, 1 launch)."""
    return (kv_indptr[1:] - kv_indptr[:-1]).to(torch.int32)


def q8_edge_case(batch, device):
    """A (batch, 16, 576) bf16 Q of amax 28 (scale 1/16) whose q / scale runs through every bf16 value e4m3 holds."""
    magnitudes = torch.arange(0x3880, 0x41E1, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)  # 2^-14 .. 28
    values = torch.cat([magnitudes, -magnitudes, torch.zeros(64, dtype=torch.bfloat16)])
    count = batch * NUM_HEADS * QK_HEAD_DIM
    return values.repeat(triton.cdiv(count, values.numel()))[:count].reshape(batch, NUM_HEADS, QK_HEAD_DIM).to(device)


# =======================================================================================
# 6. Validation: bad input -> ValueError / TypeError naming the argument (cheap: attribute reads only,
#    no device syncs; the indptr values on a plan's first call)
# =======================================================================================

PACKED_DTYPES = tuple(d for d in (getattr(torch, "float4_e2m1fn_x2", None), torch.uint8) if d)
SCALE_DTYPES = tuple(d for d in (getattr(torch, "float8_e8m0fnu", None), torch.uint8) if d)
INDPTR_DTYPES = (torch.int32,)
Q_DTYPES = (torch.bfloat16,)


def _validate(data):
    """-> (q, kv_data, qo_indptr, kv_indptr, batch, kv_len, sm_scale), or raises (no device sync: no indptr values)."""
    if not isinstance(data, (tuple, list)) or len(data) != 5:
        _fail(TypeError, "data must be the tuple (q, kv_data, qo_indptr, kv_indptr, config)")
    q, kv_data, qo_indptr, kv_indptr, config = data
    for name, value in (("config", config), ("kv_data", kv_data)):
        if not isinstance(value, dict):
            _fail(TypeError, f"{name} must be a dict, got {type(value).__name__}")
    try:
        batch, kv_len, sm_scale = config["batch_size"], config["kv_seq_len"], config["sm_scale"]
        for key, expected in CONFIG_EXPECTED.items():
            if config[key] != expected:
                _fail(ValueError, f"config[{key!r}] must be {expected}, got {config[key]!r}")
    except KeyError as exc:
        _fail(ValueError, f"config is missing key {exc.args[0]!r}")
    if not isinstance(batch, int) or batch < 1:
        _fail(ValueError, f"config['batch_size'] must be a positive int, got {batch!r}")
    if not isinstance(kv_len, int) or kv_len < 0:
        _fail(ValueError, f"config['kv_seq_len'] must be a non-negative int, got {kv_len!r}")
    if not isinstance(sm_scale, (int, float)) or not math.isfinite(sm_scale) or sm_scale <= 0:
        _fail(ValueError, f"config['sm_scale'] must be a positive finite number, got {sm_scale!r}")
    _tensor(q, "q", Q_DTYPES, 3)
    if q.shape[0] != batch or q.shape[1] != NUM_HEADS or q.shape[2] != QK_HEAD_DIM:
        _fail(ValueError, f"q must have shape (batch_size={batch}, {NUM_HEADS}, {QK_HEAD_DIM}) "
                          f"(q_seq_len 1), got {tuple(q.shape)}")
    if q.stride(2) != 1:
        _fail(ValueError, "q must be contiguous in its last dim")
    for name, indptr in (("qo_indptr", qo_indptr), ("kv_indptr", kv_indptr)):
        _tensor(indptr, name, INDPTR_DTYPES, 1)
        if indptr.shape[0] != batch + 1:
            _fail(ValueError, f"{name} must have batch_size + 1 = {batch + 1} entries, got {indptr.shape[0]}")
        if indptr.device != q.device:
            _fail(ValueError, f"{name} is on {indptr.device} but q is on {q.device}")
    return q, kv_data, qo_indptr, kv_indptr, batch, kv_len, float(sm_scale)


def check_indptr_values(qo_indptr, kv_indptr, total_kv):
    """ValueError on the first bad indptr value (a device sync: a plan's first call, or MLA_CHECK=1; else NaN rows)."""
    qo = qo_indptr.tolist()
    if qo != list(range(len(qo))):
        bad = next(i for i, v in enumerate(qo) if v != i)
        _fail(ValueError, f"qo_indptr must be 0, 1, ..., batch_size (q_seq_len 1); qo_indptr[{bad}] = {qo[bad]}")
    kv = kv_indptr.tolist()
    if kv[0] < 0 or kv[-1] > total_kv:
        _fail(ValueError, f"kv_indptr must lie in [0, total_kv={total_kv}], got first {kv[0]}, last {kv[-1]}")
    for i in range(len(kv) - 1):
        if kv[i + 1] < kv[i]:
            _fail(ValueError, f"kv_indptr must be non-decreasing; kv_indptr[{i}] = {kv[i]} > "
                              f"kv_indptr[{i + 1}] = {kv[i + 1]}")


def _mxfp4_operands(kv_data, device):
    """kv_data['mxfp4'] -> (packed (total_kv, 1, 288), scales (rows, cols)), validated."""
    entry = _kv_pair(kv_data, "mxfp4", "the Triton path reads the MXFP4 cache", "packed e2m1 data, e8m0 scales")
    packed = _tensor(entry[0], "kv_data['mxfp4'][0]", PACKED_DTYPES, 3)
    scales = _tensor(entry[1], "kv_data['mxfp4'][1]", SCALE_DTYPES, 2)
    total_kv = packed.shape[0]
    if packed.shape[1] != 1 or packed.shape[2] != PACKED_ROW_BYTES or packed.stride(2) != 1:
        _fail(ValueError, f"kv_data['mxfp4'][0] must be (total_kv, 1, {PACKED_ROW_BYTES}) with unit "
                          f"last stride, got shape {tuple(packed.shape)} strides {packed.stride()}")
    if scales.shape[0] < total_kv or scales.shape[1] < SCALE_COLS or scales.stride(1) != 1:
        _fail(ValueError, f"kv_data['mxfp4'][1] must cover (total_kv={total_kv}, {SCALE_COLS}) e8m0 scales with unit "
                          f"column stride, got shape {tuple(scales.shape)} strides {scales.stride()}")
    if packed.device != device or scales.device != device:
        _fail(ValueError, f"kv_data['mxfp4'] must be on {device} with q")
    return packed, scales


def _word_aligned(packed):
    """The kernels read the codes as int32 words: the rows must start on 4-byte boundaries."""
    return packed.data_ptr() % WORD_BYTES == 0 and packed.stride(0) % WORD_BYTES == 0


def _fp8_operands(kv_data, device):
    kv8, kv_scale = _kv_pair(kv_data, "fp8", "the aiter path reads the fp8 cache", "fp8 data, float32 scale")
    if not isinstance(kv8, torch.Tensor) or kv8.dim() != 3 or kv8.shape[1] != 1 \
            or kv8.shape[2] != QK_HEAD_DIM or kv8.element_size() != 1:
        _fail(ValueError, f"kv_data['fp8'][0] must be an fp8 tensor (total_kv, 1, {QK_HEAD_DIM})")
    if not isinstance(kv_scale, torch.Tensor) or kv_scale.numel() != 1 or kv_scale.dtype != torch.float32:
        _fail(ValueError, "kv_data['fp8'][1] must be a float32 tensor of one element")
    if kv8.device != device or kv_scale.device != device:
        _fail(ValueError, f"kv_data['fp8'] must be on {device} with q")
    return kv8, kv_scale


def _kv_pair(kv_data, key, reader, pair):
    """kv_data[key], which must be a pair (`reader`: the path that reads it, `pair`: what it holds)."""
    entry = kv_data.get(key)
    if entry is None:
        _fail(ValueError, f"kv_data is missing key {key!r} ({reader})")
    if not isinstance(entry, (tuple, list)) or len(entry) != 2:
        _fail(TypeError, f"kv_data[{key!r}] must be the pair ({pair})")
    return entry


def _tensor(value, name, dtypes, ndim):
    if not isinstance(value, torch.Tensor):
        _fail(TypeError, f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dtype not in dtypes:
        _fail(TypeError, f"{name} must have dtype {' or '.join(map(str, dtypes))}, got {value.dtype}")
    if value.dim() != ndim:
        _fail(ValueError, f"{name} must be {ndim}-D, got shape {tuple(value.shape)}")
    return value


# =======================================================================================
# 7. Errors, the device and warnings: what every part above shares
# =======================================================================================

class KernelLaunchError(RuntimeError):
    """A variant failed to build, fit or launch, the device still usable (the error is the __cause__)."""


class SelfCheckError(ArithmeticError):
    """A variant ran but disagreed with float32 attention (self_check, or the first call's check)."""


class NoVariantError(RuntimeError):
    """Every kernel variant of a plan failed to build, launch or pass its checks."""


def error_summary(exc):
    """One line for a warning or the report: the type, the innermost cause's type and last non-caret line."""
    inner = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = ([line.strip() for line in str(inner).splitlines() if line.strip().strip("^")] or [""])[-1]
    return f"{type(exc).__name__}: " + (f"{type(inner).__name__}: {text}" if inner is not exc else text)


def _fatal(exc, device):
    """Errors no other candidate can recover from: out of memory, a faulted device."""
    return isinstance(exc, torch.OutOfMemoryError) or _device_faulted(device)


def _device_faulted(device):
    """True when an earlier kernel faulted the device (illegal address...): synchronizing raises then."""
    if device.type == "cuda":
        try:
            torch.cuda.synchronize(device)
        except RuntimeError:
            return True
    return False


# Triton's compiler and backends (the AMD linker runs from there): any exception raised in them is a build failure.
_TOOLCHAIN_DIRS = tuple(os.path.join(os.path.dirname(triton.__file__), name, "") for name in ("compiler", "backends"))


def _raised_by_toolchain(exc):
    """True when `exc` was raised inside _TOOLCHAIN_DIRS (a pass's assertion, the linker's error...)."""
    return any(code.co_filename.startswith(_TOOLCHAIN_DIRS) for code in _traceback_codes(exc))


def _traceback_codes(exc):
    """The code objects of exc's traceback, from the catching frame to the raising one."""
    frame = exc.__traceback__
    while frame is not None:
        yield frame.tb_frame.f_code
        frame = frame.tb_next


def _warn_once(key, message):
    if key not in STATE.warned:
        STATE.warned.add(key)
        warnings.warn(f"submission: {message}", RuntimeWarning, stacklevel=3)


@functools.lru_cache(maxsize=None)
def _num_sms(device):
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _one_stage_only(device):
    """AMD: Triton 3.6 rejects impure inline asm (the BF16 family's conversion) in a pipelined loop."""
    return _platform(device) == "hip" or _arch(device).startswith("gfx")


@functools.lru_cache(maxsize=None)
def _arch(device):
    """The device's architecture name (cached: it sits on the dispatch path)."""
    if device.type != "cuda":
        return device.type
    if torch.version.hip:
        return torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _platform(device):
    return "cpu" if device.type != "cuda" else "hip" if torch.version.hip else "cuda"


def _fail(kind, message):
    raise kind(f"custom_kernel: {message}")


# =======================================================================================
# 8. Import-time state, then the generated tables (one block, written by eval.py's with_block)
# =======================================================================================

SOURCE_ID = _own_source_id()

STATE = State()

# A choice is str(Launch): 'aiter' or e.g. 'scaled t128 w8 s4 st2 combine'. Written by `eval.py tune` (timed on a
# GPU) or `eval.py ingest LOG` (the runner's first calls); else tuned or predicted.
# --- BEGIN MEASURED DISPATCH ---
MEASURED_DISPATCH = {}
MEASURED_ON = {}
# --- END MEASURED DISPATCH ---
# The machine probes' figures per architecture, kept by `eval.py ingest LOG` for tools/latency_model.py.
# --- BEGIN MEASURED MACHINE ---
MEASURED_MACHINE = {}
MACHINE_ON = {}
# --- END MEASURED MACHINE ---
# predicted_choice takes the latency model's fastest candidate among these forms (docs/performance.md, v15).
# --- BEGIN EMULATOR PROVEN ---
# Written by tools/gfx950/matrix.py from results/gfx950_matrix.json: the split-kernel forms
# (Variant.describe()) every run of which on the gfx950 emulator was right.
EMULATOR_PROVEN = frozenset({
    'bf16 family, gfx950 conversion, 32-token tiles, 4 warps, 1 stage(s), merge combine, unmasked full tiles + masked tail',
    'bf16 family, gfx950 conversion, 64-token tiles, 4 warps, 1 stage(s), merge combine, unmasked full tiles + masked tail',
    'bf16 family, gfx950 conversion, 64-token tiles, 4 warps, 1 stage(s), merge direct, unmasked full tiles + masked tail',
    'bf16 family, portable conversion, 16-token tiles, 4 warps, 1 stage(s), merge combine',
    'bf16 family, portable conversion, 16-token tiles, 4 warps, 1 stage(s), merge direct',
    'bf16 family, portable conversion, 32-token tiles, 4 warps, 1 stage(s), merge combine',
    'bf16 family, portable conversion, 64-token tiles, 4 warps, 1 stage(s), merge combine',
    'bf16 family, portable conversion, 64-token tiles, 4 warps, 1 stage(s), merge direct',
    'once family, gfx950 conversion, 128-token tiles, 4 warps, 1 stage(s), merge combine, Gluon kernel',
    'once family, gfx950 conversion, 128-token tiles, 4 warps, 1 stage(s), merge direct, Gluon kernel',
    'once family, gfx950 conversion, 128-token tiles, 4 warps, 1 stage(s), merge fused, Gluon kernel, fences in every wave',
    'scaled family, gfx950 conversion, 128-token tiles, 8 warps, 1 stage(s), merge combine, unmasked full tiles + masked tail, first tile early',
    'scaled family, gfx950 conversion, 128-token tiles, 8 warps, 1 stage(s), merge direct, unmasked full tiles + masked tail, first tile early',
    'scaled family, gfx950 conversion, 128-token tiles, 8 warps, 2 stage(s), merge combine, unmasked full tiles + masked tail',
    'scaled family, gfx950 conversion, 128-token tiles, 8 warps, 2 stage(s), merge direct, unmasked full tiles + masked tail',
    'scaled family, gfx950 conversion, 128-token tiles, 8 warps, 2 stage(s), merge fused, unmasked full tiles + masked tail, fences in every wave',
    'scaled family, gfx950 conversion, 64-token tiles, 4 warps, 1 stage(s), merge combine, unmasked full tiles + masked tail, first tile early',
    'scaled family, gfx950 conversion, 64-token tiles, 4 warps, 2 stage(s), merge combine, unmasked full tiles + masked tail, first tile early',
    'scaled family, gfx950 conversion, 64-token tiles, 4 warps, 2 stage(s), merge fused, unmasked full tiles + masked tail, fences in every wave, first tile early',
})
# --- END EMULATOR PROVEN ---
# --- BEGIN MI355X PREDICTION ---
# Per case every gfx950 candidate's predicted us (tools/mi355x_prediction.py --write-submission: the
# fitted parameters), fastest first; predicted_choice takes the first whose form EMULATOR_PROVEN holds.
PREDICTED_US = {
    (4, 1024): (
        (13.8, 'once t128 w4 s4 st1 fused'), (15.9, 'scaled t64 w4 s8 st2 fused'), (20.5, 'once t128 w4 s8 st1 combine'),
        (20.9, 'scaled t64 w4 s16 st2 combine'), (22.0, 'once t128 w4 s4 st1 combine'), (22.1, 'scaled t64 w4 s8 st2 combine'),
        (22.4, 'scaled t64 w4 s8 st1 combine'), (23.8, 'bf16 t32 w4 s16 st1 combine'), (24.4, 'scaled t64 w4 s4 st2 combine'),
        (25.1, 'once t128 w4 s2 st1 combine'),
    ),
    (4, 8192): (
        (18.7, 'once t128 w4 s32 st1 fused'), (20.5, 'once t128 w4 s64 st1 combine'), (22.0, 'once t128 w4 s32 st1 combine'),
        (22.1, 'scaled t64 w4 s64 st2 combine'), (22.4, 'scaled t64 w4 s64 st1 combine'), (24.4, 'scaled t64 w4 s32 st2 combine'),
        (25.1, 'once t128 w4 s16 st1 combine'), (25.6, 'bf16 t64 w4 s64 st1 combine'), (25.7, 'scaled t64 w4 s128 st2 combine'),
        (35.5, 'scaled t64 w4 s64 st2 fused'),
    ),
    (32, 1024): (
        (13.8, 'once t128 w4 s4 st1 fused'), (15.9, 'scaled t64 w4 s8 st2 fused'), (20.6, 'once t128 w4 s8 st1 combine'),
        (22.0, 'once t128 w4 s4 st1 combine'), (22.1, 'scaled t64 w4 s8 st2 combine'), (22.4, 'scaled t64 w4 s8 st1 combine'),
        (24.4, 'scaled t64 w4 s4 st2 combine'), (25.1, 'once t128 w4 s2 st1 combine'), (25.6, 'bf16 t64 w4 s8 st1 combine'),
        (25.8, 'scaled t64 w4 s16 st2 combine'),
    ),
    (32, 8192): (
        (27.0, 'once t128 w4 s8 st1 fused'), (30.0, 'scaled t128 w8 s16 st2 fused'), (34.5, 'once t128 w4 s8 st1 combine'),
        (34.5, 'scaled t128 w8 s8 st2 combine'), (37.1, 'scaled t128 w8 s16 st2 combine'), (37.1, 'once t128 w4 s16 st1 combine'),
        (43.3, 'once t128 w4 s4 st1 combine'), (47.2, 'scaled t128 w8 s32 st2 combine'), (62.6, 'bf16 t64 w4 s16 st1 combine'),
    ),
    (64, 1024): (
        (14.9, 'once t128 w4 s4 st1 fused'), (17.3, 'scaled t128 w8 s4 st2 fused'), (22.7, 'once t128 w4 s4 st1 combine'),
        (23.4, 'scaled t128 w8 s4 st2 combine'), (25.1, 'once t128 w4 s2 st1 combine'), (25.4, 'once t128 w4 s8 st1 combine'),
        (26.4, 'scaled t128 w8 s2 st2 combine'), (28.0, 'scaled t128 w8 s8 st2 combine'), (35.5, 'bf16 t64 w4 s8 st1 combine'),
    ),
    (64, 8192): (
        (42.7, 'once t128 w4 s4 st1 fused'), (46.0, 'scaled t128 w8 s8 st2 fused'), (50.5, 'once t128 w4 s4 st1 combine'),
        (50.5, 'scaled t128 w8 s4 st2 combine'), (53.2, 'scaled t128 w8 s8 st2 combine'), (53.2, 'once t128 w4 s8 st1 combine'),
        (59.8, 'scaled t128 w8 s16 st2 combine'), (67.5, 'once t128 w4 s2 st1 combine'), (99.1, 'bf16 t64 w4 s8 st1 combine'),
    ),
    (256, 1024): (
        (24.9, 'once t128 w4 s1 st1 direct'), (24.9, 'scaled t128 w8 s1 st2 direct'), (31.4, 'scaled t128 w8 s2 st2 fused'),
        (38.6, 'scaled t128 w8 s2 st2 combine'), (38.6, 'once t128 w4 s2 st1 combine'), (47.9, 'scaled t128 w8 s4 st2 combine'),
        (63.3, 'bf16 t64 w4 s2 st1 combine'),
    ),
    (256, 8192): (
        (136.0, 'once t128 w4 s1 st1 direct'), (136.0, 'scaled t128 w8 s1 st2 direct'), (142.6, 'scaled t128 w8 s2 st2 fused'),
        (149.8, 'scaled t128 w8 s2 st2 combine'), (149.8, 'once t128 w4 s2 st1 combine'), (156.4, 'scaled t128 w8 s4 st2 combine'),
        (317.8, 'bf16 t64 w4 s2 st1 combine'),
    ),
}
# --- END MI355X PREDICTION ---
