"""Small deliberate bugs that the test suite must catch (run by tools/mutate.py).

Each entry: name, path (from the repository root), old (a snippet that occurs exactly
once), new (the bug), args (what pytest runs: the tests that must fail on it).
"""
SUB = "submission.py"


def mutation(name, old, new, args, path=SUB):
    return {"name": name, "path": path, "old": old, "new": new, "args": args}


KERNEL = ["tests/test_kernel.py", "-k"]
CONVERSIONS = ["tests/test_conversions.py", "-k"]
FALLBACK = ["tests/test_fallback.py", "-k"]

MUTATIONS = [
    # --- each conversion: value, sign, scale exponent, byte select, special scale bytes ---
    mutation("portable: one code's sign", "half = (((code & 0x7) << 9) | ((code & 0x8) << 12))",
             "half = (((code & 0x7) << 9) | ((code & 0x8) << 12) | ((code == 3).to(tl.int32) << 15))",
             CONVERSIONS + ["portable and exact_range"]),
    mutation("portable: code value (exponent bits shifted)", "half = (((code & 0x7) << 9)",
             "half = (((code & 0x6) << 9) | ((code & 0x1) << 8)", CONVERSIONS + ["portable and exact_range"]),
    mutation("portable: scale exponent off by one", "bits = tl.where(scale_bytes == 0, 0x00400000, scale_bytes << 23)",
             "bits = tl.where(scale_bytes == 0, 0x00400000, (scale_bytes + 1) << 23)",
             CONVERSIONS + ["portable and exact_range"]),
    mutation("e8m0 255 as +inf again (the old _scale_f32)",
             "return tl.where(scale_bytes == 255, 0x7FC00000, bits).to(tl.float32, bitcast=True)",
             "return (scale_bytes << 23).to(tl.float32, bitcast=True)", CONVERSIONS + ["255 and portable"]),
    mutation("ptx: scale off by one power of two", "(scale_bytes + 62) << 7)", "(scale_bytes + 63) << 7)",
             CONVERSIONS + ["ptx and exact_range"]),
    mutation("ptx: byte 255 not NaN", "tl.where(scale_bytes == 255, 0x7FC0, (scale_bytes + 62) << 7)",
             "(scale_bytes + 62) << 7", CONVERSIONS + ["ptx and 255"]),
    mutation("ptx: value mask", '"and.b32 x, x, 0x81C081C0;"', '"and.b32 x, x, 0x81C083C0;"',
             CONVERSIONS + ["ptx and exact_range"]),
    mutation("ptx: even/odd bytes 2 and 3 swapped", '(("0x8180", "$5"), ("0x8382", "$6"))',
             '(("0x8180", "$5"), ("0x8283", "$6"))', CONVERSIONS + ["ptx and even_odd and exact_range"]),
    mutation("ptx: sign nibble (no sign replication)", 'f"0x{0x8480 + 0x101 * b:04x}"', 'f"0x{0x0400 + 0x101 * b:04x}"',
             CONVERSIONS + ["ptx and natural and exact_range"]),
    mutation("gfx950: byte select (op_sel) of the third pair", "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[0,1,0]",
             "v_cvt_scalef32_pk_bf16_fp4 $2, $4, $5 op_sel:[1,0,0]", CONVERSIONS + ["gfx950 and exact_range"]),
    mutation("gfx950: scale exponent off by one", "scale = _per_block(_scale_exponent_field(scale_bytes), BLOCK_N,",
             "scale = _per_block(_scale_exponent_field(scale_bytes + 1), BLOCK_N,", CONVERSIONS + ["gfx950 and exact_range"]),
    # --- masking and tails in every loop structure ---
    mutation("split-tail loop runs one tile past its end, unmasked (natural)",
             "for tile_start in range(lo, full_end, BLOCK_N):\n            m_i, l_i, acc = _natural_tile(",
             "for tile_start in range(lo, full_end + BLOCK_N, BLOCK_N):\n            m_i, l_i, acc = _natural_tile(",
             KERNEL + ["every_variant and natural-tail and 300"]),
    mutation("split-tail loop runs one tile past its end, unmasked (even/odd)",
             "for tile_start in range(lo, full_end, BLOCK_N):\n            m_i, l_i, acc_even, acc_odd",
             "for tile_start in range(lo, full_end + BLOCK_N, BLOCK_N):\n            m_i, l_i, acc_even, acc_odd",
             KERNEL + ["every_variant and even_odd-tail and 300"]),
    mutation("natural tile: tail scores not masked",
             "scores = tl.dot(q_rope, tl.trans(k_rope), scores)\n    if MASKED:",
             "scores = tl.dot(q_rope, tl.trans(k_rope), scores)\n    if False:",
             KERNEL + ["every_variant and portable-natural and 129"]),
    mutation("even/odd tile: tail scores not masked",
             "scores = tl.dot(q_rope_odd, tl.trans(kr_odd), scores)\n    if MASKED:",
             "scores = tl.dot(q_rope_odd, tl.trans(kr_odd), scores)\n    if False:",
             KERNEL + ["every_variant and ptx-even_odd and 129"]),
    mutation("one masked loop starts past the first tile",
             "        for tile_start in range(lo, hi, BLOCK_N):\n            m_i, l_i, acc = _natural_tile(",
             "        for tile_start in range(lo + BLOCK_N, hi, BLOCK_N):\n            m_i, l_i, acc = _natural_tile(",
             KERNEL + ["every_variant and portable-natural and 64"]),
    mutation("split-tail: the tail tile skipped (natural)",
             "        if full_end < hi:\n            m_i, l_i, acc = _natural_tile(",
             "        if False:\n            m_i, l_i, acc = _natural_tile(",
             KERNEL + ["every_variant and gfx950 and 129"]),
    # --- the SCALED family ---
    mutation("scaled: Q block exponent one too small (saturates)", "exponent = ((bits >> 23) & 0xFF) - 127 - 8 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)",
             "exponent = ((bits >> 23) & 0xFF) - 127 - 9 + ((bits & 0x7FFFFF) > 0x600000).to(tl.int32)",
             KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the second rope block read with scale 1", "rope_scale_real = rope_blocks[None, :] < ROPE_C // 32\n",
             "rope_scale_real = rope_blocks[None, :] < 1\n", KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the rope dims dropped from the scores",
             'scores = tl.dot_scaled(q8_rope, qs_rope, "e4m3", tl.trans(k_rope), k_rope_scales, "e2m1", scores)',
             "scores = scores", KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: tail scores not masked", "    scores = tl.dot_scaled(q8_rope, qs_rope, \"e4m3\", tl.trans(k_rope), k_rope_scales, \"e2m1\", scores)\n    if MASKED:",
             "    scores = tl.dot_scaled(q8_rope, qs_rope, \"e4m3\", tl.trans(k_rope), k_rope_scales, \"e2m1\", scores)\n    if False:",
             KERNEL + ["every_variant and scaled-portable and 129"]),
    mutation("scaled: the self-check skips the Q quantization's bytes",
             "if not (torch.equal(q_quant[0], q8) and torch.equal(q_quant[1], qs)):", "if False:",
             ["tests/test_fallback.py", "-k", "scaled_q_quantization"]),
    # --- the split merge ---
    mutation("merge: an invalid range no longer NaN (more than one split)",
             'norm = tl.where(invalid, float("nan"), norm)', "norm = norm", KERNEL + ["invalid and 4-splits"]),
    mutation("merge: empty splits weighted as exp2(nan)",
             'weight = tl.where(m > float("-inf"), tl.exp2((m - m_max) * qk_scale_log2), 0.0)',
             "weight = tl.exp2((m - m_max) * qk_scale_log2)", KERNEL + ["empty and 4-splits"]),
    mutation("merge: output 1% high", "(total * norm).to(tl.bfloat16)", "(total * norm * 1.01).to(tl.bfloat16)",
             KERNEL + ["every_variant and portable-natural and 300"]),
    # --- uniform output error the per-element bound lets through ---
    mutation("one-split output scaled by 1.015", "norm = tl.where(l_i > 0, value_scale / l_i, 0.0)",
             "norm = tl.where(l_i > 0, 1.015 * value_scale / l_i, 0.0)",
             KERNEL + ["matches_exact_attention_small and natural and 129"]),
    # --- self-check, fallback ---
    mutation("self-check tolerance 10x looser", "SELF_CHECK_ATOL, SELF_CHECK_RTOL = 8e-3, 2e-2",
             "SELF_CHECK_ATOL, SELF_CHECK_RTOL = 8e-2, 2e-1", FALLBACK + ["tolerance"]),
    mutation("self-check always passes", "    return bool(torch.isfinite(got).all()) and \\",
             "    return True or \\", FALLBACK + ["slightly_wrong"]),
    mutation("no fallback: the first variant's failure is fatal",
             "_warn_once((\"failed\", variant), f\"kernel variant failed ({failures[-1]}); \"\n"
             "                                                f\"falling back to the next one\")\n                continue",
             "raise", FALLBACK + ["fails_to_build"]),
    mutation("host-side bugs swallowed by the fallback", "except (KernelLaunchError, SelfCheckError) as exc:",
             "except Exception as exc:", FALLBACK + ["host_side"]),
    mutation("fallback order reversed", "        order.append(Variant(PORTABLE, layout, 0, PLAIN_BLOCK_N, num_warps, 1))\n    return order",
             "        order.append(Variant(PORTABLE, layout, 0, PLAIN_BLOCK_N, num_warps, 1))\n    return order[::-1]",
             FALLBACK + ["fallback_order"]),
    mutation("native variant without its split-tail loop", "native in SPLIT_TAIL_CONVERTS))", "False))",
             FALLBACK + ["fallback_order"]),
    # --- launch table and dispatch ---
    mutation("launch table: an invalid tile", "(4, 1024): ('triton', 64, 4, 16, 2),", "(4, 1024): ('triton', 48, 4, 16, 2),",
             ["tests/test_dispatch.py"]),
    mutation("dispatch ignores the measured table", "choice = measured_table(device).get((batch, kv_len))",
             "choice = None", ["tests/test_dispatch.py"]),
    mutation("predicted split count not a power of two", "_pow2_floor(tiles // 2))", "max(1, tiles // 2))",
             ["tests/test_dispatch.py"]),
    # --- first-call tuning ---
    mutation("tuning: a failed candidate is timed and can win", "splitlines()[-1][:160]))\n            continue",
             "splitlines()[-1][:160]))",
             ["tests/test_first_call_tuning.py", "-k", "never_picked"]),
    mutation("tuning: an aiter failure other than RuntimeError stops the call",
             'if choice[0] != "aiter" and not isinstance(exc, RuntimeError):', "if not isinstance(exc, RuntimeError):",
             ["tests/test_first_call_tuning.py", "-k", "aiter_failing"]),
    mutation("tuning: the slowest candidate wins", 'entry["pick"] = min(measured)[1]', 'entry["pick"] = max(measured)[1]',
             ["tests/test_first_call_tuning.py", "-k", "fastest"]),
    mutation("tuning: runs even where the table has the case", "if (batch, kv_len) in measured_table(device) or (arch, batch, kv_len) in TUNED:",
             "if (arch, batch, kv_len) in TUNED:", ["tests/test_first_call_tuning.py", "-k", "table_wins"]),
    mutation("tuning: MLA_TUNE=0 ignored", 'if mode == "0" or os.environ.get("MLA_PATH") is not None:',
             'if os.environ.get("MLA_PATH") is not None:', ["tests/test_first_call_tuning.py", "-k", "table_wins"]),
    mutation("tuning: no case budget", "if spent > TUNE_CASE_TIMING_S or", "if False and spent > TUNE_CASE_TIMING_S or",
             ["tests/test_first_call_tuning.py", "-k", "budget"]),
    # --- the runner's gates ---
    mutation("gate: a disallowed module through __import__", "from task import input_t, output_t",
             "from task import input_t, output_t\n_np = __import__(\"numpy\")", ["tests/test_submission_gates.py"]),
    mutation("gate: the forbidden word in a comment", "import functools\n", "import functools  # upstream\n",
             ["tests/test_submission_gates.py"]),
]
