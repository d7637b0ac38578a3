"""Gluon kernels of the corpus (CDNA4 operations: async copies to LDS, buffer loads, stores and
atomics, scaled and bf16 MFMA). They import under this process's Triton and under the
runner's 3.6.0 (the gfx950 build): layouts are module-level gl.constexpr values, and names
that moved between versions are looked up once here. Gluon kernels do not run in Triton's
interpreter: their numpy answers are checked only through the emulator.
"""
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

PUBLIC_REINTERPRET = gl.constexpr(hasattr(gl.shared_memory_descriptor, "reinterpret"))  # 3.6: _reinterpret

# --- buffer_load_to_shared through a 3-slot ring -------------------------------------------------------
COPY_ROWS = gl.constexpr(32)  # rows per tile
WIDE_L = gl.constexpr(gl.BlockedLayout([1, 4], [8, 8], [4, 1], [1, 0]))    # (32, 32) int32: 16 B a lane
NARROW_L = gl.constexpr(gl.BlockedLayout([1, 1], [16, 4], [4, 1], [1, 0]))  # (32, 4) int32: 4 B a lane
FLAT = gl.constexpr(gl.SwizzledSharedLayout(vec=1, per_phase=1, max_phase=1, order=[1, 0]))


@gluon.jit
def _copy_tile(wide_ring, narrow_ring, slot, x_ptr, s_ptr, tile, rows):
    """Tile `tile`'s rows of x (32 words a row) and s (4 words a row) into ring slot `slot`: one commit group; rows
    past `rows` are masked (their LDS bytes are not read)."""
    r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, WIDE_L))
    c = gl.arange(0, 32, layout=gl.SliceLayout(0, WIDE_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(wide_ring.index(slot), x_ptr, r[:, None] * 32 + c[None, :],
                                                  mask=(r < rows)[:, None])
    r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, NARROW_L))
    c = gl.arange(0, 4, layout=gl.SliceLayout(0, NARROW_L))
    gl.amd.cdna4.async_copy.buffer_load_to_shared(narrow_ring.index(slot), s_ptr, r[:, None] * 4 + c[None, :],
                                                  mask=(r < rows)[:, None])
    gl.amd.cdna4.async_copy.commit_group()


@gluon.jit
def async_copy_kernel(x_ptr, s_ptr, out_x_ptr, out_s_ptr, rows, IN_FLIGHT: gl.constexpr = 0):
    """One program, 4 warps: out_x (rows, 32) int32 = 3 x + row, out_s (rows, 4) = 5 s - 1, with x (rows, 32) and s
    (rows, 4) int32 copied global -> LDS in tiles of 32 rows (buffer_load_to_shared, 16 and 4 bytes a lane) through a
    3-slot ring: tile i + 2's copy is issued while tile i is consumed. IN_FLIGHT: the commit groups wait_group leaves
    in flight; 0 here. With 1 the kernel races: the narrow copy's layout covers 2 of the 4 warps, the other two branch
    over it, and wait_group's count (vmcnt(2): two copies a group) then lets their previous wide copy run on into
    the reads (tests/test_gfx950_corpus.py: the emulator names it)."""
    wide_ring = gl.allocate_shared_memory(gl.int32, [3, COPY_ROWS, 32], FLAT)
    narrow_ring = gl.allocate_shared_memory(gl.int32, [3, COPY_ROWS, 4], FLAT)
    _copy_tile(wide_ring, narrow_ring, 0, x_ptr, s_ptr, 0, rows)
    _copy_tile(wide_ring, narrow_ring, 1, x_ptr, s_ptr, 1, rows)
    for tile in range(gl.cdiv(rows, COPY_ROWS)):
        gl.amd.cdna4.async_copy.wait_group(IN_FLIGHT)
        _copy_tile(wide_ring, narrow_ring, (tile + 2) % 3, x_ptr, s_ptr, tile + 2, rows)
        x = gl.amd.cdna4.async_copy.load_shared_relaxed(wide_ring.index(tile % 3), WIDE_L)
        s = gl.amd.cdna4.async_copy.load_shared_relaxed(narrow_ring.index(tile % 3), NARROW_L)
        r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, WIDE_L))
        c = gl.arange(0, 32, layout=gl.SliceLayout(0, WIDE_L))
        gl.amd.cdna4.buffer_store(x * 3 + r[:, None], out_x_ptr, r[:, None] * 32 + c[None, :], mask=(r < rows)[:, None])
        r = tile * COPY_ROWS + gl.arange(0, COPY_ROWS, layout=gl.SliceLayout(1, NARROW_L))
        c = gl.arange(0, 4, layout=gl.SliceLayout(0, NARROW_L))
        gl.amd.cdna4.buffer_store(s * 5 - 1, out_s_ptr, r[:, None] * 4 + c[None, :], mask=(r < rows)[:, None])
    gl.amd.cdna4.async_copy.wait_group(0)


