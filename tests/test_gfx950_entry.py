"""A wave's entry state on the gfx950 emulator follows the code object (tools/gfx950/executor.py,
EntryState): the user SGPRs its `.amdhsa_user_sgpr_*` flags enable, in LLVM AMDGPUUsage's order,
the preloaded kernel arguments after them, the workgroup ids its system flags enable, the work-item
ids packed in v0. A flag or register the emulator does not set up stops the run naming it; nothing
runs on a default.

Hand-written amdgcn (gfx950.run_asm) states each layout; a Triton 3.9 build, whose code object
enables the dispatch pointer, the queue pointer and the dispatch id (kernarg pointer in s[4:5],
preload from s8), runs right, as it did not when the kernarg pointer was always s[0:1].
"""
import re
import sys
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import gfx950  # noqa: E402
from gfx950.executor import EntryState  # noqa: E402

# Stores, per workgroup, the dword at byte 4 of the dispatch packet (workgroup size x | y << 16), the
# dispatch id's low half and the workgroup id, with the kernarg pointer after the dispatch and
# queue pointers: s[0:1] dispatch, s[2:3] queue, s[4:5] kernarg, s[6:7] dispatch id, s8 group x.
DISPATCH_PTR_ASM = """
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_queue_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_user_sgpr_dispatch_id 1
  .amdhsa_user_sgpr_count 8
  s_load_dword s10, s[0:1], 0x4
  s_load_dwordx2 s[12:13], s[4:5], 0x0
  s_waitcnt lgkmcnt(0)
  s_mul_i32 s14, s8, 12
  v_mov_b32 v1, s10
  v_mov_b32 v2, s6
  v_mov_b32 v3, s8
  v_mov_b32 v4, s14
  global_store_dwordx3 v4, v[1:3], s[12:13]
  s_endpgm
"""


def test_user_sgprs_come_in_the_abis_order():
    out = torch.full((3, 3), -1, dtype=torch.int32)
    gfx950.run_asm(DISPATCH_PTR_ASM, [out], grid=(3,), num_warps=2)
    # workgroup size 128 (2 waves) and 1 in y; dispatch id 0 (the first of its queue); the workgroup id
    assert out.tolist() == [[128 | 1 << 16, 0, g] for g in range(3)]


def test_the_preload_follows_the_user_sgprs():
    text = """
  .amdhsa_user_sgpr_dispatch_ptr 1
  .amdhsa_user_sgpr_kernarg_segment_ptr 1
  .amdhsa_user_sgpr_kernarg_preload_length 3
  .amdhsa_user_sgpr_count 7
  v_mov_b32 v1, s6
  v_mov_b32 v2, 0
  global_store_dword v2, v1, s[4:5]
  s_endpgm
"""
    out = torch.zeros(1, dtype=torch.int32)
    gfx950.run_asm(text, [out, 1234])   # kernargs: out @0 (s[4:5]), 1234 @8 (s6)
    assert int(out) == 1234


@pytest.mark.parametrize("read, named", [("s_load_dword s10, s[0:1], 0x0", "dispatch packet's header"),
                                         ("s_load_dword s10, s[2:3], 0x0", "HSA queue")])
def test_what_is_not_modelled_stops_the_run_when_read(read, named):
    text = DISPATCH_PTR_ASM.replace("s_load_dword s10, s[0:1], 0x4", read)
    with pytest.raises(gfx950.EmulationError, match=f"Unsupported: .*{named}"):
        gfx950.run_asm(text, [torch.zeros(3, dtype=torch.int32)])


@pytest.mark.parametrize("directives, named", [
    ({"user_sgpr_private_segment_buffer": 1, "user_sgpr_count": 6}, "user_sgpr_private_segment_buffer 1"),
    ({"user_sgpr_flat_scratch_init": 1, "user_sgpr_count": 4}, "user_sgpr_flat_scratch_init 1"),
    ({"system_sgpr_workgroup_info": 1}, "system_sgpr_workgroup_info 1"),
    ({"user_sgpr_count": 3}, "user_sgpr_count 3: the enabled user SGPRs"),
    ({"system_vgpr_workitem_id": 3}, "system_vgpr_workitem_id 3"),
])
def test_a_flag_it_does_not_model_is_unsupported_by_name(directives, named):
    with pytest.raises(gfx950.Unsupported, match=re.escape(named)):
        EntryState({"user_sgpr_kernarg_segment_ptr": 1, **directives})


def test_absent_directives_take_the_assemblers_defaults():
    entry = EntryState({"user_sgpr_kernarg_segment_ptr": 1})
    assert entry.user == [("kernarg_segment_ptr", 0, 2)] and entry.group_ids == [(0, 2)]
    entry = EntryState({"user_sgpr_kernarg_segment_ptr": 1, "system_sgpr_workgroup_id_x": 0,
                        "system_sgpr_workgroup_id_z": 1})
    assert entry.group_ids == [(2, 2)]


@triton.jit
def tile_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                       stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The tutorial's tiled matmul, a 2-D grid of (BLOCK_M, BLOCK_N) tiles, fp16 in, fp32 out."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    dims = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        ks = k * BLOCK_K + dims
        a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
        b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


@pytest.mark.skipif(triton.__version__.split("+")[0] != "3.9.0", reason="this Python's own Triton is not 3.9.0")
def test_a_triton_39_build_with_the_dispatch_pointer_runs_right():
    generator = torch.Generator().manual_seed(0)
    M, N, K = 40, 48, 80
    a = torch.randn(M, K, generator=generator).half()
    b = torch.randn(K, N, generator=generator).half()
    c = torch.full((M, N), float("nan"))
    launch = gfx950.emulate(tile_matmul_kernel, (2, 2), a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, triton=gfx950.INSTALLED_TRITON)
    assert launch.built.triton == "3.9.0"
    flags = dict(re.findall(r"\.amdhsa_(user_sgpr_\w+)\s+(\d+)", launch.built.asm))
    assert flags["user_sgpr_dispatch_ptr"] == flags["user_sgpr_queue_ptr"] == flags["user_sgpr_dispatch_id"] == "1"
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-4, atol=1e-4)