# --- fp4 -> bf16 by Triton's own upcast, and a ticket through a buffer atomic ----------------------------
UPCAST_L = gl.constexpr(gl.BlockedLayout([1, 4], [16, 4], [4, 1], [1, 0]))  # (64, 16) uint8 pairs
LANES_L = gl.constexpr(gl.BlockedLayout([1], [64], [4], [0]))


@gluon.jit
def fp4_upcast_kernel(packed_ptr, out_ptr, counter_ptr, ticket_ptr, rows):
    """Program p: rows [64 p, + 64) of packed (rows, 16) uint8 e2m1 pairs (low nibble: the even column) -> out (rows,
    32) bf16 by gl.fp4_to_fp; then lane 0 adds 1 to counter[0] by a buffer atomic and ticket[p] = the old value (every
    lane learns it through a sum over the 256 lanes)."""
    r = gl.program_id(0) * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, UPCAST_L))
    c = gl.arange(0, 16, layout=gl.SliceLayout(0, UPCAST_L))
    ok = (r < rows)[:, None]
    packed = gl.amd.cdna4.buffer_load(packed_ptr, r[:, None] * 16 + c[None, :], mask=ok, other=0)
    values = gl.fp4_to_fp(packed, gl.bfloat16, 1)
    out_l: gl.constexpr = values.type.layout
    r_out = gl.program_id(0) * 64 + gl.arange(0, 64, layout=gl.SliceLayout(1, out_l))
    c_out = gl.arange(0, 32, layout=gl.SliceLayout(0, out_l))
    gl.amd.cdna4.buffer_store(values, out_ptr, r_out[:, None] * 32 + c_out[None, :], mask=(r_out < rows)[:, None])
    lane = gl.arange(0, 256, layout=LANES_L)
    first = lane == 0
    # CDNA4's buffer atomic integer add is on uint32
    old = gl.amd.cdna4.buffer_atomic_add(counter_ptr.to(gl.pointer_type(gl.uint32)), lane * 0,
                                         gl.full([256], 1, gl.uint32, LANES_L), mask=first, sem="acq_rel", scope="gpu")
    ticket = gl.sum(gl.where(first, old.to(gl.int32), 0), axis=0)
    gl.amd.cdna4.buffer_store(gl.full([256], 0, gl.int32, LANES_L) + ticket, ticket_ptr, lane * 0 + gl.program_id(0),
                              mask=first)


# --- online softmax over KV tiles: scaled MFMA scores from LDS, values by inline-asm fp4 -> bf16 ----------
# Q (16, 384) bf16: 256 "nope" dims then 128 "rope" dims. A KV row: 128 bytes of nope e2m1 pairs (256 dims), then 64
# bytes of rope pairs (128 dims); a scale row: 8 nope e8m0 bytes then 4 rope bytes. The values are nope dims 0..127.
TOKENS = gl.constexpr(128)      # KV rows per tile
NOPE_BYTES = gl.constexpr(128)
ROPE_BYTES = gl.constexpr(64)
ROW_BYTES = gl.constexpr(192)
SCALE_WORDS = gl.constexpr(3)   # 12 scale bytes a row
VALUE_WORDS = gl.constexpr(16)  # the values: dims 0..127, words 0..15 of a row
S_MMA = gl.constexpr(gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 128], transposed=True, warps_per_cta=[1, 4]))
Q_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=S_MMA, k_width=16))
K_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=S_MMA, k_width=16))
V_MMA = gl.constexpr(gl.amd.AMDMFMALayout(version=4, instr_shape=[16, 16, 32], transposed=True, warps_per_cta=[1, 4]))
P_A = gl.constexpr(gl.DotOperandLayout(operand_index=0, parent=V_MMA, k_width=8))
V_B = gl.constexpr(gl.DotOperandLayout(operand_index=1, parent=V_MMA, k_width=8))
NOPE_L = gl.constexpr(gl.BlockedLayout([1, 16], [8, 8], [4, 1], [1, 0]))   # (128, 128) uint8: 16 B a lane
ROPE_L = gl.constexpr(gl.BlockedLayout([1, 16], [16, 4], [4, 1], [1, 0]))  # (128, 64) uint8
SCALES_L = gl.constexpr(gl.BlockedLayout([1, 1], [16, 4], [4, 1], [1, 0]))  # (128, 4) int32, 3 real
WORDS_L = gl.constexpr(gl.BlockedLayout([1, 4], [16, 4], [4, 1], [1, 0]))  # (128, 16) int32
VALUE_SCALE_L = gl.constexpr(gl.BlockedLayout([1, 4], [64, 1], [2, 2], [1, 0]))  # (128, 4) uint8: a row's 4 a lane
# byte b of word $4 -> bf16 pair $b (low nibble in the low half) times the float32 scale $5
E2M1_PAIRS_ASM = gl.constexpr("""
        v_cvt_scalef32_pk_bf16_fp4 $0, $4, $5
        v_cvt_scalef32_pk_bf16_fp4 $1, $4, $5 op_sel:[1,0,0]
        v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]
        v_cvt_scalef32_pk_bf16_fp4 $3, $4, $5 op_sel:[1,1,0]
        """)


@gluon.jit
def _reinterpret(desc, dtype: gl.constexpr, shape: gl.constexpr, layout: gl.constexpr):
    if PUBLIC_REINTERPRET:
        view = desc.reinterpret(dtype, shape, layout)
    else:
        view = desc._reinterpret(dtype, shape, layout)
    return view


@gluon.jit
def _e4m3_blocks(x, ROWS: gl.constexpr, BLOCKS: gl.constexpr):
    """x (ROWS, 32 BLOCKS) float32 -> (e4m3 (ROWS, 32 BLOCKS), e8m0 bytes (ROWS, BLOCKS) uint8): per 32-block the least
    exponent e in [-126, 127] with max |x| / 2^e <= 448 (triton_kernels._e4m3_blocks' rule), codes x / 2^e rounded to
    nearest even."""
    blocks = gl.reshape(x, [ROWS, BLOCKS, 32])
    amax_bits = gl.max(gl.abs(blocks), axis=2).to(gl.int32, bitcast=True)
    e = ((amax_bits >> 23) & 0xFF) - 135 + ((amax_bits & 0x7FFFFF) > 0x600000).to(gl.int32)
    e = gl.minimum(gl.maximum(e, -126), 127)
    codes = (blocks * gl.expand_dims(((127 - e) << 23).to(gl.float32, bitcast=True), 2)).to(gl.float8e4nv)
    return gl.reshape(codes, [ROWS, BLOCKS * 32]), (e + 127).to(gl.uint8)


@gluon.jit
def _quantize_q(qb_ptr, q8_ptr, qs_ptr, seq, FIRST: gl.constexpr, DIMS: gl.constexpr, ROW: gl.constexpr):
    """Dims [FIRST, + DIMS) of the 16 rows of sequence `seq` of a (batch, 16, ROW) bf16 Q, loaded in the scaled MFMA's
    operand layout and quantized (_e4m3_blocks); the codes and scales are stored to q8 (batch, 16, ROW) e4m3 bytes and
    qs (batch, 16, ROW / 32) e8m0 for the check."""
    heads = gl.arange(0, 16, layout=gl.SliceLayout(1, Q_A))[:, None]
    dims = FIRST + gl.arange(0, DIMS, layout=gl.SliceLayout(0, Q_A))[None, :]
    q8, qs = _e4m3_blocks(gl.amd.cdna4.buffer_load(qb_ptr, seq * (16 * ROW) + heads * ROW + dims).to(gl.float32),
                          16, DIMS // 32)
    q8 = gl.convert_layout(q8, Q_A)
    gl.amd.cdna4.buffer_store(q8.to(gl.uint8, bitcast=True), q8_ptr, seq * (16 * ROW) + heads * ROW + dims)
    qs_l: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(Q_A, [16, DIMS // 32])
    qs = gl.convert_layout(qs, qs_l)
    blocks = gl.arange(0, DIMS // 32, layout=gl.SliceLayout(0, qs_l))[None, :]
    gl.amd.cdna4.buffer_store(qs, qs_ptr, seq * (16 * (ROW // 32)) + FIRST // 32 + blocks
                              + gl.arange(0, 16, layout=gl.SliceLayout(1, qs_l))[:, None] * (ROW // 32))
    return q8, qs


@gluon.jit
def gluon_quantize_kernel(x_ptr, q8_ptr, qs_ptr):
    """Program b: x[b] (16, 512) bf16 -> q8[b] (16, 512) e4m3 bytes, qs[b] (16, 16) e8m0 by _e4m3_blocks, computed in
    the scaled MFMA's operand layout, the scales in its scale layout (4 warps)."""
    _quantize_q(x_ptr, q8_ptr, qs_ptr, gl.program_id(0), 0, 512, 512)


@gluon.jit
def _copy_kv_tile(nope_smem, rope_smem, scales_smem, slot, kv_ptr, scale_ptr, first, end):
    """KV rows [first, first + 128) into ring slot `slot`, one commit group: a full tile unmasked, a partial one with
    the rows >= end masked (their LDS bytes read as zeros)."""
    if end - first >= TOKENS:
        _copy_kv_rows(nope_smem.index(slot), rope_smem.index(slot), scales_smem.index(slot), kv_ptr, scale_ptr, first,
                      end, False)
    else:
        _copy_kv_rows(nope_smem.index(slot), rope_smem.index(slot), scales_smem.index(slot), kv_ptr, scale_ptr, first,
                      end, True)
    gl.amd.cdna4.async_copy.commit_group()


@gluon.jit
def _copy_kv_rows(nope_dest, rope_dest, scales_dest, kv_ptr, scale_ptr, first, end, MASKED: gl.constexpr):
    rows = first + gl.arange(0, TOKENS, layout=gl.SliceLayout(1, NOPE_L))
    offs = rows[:, None] * ROW_BYTES + gl.arange(0, NOPE_BYTES, layout=gl.SliceLayout(0, NOPE_L))[None, :]
    if MASKED:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(nope_dest, kv_ptr, offs, mask=(rows < end)[:, None])
    else:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(nope_dest, kv_ptr, offs)
    rows = first + gl.arange(0, TOKENS, layout=gl.SliceLayout(1, ROPE_L))
    offs = rows[:, None] * ROW_BYTES + NOPE_BYTES + gl.arange(0, ROPE_BYTES, layout=gl.SliceLayout(0, ROPE_L))[None, :]
    if MASKED:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(rope_dest, kv_ptr, offs, mask=(rows < end)[:, None])
    else:
        gl.amd.cdna4.async_copy.buffer_load_to_shared(rope_dest, kv_ptr, offs)
    rows = first + gl.arange(0, TOKENS, layout=gl.SliceLayout(1, SCALES_L))
    words = gl.arange(0, 4, layout=gl.SliceLayout(0, SCALES_L))
    real = (words < SCALE_WORDS)[None, :]
    if MASKED:
        real = real & (rows < end)[:, None]
    gl.amd.cdna4.async_copy.buffer_load_to_shared(scales_dest, scale_ptr.to(gl.pointer_type(gl.int32)),
                                                  rows[:, None] * SCALE_WORDS + words[None, :], mask=real)


@gluon.jit
def _bf16_halves(pair):
    """A converted byte (a bf16 pair: the low nibble's in the low half) -> the two bf16 values, joined."""
    low = (pair & 0xFFFF).to(gl.int16).to(gl.bfloat16, bitcast=True)
    high = (pair >> 16).to(gl.int16).to(gl.bfloat16, bitcast=True)
    return gl.join(low, high)


@gluon.jit
def _tile_values(words, scale_bytes):
    """words (128, 16) int32 of e2m1 codes, scale_bytes (128, 4) uint8 the scales of dims 0..127 (block j: words 4j ..
    4j + 3) -> (128, 128) bf16 in dim order, by v_cvt_scalef32_pk_bf16_fp4."""
    field = (scale_bytes.to(gl.int32) << 23).to(gl.float32, bitcast=True)
    field = gl.reshape(gl.join(gl.join(field, field), gl.join(field, field)), [TOKENS, VALUE_WORDS])  # block per word
    vscale = gl.convert_layout(field, words.type.layout)
    r0, r1, r2, r3 = gl.inline_asm_elementwise(E2M1_PAIRS_ASM, "=&v,=&v,=&v,=v,v,v", [words, vscale],
                                               dtype=(gl.int32, gl.int32, gl.int32, gl.int32), is_pure=True, pack=1)
    v = gl.join(gl.join(_bf16_halves(r0), _bf16_halves(r2)), gl.join(_bf16_halves(r1), _bf16_halves(r3)))
    # axes (row, word, nibble, byte bit 1, byte bit 0) -> (row, word, byte bit 1, byte bit 0, nibble): dim 8j + 2b + n
    return gl.reshape(gl.permute(v, [0, 1, 3, 4, 2]), [TOKENS, 8 * VALUE_WORDS])


@gluon.jit
def gluon_attention_kernel(qb_ptr, q8_ptr, qs_ptr, kv_ptr, scale_ptr, kv_indptr_ptr, scores_ptr, m_ptr, out_ptr,
                           qk_scale_log2):
    """Program b (4 warps): attention of sequence b's 16 heads over KV rows [kv_indptr[b], kv_indptr[b + 1]) in tiles of
    128 rows, copied global -> LDS (buffer_load_to_shared) through a 3-slot ring: tile i + 1's copy stays in flight
    (wait_group(1)) and tile i + 2's is issued while tile i is computed; rows past the end read 0 and score -inf.
    qb (batch, 16, 384) bf16 -> quantized here (_quantize_q): q8 (batch, 16, 384) e4m3 bytes, qs (batch, 16, 12) e8m0
    kv (rows, 192) bytes, scale (rows, 12) e8m0 (rows: every sequence's, plus 3 words of slack)
    scores (batch, 16, 256) float32: the first two tiles' raw scores (nope mfma_scaled + rope mfma_scaled on it)
    m (batch, 16): the largest score (-inf for an empty sequence)
    out (batch, 16, 128) float32 = softmax(scores x qk_scale_log2, base 2) @ V (0 for an empty sequence), V = nope
    dims 0..127 converted in registers from the LDS words (v_cvt_scalef32_pk_bf16_fp4), P rounded to bf16."""
    seq = gl.program_id(0)
    start = gl.load(kv_indptr_ptr + seq)
    end = gl.load(kv_indptr_ptr + seq + 1)
    nope_smem = gl.allocate_shared_memory(gl.uint8, [3, TOKENS, NOPE_BYTES], FLAT)
    rope_smem = gl.allocate_shared_memory(gl.uint8, [3, TOKENS, ROPE_BYTES], FLAT)
    scales_smem = gl.allocate_shared_memory(gl.int32, [3, TOKENS, 4], FLAT)
    if end != start:  # an empty sequence copies nothing (its loop runs no tile)
        _copy_kv_tile(nope_smem, rope_smem, scales_smem, 0, kv_ptr, scale_ptr, start, end)
        _copy_kv_tile(nope_smem, rope_smem, scales_smem, 1, kv_ptr, scale_ptr, start + TOKENS, end)
    q8, qs = _quantize_q(qb_ptr, q8_ptr, qs_ptr, seq, 0, 256, 384)
    q8r, qsr = _quantize_q(qb_ptr, q8_ptr, qs_ptr, seq, 256, 128, 384)
    ks_l: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(K_B, [TOKENS, 8])
    ksr_l: gl.constexpr = gl.amd.cdna4.get_mfma_scale_layout(K_B, [TOKENS, 4])
    head = gl.arange(0, 16, layout=gl.SliceLayout(1, S_MMA))
    m_i = gl.full([16], float("-inf"), gl.float32, gl.SliceLayout(1, S_MMA))
    l_i = gl.zeros([16], gl.float32, gl.SliceLayout(1, S_MMA))
    acc = gl.zeros([16, 8 * VALUE_WORDS], gl.float32, V_MMA)
    for tile in range(gl.cdiv(end - start, TOKENS)):
        first = start + tile * TOKENS
        slot = tile % 3
        gl.amd.cdna4.async_copy.wait_group(1)
        _copy_kv_tile(nope_smem, rope_smem, scales_smem, (tile + 2) % 3, kv_ptr, scale_ptr, first + 2 * TOKENS, end)
        scale_view = _reinterpret(scales_smem.index(slot), gl.uint8, [TOKENS, 16], FLAT)
        k = gl.amd.cdna4.async_copy.load_shared_relaxed(nope_smem.index(slot).permute([1, 0]), K_B)
        ks = gl.amd.cdna4.async_copy.load_shared_relaxed(scale_view.slice(0, 8, 1), ks_l)
        kr = gl.amd.cdna4.async_copy.load_shared_relaxed(rope_smem.index(slot).permute([1, 0]), K_B)
        ksr = gl.amd.cdna4.async_copy.load_shared_relaxed(scale_view.slice(8, 4, 1), ksr_l)
        s = gl.amd.cdna4.mfma_scaled(q8, qs, "e4m3", k, ks, "e2m1", gl.zeros([16, TOKENS], gl.float32, S_MMA))
        s = gl.amd.cdna4.mfma_scaled(q8r, qsr, "e4m3", kr, ksr, "e2m1", s)
        token = gl.arange(0, TOKENS, layout=gl.SliceLayout(0, S_MMA))
        s = gl.where((first + token < end)[None, :], s, float("-inf"))
        gl.amd.cdna4.buffer_store(s, scores_ptr, seq * (16 * 256) + head[:, None] * 256 + tile * TOKENS + token[None, :],
                                  mask=(tile < 2) & (head < 16)[:, None])
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        m_use = gl.where(m_new != float("-inf"), m_new, 0.0)  # a row with no score yet: no NaN from -inf - -inf
        alpha = gl.exp2((m_i - m_use) * qk_scale_log2)
        p = gl.exp2((s - m_use[:, None]) * qk_scale_log2)
        l_i = l_i * alpha + gl.sum(p, axis=1)
        m_i = m_new
        words = gl.amd.cdna4.async_copy.load_shared_relaxed(
            _reinterpret(nope_smem.index(slot), gl.int32, [TOKENS, NOPE_BYTES // 4], FLAT).slice(0, VALUE_WORDS, 1),
            WORDS_L)
        v = _tile_values(words, gl.amd.cdna4.async_copy.load_shared_relaxed(scale_view.slice(0, 4, 1), VALUE_SCALE_L))
        alpha_v = gl.convert_layout(alpha, gl.SliceLayout(1, V_MMA))
        acc = gl.amd.cdna4.mfma(gl.convert_layout(p.to(gl.bfloat16), P_A), gl.convert_layout(v, V_B),
                                acc * alpha_v[:, None])
    gl.amd.cdna4.async_copy.wait_group(0)
    gl.amd.cdna4.buffer_store(m_i, m_ptr, seq * 16 + head)
    l_v = gl.convert_layout(l_i, gl.SliceLayout(1, V_MMA))
    dims = gl.arange(0, 8 * VALUE_WORDS, layout=gl.SliceLayout(0, V_MMA))
    head_v = gl.arange(0, 16, layout=gl.SliceLayout(1, V_MMA))
    gl.amd.cdna4.buffer_store(gl.where(l_v > 0, 1.0 / l_v, 0.0)[:, None] * acc, out_ptr,
                              seq * (16 * 128) + head_v[:, None] * 128 + dims[None, :])


# --- the merge of split partials, 4 splits a step ---------------------------------------------------------
MERGE_ACC_L = gl.constexpr(gl.BlockedLayout([4, 1, 4], [1, 2, 32], [1, 4, 1], [2, 1, 0]))  # (4 splits, 16, 512)
MERGE_ML_L = gl.constexpr(gl.SliceLayout(2, MERGE_ACC_L))  # (split, head)
MERGE_OUT_L = gl.constexpr(gl.SliceLayout(0, MERGE_ACC_L))  # (head, dim)


@gluon.jit
def gluon_merge_kernel(out_ptr, part_acc_ptr, part_ml_ptr, num_splits, qk_scale_log2):
    """Program b: out[b] (16, 512) bf16 = sum_s 2^((m_s - M) c) acc_s / sum_s 2^((m_s - M) c) l_s over the splits of
    sequence b (triton_kernels.merge_partials_kernel's answer), 4 splits a step by buffer loads (past num_splits:
    masked); NaN for a head with a NaN m, 0 where every split is empty. part_acc (batch, num_splits, 16, 512),
    part_ml (batch, num_splits, 2, 16) float32."""
    seq = gl.program_id(0)
    splits = gl.arange(0, 4, layout=gl.SliceLayout(1, MERGE_ML_L))
    heads = gl.arange(0, 16, layout=gl.SliceLayout(0, MERGE_ML_L))
    ml_offs = splits[:, None] * 32 + heads[None, :]
    out_heads = gl.arange(0, 16, layout=gl.SliceLayout(1, MERGE_OUT_L))
    rows = out_heads[:, None] * 512 + gl.arange(0, 512, layout=gl.SliceLayout(0, MERGE_OUT_L))[None, :]
    acc_offs = gl.expand_dims(gl.convert_layout(splits, gl.SliceLayout(1, gl.SliceLayout(2, MERGE_ACC_L))), 1)[:, :, None] \
        * (16 * 512) + rows[None, :, :]
    head_l: gl.constexpr = gl.SliceLayout(0, MERGE_ML_L)
    m_run = gl.full([16], float("-inf"), gl.float32, head_l)
    l_run = gl.zeros([16], gl.float32, head_l)
    acc_run = gl.zeros([16, 512], gl.float32, MERGE_OUT_L)
    invalid = gl.zeros([16], gl.int32, head_l)
    for first in range(0, num_splits, 4):
        part = seq * num_splits + first
        real = (first + splits) < num_splits
        m = gl.amd.cdna4.buffer_load(part_ml_ptr, part * 32 + ml_offs, mask=real[:, None], other=float("-inf"))
        l = gl.amd.cdna4.buffer_load(part_ml_ptr, part * 32 + 16 + ml_offs, mask=real[:, None], other=0.0)
        acc = gl.amd.cdna4.buffer_load(part_acc_ptr, part * (16 * 512) + acc_offs,
                                       mask=gl.convert_layout(real[:, None], MERGE_ML_L)[:, :, None], other=0.0)
        invalid = gl.maximum(invalid, gl.max((m != m).to(gl.int32), axis=0))
        m = gl.where(m != m, float("-inf"), m)
        m_new = gl.maximum(m_run, gl.max(m, axis=0))
        m_ref = gl.where(m_new > float("-inf"), m_new, 0.0)
        run_weight = gl.exp2((m_run - m_ref) * qk_scale_log2)
        weight = gl.exp2((m - m_ref[None, :]) * qk_scale_log2)
        acc_run = gl.convert_layout(run_weight, gl.SliceLayout(1, MERGE_OUT_L))[:, None] * acc_run \
            + gl.sum(weight[:, :, None] * acc, axis=0)
        l_run = run_weight * l_run + gl.sum(weight * l, axis=0)
        m_run = m_new
    norm = gl.where(l_run > 0, 1.0 / l_run, 0.0)
    norm = gl.convert_layout(gl.where(invalid > 0, float("nan"), norm), gl.SliceLayout(1, MERGE_OUT_L))
    gl.amd.cdna4.buffer_store((acc_run * norm[:, None]).to(gl.bfloat16), out_ptr, seq * (16 * 512) + rows)
